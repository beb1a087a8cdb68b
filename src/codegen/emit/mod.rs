//! `Gen`: lowering of fused graph nodes into the kernel IR
//! (`kernel::ir`), shared by every kernel builder. Each node's value at
//! an index becomes one SSA `Let` (memoised by node and index), so shared
//! subexpressions are computed once and a chain of a thousand ops is a
//! thousand short instructions, not one deep expression. Movement ops
//! become index arithmetic; stored data is read through its layout
//! (strides and offset), buffers past one binding in parts. Scalars and
//! other runtime values are read from the `params` buffer, never written
//! into the code. Printing is `render`'s job.

use std::collections::HashMap;

use crate::dtype::DType;
use crate::graph::op::{BinaryOp, Op, UnaryOp};
use crate::graph::{GKind, GNode};
use crate::kernel::ir::{Arith, Buffer, Builtin, Check, Expr, Inst, PartAccess, Ty, Var};
use crate::kernel::layouts::SzLayout;
use crate::kernel::{Guards, Sz};
use crate::shape::{Layout, numel};

mod assemble;
mod guards;
mod movement;
mod scatter;
use super::source::CodegenContext;
use super::wgsl::{UNIFORM_PARAMS_BYTES, unroll_guarded};
pub(crate) use movement::{SplitOperand, SplitPart};

/// Stack left before a recursive walk over the graph grows it, and by how
/// much it grows (see `Gen::value`).
const STACK_RED_ZONE: usize = 64 << 10;
const STACK_GROWTH: usize = 1 << 20;

/// Binding names of a buffer in `parts` parts: `name`, or `name_p0`, ...
fn part_names(name: &str, parts: usize) -> Vec<String> {
    if parts == 1 {
        vec![name.to_string()]
    } else {
        (0..parts).map(|j| format!("{name}_p{j}")).collect()
    }
}

/// The 16-bit float dtype a buffer of `dtype` stores, if it is one.
fn half(dtype: DType) -> Option<DType> {
    dtype.is_half().then_some(dtype)
}

/// The storage dtype of `dtype` (booleans are stored as `u32`).
fn storage_dtype(dtype: DType) -> DType {
    if dtype == DType::Bool {
        DType::U32
    } else {
        dtype
    }
}

/// Lowering shared by every kernel builder: each node's value at an
/// index becomes a `Let` in `body`, memoised per (node, index).
pub(crate) struct Gen<'a> {
    nodes: &'a [GNode],
    pub stored: &'a dyn Fn(usize) -> bool,
    /// The instructions lowered so far.
    body: Vec<Inst>,
    /// (node, index, vectorised) -> the value there.
    memo: HashMap<(usize, Expr, bool), Expr>,
    /// Where a strided scatter into a base reads its source: (the source
    /// index, the view's shape and layout) -> the base index it was
    /// derived from. A view with that shape and layout read at that
    /// source index is the base index again, so `x[w] = f(x[w])` reads
    /// `x` at one index instead of two, and a chain of such writes (one
    /// in-place op per window of one buffer) stays linear instead of
    /// doubling with each write.
    window_inverse: HashMap<(Expr, Vec<usize>, Layout), Expr>,
    /// Nodes bound for reading, and whether as `vec4`s.
    reads: Vec<(usize, bool)>,
    next_var: usize,
    /// The highest parameter word the kernel reads, if any.
    max_param: Option<usize>,
    uses_rng: bool,
    uses_pow: bool,
    uses_erf: bool,
    uses_tanh: bool,
    /// Whether a 16-bit float is rounded, loaded or stored.
    uses_half: bool,
    /// Whether the body uses cooperative matrices (on `f16` tiles).
    uses_coop: bool,
    aliases: &'a [(usize, usize)],
    /// The target (binding part size) and node labels for annotations.
    cx: CodegenContext<'a>,
    /// Anomaly mode: values and indices are checked (`Inst::Check`).
    checks: bool,
    /// Whether a check was lowered (the kernel then binds `checks`).
    uses_checks: bool,
    /// The kernels that could have computed this one's root, and whether
    /// each was valid at its sizes (set by the builders that choose:
    /// reductions, softmax, elementwise), for `LAZYWGPU_DUMP`.
    pub candidates: Vec<(String, bool)>,
    /// The tests of sizes the kernel's choices made (`kernel::sizes`):
    /// what its code depends on, for `LAZYWGPU_DUMP` and recompile
    /// warnings.
    pub guards: Guards,
    /// Per node, whether its dimensions were tested against one
    /// (`guard_size_one`).
    size_one_tested: Vec<bool>,
    /// Per node, the accesses (read or write, scalar or `vec4`) whose
    /// binding parts were tested (`guard_parts`), as bits.
    parts_tested: Vec<u8>,
    /// The nodes a kernel working on vectors computes a lane at a time
    /// (`vectorize::lanes_gathered`), sorted.
    gathered: Vec<usize>,
}

