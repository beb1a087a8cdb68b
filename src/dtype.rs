//! Element types.
//!
//! On the host (the CPU reference, uploads, readback, scalar parameters)
//! every element travels as a 32-bit pattern ([`Element::to_bits`]; a
//! 16-bit float in the low half). On a GPU, `F16` and `BF16` are stored two
//! to a 32-bit word and every other dtype in a word of its own (WGSL has no
//! storable `bool`, so `Bool` is stored as a `u32` that is 0 or 1).
//! Kernels compute every float dtype in `f32` registers: a 16-bit value is
//! widened when loaded and rounded (to nearest, ties to even) where a node
//! of its dtype is computed, as PyTorch's kernels compute half types in
//! `float` and round each op's result.

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
    /// 64-bit signed integer (PyTorch's default integer: labels, indices).
    /// Stored and computed as 32 bits: values must fit in `i32`, which is
    /// checked where they enter (`from_vec`, scalars, safetensors), and
    /// arithmetic wraps at 32 bits, not 64.
    I64,
    /// 8-bit unsigned integer (image pixels). Stored one to a 32-bit word
    /// on a GPU; arithmetic wraps modulo 256 as PyTorch's does, and casts
    /// into `u8` saturate to `[0, 255]`.
    U8,
    /// Boolean (stored as a 32-bit 0 or 1).
    Bool,
    /// 16-bit IEEE float (binary16): 10 mantissa bits, largest finite
    /// value 65504. On a GPU it needs the adapter's `SHADER_F16`.
    F16,
    /// bfloat16: f32's exponent with 7 mantissa bits. WGSL has no bf16:
    /// it is stored as 16-bit halves of `u32` words and converted in
    /// kernels, so it needs no adapter feature.
    BF16,
}

impl DType {
    /// Bytes per element in device memory (4 for `I64` and `U8`, which
    /// are stored in 32-bit words).
    pub const fn size_in_bytes(self) -> usize {
        match self {
            DType::F16 | DType::BF16 => 2,
            _ => 4,
        }
    }

    /// Whether this is a floating-point type.
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16)
    }

    /// Whether this is a 16-bit float (stored two to a word on a GPU,
    /// computed in `f32`).
    pub const fn is_half(self) -> bool {
        matches!(self, DType::F16 | DType::BF16)
    }

    /// A small number naming the dtype (its declaration order), for
    /// storing it in an atomic.
    pub(crate) const fn index(self) -> u8 {
        self as u8
    }

    /// The dtype of [`DType::index`] `i`.
    pub(crate) const fn from_index(i: u8) -> DType {
        match i {
            0 => DType::F32,
            1 => DType::I32,
            2 => DType::U32,
            3 => DType::I64,
            4 => DType::U8,
            5 => DType::Bool,
            6 => DType::F16,
            _ => DType::BF16,
        }
    }

    /// The dtype kernels compute this one in: `F32` for every float,
    /// `I32` for `I64`, `U32` for `U8`.
    pub(crate) const fn compute(self) -> DType {
        match self.storage() {
            d if d.is_float() => DType::F32,
            d => d,
        }
    }

    /// The dtype the compiler and the backends see for this one: `I64`
    /// is an `I32` and `U8` a `U32` below the front end (they differ only
    /// in the range checks and wrapping the front end applies).
    pub(crate) const fn storage(self) -> DType {
        match self {
            DType::I64 => DType::I32,
            DType::U8 => DType::U32,
            d => d,
        }
    }

    /// Elements one 32-bit word of a GPU buffer holds (2 or 1).
    pub(crate) const fn per_word(self) -> usize {
        4 / self.size_in_bytes()
    }

    /// 32-bit words that `len` elements take in a GPU buffer.
    pub(crate) const fn words(self, len: usize) -> usize {
        len.div_ceil(self.per_word())
    }

    /// The device words holding `bits` (one 32-bit pattern per element,
    /// as on the host): 16-bit types two to a word, low half first; other
    /// dtypes as they are (no copy).
    pub(crate) fn pack(self, bits: Vec<u32>) -> Vec<u32> {
        if !self.is_half() {
            return bits;
        }
        bits.chunks(2)
            .map(|pair| (pair[0] & 0xffff) | (pair.get(1).map_or(0, |&b| b & 0xffff) << 16))
            .collect()
    }

    /// Elements `first..first + len` of device `words` whose element 0 is
    /// at word 0, as one 32-bit pattern each (the inverse of `pack`; for
    /// 32-bit dtypes the words themselves, trimmed in place).
    pub(crate) fn unpack(self, mut words: Vec<u32>, first: usize, len: usize) -> Vec<u32> {
        if !self.is_half() {
            words.truncate(first + len);
            words.drain(..first);
            return words;
        }
        (first..first + len)
            .map(|i| (words[i / 2] >> (16 * (i % 2))) & 0xffff)
            .collect()
    }

    /// The value of a float element's 32-bit pattern (`F32`, `F16`, `BF16`).
    pub(crate) fn float_from_bits(self, bits: u32) -> f32 {
        match self {
            DType::F16 => half::f16::from_bits(bits as u16).to_f32(),
            DType::BF16 => half::bf16::from_bits(bits as u16).to_f32(),
            _ => f32::from_bits(bits),
        }
    }

    /// The 32-bit pattern of float `v` in this float dtype, rounded to
    /// nearest, ties to even (overflow to infinity, NaN kept).
    pub(crate) fn float_to_bits(self, v: f32) -> u32 {
        match self {
            DType::F16 => half::f16::from_f32(v).to_bits() as u32,
            DType::BF16 => half::bf16::from_f32(v).to_bits() as u32,
            _ => v.to_bits(),
        }
    }

    /// `v` rounded to this float dtype and widened back to `f32`.
    pub(crate) fn round_f32(self, v: f32) -> f32 {
        self.float_from_bits(self.float_to_bits(v))
    }

    /// Whether this is an integer type (not bool).
    pub const fn is_int(self) -> bool {
        matches!(self, DType::I32 | DType::U32 | DType::I64 | DType::U8)
    }

    /// The WGSL type used for a value of this dtype in registers.
    pub(crate) const fn wgsl_value_type(self) -> &'static str {
        match self {
            DType::F32 | DType::F16 | DType::BF16 => "f32",
            DType::I32 | DType::I64 => "i32",
            DType::U32 | DType::U8 => "u32",
            DType::Bool => "bool",
        }
    }

    /// The WGSL type used for storage in buffers (a `bf16` pair is a
    /// `u32` word).
    pub(crate) const fn wgsl_storage_type(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::I32 | DType::I64 => "i32",
            DType::U32 | DType::U8 | DType::Bool | DType::BF16 => "u32",
        }
    }

    /// Category for type promotion: bool < integer < float.
    pub(crate) const fn category(self) -> u8 {
        match self {
            DType::Bool => 0,
            DType::I32 | DType::U32 | DType::I64 | DType::U8 => 1,
            DType::F32 | DType::F16 | DType::BF16 => 2,
        }
    }
}

