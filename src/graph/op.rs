//! The operations a node can hold. This enum is the whole vocabulary that
//! lowering, code generation and the CPU reference have to understand.

use crate::dtype::DType;
use crate::shape::Layout;

/// Elementwise functions of one operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum UnaryOp {
    Neg,
    Abs,
    Exp,
    Log,
    Sqrt,
    Rsqrt,
    Recip,
    Sin,
    Cos,
    Tanh,
    Sigmoid,
    Relu,
    Floor,
    Ceil,
    Round,
    Sign,
    Erf,
    Gelu,
}

impl UnaryOp {
    /// The user-facing name, for messages and dumps.
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Abs => "abs",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Rsqrt => "rsqrt",
            UnaryOp::Recip => "recip",
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Relu => "relu",
            UnaryOp::Floor => "floor",
            UnaryOp::Ceil => "ceil",
            UnaryOp::Round => "round",
            UnaryOp::Sign => "sign",
            UnaryOp::Erf => "erf",
            UnaryOp::Gelu => "gelu",
        }
    }

    /// Whether the op only makes sense on floats, so integer operands are
    /// promoted to `f32` first (as PyTorch does for `exp(int_tensor)`).
    pub fn needs_float(self) -> bool {
        !matches!(
            self,
            UnaryOp::Neg
                | UnaryOp::Abs
                | UnaryOp::Relu
                | UnaryOp::Sign
                | UnaryOp::Floor
                | UnaryOp::Ceil
                | UnaryOp::Round
        )
    }
}

/// Elementwise functions of two operands of equal shape and dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Maximum,
    Minimum,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl BinaryOp {
    /// The user-facing name, for messages and dumps.
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Pow => "pow",
            BinaryOp::Maximum => "maximum",
            BinaryOp::Minimum => "minimum",
            BinaryOp::Eq => "eq",
            BinaryOp::Ne => "ne",
            BinaryOp::Lt => "lt",
            BinaryOp::Le => "le",
            BinaryOp::Gt => "gt",
            BinaryOp::Ge => "ge",
        }
    }

    /// Whether the result is `Bool` rather than the operands' dtype.
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge
        )
    }
}

/// How a reduction combines elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum ReduceOp {
    Sum,
    Prod,
    Max,
    Min,
    /// Index (within the reduced elements, row-major) of the first maximum.
    ArgMax,
    /// Index of the first minimum.
    ArgMin,
}

impl ReduceOp {
    /// The user-facing name, for messages and dumps.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::ArgMax => "argmax",
            ReduceOp::ArgMin => "argmin",
        }
    }

    /// Whether the result is an index (`i32`) rather than a value.
    pub fn is_arg(self) -> bool {
        matches!(self, ReduceOp::ArgMax | ReduceOp::ArgMin)
    }
}

/// One pass of a radix sort (`Op::RadixCount`, `Op::RadixScatter`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RadixPass {
    /// The sorted dim.
    pub axis: usize,
    /// Greatest first (the key's bits flipped).
    pub descending: bool,
    /// The key bit the pass's four-bit digit starts at.
    pub shift: usize,
    /// Line positions each invocation walks in order.
    pub block: usize,
}

impl RadixPass {
    /// Bits of the key a pass sorts by (a radix select fixes as many).
    pub const DIGIT_BITS: usize = 4;
    /// Values such a digit takes.
    pub const DIGITS: usize = 1 << Self::DIGIT_BITS;
}

