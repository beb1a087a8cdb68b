//! WGSL generation for one kernel of elementwise work.
//!
//! Each invocation owns one element index `gi` of the kernel's iteration
//! space. A node's value at an index is emitted once as a `let` (memoised by
//! node and index variable), so shared subexpressions are computed once and a
//! chain of a thousand ops is a thousand short lines, not one deep
//! expression. Movement ops become index arithmetic; stored data is read
//! through its layout (strides and offset). Scalars and other runtime values
//! are read from the `params` buffer, never written into the code.

use std::collections::HashMap;
use std::fmt::Write;

use crate::dtype::DType;
use crate::graph::op::{BinaryOp, Op, UnaryOp};
use crate::graph::{GKind, GNode, GraphKey};
use crate::shape::{Layout, contiguous_strides, numel};

/// Invocations per workgroup for elementwise kernels.
pub(crate) const WORKGROUP_SIZE: u32 = 256;

/// Generated code for one kernel and what it binds.
#[derive(Clone, Debug)]
pub(crate) struct KernelSource {
    pub wgsl: String,
    /// Whether binding 0 is the parameter buffer.
    pub uses_params: bool,
    /// Graph nodes read from memory, in binding order after `params`.
    pub reads: Vec<usize>,
    /// Graph nodes written, in binding order after the reads.
    pub writes: Vec<usize>,
}

/// Generates the kernel that writes `outputs` (all of `numel` elements).
/// `stored(i)` says whether node `i` can be read from memory (a graph input
/// or the output of an earlier kernel) instead of being recomputed.
pub(crate) fn generate_kernel(
    key: &GraphKey,
    outputs: &[usize],
    numel: usize,
    stored: &dyn Fn(usize) -> bool,
) -> KernelSource {
    let mut g = Gen {
        nodes: &key.nodes,
        stored,
        body: String::new(),
        memo: HashMap::new(),
        reads: Vec::new(),
        next_var: 0,
        uses_params: false,
        uses_rng: false,
        uses_pow: false,
    };
    let mut stores = String::new();
    for (k, &o) in outputs.iter().enumerate() {
        // An output that is itself stored (a strided view being made
        // contiguous) is read through its layout, not recursed into.
        let value = g.value(o, "gi", true);
        let stored_value = match key.nodes[o].dtype {
            DType::Bool => format!("select(0u, 1u, {value})"),
            _ => value,
        };
        let _ = writeln!(stores, "    out{k}[gi] = {stored_value};");
    }

    let mut src = String::new();
    let mut binding = 0;
    if g.uses_params {
        let _ = writeln!(
            src,
            "@group(0) @binding({binding}) var<storage, read> params: array<u32>;"
        );
        binding += 1;
    }
    for (k, &r) in g.reads.iter().enumerate() {
        let ty = key.nodes[r].dtype.wgsl_storage_type();
        let _ = writeln!(
            src,
            "@group(0) @binding({binding}) var<storage, read> in{k}: array<{ty}>;"
        );
        binding += 1;
    }
    for (k, &o) in outputs.iter().enumerate() {
        let ty = key.nodes[o].dtype.wgsl_storage_type();
        let _ = writeln!(
            src,
            "@group(0) @binding({binding}) var<storage, read_write> out{k}: array<{ty}>;"
        );
        binding += 1;
    }
    if g.uses_rng {
        src.push_str(RNG_FUNCTIONS);
    }
    if g.uses_pow {
        src.push_str(POW_FUNCTION);
    }
    let _ = write!(
        src,
        "\n@compute @workgroup_size({WORKGROUP_SIZE})\n\
         fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, \
         @builtin(local_invocation_index) lid: u32) {{\n    \
         // Grids past 65,535 workgroups are split over y.\n    \
         let gi = (wid.y * nwg.x + wid.x) * {WORKGROUP_SIZE}u + lid;\n    \
         if (gi >= {numel}u) {{ return; }}\n{}{}}}\n",
        g.body, stores
    );
    KernelSource {
        wgsl: src,
        uses_params: g.uses_params,
        reads: g.reads,
        writes: outputs.to_vec(),
    }
}

