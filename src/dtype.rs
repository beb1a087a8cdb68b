//! Element types. Every dtype is four bytes wide on the device, which keeps
//! buffer arithmetic and WGSL storage types uniform (WGSL has no storable
//! `bool`, so `Bool` is stored as a `u32` that is 0 or 1).

use std::fmt;

/// The element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// 32-bit IEEE float.
    F32,
    /// 32-bit signed integer.
    I32,
    /// 32-bit unsigned integer.
    U32,
    /// Boolean (stored as a 32-bit 0 or 1).
    Bool,
}

impl DType {
    /// Bytes per element in device memory.
    pub const fn size_in_bytes(self) -> usize {
        4
    }

    /// Whether this is a floating-point type.
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F32)
    }

    /// Whether this is an integer type (not bool).
    pub const fn is_int(self) -> bool {
        matches!(self, DType::I32 | DType::U32)
    }

    /// The WGSL type used for a value of this dtype in registers.
    pub(crate) const fn wgsl_value_type(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::I32 => "i32",
            DType::U32 => "u32",
            DType::Bool => "bool",
        }
    }

    /// The WGSL type used for storage in buffers.
    pub(crate) const fn wgsl_storage_type(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::I32 => "i32",
            DType::U32 | DType::Bool => "u32",
        }
    }

    /// Category for type promotion: bool < integer < float.
    pub(crate) const fn category(self) -> u8 {
        match self {
            DType::Bool => 0,
            DType::I32 | DType::U32 => 1,
            DType::F32 => 2,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DType::F32 => "f32",
            DType::I32 => "i32",
            DType::U32 => "u32",
            DType::Bool => "bool",
        })
    }
}

/// A host element type that a tensor can be built from and read back into.
///
/// Values cross the host/device boundary as their 32-bit patterns
/// ([`Element::to_bits`]), which is also how scalars travel in the parameter
/// buffer.
pub trait Element: Copy + Send + Sync + fmt::Debug + PartialEq + 'static {
    /// The dtype this host type maps to.
    const DTYPE: DType;
    /// The value's 32-bit device representation.
    fn to_bits(self) -> u32;
    /// The value from its 32-bit device representation.
    fn from_bits(bits: u32) -> Self;
}

impl Element for f32 {
    const DTYPE: DType = DType::F32;
    fn to_bits(self) -> u32 {
        f32::to_bits(self)
    }
    fn from_bits(bits: u32) -> Self {
        f32::from_bits(bits)
    }
}

impl Element for i32 {
    const DTYPE: DType = DType::I32;
    fn to_bits(self) -> u32 {
        self as u32
    }
    fn from_bits(bits: u32) -> Self {
        bits as i32
    }
}

impl Element for u32 {
    const DTYPE: DType = DType::U32;
    fn to_bits(self) -> u32 {
        self
    }
    fn from_bits(bits: u32) -> Self {
        bits
    }
}

impl Element for bool {
    const DTYPE: DType = DType::Bool;
    fn to_bits(self) -> u32 {
        self as u32
    }
    fn from_bits(bits: u32) -> Self {
        bits != 0
    }
}

/// The result dtype of a binary op, following PyTorch's promotion between
/// categories (bool < integer < float). Mixing `i32` and `u32` has no
/// PyTorch counterpart and is refused (`None`).
pub(crate) fn promote(a: DType, b: DType) -> Option<DType> {
    if a == b {
        return Some(a);
    }
    match a.category().cmp(&b.category()) {
        std::cmp::Ordering::Greater => Some(a),
        std::cmp::Ordering::Less => Some(b),
        std::cmp::Ordering::Equal => None,
    }
}
