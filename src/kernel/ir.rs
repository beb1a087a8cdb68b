//! The body of a kernel as data: a list of instructions over SSA values
//! (`Let`: each value defined once, with its type and, where it computes a
//! graph node, that node). Lowering (`codegen::emit::Gen`) builds it from
//! the graph: op application, loads through layouts, index arithmetic,
//! binding parts, stores. `codegen::render` prints it as WGSL and nothing
//! else; the `Display` impls here print it as the kernel IR that
//! `LAZYWGPU_DUMP` writes beside the WGSL, and donation is checked on it
//! (`kernel::reads_output_elsewhere`).
//!
//! Every kernel is built as IR, its loops, barriers and workgroup memory
//! included: no IR type holds WGSL text (identifiers aside).

use std::fmt;

use std::sync::Arc;

use super::sizes::{SizeExpr, Sz};
use crate::dtype::DType;
use crate::graph::op::{BinaryOp, UnaryOp};

/// The type of a value: a scalar of `dtype`, or four of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Ty {
    pub dtype: DType,
    pub vec: bool,
}

impl Ty {
    pub const U32: Ty = Ty::scalar(DType::U32);
    pub const F32: Ty = Ty::scalar(DType::F32);
    pub const BOOL: Ty = Ty::scalar(DType::Bool);

    /// One value of `dtype`.
    pub const fn scalar(dtype: DType) -> Ty {
        Ty { dtype, vec: false }
    }

    /// `dtype`, four values when `vec`.
    pub const fn of(dtype: DType, vec: bool) -> Ty {
        Ty { dtype, vec }
    }
}

/// An SSA value, printed `{prefix}{id}` (the prefix says what it holds:
/// `v` a node's value, `j` an index, `c` a coordinate, `h` a condition).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Var {
    pub prefix: &'static str,
    pub id: usize,
}

/// A storage binding: input `k` or output `k` of the kernel, in part
/// `part` when the buffer is bound in several; `half`: the 16-bit float
/// dtype it stores (loads widen it to `f32`, stores round to it), `None`
/// for a buffer of 32-bit elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Buffer {
    pub output: bool,
    pub k: usize,
    pub part: Option<usize>,
    pub half: Option<DType>,
}

/// Integer index arithmetic and the conditions built from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Arith {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Lt,
    Ge,
    Eq,
    /// `a != b` as the language compares (no NaN rule: see
    /// `kernel::legalise`).
    Ne,
    And,
    Or,
    /// `a >> b` on `u32`s.
    Shr,
    /// Lane by lane `a && b` on `vec4<bool>`s.
    LaneAnd,
    /// Lane by lane `a || b` on `vec4<bool>`s.
    LaneOr,
}

impl Arith {
    /// The WGSL (and IR) operator.
    pub fn symbol(self) -> &'static str {
        match self {
            Arith::Add => "+",
            Arith::Sub => "-",
            Arith::Mul => "*",
            Arith::Div => "/",
            Arith::Rem => "%",
            Arith::Lt => "<",
            Arith::Ge => ">=",
            Arith::Eq => "==",
            Arith::Ne => "!=",
            Arith::And => "&&",
            Arith::Or => "||",
            Arith::Shr => ">>",
            Arith::LaneAnd => "&",
            Arith::LaneOr => "|",
        }
    }
}