struct Gen<'a> {
    nodes: &'a [GNode],
    stored: &'a dyn Fn(usize) -> bool,
    body: String,
    memo: HashMap<(usize, String), String>,
    reads: Vec<usize>,
    next_var: usize,
    uses_params: bool,
    uses_rng: bool,
    uses_pow: bool,
}

impl Gen<'_> {
    fn fresh(&mut self, prefix: &str) -> String {
        self.next_var += 1;
        format!("{prefix}{}", self.next_var)
    }

    fn emit(&mut self, prefix: &str, ty: &str, expr: &str) -> String {
        let var = self.fresh(prefix);
        let _ = writeln!(self.body, "    let {var}: {ty} = {expr};");
        var
    }

    fn param(&mut self, slot: usize, dtype: DType) -> String {
        self.uses_params = true;
        match dtype {
            DType::F32 => format!("bitcast<f32>(params[{slot}])"),
            DType::I32 => format!("bitcast<i32>(params[{slot}])"),
            DType::U32 => format!("params[{slot}]"),
            DType::Bool => format!("(params[{slot}] != 0u)"),
        }
    }

    /// The variable holding node `n`'s value at element index `idx`.
    /// `is_root` marks a kernel output, which is computed even if stored
    /// (unless it is a graph input, which has no computation).
    fn value(&mut self, n: usize, idx: &str, is_root: bool) -> String {
        let memo_key = (n, idx.to_string());
        if let Some(v) = self.memo.get(&memo_key) {
            return v.clone();
        }
        let node = &self.nodes[n];
        let ty = node.dtype.wgsl_value_type();
        let is_input = matches!(node.kind, GKind::Input { .. });
        let var = if is_input || (!is_root && (self.stored)(n)) {
            self.load(n, idx)
        } else {
            let GKind::Op { op, param_base } = &node.kind else {
                unreachable!("inputs are loaded above")
            };
            let (op, base) = (op.clone(), *param_base);
            let inputs = node.inputs.clone();
            let dtype = node.dtype;
            match op {
                Op::Scalar => {
                    let p = self.param(base, dtype);
                    self.emit("v", ty, &p)
                }
                Op::Arange => {
                    let start = self.param(base, dtype);
                    let step = self.param(base + 1, dtype);
                    self.emit("v", ty, &format!("{start} + {ty}({idx}) * {step}"))
                }
                Op::Rand { normal } => {
                    self.uses_rng = true;
                    self.uses_params = true;
                    let f = if normal { "rng_normal" } else { "rng_uniform" };
                    self.emit(
                        "v",
                        ty,
                        &format!(
                            "{f}(params[{base}], params[{}], params[{}] + {idx})",
                            base + 1,
                            base + 2
                        ),
                    )
                }
                Op::Unary(u) => {
                    let a = self.value(inputs[0], idx, false);
                    let expr = unary_expr(u, dtype, &a);
                    self.emit("v", ty, &expr)
                }
                Op::Binary(b) => {
                    let a = self.value(inputs[0], idx, false);
                    let c = self.value(inputs[1], idx, false);
                    if b == BinaryOp::Pow {
                        self.uses_pow = true;
                    }
                    let expr = binary_expr(b, &a, &c);
                    self.emit("v", ty, &expr)
                }
                Op::Where => {
                    let c = self.value(inputs[0], idx, false);
                    let a = self.value(inputs[1], idx, false);
                    let b = self.value(inputs[2], idx, false);
                    self.emit("v", ty, &format!("select({b}, {a}, {c})"))
                }
                Op::Cast(to) => {
                    let from = self.nodes[inputs[0]].dtype;
                    let a = self.value(inputs[0], idx, false);
                    self.emit("v", ty, &cast_expr(from, to, &a))
                }
                Op::Reshape => self.value(inputs[0], idx, false),
                Op::Permute(perm) => {
                    let src_shape = self.nodes[inputs[0]].shape.clone();
                    let src_strides = contiguous_strides(&src_shape);
                    // Output dim k reads source dim perm[k].
                    let strides: Vec<usize> = perm.iter().map(|&p| src_strides[p]).collect();
                    let layout = Layout { strides, offset: 0 };
                    let j = self.index_var(&node.shape.clone(), &layout, idx);
                    self.value(inputs[0], &j, false)
                }
                Op::Expand => {
                    let src_shape = self.nodes[inputs[0]].shape.clone();
                    let layout = Layout::contiguous(&src_shape).expand(&src_shape, &node.shape);
                    let j = self.index_var(&node.shape.clone(), &layout, idx);
                    self.value(inputs[0], &j, false)
                }
            }
        };
        self.memo.insert(memo_key, var.clone());
        var
    }

    /// Loads node `n` from its binding at element index `idx`.
    fn load(&mut self, n: usize, idx: &str) -> String {
        let node = &self.nodes[n];
        let (shape, dtype) = (node.shape.clone(), node.dtype);
        let layout = match &node.kind {
            GKind::Input { layout, .. } => layout.clone(),
            GKind::Op { .. } => Layout::contiguous(&shape),
        };
        let k = match self.reads.iter().position(|&r| r == n) {
            Some(k) => k,
            None => {
                self.reads.push(n);
                self.reads.len() - 1
            }
        };
        let pos = self.index_var(&shape, &layout, idx);
        let raw = format!("in{k}[{pos}]");
        let expr = if dtype == DType::Bool {
            format!("({raw} != 0u)")
        } else {
            raw
        };
        self.emit("v", dtype.wgsl_value_type(), &expr)
    }

    /// A variable with the buffer position of row-major element `idx` of
    /// `shape` stored with `layout` (`idx` itself when that is the identity).
    fn index_var(&mut self, shape: &[usize], layout: &Layout, idx: &str) -> String {
        if layout.is_row_major(shape) {
            if layout.offset == 0 {
                return idx.to_string();
            }
            return self.emit("j", "u32", &format!("{idx} + {}u", layout.offset));
        }
        let mut terms = Vec::new();
        let mut inner = 1usize;
        let total = numel(shape);
        for (&dim, &stride) in shape.iter().zip(&layout.strides).rev() {
            if dim > 1 && stride != 0 {
                let outer = inner * dim;
                let coord = if inner == 1 {
                    format!("({idx} % {dim}u)")
                } else if outer >= total {
                    format!("({idx} / {inner}u)")
                } else {
                    format!("(({idx} / {inner}u) % {dim}u)")
                };
                terms.push(if stride == 1 {
                    coord
                } else {
                    format!("{coord} * {stride}u")
                });
            }
            inner *= dim;
        }
        if layout.offset != 0 || terms.is_empty() {
            terms.push(format!("{}u", layout.offset));
        }
        self.emit("j", "u32", &terms.join(" + "))
    }
}