/// Whether lowering reads node `n` from memory rather than computing
/// it: a graph input, or a value stored by an earlier kernel, unless it
/// is the root the kernel computes (`is_root`).
pub(crate) fn read_from_memory(
    nodes: &[GNode],
    n: usize,
    is_root: bool,
    stored: &dyn Fn(usize) -> bool,
) -> bool {
    match nodes[n].kind {
        GKind::Input { .. } => true,
        GKind::Op { .. } => !is_root && stored(n),
    }
}

impl<'a> Gen<'a> {
    pub fn new(
        nodes: &'a [GNode],
        stored: &'a dyn Fn(usize) -> bool,
        aliases: &'a [(usize, usize)],
        cx: &CodegenContext<'a>,
    ) -> Gen<'a> {
        Gen {
            nodes,
            stored,
            body: Vec::new(),
            memo: HashMap::new(),
            window_inverse: HashMap::new(),
            reads: Vec::new(),
            next_var: 0,
            max_param: None,
            uses_rng: false,
            uses_pow: false,
            uses_erf: false,
            uses_tanh: false,
            uses_half: false,
            uses_coop: false,
            aliases,
            cx: *cx,
            checks: false,
            uses_checks: false,
            candidates: Vec::new(),
            guards: Guards::default(),
            size_one_tested: vec![false; nodes.len()],
            parts_tested: vec![0; nodes.len()],
            gathered: Vec::new(),
        }
    }

    /// Computes `nodes` (sorted) a lane at a time wherever their value is
    /// wanted four elements at a time (`vectorize::lanes_gathered`).
    pub fn gather_lanes_of(&mut self, nodes: Vec<usize>) {
        self.gathered = nodes;
    }

    /// Bindings a read of node `n` needs: its buffer, up to the furthest
    /// element its layout reaches, in parts of
    /// `Target::binding_part_bytes` (one, unless it is larger than that).
    pub fn parts_of(&self, n: usize, vec: bool) -> usize {
        self.parts_for(n, self.nodes[n].extent(), vec)
    }

    /// Bindings a write of node `n` needs: the buffer a kernel writes
    /// holds its elements alone, whatever layout the node was read with
    /// (a strided view of a stored input, copied out, reaches far past
    /// its own few elements).
    pub fn write_parts_of(&self, n: usize, vec: bool) -> usize {
        self.parts_for(n, numel(&self.nodes[n].shape), vec)
    }

    /// Parts of `Target::binding_part_bytes` that `elements` of node `n`
    /// take (`vec`: counted in groups of four).
    fn parts_for(&self, n: usize, elements: usize, vec: bool) -> usize {
        let size = self.nodes[n].dtype.size_in_bytes();
        crate::kernel::binding_parts(elements, size, vec, self.part_bytes())
    }

    /// Reads element `pos` of node `n` from input or output binding `k`:
    /// a load, or over several parts a variable set by an `if` chain over
    /// the parts.
    fn split_access(&mut self, buffer: Buffer, n: usize, pos: Expr, vec: bool) -> Expr {
        let parts = self.parts_of(n, vec);
        self.guard_parts(n, (false, vec), parts);
        if parts == 1 {
            return Expr::Load {
                buffer,
                index: Box::new(pos),
            };
        }
        // A computed position is bound once for the chain's branches; a
        // variable (the invocation's own `gi`) is used as it is, so the
        // donation check still sees a read at the own element.
        let q = match pos {
            Expr::Var(_) | Expr::Invocation | Expr::U32(_) => pos,
            computed => self.emit("q", Ty::U32, computed),
        };
        let var = self.fresh("s");
        let ty = Ty::of(storage_dtype(self.nodes[n].dtype), vec);
        self.body.push(Inst::Declare {
            var,
            ty,
            init: None,
        });
        self.body.push(Inst::Parts {
            buffer,
            parts,
            per_part: self.per_part(n, vec),
            index: q,
            access: PartAccess::Read(var),
        });
        Expr::Var(var)
    }

    /// Elements (or `vec4`s) of node `n` one binding part holds.
    fn per_part(&self, n: usize, vec: bool) -> usize {
        let size = self.nodes[n].dtype.size_in_bytes();
        self.part_bytes() / if vec { 4 * size } else { size }
    }

    /// Element `idx` of output `k` (node `o`, computed by this kernel and
    /// read back by it, as a sort's network reads the indices it swaps),
    /// through the output's binding parts like `split_access`.
    pub fn load_output(&mut self, k: usize, o: usize, idx: &Expr) -> Expr {
        self.split_access(self.output_buffer(k, o), o, idx.clone(), false)
    }

    /// Output `k`'s buffer, holding node `o` (its parts chosen per access).
    fn output_buffer(&self, k: usize, o: usize) -> Buffer {
        Buffer {
            output: true,
            k,
            part: None,
            half: half(self.nodes[o].dtype),
        }
    }

    /// The instruction storing `value` at element `idx` of output `k`
    /// (node `o`; a boolean is stored as a `u32`), split over parts like
    /// `split_access`.
    pub fn store(&mut self, k: usize, o: usize, idx: &Expr, value: Expr, vec: bool) -> Inst {
        let value = if self.nodes[o].dtype == DType::Bool {
            Expr::FromBool {
                x: Box::new(value),
                vec,
            }
        } else {
            value
        };
        let buffer = self.output_buffer(k, o);
        let parts = self.write_parts_of(o, vec);
        self.guard_parts(o, (true, vec), parts);
        match parts {
            1 => Inst::Store {
                buffer,
                index: idx.clone(),
                value,
                node: o,
            },
            parts => Inst::Parts {
                buffer,
                parts,
                per_part: self.per_part(o, vec),
                index: idx.clone(),
                access: PartAccess::Write(value),
            },
        }
    }

    /// Marks the kernel as using cooperative matrices (WGSL's `enable
    /// wgpu_cooperative_matrix`, and `f16` for their tiles).
    pub fn use_cooperative_matrices(&mut self) {
        self.uses_coop = true;
    }

    /// Turns anomaly checks on for what is lowered from now on.
    pub fn set_checks(&mut self, on: bool) {
        self.checks = on;
    }

    /// Whether the kernel checks anything (and so binds `checks`).
    pub fn uses_checks(&self) -> bool {
        self.uses_checks
    }

    /// Lowers `check` of graph node `node`, in anomaly mode.
    pub fn check(&mut self, check: Check, node: usize) {
        if self.checks {
            self.uses_checks = true;
            self.body.push(Inst::Check { check, node });
        }
    }

    /// Anomaly mode: whether op node `n` (its value at `idx` is `value`)
    /// produced NaN or infinity from finite inputs. Only arithmetic is
    /// checked: a select or a constant (a mask's -inf) makes no new value.
    fn check_produced(&mut self, n: usize, idx: &Expr, value: &Expr, vec: bool) {
        let node = &self.nodes[n];
        let arithmetic = matches!(
            &node.kind,
            GKind::Op {
                op: Op::Unary(_) | Op::Binary(_),
                ..
            }
        );
        if !self.checks || !arithmetic || node.dtype != DType::F32 {
            return;
        }
        let inputs = node
            .inputs
            .iter()
            .filter(|&&i| self.nodes[i].dtype == DType::F32)
            .filter_map(|&i| self.memo.get(&(i, idx.clone(), vec)).cloned())
            .collect();
        let check = Check::NonFinite {
            value: value.clone(),
            inputs,
            vec,
        };
        self.check(check, n);
    }

    /// Appends a kernel builder's instruction.
    pub fn push(&mut self, inst: Inst) {
        self.body.push(inst);
    }

    /// Runs `f` with a fresh body and returns the instructions it lowered;
    /// values memoised inside are forgotten afterwards (they are local to
    /// the block, e.g. a loop body).
    fn scoped_insts(&mut self, f: impl FnOnce(&mut Self)) -> Vec<Inst> {
        let saved_body = std::mem::take(&mut self.body);
        let saved_memo = self.memo.clone();
        f(self);
        self.memo = saved_memo;
        std::mem::replace(&mut self.body, saved_body)
    }

    /// The instructions `f` lowers, as a block of their own (a loop's
    /// body): values memoised inside are forgotten afterwards.
    pub fn block(&mut self, f: impl FnOnce(&mut Self)) -> Vec<Inst> {
        self.scoped_insts(f)
    }

    /// A mutable f32 accumulator starting at zero, declared here.
    pub fn accumulator(&mut self, prefix: &'static str) -> Expr {
        let var = self.fresh(prefix);
        self.body.push(Inst::Declare {
            var,
            ty: Ty::F32,
            init: Some(Expr::Construct {
                ty: Ty::F32,
                x: Box::new(Expr::U32(0)),
            }),
        });
        Expr::Var(var)
    }

    /// A mutable f32 variable set to `init`, declared here.
    pub fn variable(&mut self, prefix: &'static str, init: Expr) -> Expr {
        self.variable_of(prefix, Ty::F32, init)
    }

    /// A mutable variable of `ty` set to `init`, declared here.
    pub fn variable_of(&mut self, prefix: &'static str, ty: Ty, init: Expr) -> Expr {
        let var = self.fresh(prefix);
        self.body.push(Inst::Declare {
            var,
            ty,
            init: Some(init),
        });
        Expr::Var(var)
    }

    /// `var = value`, for a variable from `variable` or `accumulator`.
    pub fn assign(&mut self, var: &Expr, value: Expr) {
        let Expr::Var(var) = var else {
            unreachable!("only variables are assigned")
        };
        self.body.push(Inst::Assign { var: *var, value });
    }

    /// `acc = acc + value`, for an accumulator from `accumulator`.
    pub fn accumulate(&mut self, acc: &Expr, value: Expr) {
        let Expr::Var(var) = acc else {
            unreachable!("accumulators are variables")
        };
        self.body.push(Inst::Accumulate { var: *var, value });
    }

    /// The top-level body lowered so far.
    pub fn body(&self) -> &[Inst] {
        &self.body
    }

    /// Takes the instructions emitted so far, leaving the body empty: a
    /// builder hands its finished body on without copying it.
    pub fn take_body(&mut self) -> Vec<Inst> {
        std::mem::take(&mut self.body)
    }

    /// Declares that node `n` at index `idx` is held in `value` (a kernel
    /// root's result, for its epilogue).
    pub fn seed(&mut self, n: usize, idx: &Expr, value: Expr, vec: bool) {
        let value = self.rounded(n, value, vec);
        self.memo.insert((n, idx.clone(), vec), value);
    }

    /// `value`, computed in f32 for node `n`, rounded to `n`'s dtype when
    /// that is a 16-bit float (each op's result is, as in PyTorch, also
    /// where ops are fused).
    fn rounded(&mut self, n: usize, value: Expr, vec: bool) -> Expr {
        let dtype = self.nodes[n].dtype;
        if !dtype.is_half() {
            return value;
        }
        self.uses_half = true;
        let x = Box::new(value);
        self.emit("v", Ty::of(dtype, vec), Expr::Round { dtype, vec, x })
    }

    /// Graph nodes read from bindings, in binding order.
    pub fn reads(&self) -> Vec<usize> {
        self.reads.iter().map(|&(r, _)| r).collect()
    }

    /// Bytes of the parameter buffer bound as a uniform buffer: the words
    /// up to the highest one read, in whole `vec4`s, when they fit in the
    /// smallest uniform binding every adapter allows (64 KiB); `None`
    /// (a storage binding) past that. Uniform, because a uniform read of
    /// a constant address is one load for all SIMD lanes on lavapipe,
    /// where a storage read is a loop over the lanes.
    pub fn uniform_params_bytes(&self) -> Option<u64> {
        let words = self.max_param? + 1;
        let bytes = words.div_ceil(4) as u64 * 16;
        (bytes <= UNIFORM_PARAMS_BYTES).then_some(bytes)
    }

    /// Notes that parameter word `slot` is read.
    fn note_param(&mut self, slot: usize) {
        self.max_param = Some(self.max_param.map_or(slot, |m| m.max(slot)));
    }

    /// A new SSA variable.
    pub fn fresh(&mut self, prefix: &'static str) -> Var {
        self.next_var += 1;
        Var {
            prefix,
            id: self.next_var,
        }
    }

    /// Binds `value` (of `ty`) to a new variable.
    pub fn emit(&mut self, prefix: &'static str, ty: Ty, value: Expr) -> Expr {
        let var = self.fresh(prefix);
        self.body.push(Inst::Let {
            var,
            ty,
            value,
            node: None,
        });
        Expr::Var(var)
    }

    /// The context this generator was made with (for the kernels a
    /// builder generates beside its own, such as packing kernels).
    pub fn context(&self) -> CodegenContext<'a> {
        self.cx
    }

    /// `body` for `counter` in `0..count`, unrolled where `count` passes
    /// the kernel's loop budget (lavapipe leaves all loops of an
    /// invocation after 65,535 iterations in all, silently).
    pub(super) fn counted_loop(&mut self, counter: Var, count: &Sz, body: Vec<Inst>) -> Inst {
        Inst::Loop {
            counter,
            count: Expr::size_u32(count),
            unroll: unroll_guarded(count, self.cx.target.loop_budget(1), &mut self.guards),
            body,
        }
    }

    /// Bytes one storage binding covers (`Target::binding_part_bytes`).
    fn part_bytes(&self) -> usize {
        self.cx.target.binding_part_bytes
    }

    /// Parameter word `slot` read as `dtype`.
    pub(super) fn param(&mut self, slot: usize, dtype: DType) -> Expr {
        self.note_param(slot);
        Expr::Param { word: slot, dtype }
    }

    /// The value of node `n` at element index `idx` (the index of a group
    /// of four elements when `vec`). `is_root` marks a kernel output,
    /// which is computed even if stored (unless it is a graph input,
    /// which has no computation).
    pub fn value(&mut self, n: usize, idx: &Expr, is_root: bool, vec: bool) -> Expr {
        self.guard_size_one(n);
        // Recursion as deep as the longest chain of fused ops: the stack
        // grows on demand (a 16,800-op chain overflowed a test thread's).
        stacker::maybe_grow(STACK_RED_ZONE, STACK_GROWTH, || {
            self.value_uncached(n, idx, is_root, vec)
        })
    }

    fn value_uncached(&mut self, n: usize, idx: &Expr, is_root: bool, vec: bool) -> Expr {
        let memo_key = (n, idx.clone(), vec);
        if let Some(v) = self.memo.get(&memo_key) {
            return v.clone();
        }
        if vec && self.gathered.binary_search(&n).is_ok() {
            let value = self.gather_lanes(n, idx, is_root);
            self.memo.insert(memo_key, value.clone());
            return value;
        }
        let is_input = matches!(self.nodes[n].kind, GKind::Input { .. });
        let value = if read_from_memory(self.nodes, n, is_root, self.stored) {
            self.load(n, idx, vec)
        } else {
            self.compute(n, idx, vec)
        };
        self.name_last_let(n, &value);
        if !is_input && (is_root || !(self.stored)(n)) {
            self.check_produced(n, idx, &value, vec);
        }
        self.memo.insert(memo_key, value.clone());
        value
    }

    /// Whether every group of four of node `n` is one value repeated:
    /// rows of whole groups of four, broadcast along them (an input read
    /// with a last stride of zero, or an expanded column).
    fn one_value_a_group(&self, n: usize) -> bool {
        let node = &self.nodes[n];
        let rows_in_fours = node.shape.last().is_some_and(|d| d.is_multiple_of(4));
        let broadcast = match &node.kind {
            GKind::Input { layout, .. } => layout.strides.last() == Some(&0),
            GKind::Op { op: Op::Expand, .. } => self.nodes[node.inputs[0]].shape.last() == Some(&1),
            GKind::Op { .. } => false,
        };
        rows_in_fours && broadcast
    }

    /// Names node `n` on the instruction just lowered, where it binds
    /// `value` and names no node yet (a view passes its input's value
    /// through and names nothing).
    fn name_last_let(&mut self, n: usize, value: &Expr) {
        if let (Some(Inst::Let { var, node, .. }), Expr::Var(v)) = (self.body.last_mut(), value)
            && var == v
            && node.is_none()
        {
            *node = Some(n);
        }
    }

    /// Node `n`'s group of four elements `idx`, each computed a lane at a
    /// time and gathered into one vector (`vectorize::lanes_gathered`): for a
    /// node that cannot be computed four at a time in a kernel that is.
    fn gather_lanes(&mut self, n: usize, idx: &Expr, is_root: bool) -> Expr {
        let first = self.first_of_group(idx);
        let ty = Ty::of(self.nodes[n].dtype, true);
        if self.one_value_a_group(n) {
            // A column broadcast along rows of whole groups of four: the
            // group's four lanes are one value, read once.
            let x = Box::new(self.value(n, &first, is_root, false));
            let value = self.emit("v", ty, Expr::Construct { ty, x });
            self.name_last_let(n, &value);
            return value;
        }
        let lanes = (0..4)
            .map(|q| {
                let at = match q {
                    0 => first.clone(),
                    q => {
                        let at = Expr::arith(Arith::Add, first.clone(), Expr::U32(q));
                        self.emit("e", Ty::U32, at)
                    }
                };
                self.value(n, &at, is_root, false)
            })
            .collect();
        let value = self.emit("v", ty, Expr::call(Builtin::Lanes, lanes));
        self.name_last_let(n, &value);
        value
    }

    /// Op node `n`'s value at `idx`, computed from its inputs (in f32 for
    /// every float dtype, then rounded to a 16-bit one).
    fn compute(&mut self, n: usize, idx: &Expr, vec: bool) -> Expr {
        let value = self.compute_f32(n, idx, vec);
        let rounds = matches!(
            &self.nodes[n].kind,
            GKind::Op {
                op: Op::Scalar
                    | Op::Arange
                    | Op::Rand { .. }
                    | Op::Unary(_)
                    | Op::Binary(_)
                    | Op::Cast(_),
                ..
            }
        );
        if rounds {
            self.rounded(n, value, vec)
        } else {
            value
        }
    }

    fn compute_f32(&mut self, n: usize, idx: &Expr, vec: bool) -> Expr {
        let node = &self.nodes[n];
        let GKind::Op { op, param_base } = &node.kind else {
            unreachable!("inputs are loaded, not computed")
        };
        let (op, base, dtype) = (op.clone(), *param_base, node.dtype);
        let inputs = node.inputs.clone();
        let ty = Ty::of(dtype, vec);
        let boxed = Box::new;
        match op {
            Op::Scalar => {
                let p = self.param(base, dtype);
                self.emit("v", ty, Expr::Construct { ty, x: boxed(p) })
            }
            Op::Arange => self.arange_value(base, ty, idx),
            Op::Rand { normal } => self.rand_value(normal, base, ty, idx),
            Op::Unary(u) => {
                let x = self.value(inputs[0], idx, false, vec);
                self.uses_erf |= matches!(u, UnaryOp::Erf | UnaryOp::Gelu);
                self.uses_tanh |= u == UnaryOp::Tanh;
                let value = Expr::Unary {
                    op: u,
                    dtype,
                    vec,
                    x: boxed(x),
                };
                self.emit("v", ty, value)
            }
            Op::Binary(b) => {
                let a = self.value(inputs[0], idx, false, vec);
                let c = self.value(inputs[1], idx, false, vec);
                self.uses_pow |= b == BinaryOp::Pow;
                let value = Expr::Binary {
                    op: b,
                    operand: self.nodes[inputs[0]].dtype,
                    vec,
                    a: boxed(a),
                    b: boxed(c),
                };
                self.emit("v", ty, value)
            }
            Op::Where => {
                let c = self.value(inputs[0], idx, false, vec);
                let a = self.value(inputs[1], idx, false, vec);
                let b = self.value(inputs[2], idx, false, vec);
                self.emit("v", ty, Expr::select(c, a, b))
            }
            Op::Cast(to) => {
                let from = self.nodes[inputs[0]].dtype;
                let x = self.value(inputs[0], idx, false, vec);
                let value = Expr::Cast {
                    from,
                    to,
                    vec,
                    x: boxed(x),
                };
                self.emit("v", ty, value)
            }
            _ if op.is_kernel_root() => {
                unreachable!(
                    "kernel roots are computed by their own kernel and read from memory (node {n})"
                )
            }
            _ => self.moved_value(n, &op, base, idx, vec),
        }
    }

    /// An `Arange`'s element `idx`: `start + idx * step`, its start and
    /// step the parameter words from `base` on.
    fn arange_value(&mut self, base: usize, ty: Ty, idx: &Expr) -> Expr {
        let start = self.param(base, ty.dtype);
        let step = self.param(base + 1, ty.dtype);
        let at = Expr::Construct {
            ty,
            x: Box::new(idx.clone()),
        };
        let value = Expr::arith(Arith::Add, start, Expr::arith(Arith::Mul, at, step));
        self.emit("v", ty, value)
    }

    /// A `Rand`'s draw at element `idx` (uniform, or normal when
    /// `normal`), which brings in the RNG functions and the four
    /// parameter words from `base` on.
    fn rand_value(&mut self, normal: bool, base: usize, ty: Ty, idx: &Expr) -> Expr {
        self.uses_rng = true;
        // Seed and 64-bit offset: four words (`Device::next_rng`).
        for slot in base..base + 4 {
            self.note_param(slot);
        }
        let value = Expr::Rng {
            normal,
            params: base,
            index: Box::new(idx.clone()),
        };
        self.emit("v", ty, value)
    }

    /// Loads node `n` at element index `idx` (group index when `vec`; a
    /// single-element input is then loaded once and splatted). A donated
    /// input is read from the output binding it shares; whether that is
    /// only at the own element is checked on the IR
    /// (`kernel::reads_output_elsewhere`).
    fn load(&mut self, n: usize, idx: &Expr, vec: bool) -> Expr {
        let node = &self.nodes[n];
        let (shape, dtype) = (node.shape.clone(), node.dtype);
        let sizes = Sz::shape(n, &shape);
        // An op's value stored by an earlier kernel lies row-major.
        let layout = match &node.kind {
            GKind::Input { layout, .. } => SzLayout::of(n, layout),
            GKind::Op { .. } => SzLayout::contiguous(&sizes),
        };
        let ty = Ty::of(dtype, vec);
        let from_storage = |raw: Expr| {
            if dtype == DType::Bool {
                Expr::NonZero {
                    x: Box::new(raw),
                    vec,
                }
            } else {
                raw
            }
        };
        if let Some(&(_, k)) = self.aliases.iter().find(|(a, _)| *a == n) {
            let raw = self.split_access(self.output_buffer(k, n), n, idx.clone(), vec);
            return self.emit("v", ty, from_storage(raw));
        }
        if vec && numel(&shape) == 1 {
            return self.splat_single(n, ty);
        }
        let k = match self.reads.iter().position(|&r| r == (n, vec)) {
            Some(k) => k,
            None => {
                self.reads.push((n, vec));
                self.reads.len() - 1
            }
        };
        let pos = if vec && layout.is_row_major(&sizes, &mut self.guards) {
            // Row-major with an offset divisible by four (see
            // `vectorize::computes_in_fours`).
            match layout.starts_at_zero(&mut self.guards) {
                true => idx.clone(),
                false => {
                    let q = Expr::size_u32(&layout.offset.div(4));
                    Expr::arith(Arith::Add, idx.clone(), q)
                }
            }
        } else if vec {
            // Groups of four in aligned rows (`Layout::reads_in_aligned_fours`):
            // the group's first element's position, a multiple of four.
            self.group_position(&sizes, &layout, idx)
        } else {
            self.index_var(&sizes, &layout, idx)
        };
        let buffer = Buffer {
            output: false,
            k,
            part: None,
            half: half(dtype),
        };
        let raw = self.split_access(buffer, n, pos, vec);
        self.emit("v", ty, from_storage(raw))
    }
}