/// A typed expression (the type is the `Let`'s that holds it).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Expr {
    /// An SSA value defined earlier.
    Var(Var),
    /// The invocation's index over the kernel's grid (`gi`; see
    /// `program::Entry`).
    Invocation,
    /// The invocation's index within its workgroup (`lid`).
    Local,
    /// The invocation's lane within its subgroup (`sid`; the entry must
    /// ask for it, `Entry::subgroup_id`).
    SubgroupLane,
    /// Element `index` of `base`: a lane of a `vec4`, an element of a
    /// private or workgroup array (`Inst::DeclareArray`,
    /// `program::WorkgroupArray`).
    Index { base: Box<Expr>, index: Box<Expr> },
    /// A built-in function applied to `args`.
    Call { f: Builtin, args: Vec<Expr> },
    /// A boolean literal.
    Bool(bool),
    /// A `u32` literal.
    U32(u64),
    /// An `f32` literal, as its bits (NaN and infinities included).
    F32(u32),
    /// A literal (`lit`: a `U32` or `I32`) that is a size of the graph the
    /// kernel was lowered from, with how it is computed from the graph's
    /// numbers (`kernel::sizes`): printed as the literal, and evaluated
    /// at another graph's numbers for the value it takes there.
    Sized { lit: Box<Expr>, size: Arc<SizeExpr> },
    /// Word `slot` of the kernel's dynamic sizes (`Binding::Sizes`), read
    /// as `dtype` (`u32` or `i32`): a size that reads a number changing
    /// at the kernel's trace site (see `kernel::generic`).
    Size { slot: usize, dtype: DType },
    /// Whether an f32 value (`vec`: each of four) is NaN or infinite,
    /// tested on its bits (WGSL lets compilers assume floats are finite).
    IsNonFinite { x: Box<Expr>, vec: bool },
    /// Whether an f32 value (`vec`: each of four) is NaN, tested on its
    /// bits.
    IsNan { x: Box<Expr>, vec: bool },
    /// Logical negation of a condition.
    Not(Box<Expr>),
    /// An `i32` literal.
    I32(i64),
    /// Runtime parameter word `word`, reinterpreted as `dtype`.
    Param { word: usize, dtype: DType },
    /// Element `index` of a binding, as stored (booleans as `u32`).
    Load { buffer: Buffer, index: Box<Expr> },
    /// A stored boolean (`u32`, `vec` of four) read as `bool`.
    NonZero { x: Box<Expr>, vec: bool },
    /// A boolean written as its stored `u32` (0 or 1).
    FromBool { x: Box<Expr>, vec: bool },
    /// A unary op of the graph on a value of `dtype`.
    Unary {
        op: UnaryOp,
        dtype: DType,
        vec: bool,
        x: Box<Expr>,
    },
    /// A binary op of the graph on two values of `operand`.
    Binary {
        op: BinaryOp,
        operand: DType,
        vec: bool,
        a: Box<Expr>,
        b: Box<Expr>,
    },
    /// An f32 value rounded to the 16-bit float `dtype` (and kept in
    /// f32): the value of a node of that dtype.
    Round {
        dtype: DType,
        vec: bool,
        x: Box<Expr>,
    },
    /// A dtype conversion with the graph's rules.
    Cast {
        from: DType,
        to: DType,
        vec: bool,
        x: Box<Expr>,
    },
    /// `then` where `cond` holds, else `otherwise`.
    Select {
        cond: Box<Expr>,
        then: Box<Expr>,
        otherwise: Box<Expr>,
    },
    /// A value converted to `ty` (from a scalar, a splat).
    Construct { ty: Ty, x: Box<Expr> },
    /// Index arithmetic or a condition.
    Arith {
        op: Arith,
        a: Box<Expr>,
        b: Box<Expr>,
    },
    /// An `i32` index clamped into `0..=top` (an `i32`), as a `u32`
    /// position.
    ClampIndex { k: Box<Expr>, top: Box<Expr> },
    /// Counter-based random number (`cpu::rng`'s scheme) for element
    /// `index` of a draw whose seed (two words) and 64-bit offset (two
    /// words, low first) are runtime parameters from word `params` on.
    Rng {
        normal: bool,
        params: usize,
        index: Box<Expr>,
    },
}

impl Expr {
    /// `a op b`.
    pub fn arith(op: Arith, a: Expr, b: Expr) -> Expr {
        Expr::Arith {
            op,
            a: Box::new(a),
            b: Box::new(b),
        }
    }

    /// Size `size` as a `u32` literal that keeps its provenance
    /// (`Expr::Sized`).
    /// (`Expr::Sized`; a plain literal where it reads no symbol).
    pub fn size_u32(size: &Sz) -> Expr {
        Expr::sized(Expr::U32(size.literal() as u64), size)
    }

    /// Size `size` as an `i32` literal that keeps its provenance.
    pub fn size_i32(size: &Sz) -> Expr {
        Expr::sized(Expr::I32(size.literal() as i64), size)
    }

    fn sized(lit: Expr, size: &Sz) -> Expr {
        match size.expr().is_constant() {
            true => lit,
            false => Expr::Sized {
                lit: Box::new(lit),
                size: size.expr().clone(),
            },
        }
    }