fn float_lit(dtype: DType, v: i32) -> String {
    match dtype {
        DType::F32 => format!("{v}.0"),
        DType::I32 => format!("{v}i"),
        _ => format!("{v}u"),
    }
}

fn unary_expr(u: UnaryOp, dtype: DType, a: &str) -> String {
    let zero = float_lit(dtype, 0);
    match (u, dtype) {
        (UnaryOp::Neg, DType::U32) => format!("0u - {a}"),
        (UnaryOp::Neg, _) => format!("-{a}"),
        (UnaryOp::Abs, DType::U32) => a.to_string(),
        (UnaryOp::Abs, _) => format!("abs({a})"),
        (UnaryOp::Exp, _) => format!("exp({a})"),
        (UnaryOp::Log, _) => format!("log({a})"),
        (UnaryOp::Sqrt, _) => format!("sqrt({a})"),
        (UnaryOp::Rsqrt, _) => format!("inverseSqrt({a})"),
        (UnaryOp::Recip, _) => format!("1.0 / {a}"),
        (UnaryOp::Sin, _) => format!("sin({a})"),
        (UnaryOp::Cos, _) => format!("cos({a})"),
        // Clamped: tanh is ±1 in f32 well before 15, and some drivers
        // compute it through exp, which overflows for large inputs.
        (UnaryOp::Tanh, _) => format!("tanh(clamp({a}, -15.0, 15.0))"),
        (UnaryOp::Sigmoid, _) => format!("1.0 / (1.0 + exp(-{a}))"),
        (UnaryOp::Relu, _) => format!("max({a}, {zero})"),
        (UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round, d) if d != DType::F32 => a.to_string(),
        (UnaryOp::Floor, _) => format!("floor({a})"),
        (UnaryOp::Ceil, _) => format!("ceil({a})"),
        // WGSL's round() rounds half to even, as PyTorch does.
        (UnaryOp::Round, _) => format!("round({a})"),
        (UnaryOp::Sign, DType::U32) => format!("min({a}, 1u)"),
        (UnaryOp::Sign, _) => format!("sign({a})"),
    }
}

