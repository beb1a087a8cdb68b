//! What a kernel binds, in binding order, as data: the one definition
//! that the runtime binds from and that a test checks against the
//! bindings each generated WGSL module declares (read by naga).

/// Bindings that `elements` values of `size_in_bytes` each take in parts
/// of `part_bytes` (`vec`: counted in groups of four): one, unless they
/// are larger than a part.
pub(crate) fn binding_parts(
    elements: usize,
    size_in_bytes: usize,
    vec: bool,
    part_bytes: usize,
) -> usize {
    let elements = if vec {
        elements.div_ceil(4) * 4
    } else {
        elements
    };
    (elements * size_in_bytes).div_ceil(part_bytes).max(1)
}

/// One binding of a kernel's bind group, in order from binding 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Binding {
    /// The runtime parameters (scalars, seeds): a uniform buffer of its
    /// first `uniform_bytes` bytes, or the whole buffer as read-only
    /// storage when `None`.
    Params { uniform_bytes: Option<u64> },
    /// Part `part` of the buffer of graph node `node`, read-only.
    Read { node: usize, part: usize },
    /// Part `part` of the buffer graph node `node` is written to.
    Write { node: usize, part: usize },
    /// Scratch texture `slot` of the kernel, as a write-only storage
    /// texture (`write`) or a sampled one.
    Texture { slot: usize, write: bool },
    /// Anomaly mode: the run's two flag words (`array<atomic<u32>, 2>`),
    /// after every other but `Sizes`.
    Checks,
    /// A kernel generic over its sizes: the values of the sizes it reads
    /// (`Expr::Size`), a range of the executable's uniform buffer of
    /// `vec4s` words of four, always last.
    Sizes { vec4s: usize },
}

impl Binding {
    /// A short description for dumps: `params (uniform, 16 B)`,
    /// `read n3`, `write n7 part 1`, `texture 0 (write)`.
    pub fn describe(&self) -> String {
        let part = |p: usize| {
            if p == 0 {
                String::new()
            } else {
                format!(" part {p}")
            }
        };
        match *self {
            Binding::Params {
                uniform_bytes: Some(b),
            } => format!("params (uniform, {b} B)"),
            Binding::Params {
                uniform_bytes: None,
            } => "params (storage)".to_string(),
            Binding::Read { node, part: p } => format!("read n{node}{}", part(p)),
            Binding::Write { node, part: p } => format!("write n{node}{}", part(p)),
            Binding::Checks => "checks (anomaly flags)".to_string(),
            Binding::Sizes { vec4s } => format!("dynamic sizes (uniform, {vec4s} vec4)"),
            Binding::Texture { slot, write } => {
                format!(
                    "texture {slot} ({})",
                    if write { "write" } else { "sampled" }
                )
            }
        }
    }
}