impl std::str::FromStr for DType {
    type Err = String;

    /// A dtype by the name [`fmt::Display`] prints (`f32`, `f16`, `bf16`,
    /// `i32`, `u32`, `i64`, `u8`, `bool`).
    fn from_str(name: &str) -> Result<DType, String> {
        [
            DType::F32,
            DType::F16,
            DType::BF16,
            DType::I32,
            DType::U32,
            DType::I64,
            DType::U8,
            DType::Bool,
        ]
        .into_iter()
        .find(|d| d.to_string() == name)
        .ok_or_else(|| format!("no dtype {name:?} (f32, f16, bf16, i32, u32, i64, u8 or bool)"))
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DType::F32 => "f32",
            DType::I32 => "i32",
            DType::U32 => "u32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::Bool => "bool",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
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
    /// Whether the value survives its 32-bit representation (an `i64`
    /// must fit in `i32`; every other type always does).
    fn fits(self) -> bool {
        true
    }
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

impl Element for i64 {
    const DTYPE: DType = DType::I64;
    fn to_bits(self) -> u32 {
        self as i32 as u32
    }
    fn from_bits(bits: u32) -> Self {
        bits as i32 as i64
    }
    fn fits(self) -> bool {
        i32::try_from(self).is_ok()
    }
}

impl Element for u8 {
    const DTYPE: DType = DType::U8;
    fn to_bits(self) -> u32 {
        self as u32
    }
    fn from_bits(bits: u32) -> Self {
        bits as u8
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

impl Element for half::f16 {
    const DTYPE: DType = DType::F16;
    fn to_bits(self) -> u32 {
        half::f16::to_bits(self) as u32
    }
    fn from_bits(bits: u32) -> Self {
        half::f16::from_bits(bits as u16)
    }
}

impl Element for half::bf16 {
    const DTYPE: DType = DType::BF16;
    fn to_bits(self) -> u32 {
        half::bf16::to_bits(self) as u32
    }
    fn from_bits(bits: u32) -> Self {
        half::bf16::from_bits(bits as u16)
    }
}

/// The result dtype of a binary op, following PyTorch's promotion between
/// categories (bool < integer < float) and within floats (`f16` or `bf16`
/// with `f32` is `f32`; `f16` with `bf16` is `f32`, as in PyTorch). Mixing
/// `i32` and `u32` has no PyTorch counterpart and is refused (`None`).
pub(crate) fn promote(a: DType, b: DType) -> Option<DType> {
    if a == b {
        return Some(a);
    }
    match a.category().cmp(&b.category()) {
        std::cmp::Ordering::Greater => Some(a),
        std::cmp::Ordering::Less => Some(b),
        std::cmp::Ordering::Equal if a.is_float() => Some(DType::F32),
        // Integers: i64 takes any other, u8 gives way to any other;
        // i32 with u32 has no common type.
        std::cmp::Ordering::Equal if a == DType::I64 || b == DType::I64 => Some(DType::I64),
        std::cmp::Ordering::Equal if a == DType::U8 => Some(b),
        std::cmp::Ordering::Equal if b == DType::U8 => Some(a),
        std::cmp::Ordering::Equal => None,
    }
}