    /// `then` where `cond`, else `otherwise`.
    pub fn select(cond: Expr, then: Expr, otherwise: Expr) -> Expr {
        Expr::Select {
            cond: Box::new(cond),
            then: Box::new(then),
            otherwise: Box::new(otherwise),
        }
    }

    /// All of `conds` (`true` when empty).
    pub fn all(conds: Vec<Expr>) -> Expr {
        conds
            .into_iter()
            .reduce(|a, b| Expr::arith(Arith::And, a, b))
            .unwrap_or(Expr::Bool(true))
    }

    /// The graph's `op` on two `f32` values (`vec`: `vec4`s; a scalar
    /// operand of a `vec4` product multiplies every lane).
    pub fn f32_binary(op: BinaryOp, a: Expr, b: Expr, vec: bool) -> Expr {
        Expr::Binary {
            op,
            operand: DType::F32,
            vec,
            a: Box::new(a),
            b: Box::new(b),
        }
    }

    /// The graph's `op` on an `f32` value (`vec`: a `vec4`).
    pub fn f32_unary(op: UnaryOp, x: Expr, vec: bool) -> Expr {
        Expr::Unary {
            op,
            dtype: DType::F32,
            vec,
            x: Box::new(x),
        }
    }

    /// Element `index` of `base`.
    pub fn index(base: Expr, index: Expr) -> Expr {
        Expr::Index {
            base: Box::new(base),
            index: Box::new(index),
        }
    }

    /// A count or size known when the kernel is built, as a `u32`
    /// literal.
    pub fn count(n: usize) -> Expr {
        Expr::U32(n as u64)
    }

    /// `f(args)`.
    pub fn call(f: Builtin, args: Vec<Expr>) -> Expr {
        Expr::Call { f, args }
    }

    /// The sum of `terms` (`0u` when empty).
    pub fn sum(terms: Vec<Expr>) -> Expr {
        terms
            .into_iter()
            .reduce(|a, b| Expr::arith(Arith::Add, a, b))
            .unwrap_or(Expr::U32(0))
    }
}

impl From<Var> for Expr {
    fn from(var: Var) -> Expr {
        Expr::Var(var)
    }
}

/// The built-in functions kernels call beyond the graph's ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Builtin {
    /// The smaller of two numbers (NaN unspecified on floats).
    Min,
    /// The larger of two numbers (NaN unspecified on floats).
    Max,
    /// Whether any lane of a `vec4<bool>` holds.
    Any,
    /// A `vec4<f32>` of four `f32`s.
    Vec4,
    /// A vector of four scalars of one type, its type that of its lanes
    /// (a gathered value: `Gen::gather_lanes`).
    Lanes,
    /// An `f32` rounded to a real `f16` (not widened back): the element
    /// of a workgroup array of `f16` (`program::WorkgroupArray` of
    /// element dtype `F16`), which cooperative matrices load.
    ToF16,
    /// The bits of an `f32` as a `u32` (a radix select's keys).
    Bits,
    /// `args[0]` as lane `args[1]` (a uniform `u32`) of the subgroup holds it.
    SubgroupBroadcast,
    /// The texel at column `args[0]`, row `args[1]`, layer `args[2]` of
    /// the sampled texture array bound as `name` (a `vec4<f32>`).
    TextureLoad(&'static str),
    /// `args[0]` as lane `args[1]` (any `u32`) of the subgroup holds it.
    #[cfg_attr(
        not(test),
        expect(
            dead_code,
            reason = "built by the CPU-only primitives test; no lowering emits it on the adapters here yet"
        )
    )]
    SubgroupShuffle,
    /// `args[0]` as the lane whose id is this lane's xor `args[1]` holds it
    /// (the butterfly of a subgroup reduction).
    #[cfg_attr(
        not(test),
        expect(
            dead_code,
            reason = "built by the CPU-only primitives test; no lowering emits it on the adapters here yet"
        )
    )]
    SubgroupShuffleXor,
    /// The sum of `args[0]` over the subgroup's active lanes.
    #[cfg_attr(
        not(test),
        expect(
            dead_code,
            reason = "built by the CPU-only primitives test; no lowering emits it on the adapters here yet"
        )
    )]
    SubgroupAdd,
    /// The largest `args[0]` of the subgroup's active lanes (NaN
    /// unspecified on floats, as `Max`).
    #[cfg_attr(
        not(test),
        expect(
            dead_code,
            reason = "built by the CPU-only primitives test; no lowering emits it on the adapters here yet"
        )
    )]
    SubgroupMax,
}