/// What a node computes. Leaves (`Scalar`, `Arange`, `Rand`) carry their
/// runtime values separately (see `Leaf values` in the graph module), so that
/// the op itself, and with it the cache key, does not change with them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// A rank-0 constant whose value is a runtime parameter.
    Scalar,
    /// `start + i * step` over the flattened output; both runtime parameters.
    Arange,
    /// Counter-based random numbers: uniform in [0, 1) or standard normal.
    Rand {
        /// Box-Muller normal rather than uniform.
        normal: bool,
    },
    /// Elementwise unary function.
    Unary(UnaryOp),
    /// Elementwise binary function (operands already broadcast and promoted).
    Binary(BinaryOp),
    /// `cond ? a : b` elementwise (operands already broadcast).
    Where,
    /// Conversion to another dtype.
    Cast(DType),
    /// Same elements in row-major order, new shape.
    Reshape,
    /// Size-1 dims repeated to the node's shape (same rank as the input).
    Expand,
    /// A strided view of the input's row-major elements: output element
    /// `(i0, i1, ..)` is input element number `offset + Σ ik * strides[k]`.
    /// This is how a view handle reads its base (functionalization).
    AsStrided(Layout),
    /// Constant padding: dim `d` gets `pads[d].0` elements before and
    /// `pads[d].1` after; the fill value is a runtime parameter.
    Pad(Vec<(usize, usize)>),
    /// The input with the listed dims reversed.
    Flip(Vec<usize>),
    /// `out[c] = x[c with coordinate axis = index[c]]` (index `i32`, the
    /// output's shape; out-of-range indices are clamped).
    Gather(usize),
    /// `base` plus, for every element `j` of `src`, `src[j]` added at `j`'s
    /// coordinates with coordinate `axis` replaced by `index[j]` (index
    /// shaped like `src`; out-of-range indices are dropped).
    ScatterAdd(usize),
    /// `ScatterAdd` along `axis` of an index that varies along `axis`
    /// alone (an embedding's or `index_add`'s gradient), from the index
    /// sorted: the inputs are the base, the source, the source's
    /// positions along `axis` in index order (a stable `Sort` of the
    /// index) and `SortedStarts` of that order. Each output element sums
    /// the source's slices its index names, a run of the order, in
    /// ascending position as `ScatterAdd` does: the work follows the
    /// source, not the source times the output's rows. Only in graphs
    /// lowered for the GPU (`schedule::split::sort_scatters`).
    SortedScatterAdd(usize),
    /// `out[v]` (`v` in `0..=rows`, `i32`) is how many of the first
    /// input's values (an `i32` line) are less than `v`, read through
    /// the second input, the line's stable ascending order: where row
    /// `v`'s run of the order starts. A binary search per element. Only
    /// in graphs lowered for the GPU (`schedule::split::sort_scatters`).
    SortedStarts,
    /// Reduction over `axes`; the output keeps them as size-1 dims. With
    /// `parts > 1` (only in graphs lowered for the GPU, see
    /// `schedule::split_reductions`) the reduced elements (numbered in row-major order of the
    /// reduced dims) are split into `parts` interleaved parts, in groups of
    /// four: part `p` takes groups `p, p + parts, ..` (elements `4p ..
    /// 4p + 3`, then `4(p + parts) ..`), and the output has one more
    /// trailing dim of size `parts` holding each part's result: the first
    /// stage of a two-stage reduction of a huge tensor. Interleaving makes
    /// neighbouring invocations read neighbouring memory; groups of four
    /// let each read a `vec4`.
    Reduce {
        /// How elements combine.
        op: ReduceOp,
        /// The reduced dims of the input, ascending.
        axes: Vec<usize>,
        /// Chunks of the reduced elements (1: a plain reduction).
        parts: usize,
    },
    /// Softmax (or log-softmax) along `axis`, in one kernel per row group.
    Softmax {
        /// The normalised dim.
        axis: usize,
        /// log_softmax rather than softmax.
        log: bool,
    },
    /// Batched matrix product of `[.., M, K]` and `[.., K, N]` (batch dims
    /// already broadcast to the same shape).
    /// Each row along the last axis normalised: `(x - mean) / sqrt(var +
    /// eps)` with the biased variance, `eps` the node's parameter (the core
    /// of `layer_norm`: one kernel, a row per invocation); with `rms`,
    /// `x / sqrt(mean(x^2) + eps)` (the core of `rms_norm`).
    Normalize {
        /// Root mean square normalisation: no mean subtracted.
        rms: bool,
    },
    /// The gradient of `Normalize` for inputs `(x, gy)`:
    /// `rstd * (gy - mean(gy) - xhat * mean(gy * xhat))` per row, `eps`
    /// the node's parameter; with `rms`, `rstd * (gy - xhat * mean(gy *
    /// xhat))`.
    NormalizeBackward {
        /// The gradient of the root mean square normalisation.
        rms: bool,
    },
    /// Attention `softmax(q k^T * scale) v` over inputs `(q, k, v)` shaped
    /// `[batch.., L, E]`, `[batch.., S, E]`, `[batch.., S, Ev]` (same batch
    /// dims), `scale` the node's parameter; `causal` keeps key `j` for
    /// query `i` only when `j <= i`. One kernel: a query row per
    /// invocation with an online softmax, the scores never stored.
    Attention {
        causal: bool,
    },
    Matmul,
    /// Running sums (`op` `Sum`) or products (`Prod`) along `axis`, the
    /// output shaped as the input: element `j` combines elements `0..=j`
    /// in order. One kernel, an invocation per line along the axis.
    /// With `chunk > 0` (only in graphs lowered for the GPU, see
    /// `schedule::split_long_scans`): over one input, each chunk of
    /// `chunk` elements of a line scanned alone (an invocation a chunk);
    /// over two, the first holding those chunks' scans and the second
    /// the running value of each line's chunks but its last (`[..,
    /// chunks - 1, ..]` along `axis`), element `k` of chunk `c > 0`
    /// combined with the second's element `c - 1` (an invocation an
    /// element).
    Scan {
        /// How elements combine (`Sum` or `Prod`).
        op: ReduceOp,
        /// The scanned dim.
        axis: usize,
        /// Elements an invocation scans (0: a whole line).
        chunk: usize,
    },
    /// The `i32` indices that sort the input along `axis` (a stable sort;
    /// NaN greatest; `descending` puts the greatest first, equal values
    /// still in their original order). The kernel sorts in its output
    /// buffer, so the node is always written and takes no epilogue.
    Sort {
        /// The sorted dim.
        axis: usize,
        /// Greatest first.
        descending: bool,
        /// Elements sorted together (0: whole lines). With `run > 0` (a
        /// power of two; only in graphs lowered for the GPU, see
        /// `schedule::split_long_sorts`) each run of `run` elements of a
        /// line is sorted alone, by a workgroup of its own; the indices
        /// are still the line's.
        run: usize,
    },
    /// The indices of the first input's lines sorted as `Sort` sorts
    /// them, from the second input's indices sorted in runs of `run`
    /// (merged in pairs into runs of `2 * run`): an invocation per
    /// element finds its place in the other run of its pair by binary
    /// search. Only in graphs lowered for the GPU
    /// (`schedule::split_long_sorts`); always written, no epilogue.
    MergeRuns {
        /// The sorted dim.
        axis: usize,
        /// Greatest first.
        descending: bool,
        /// Elements of each sorted run of the second input.
        run: usize,
    },
    /// One pass of a least-significant-digit radix sort along an axis
    /// (only in graphs lowered for a CPU adapter, see
    /// `schedule::split_long_sorts`): per line, per block of
    /// `RadixPass::block` positions of the order so far (the second input,
    /// on every pass but the first, `shift` 0, which walks the identity),
    /// how many of the elements there have each of the sixteen values of
    /// the key's digit at `shift`: `[lines, 16 * blocks]` `i32`s, digit-major, whose running sum is where each block
    /// writes each digit. Always written, no epilogue.
    RadixCount(RadixPass),
    /// The order after one radix pass: the first input's line positions
    /// in the order so far (the second input, after the first pass), each moved to
    /// its digit's place, `RadixCount`'s counts (the last input but one)
    /// and their running sums (the last) saying where each block's
    /// digits start. Stable, so eight passes sort by the whole key.
    /// Writes scattered positions: always written, no epilogue.
    RadixScatter(RadixPass),
    /// The `i32` indices, along the last dim, of the `k` elements of each
    /// line that a stable sort (greatest first when `largest`) puts
    /// first, listed in increasing index order (NaN greatest; equal
    /// values, all NaNs equal and -0 equal to 0, taken by the smaller
    /// index). A radix select a line per workgroup: `topk` sorts the
    /// `k` values it picks (`tensor::sort`). Always written, no epilogue.
    TopkSelect {
        /// Elements picked from each line.
        k: usize,
        /// The greatest (else the least).
        largest: bool,
    },
    /// The first input (the base) with the elements that the strided view
    /// `Layout` selects replaced by the second input (the view's new
    /// values). This is how a write through a view updates its base.
    StridedScatter(Layout),
}

