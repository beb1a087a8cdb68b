//! naga validation of generated WGSL, so that a codegen bug becomes an
//! `Error` with the source attached instead of a wgpu panic.

/// Parses and validates `source`; the error text is naga's own.
pub(crate) fn validate_wgsl(source: &str) -> Result<(), String> {
    let module = naga::front::wgsl::parse_str(source).map_err(|e| e.emit_to_string(source))?;
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .map_err(|e| e.emit_to_string(source))?;
    Ok(())
}