/// A cooperative matrix: `size` x `size` elements of `dtype` (f32 or
/// f16) spread over a subgroup, in the `role` it plays in a
/// multiply-accumulate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct CoopMatrix {
    /// 8 or 16.
    pub size: usize,
    pub dtype: DType,
    pub role: CoopRole,
}

/// The operand a cooperative matrix is: `C += A * B`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum CoopRole {
    A,
    B,
    C,
}

/// The memory a cooperative matrix is loaded from or stored to: a
/// storage buffer, or a workgroup array (`program::WorkgroupArray`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum CoopMemory {
    #[cfg_attr(
        not(test),
        expect(
            dead_code,
            reason = "built by the CPU-only primitives test; the matmul stages its tiles in workgroup memory"
        )
    )]
    Buffer(Buffer),
    Workgroup(Var),
}

/// Where a cooperative matrix is loaded from or stored to: element
/// `offset` of `memory` is its first, rows (or columns unless
/// `row_major`) `stride` elements apart.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CoopAccess {
    pub memory: CoopMemory,
    pub offset: Expr,
    pub stride: Expr,
    pub row_major: bool,
}

/// What an `Inst::Parts` does at its element.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum PartAccess {
    /// Reads it into the variable (declared before).
    Read(Var),
    /// Stores the value there.
    Write(Expr),
}

/// One instruction of a kernel body.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Inst {
    /// Defines `var` (of `ty`) as `value`; `node`: the graph node whose
    /// value it is, if any.
    Let {
        var: Var,
        ty: Ty,
        value: Expr,
        node: Option<usize>,
    },
    /// A mutable variable of `ty`, set from `init` when given.
    Declare {
        var: Var,
        ty: Ty,
        init: Option<Expr>,
    },
    /// `var = var + value`.
    Accumulate { var: Var, value: Expr },
    /// `var = value`, for a variable from `Declare`.
    Assign { var: Var, value: Expr },
    /// A private array of `len` elements of `element`, uninitialised.
    DeclareArray { var: Var, element: Ty, len: usize },
    /// `var[index] = value`, for a private or workgroup array.
    SetElement { var: Var, index: Expr, value: Expr },
    /// Waits until every invocation of the workgroup reaches it, and
    /// makes their workgroup-memory writes visible (uniform control flow
    /// only).
    Barrier,
    /// `Barrier` that also makes the workgroup's storage-buffer writes
    /// visible to its invocations (uniform control flow only).
    StorageBarrier,
    /// Leaves the innermost `Loop`.
    Break,
    /// `array[index] = max(array[index], value)`, atomically, on the
    /// `u32` atomics bound as `array` (the anomaly flags, `checks`).
    AtomicMax {
        array: &'static str,
        index: Expr,
        value: Expr,
    },
    /// A cooperative matrix variable loaded from `from`.
    CoopLoad {
        var: Var,
        matrix: CoopMatrix,
        from: CoopAccess,
    },
    /// `acc = a * b + acc` on cooperative matrices of roles A, B and C.
    CoopMultiplyAdd { acc: Var, a: Var, b: Var },
    /// Stores cooperative matrix `var` to `to`.
    CoopStore { var: Var, to: CoopAccess },
    /// Writes `value` (a `vec4<f32>`) at column `x`, row `y`, layer
    /// `layer` of the storage texture array bound as `texture`.
    TextureStore {
        texture: &'static str,
        x: Expr,
        y: Expr,
        layer: Expr,
        value: Expr,
    },
    /// Element `index` of a buffer bound in `parts` parts of
    /// `per_part` elements each (`buffer.part` unset): the part holding it
    /// is chosen at run time.
    Parts {
        buffer: Buffer,
        parts: usize,
        per_part: usize,
        index: Expr,
        access: PartAccess,
    },
    /// `buffer[index] = value`, the value of graph node `node`.
    Store {
        buffer: Buffer,
        index: Expr,
        value: Expr,
        node: usize,
    },
    /// `body` where `cond` holds.
    If { cond: Expr, body: Vec<Inst> },
    /// `body` for `counter` in `0..count`, `unroll` copies of it an
    /// iteration (each bound to its own `counter`, guarded by
    /// `counter < count`): a loop longer than the kernel's loop budget
    /// (`Target::loop_budget`) runs fewer iterations.
    Loop {
        counter: Var,
        /// A `u32` (a literal, a size made dynamic, or a length read from
        /// a buffer and clamped to a literal bound, as a sorted
        /// scatter's runs are).
        count: Expr,
        unroll: usize,
        body: Vec<Inst>,
    },
    /// Anomaly mode: flags `node` in the kernel's `checks` buffer when
    /// `check` fails.
    Check { check: Check, node: usize },
}