fn binary_expr(b: BinaryOp, a: &str, c: &str) -> String {
    match b {
        BinaryOp::Add => format!("{a} + {c}"),
        BinaryOp::Sub => format!("{a} - {c}"),
        BinaryOp::Mul => format!("{a} * {c}"),
        BinaryOp::Div => format!("{a} / {c}"),
        BinaryOp::Pow => format!("pow_torch({a}, {c})"),
        BinaryOp::Maximum => format!("max({a}, {c})"),
        BinaryOp::Minimum => format!("min({a}, {c})"),
        BinaryOp::Eq => format!("{a} == {c}"),
        BinaryOp::Ne => format!("{a} != {c}"),
        BinaryOp::Lt => format!("{a} < {c}"),
        BinaryOp::Le => format!("{a} <= {c}"),
        BinaryOp::Gt => format!("{a} > {c}"),
        BinaryOp::Ge => format!("{a} >= {c}"),
    }
}

fn cast_expr(from: DType, to: DType, a: &str) -> String {
    match (from, to) {
        _ if from == to => a.to_string(),
        (DType::Bool, _) => format!("select({}, {}, {a})", float_lit(to, 0), float_lit(to, 1)),
        (_, DType::Bool) => format!("{a} != {}", float_lit(from, 0)),
        (DType::I32, DType::U32) => format!("bitcast<u32>({a})"),
        (DType::U32, DType::I32) => format!("bitcast<i32>({a})"),
        (_, to) => format!("{}({a})", to.wgsl_value_type()),
    }
}

/// PyTorch's `pow`: defined for negative bases with integral exponents and
/// `pow(x, 0) == 1`, which WGSL's `pow` leaves undefined.
const POW_FUNCTION: &str = r#"
fn pow_torch(a: f32, b: f32) -> f32 {
    if (b == 0.0) { return 1.0; }
    // Drivers disagree on pow(0, b < 0); IEEE (and PyTorch) say +inf.
    if (a == 0.0) { return select(0.0, bitcast<f32>(0x7f800000u), b < 0.0); }
    let p = pow(abs(a), b);
    if (a >= 0.0) { return p; }
    if (floor(b) != b) { return bitcast<f32>(0x7fc00000u); }
    let odd = abs(b) < 16777216.0 && (u32(abs(b)) & 1u) == 1u;
    return select(p, -p, odd);
}
"#;

/// Counter-based random numbers: a hash of (seed, counter), so any element
/// can be generated independently, in any kernel, and identically by the CPU
/// reference (`cpu::rng`).
const RNG_FUNCTIONS: &str = r#"
fn rng_hash(x0: u32) -> u32 {
    var x = x0;
    x ^= x >> 16u; x *= 0x7feb352du;
    x ^= x >> 15u; x *= 0x846ca68bu;
    x ^= x >> 16u;
    return x;
}
fn rng_bits(seed_lo: u32, seed_hi: u32, counter: u32) -> u32 {
    return rng_hash(rng_hash(rng_hash(seed_lo) ^ seed_hi) ^ counter);
}
fn rng_uniform(seed_lo: u32, seed_hi: u32, counter: u32) -> f32 {
    return f32(rng_bits(seed_lo, seed_hi, counter) >> 8u) * (1.0 / 16777216.0);
}
fn rng_normal(seed_lo: u32, seed_hi: u32, counter: u32) -> f32 {
    // Box-Muller over two independent streams of the same counter.
    let u1 = (f32(rng_bits(seed_lo, seed_hi ^ 0x9e3779b9u, counter) >> 8u) + 1.0) * (1.0 / 16777216.0);
    let u2 = f32(rng_bits(seed_lo, seed_hi ^ 0x7f4a7c15u, counter) >> 8u) * (1.0 / 16777216.0);
    return sqrt(-2.0 * log(u1)) * cos(6.2831853071795864 * u2);
}
"#;