impl Op {
    /// Short name for messages and dumps.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Scalar => "scalar",
            Op::Arange => "arange",
            Op::Rand { normal: false } => "rand",
            Op::Rand { normal: true } => "randn",
            Op::Unary(u) => u.name(),
            Op::Binary(b) => b.name(),
            Op::Where => "where",
            Op::Cast(_) => "cast",
            Op::Reshape => "reshape",
            Op::Expand => "expand",
            Op::AsStrided(_) => "as_strided",
            Op::Reduce { op, .. } => op.name(),
            Op::Pad(_) => "pad",
            Op::Flip(_) => "flip",
            Op::Gather(_) => "gather",
            Op::ScatterAdd(_) | Op::SortedScatterAdd(_) | Op::SortedStarts => "scatter_add",
            Op::Softmax { log: false, .. } => "softmax",
            Op::Softmax { log: true, .. } => "log_softmax",
            Op::Matmul => "matmul",
            Op::Scan {
                op: ReduceOp::Prod, ..
            } => "cumprod",
            Op::Scan { .. } => "cumsum",
            Op::Sort { .. } | Op::MergeRuns { .. } => "argsort",
            Op::TopkSelect { .. } => "topk",
            Op::RadixCount(_) | Op::RadixScatter(_) => "argsort",
            Op::Normalize { rms: false } => "normalize",
            Op::Normalize { rms: true } => "rms_normalize",
            Op::NormalizeBackward { rms: false } => "normalize_backward",
            Op::NormalizeBackward { rms: true } => "rms_normalize_backward",
            Op::Attention { .. } => "attention",
            Op::StridedScatter(_) => "strided_scatter",
        }
    }

    /// Ops whose kernel is not elementwise: each is written to memory and
    /// gets a kernel of its own shape (possibly with an epilogue).
    pub fn is_kernel_root(&self) -> bool {
        matches!(
            self,
            Op::Reduce { .. }
                | Op::Softmax { .. }
                | Op::Matmul
                | Op::Normalize { .. }
                | Op::NormalizeBackward { .. }
                | Op::Attention { .. }
                | Op::Scan { .. }
                | Op::Sort { .. }
                | Op::MergeRuns { .. }
                | Op::TopkSelect { .. }
                | Op::RadixCount(_)
                | Op::RadixScatter(_)
        )
    }

    /// Kernel roots whose kernel works in its own output buffer (reads
    /// back what it wrote): always written, never with an epilogue.
    pub fn works_in_its_output(&self) -> bool {
        matches!(
            self,
            Op::Sort { .. }
                | Op::MergeRuns { .. }
                | Op::TopkSelect { .. }
                | Op::RadixCount(_)
                | Op::RadixScatter(_)
        )
    }

    /// Movement ops change only which element is read, never values.
    pub fn is_movement(&self) -> bool {
        matches!(
            self,
            Op::Reshape | Op::Expand | Op::AsStrided(_) | Op::Flip(_)
        )
    }
}