impl CoopAccess {
    /// Whether it reads or writes an output binding (a workgroup array
    /// is none).
    pub fn reads_an_output(&self) -> bool {
        matches!(self.memory, CoopMemory::Buffer(b) if b.output)
    }
}

/// What anomaly mode checks of a value (see `Device::set_checks`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Check {
    /// `value` is NaN or infinite where none of `inputs` is: the op
    /// produced it.
    NonFinite {
        value: Expr,
        inputs: Vec<Expr>,
        vec: bool,
    },
    /// `value` (a kernel root's result) is NaN.
    Nan { value: Expr, vec: bool },
    /// The `i32` index `index` lies outside `0..size` (an `i32`).
    Index { index: Expr, size: Expr },
}

impl Check {
    /// The word of the `checks` buffer it flags: 0 for values, 1 for
    /// indices. Each holds `u32::MAX - node` of the earliest node flagged
    /// (an atomic maximum over a buffer cleared to zero).
    pub fn slot(&self) -> usize {
        match self {
            Check::NonFinite { .. } | Check::Nan { .. } => 0,
            Check::Index { .. } => 1,
        }
    }
}

// The IR notation (dumps): `v3: f32 = mul(v1, v2)  ; n7`.

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        if self.vec {
            write!(f, "{}x4", self.dtype)
        } else {
            write!(f, "{}", self.dtype)
        }
    }
}

impl fmt::Display for Var {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        // `i32`, `u32`, `f32` and `f16` are WGSL type names: a variable
        // spelled like one (prefix `i`, id 32) would not parse.
        let reserved = matches!((self.prefix, self.id), ("i" | "u" | "f", 16 | 32));
        write!(
            f,
            "{}{}{}",
            self.prefix,
            self.id,
            if reserved { "_" } else { "" }
        )
    }
}

impl fmt::Display for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let prefix = if self.output { "out" } else { "in" };
        match self.part {
            Some(p) => write!(f, "{prefix}{}_p{p}", self.k),
            None => write!(f, "{prefix}{}", self.k),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::reads_output_elsewhere;

    fn var(id: usize) -> Var {
        Var { prefix: "v", id }
    }

    #[test]
    fn variables_never_spell_a_type_name() {
        let i32_var = Var {
            prefix: "i",
            id: 32,
        };
        assert_eq!(i32_var.to_string(), "i32_");
        assert_eq!(
            Var {
                prefix: "i",
                id: 31
            }
            .to_string(),
            "i31"
        );
        assert_eq!(
            Var {
                prefix: "f",
                id: 16
            }
            .to_string(),
            "f16_"
        );
    }

    #[test]
    fn a_load_from_an_output_elsewhere_than_the_own_element_is_found() {
        let own = Expr::Invocation;
        let out = Buffer {
            output: true,
            k: 0,
            part: None,
            half: None,
        };
        let at = |index: Expr| Inst::Let {
            var: var(1),
            ty: Ty::F32,
            value: Expr::Load {
                buffer: out,
                index: Box::new(index),
            },
            node: Some(0),
        };
        assert!(!reads_output_elsewhere(&[at(own.clone())], &own));
        assert!(reads_output_elsewhere(&[at(Expr::U32(0))], &own));
        // Nested in a loop body, and an input read anywhere is fine.
        let nested = Inst::Loop {
            counter: var(2),
            count: Expr::count(3),
            unroll: 1,
            body: vec![at(Expr::Var(var(2)))],
        };
        assert!(reads_output_elsewhere(&[nested], &own));
        let input = Inst::Let {
            var: var(3),
            ty: Ty::F32,
            value: Expr::Load {
                buffer: Buffer {
                    output: false,
                    k: 0,
                    part: None,
                    half: None,
                },
                index: Box::new(Expr::U32(5)),
            },
            node: None,
        };
        assert!(!reads_output_elsewhere(&[input], &own));
    }
}
