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
use crate::kernel::{Binding, Target};
use crate::shape::{Layout, contiguous_strides, numel};

/// Stack left before a recursive walk over the graph grows it, and by how
/// much it grows (see `Gen::value`).
const STACK_RED_ZONE: usize = 64 << 10;
const STACK_GROWTH: usize = 1 << 20;

/// The most parameter bytes bound as a uniform buffer: WebGPU's minimum
/// for `max_uniform_buffer_binding_size`, so every adapter allows it.
pub(crate) const UNIFORM_PARAMS_BYTES: u64 = 64 << 10;

/// Invocations per workgroup for elementwise kernels.
pub(crate) const WORKGROUP_SIZE: u32 = 256;

/// An `if` chain running `stmt(part, index within the part)` for the part
/// of a split buffer that holds element `idx` (in `vec4` units when `vec`).
/// Each part holds `part_bytes`.
fn part_chain(
    (parts, part_bytes): (usize, usize),
    vec: bool,
    idx: &str,
    stmt: impl Fn(usize, String) -> String,
) -> String {
    let per = part_bytes / if vec { 16 } else { 4 };
    let mut chain = String::from("    ");
    for j in 0..parts {
        if j > 0 {
            chain.push_str(" else ");
        }
        if j + 1 < parts {
            let _ = write!(chain, "if ({idx} < {}u) ", (j + 1) * per);
        }
        let _ = write!(chain, "{{ {} }}", stmt(j, format!("{idx} - {}u", j * per)));
    }
    chain.push('\n');
    chain
}

/// Binding names of a buffer in `parts` parts: `name`, or `name_p0`, ...
fn part_names(name: &str, parts: usize) -> Vec<String> {
    if parts == 1 {
        vec![name.to_string()]
    } else {
        (0..parts).map(|j| format!("{name}_p{j}")).collect()
    }
}

/// What code generation is given besides the graph: the target, and
/// (for dumps) a label per graph node, written as a comment on each line
/// that computes or stores that node.
#[derive(Clone, Copy)]
pub(crate) struct CodegenContext<'a> {
    /// The adapter's description.
    pub target: &'a Target,
    /// Per graph node: `op file:line`, or `None` for unannotated code
    /// (the default: annotations tie the text, and with it the pipeline
    /// cache, to one graph's call sites).
    pub origins: Option<&'a [String]>,
}

impl<'a> CodegenContext<'a> {
    /// Unannotated code for `target`.
    #[cfg(test)]
    pub fn plain(target: &'a Target) -> CodegenContext<'a> {
        CodegenContext {
            target,
            origins: None,
        }
    }
}

/// Generated code for one kernel and what it binds.
#[derive(Clone, Debug)]
pub(crate) struct KernelSource {
    pub wgsl: String,
    /// Whether binding 0 is the parameter buffer.
    pub uses_params: bool,
    /// `Some(bytes)`: the parameter buffer is bound as a uniform buffer of
    /// that many bytes (its first words); `None`: as a storage buffer.
    pub uniform_params: Option<u64>,
    /// Graph nodes read from memory, in binding order after `params`.
    pub reads: Vec<usize>,
    /// Graph nodes written, in binding order after the reads.
    pub writes: Vec<usize>,
    /// Bindings per read and per write: a buffer larger than one storage
    /// binding may hold is bound as consecutive parts of
    /// `Target::binding_part_bytes` each (see `Gen::split_access`).
    pub read_parts: Vec<usize>,
    /// See `read_parts`.
    pub write_parts: Vec<usize>,
    /// Workgroups to launch (the runtime spreads them over a 2-D grid; the
    /// kernel recombines the index).
    pub groups: usize,
    /// Whether an aliased (donated) input was read other than at the
    /// invocation's own element, which would race with the write: the
    /// caller must then drop the alias.
    pub alias_violation: bool,
    /// Scratch textures bound after the buffers, in this order.
    pub textures: Vec<TextureUse>,
    /// `rgba32float` scratch texture arrays (width, height, layers) that
    /// this kernel and its `packs` share; the runtime creates them once
    /// per compiled graph.
    pub scratch: Vec<(u32, u32, u32)>,
    /// Kernels dispatched right before this one, writing its scratch
    /// textures (a matmul's operand packing).
    pub packs: Vec<KernelSource>,
}

/// A scratch texture a kernel binds: entry `slot` of the owning kernel's
/// `scratch`, as a write-only storage texture or a sampled one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TextureUse {
    pub slot: usize,
    pub write: bool,
}

impl KernelSource {
    /// Everything the kernel binds, in binding order: the parameters
    /// (when read), each read in its parts, each write in its parts, then
    /// the scratch textures. The WGSL declares its bindings in this order
    /// (`Gen::header`, the textures after it), and the runtime binds from
    /// this list; a unit test holds the two together.
    pub fn bindings(&self) -> Vec<Binding> {
        let params = self.uses_params.then_some(Binding::Params {
            uniform_bytes: self.uniform_params,
        });
        let reads = self
            .reads
            .iter()
            .zip(&self.read_parts)
            .flat_map(|(&node, &parts)| (0..parts).map(move |part| Binding::Read { node, part }));
        let writes = self
            .writes
            .iter()
            .zip(&self.write_parts)
            .flat_map(|(&node, &parts)| (0..parts).map(move |part| Binding::Write { node, part }));
        let textures = self.textures.iter().map(|t| Binding::Texture {
            slot: t.slot,
            write: t.write,
        });
        params
            .into_iter()
            .chain(reads)
            .chain(writes)
            .chain(textures)
            .collect()
    }

    /// Storage and uniform bindings of this kernel alone (a buffer bound
    /// in parts counts once per part; textures are not buffers).
    pub fn buffer_bindings(&self) -> usize {
        self.bindings()
            .iter()
            .filter(|b| !matches!(b, Binding::Texture { .. }))
            .count()
    }

    /// Nodes read from buffers by this kernel or its packing kernels.
    pub fn all_reads(&self) -> impl Iterator<Item = usize> + '_ {
        self.reads
            .iter()
            .chain(self.packs.iter().flat_map(|p| p.reads.iter()))
            .copied()
    }
}

/// Generates the kernel that writes `outputs` (all of `numel` elements).
/// `stored(i)` says whether node `i` can be read from memory (a graph input
/// or the output of an earlier kernel) instead of being recomputed.
///
/// When every element the kernel touches sits at the same position in every
/// buffer (no index arithmetic beyond splatting single values), it works on
/// `vec4`s: four elements per invocation, loaded and stored as one, which is
/// worth ~2.5x on lavapipe and saves loads everywhere.
///
/// `aliases` lists graph inputs whose buffer is donated to output `k` of
/// this kernel: they are read from `out{k}` (before it is written) instead
/// of a binding of their own.
pub(crate) fn generate_kernel(
    key: &GraphKey,
    outputs: &[usize],
    numel: usize,
    stored: &dyn Fn(usize) -> bool,
    aliases: &[(usize, usize)],
    cx: &CodegenContext,
) -> KernelSource {
    let vec = numel.is_multiple_of(4)
        && outputs
            .iter()
            .all(|&o| vectorizable(&key.nodes, o, stored, true));
    let mut g = Gen::new(&key.nodes, stored, aliases, vec, cx);
    let mut stores = String::new();
    for (k, &o) in outputs.iter().enumerate() {
        // An output that is itself stored (a strided view being made
        // contiguous) is read through its layout, not recursed into.
        let value = g.value(o, "gi", true, vec);
        let stored_value = match key.nodes[o].dtype {
            DType::Bool => format!(
                "select({}, {}, {value})",
                lit(DType::U32, 0, vec),
                lit(DType::U32, 1, vec)
            ),
            _ => value,
        };
        let stmt = g.store(k, o, "gi", &stored_value, vec);
        stores.push_str(&stmt);
    }

    let out_types: Vec<(usize, bool)> = outputs.iter().map(|&o| (o, vec)).collect();
    let mut src = g.header(&out_types);
    let invocations = if vec { numel / 4 } else { numel };
    let _ = write!(
        src,
        "\n{}{}{}}}\n",
        kernel_main(WORKGROUP_SIZE as usize, true, invocations, ""),
        g.body,
        stores
    );
    KernelSource {
        wgsl: src,
        uses_params: g.uses_params(),
        uniform_params: g.uniform_params_bytes(),
        read_parts: g.read_parts(),
        write_parts: outputs.iter().map(|&o| g.parts_of(o, vec)).collect(),
        reads: g.reads.into_iter().map(|(r, _)| r).collect(),
        writes: outputs.to_vec(),
        groups: invocations.div_ceil(WORKGROUP_SIZE as usize),
        alias_violation: g.alias_violation,
        textures: Vec::new(),
        scratch: Vec::new(),
        packs: Vec::new(),
    }
}

/// The opening of a kernel's `main`, through its early return: workgroups
/// of `size` invocations, `gi` the index of the invocation (or, unless
/// `per_invocation`, of the workgroup) over a grid that is split over y
/// past 65,535 workgroups, and a return once `gi` reaches `count`.
/// `builtins` adds parameters after `lid` (", @builtin(..) name: type").
pub(crate) fn kernel_main(
    size: usize,
    per_invocation: bool,
    count: usize,
    builtins: &str,
) -> String {
    let gi = if per_invocation {
        format!("(wid.y * nwg.x + wid.x) * {size}u + lid")
    } else {
        "wid.y * nwg.x + wid.x".to_string()
    };
    format!(
        "@compute @workgroup_size({size})\n\
         fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, \
         @builtin(local_invocation_index) lid: u32{builtins}) {{\n\
         let gi = {gi};\n\
         if (gi >= {count}u) {{ return; }}\n"
    )
}

/// Whether node `n`'s value can be computed four elements at a time with
/// every read at the output's own position (or a single splatted value).
///
/// One walk over the nodes `n` reads, each decided once (graphs reuse
/// values: a walk that follows every path is exponential in the depth of
/// the reuse, and `y = y * y + y` eighteen times took 14 s here).
pub(crate) fn vectorizable(
    nodes: &[GNode],
    n: usize,
    stored: &dyn Fn(usize) -> bool,
    is_root: bool,
) -> bool {
    // What a node decides by itself, or `None`: vectorizable when all its
    // inputs are. Only the root may be computed where it is stored.
    let own = |m: usize, root: bool| -> Option<bool> {
        let node = &nodes[m];
        match &node.kind {
            GKind::Input { layout, .. } => Some(
                numel(&node.shape) == 1
                    || (layout.is_row_major(&node.shape) && layout.offset.is_multiple_of(4)),
            ),
            GKind::Op { .. } if !root && stored(m) => Some(true),
            GKind::Op { op, .. } => match op {
                Op::Scalar => Some(true),
                Op::Arange
                | Op::Rand { .. }
                | Op::AsStrided(_)
                | Op::StridedScatter(_)
                | Op::Reduce { .. }
                | Op::Softmax { .. }
                | Op::Matmul
                | Op::Pad(_)
                | Op::Flip(_)
                | Op::Gather(_)
                | Op::ScatterAdd(_) => Some(false),
                Op::Expand => Some(numel(&nodes[node.inputs[0]].shape) == 1),
                Op::Unary(_) | Op::Binary(_) | Op::Where | Op::Cast(_) | Op::Reshape => None,
            },
        }
    };
    if let Some(v) = own(n, is_root) {
        return v;
    }
    // Iterative depth-first search for a node that is not vectorizable;
    // `seen` keeps every node to one visit.
    let mut seen: rustc_hash::FxHashSet<usize> = Default::default();
    let mut stack: Vec<usize> = nodes[n].inputs.clone();
    while let Some(m) = stack.pop() {
        if !seen.insert(m) {
            continue;
        }
        match own(m, false) {
            Some(true) => {}
            Some(false) => return false,
            None => stack.extend_from_slice(&nodes[m].inputs),
        }
    }
    true
}

pub(crate) fn value_type(dtype: DType, vec: bool) -> String {
    if vec {
        format!("vec4<{}>", dtype.wgsl_value_type())
    } else {
        dtype.wgsl_value_type().to_string()
    }
}

fn storage_type(dtype: DType, vec: bool) -> String {
    if vec {
        format!("vec4<{}>", dtype.wgsl_storage_type())
    } else {
        dtype.wgsl_storage_type().to_string()
    }
}

/// Expression emission shared by every kernel template: each node's value
/// at an index becomes a `let` in `body`, memoised per (node, index).
pub(crate) struct Gen<'a> {
    nodes: &'a [GNode],
    pub stored: &'a dyn Fn(usize) -> bool,
    pub body: String,
    /// (node, index variable, vectorised) -> variable holding the value.
    memo: HashMap<(usize, String, bool), String>,
    /// Nodes bound for reading, and whether as `vec4`s.
    reads: Vec<(usize, bool)>,
    next_var: usize,
    /// The highest parameter word the kernel reads, if any.
    max_param: Option<usize>,
    uses_rng: bool,
    uses_pow: bool,
    aliases: &'a [(usize, usize)],
    kernel_vec: bool,
    alias_violation: bool,
    /// Bytes one storage binding covers (`Target::binding_part_bytes`).
    pub part_bytes: usize,
    /// See `CodegenContext::origins`.
    pub origins: Option<&'a [String]>,
    target: &'a Target,
    /// The variable of the last `let` emitted, to annotate it.
    last_emitted: Option<String>,
}

impl<'a> Gen<'a> {
    pub fn new(
        nodes: &'a [GNode],
        stored: &'a dyn Fn(usize) -> bool,
        aliases: &'a [(usize, usize)],
        kernel_vec: bool,
        cx: &CodegenContext<'a>,
    ) -> Gen<'a> {
        Gen {
            nodes,
            stored,
            body: String::new(),
            memo: HashMap::new(),
            reads: Vec::new(),
            next_var: 0,
            max_param: None,
            uses_rng: false,
            uses_pow: false,
            aliases,
            kernel_vec,
            alias_violation: false,
            part_bytes: cx.target.binding_part_bytes,
            origins: cx.origins,
            target: cx.target,
            last_emitted: None,
        }
    }

    /// Binding declarations (params, reads, then `outputs` as
    /// `(node, vec4)`) and the helper functions the body used.
    pub fn header(&self, outputs: &[(usize, bool)]) -> String {
        let mut src = String::new();
        let mut binding = 0;
        match (self.max_param, self.uniform_params_bytes()) {
            (None, _) => {}
            (Some(_), Some(bytes)) => {
                let _ = writeln!(
                    src,
                    "@group(0) @binding({binding}) var<uniform> params: array<vec4<u32>, {}>;\n\
                     fn param_word(i: u32) -> u32 {{ return params[i / 4u][i % 4u]; }}",
                    bytes / 16
                );
                binding += 1;
            }
            (Some(_), None) => {
                let _ = writeln!(
                    src,
                    "@group(0) @binding({binding}) var<storage, read> params: array<u32>;\n\
                     fn param_word(i: u32) -> u32 {{ return params[i]; }}"
                );
                binding += 1;
            }
        }
        for (k, &(r, rvec)) in self.reads.iter().enumerate() {
            let ty = storage_type(self.nodes[r].dtype, rvec);
            for name in part_names(&format!("in{k}"), self.parts_of(r, rvec)) {
                let _ = writeln!(
                    src,
                    "@group(0) @binding({binding}) var<storage, read> {name}: array<{ty}>;"
                );
                binding += 1;
            }
        }
        for (k, &(o, ovec)) in outputs.iter().enumerate() {
            let ty = storage_type(self.nodes[o].dtype, ovec);
            for name in part_names(&format!("out{k}"), self.parts_of(o, ovec)) {
                let _ = writeln!(
                    src,
                    "@group(0) @binding({binding}) var<storage, read_write> {name}: array<{ty}>;"
                );
                binding += 1;
            }
        }
        if self.uses_rng {
            src.push_str(RNG_FUNCTIONS);
        }
        if self.uses_pow {
            src.push_str(POW_FUNCTION);
        }
        src
    }

    /// Elements of node `n`'s buffer that kernels may touch: an input's
    /// furthest element under its layout, else its element count.
    fn extent(&self, n: usize) -> usize {
        let node = &self.nodes[n];
        let count = numel(&node.shape);
        match &node.kind {
            GKind::Input { layout, .. } if count > 0 => {
                1 + layout.offset
                    + node
                        .shape
                        .iter()
                        .zip(&layout.strides)
                        .map(|(&d, &s)| (d - 1) * s)
                        .sum::<usize>()
            }
            _ => count,
        }
    }

    /// Bindings node `n` needs: its buffer in parts of
    /// `Target::binding_part_bytes` (one, unless it is larger than that).
    pub fn parts_of(&self, n: usize, vec: bool) -> usize {
        let bytes = if vec {
            self.extent(n).div_ceil(4) * 16
        } else {
            self.extent(n) * 4
        };
        bytes.div_ceil(self.part_bytes).max(1)
    }

    /// Bindings per read, in binding order.
    pub fn read_parts(&self) -> Vec<usize> {
        self.reads
            .iter()
            .map(|&(r, rvec)| self.parts_of(r, rvec))
            .collect()
    }

    /// An expression (or variable) reading element `pos` of binding
    /// `name` for node `n`; over several parts, an `if` chain picks the
    /// part that holds it.
    fn split_access(&mut self, name: &str, n: usize, pos: &str, vec: bool, ty: &str) -> String {
        let parts = self.parts_of(n, vec);
        if parts == 1 {
            return format!("{name}[{pos}]");
        }
        let q = self.emit("q", "u32", pos);
        let var = self.fresh("s");
        let _ = writeln!(self.body, "    var {var}: {ty};");
        let chain = part_chain((parts, self.part_bytes), vec, &q, |part, local| {
            format!("{var} = {name}_p{part}[{local}];")
        });
        self.body.push_str(&chain);
        var
    }

    /// The statement storing `value` at element `idx` of output `k`
    /// (node `o`), split over parts like `split_access`.
    pub fn store(&mut self, k: usize, o: usize, idx: &str, value: &str, vec: bool) -> String {
        match self.parts_of(o, vec) {
            1 => format!("    out{k}[{idx}] = {value};{}\n", self.origin_comment(o)),
            parts => part_chain((parts, self.part_bytes), vec, idx, |part, local| {
                format!("out{k}_p{part}[{local}] = {value};")
            }),
        }
    }

    /// Runs `f` with `body` redirected to a fresh buffer and returns the
    /// code it emitted; values memoised inside are forgotten afterwards
    /// (they are local to the block, e.g. a loop body).
    pub fn scoped(&mut self, f: impl FnOnce(&mut Self)) -> String {
        let saved_body = std::mem::take(&mut self.body);
        let saved_memo = self.memo.clone();
        f(self);
        self.memo = saved_memo;
        std::mem::replace(&mut self.body, saved_body)
    }

    /// Declares that node `n` at index `idx` is held in variable `var`
    /// (a kernel root's result, for its epilogue).
    pub fn seed(&mut self, n: usize, idx: &str, var: &str) {
        self.memo
            .insert((n, idx.to_string(), false), var.to_string());
    }

    /// Graph nodes read from bindings, in binding order.
    pub fn reads(&self) -> Vec<usize> {
        self.reads.iter().map(|&(r, _)| r).collect()
    }

    pub fn uses_params(&self) -> bool {
        self.max_param.is_some()
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

    /// The expression reading parameter word `slot`.
    fn param_word(&mut self, slot: usize) -> String {
        self.max_param = Some(self.max_param.map_or(slot, |m| m.max(slot)));
        format!("param_word({slot}u)")
    }

    pub fn fresh(&mut self, prefix: &str) -> String {
        self.next_var += 1;
        format!("{prefix}{}", self.next_var)
    }

    pub fn emit(&mut self, prefix: &str, ty: &str, expr: &str) -> String {
        let var = self.fresh(prefix);
        let _ = writeln!(self.body, "    let {var}: {ty} = {expr};");
        self.last_emitted = Some(var.clone());
        var
    }

    /// The context this generator was made with (for the kernels a
    /// template generates beside its own, such as packing kernels).
    pub fn context(&self) -> CodegenContext<'a> {
        CodegenContext {
            target: self.target,
            origins: self.origins,
        }
    }

    /// ` // n{node} {origin}` when annotating, else nothing.
    fn origin_comment(&self, n: usize) -> String {
        match self.origins {
            Some(origins) => format!("  // n{n} {}", origins[n]),
            None => String::new(),
        }
    }

    fn param(&mut self, slot: usize, dtype: DType) -> String {
        let word = self.param_word(slot);
        match dtype {
            DType::F32 => format!("bitcast<f32>({word})"),
            DType::I32 => format!("bitcast<i32>({word})"),
            DType::U32 => word,
            DType::Bool => format!("({word} != 0u)"),
        }
    }

    /// The variable holding node `n`'s value at element index `idx` (the
    /// index of a group of four elements when `vec`). `is_root` marks a
    /// kernel output, which is computed even if stored (unless it is a
    /// graph input, which has no computation).
    pub fn value(&mut self, n: usize, idx: &str, is_root: bool, vec: bool) -> String {
        // Recursion as deep as the longest chain of fused ops: the stack
        // grows on demand (a 16,800-op chain overflowed a test thread's).
        stacker::maybe_grow(STACK_RED_ZONE, STACK_GROWTH, || {
            self.value_uncached(n, idx, is_root, vec)
        })
    }

    fn value_uncached(&mut self, n: usize, idx: &str, is_root: bool, vec: bool) -> String {
        let memo_key = (n, idx.to_string(), vec);
        if let Some(v) = self.memo.get(&memo_key) {
            return v.clone();
        }
        let node = &self.nodes[n];
        let ty = value_type(node.dtype, vec);
        let is_input = matches!(node.kind, GKind::Input { .. });
        let var = if is_input || (!is_root && (self.stored)(n)) {
            self.load(n, idx, vec)
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
                    self.emit("v", &ty, &format!("{ty}({p})"))
                }
                Op::Arange => {
                    let start = self.param(base, dtype);
                    let step = self.param(base + 1, dtype);
                    self.emit("v", &ty, &format!("{start} + {ty}({idx}) * {step}"))
                }
                Op::Rand { normal } => {
                    self.uses_rng = true;
                    let f = if normal { "rng_normal" } else { "rng_uniform" };
                    let (k0, k1, offset) = (
                        self.param_word(base),
                        self.param_word(base + 1),
                        self.param_word(base + 2),
                    );
                    self.emit("v", &ty, &format!("{f}({k0}, {k1}, {offset} + {idx})"))
                }
                Op::Unary(u) => {
                    let a = self.value(inputs[0], idx, false, vec);
                    let expr = unary_expr(u, dtype, &a, vec);
                    self.emit("v", &ty, &expr)
                }
                Op::Binary(b) => {
                    let a = self.value(inputs[0], idx, false, vec);
                    let c = self.value(inputs[1], idx, false, vec);
                    if b == BinaryOp::Pow {
                        self.uses_pow = true;
                    }
                    let operand = self.nodes[inputs[0]].dtype;
                    let expr = binary_expr(b, operand, &a, &c, vec);
                    self.emit("v", &ty, &expr)
                }
                Op::Where => {
                    let c = self.value(inputs[0], idx, false, vec);
                    let a = self.value(inputs[1], idx, false, vec);
                    let b = self.value(inputs[2], idx, false, vec);
                    self.emit("v", &ty, &format!("select({b}, {a}, {c})"))
                }
                Op::Cast(to) => {
                    let from = self.nodes[inputs[0]].dtype;
                    let a = self.value(inputs[0], idx, false, vec);
                    self.emit("v", &ty, &cast_expr(from, to, &a, vec))
                }
                Op::Reshape => self.value(inputs[0], idx, false, vec),
                Op::AsStrided(layout) => {
                    let j = self.index_var(&node.shape.clone(), &layout, idx);
                    self.value(inputs[0], &j, false, vec)
                }
                Op::StridedScatter(layout) => {
                    let view_shape = self.nodes[inputs[1]].shape.clone();
                    let (hit, src_idx) = self.scatter_source(&view_shape, &layout, idx);
                    let old = self.value(inputs[0], idx, false, vec);
                    let new = self.value(inputs[1], &src_idx, false, vec);
                    self.emit("v", &ty, &format!("select({old}, {new}, {hit})"))
                }
                Op::Pad(pads) => {
                    let src_shape = self.nodes[inputs[0]].shape.clone();
                    let coords = self.coords(&node.shape.clone(), idx);
                    let mut conds = Vec::new();
                    let mut moved = Vec::new();
                    for (d, &(before, _)) in pads.iter().enumerate() {
                        if before > 0 {
                            conds.push(format!("{} >= {before}u", coords[d]));
                        }
                        conds.push(format!("{} < {}u", coords[d], before + src_shape[d]));
                        moved.push(format!("({} - {before}u)", coords[d]));
                    }
                    let inside = self.emit("h", "bool", &conds.join(" && "));
                    let j = self.ravel(&src_shape, &moved);
                    let j = self.emit("j", "u32", &format!("select(0u, {j}, {inside})"));
                    let v = self.value(inputs[0], &j, false, vec);
                    let fill = self.param(base, dtype);
                    self.emit("v", &ty, &format!("select({fill}, {v}, {inside})"))
                }
                Op::Flip(axes) => {
                    let shape = node.shape.clone();
                    let coords = self.coords(&shape, idx);
                    let flipped: Vec<String> = coords
                        .iter()
                        .enumerate()
                        .map(|(d, c)| {
                            if axes.contains(&d) {
                                format!("({}u - {c})", shape[d] - 1)
                            } else {
                                c.clone()
                            }
                        })
                        .collect();
                    let j = self.ravel(&shape, &flipped);
                    let j = self.emit("j", "u32", &j);
                    self.value(inputs[0], &j, false, vec)
                }
                Op::Gather(axis) => {
                    let x_shape = self.nodes[inputs[0]].shape.clone();
                    let mut coords = self.coords(&node.shape.clone(), idx);
                    let k = self.value(inputs[1], idx, false, false);
                    let top = x_shape[axis].max(1) as i64 - 1;
                    coords[axis] = format!("u32(clamp({k}, 0i, {top}i))");
                    let j = self.ravel(&x_shape, &coords);
                    let j = self.emit("j", "u32", &j);
                    self.value(inputs[0], &j, false, vec)
                }
                Op::ScatterAdd(axis) => {
                    let src_shape = self.nodes[inputs[2]].shape.clone();
                    let coords = self.coords(&node.shape.clone(), idx);
                    let acc = self.fresh("acc");
                    let b = self.value(inputs[0], idx, false, false);
                    let _ = writeln!(self.body, "    var {acc}: {ty} = {b};");
                    // Only coordinates inside src's extent receive anything.
                    let mut inside: Vec<String> = (0..src_shape.len())
                        .filter(|&d| d != axis)
                        .map(|d| format!("{} < {}u", coords[d], src_shape[d]))
                        .collect();
                    inside.push("true".into());
                    let loop_var = self.fresh("s");
                    let mut src_coords = coords.clone();
                    src_coords[axis] = loop_var.clone();
                    let j = self.ravel(&src_shape, &src_coords);
                    let target = coords[axis].clone();
                    let body = self.scoped(|g| {
                        let j = g.emit("j", "u32", &j);
                        let k = g.value(inputs[1], &j, false, false);
                        let v = g.value(inputs[2], &j, false, false);
                        let _ = writeln!(g.body, "        if (u32({k}) == {target} && {k} >= 0i) {{ {acc} = {acc} + {v}; }}");
                    });
                    let _ = writeln!(
                        self.body,
                        "    if ({}) {{\n    for (var {loop_var} = 0u; {loop_var} < {}u; {loop_var} = {loop_var} + 1u) {{\n{body}    }}\n    }}",
                        inside.join(" && "),
                        src_shape[axis]
                    );
                    acc
                }
                Op::Reduce { .. } | Op::Softmax { .. } | Op::Matmul => {
                    unreachable!(
                        "kernel roots are computed by their own kernel and read from memory (node {n})"
                    )
                }
                Op::Expand if vec => {
                    // Vectorised kernels only expand single values: splat.
                    let one = self.value(inputs[0], "0u", false, false);
                    self.emit("v", &ty, &format!("{ty}({one})"))
                }
                Op::Expand => {
                    let src_shape = self.nodes[inputs[0]].shape.clone();
                    let layout = Layout::contiguous(&src_shape).expand(&src_shape, &node.shape);
                    let j = self.index_var(&node.shape.clone(), &layout, idx);
                    self.value(inputs[0], &j, false, vec)
                }
            }
        };
        // The line just emitted for this node, if any, names it.
        if self.origins.is_some() && self.last_emitted.as_deref() == Some(var.as_str()) {
            let comment = self.origin_comment(n);
            if self.body.ends_with('\n') {
                self.body.pop();
                self.body.push_str(&comment);
                self.body.push('\n');
            }
            self.last_emitted = None;
        }
        self.memo.insert(memo_key, var.clone());
        var
    }

    /// Loads node `n` from its binding at element index `idx` (group index
    /// when `vec`; a single-element input is then loaded once and splatted).
    fn load(&mut self, n: usize, idx: &str, vec: bool) -> String {
        let node = &self.nodes[n];
        let (shape, dtype) = (node.shape.clone(), node.dtype);
        let layout = match &node.kind {
            GKind::Input { layout, .. } => layout.clone(),
            GKind::Op { .. } => Layout::contiguous(&shape),
        };
        if let Some(&(_, k)) = self.aliases.iter().find(|(a, _)| *a == n) {
            if idx == "gi" && vec == self.kernel_vec {
                let raw =
                    self.split_access(&format!("out{k}"), n, "gi", vec, &value_type(dtype, vec));
                let expr = if dtype == DType::Bool {
                    format!("({raw} != {})", lit(DType::U32, 0, vec))
                } else {
                    raw
                };
                return self.emit("v", &value_type(dtype, vec), &expr);
            }
            self.alias_violation = true;
        }
        if vec && numel(&shape) == 1 {
            let one = self.load(n, "0u", false);
            let ty = value_type(dtype, true);
            return self.emit("v", &ty, &format!("{ty}({one})"));
        }
        let k = match self.reads.iter().position(|&r| r == (n, vec)) {
            Some(k) => k,
            None => {
                self.reads.push((n, vec));
                self.reads.len() - 1
            }
        };
        let pos = if vec {
            // Row-major with an offset divisible by four (see `vectorizable`).
            match layout.offset / 4 {
                0 => idx.to_string(),
                q => format!("{idx} + {q}u"),
            }
        } else {
            self.index_var(&shape, &layout, idx)
        };
        let raw = self.split_access(&format!("in{k}"), n, &pos, vec, &storage_type(dtype, vec));
        let expr = if dtype == DType::Bool {
            format!("({raw} != {})", lit(DType::U32, 0, vec))
        } else {
            raw
        };
        self.emit("v", &value_type(dtype, vec), &expr)
    }

    /// Coordinate expressions of row-major element `idx` of `shape`.
    fn coords(&mut self, shape: &[usize], idx: &str) -> Vec<String> {
        let strides = contiguous_strides(shape);
        shape
            .iter()
            .zip(&strides)
            .enumerate()
            .map(|(d, (&size, &stride))| {
                if size <= 1 {
                    "0u".to_string()
                } else if d == 0 {
                    self.emit("c", "u32", &format!("{idx} / {stride}u"))
                } else {
                    self.emit("c", "u32", &format!("({idx} / {stride}u) % {size}u"))
                }
            })
            .collect()
    }

    /// The row-major index of `coords` in `shape`.
    fn ravel(&self, shape: &[usize], coords: &[String]) -> String {
        let strides = contiguous_strides(shape);
        let terms: Vec<String> = coords
            .iter()
            .zip(&strides)
            .zip(shape)
            .filter(|(_, size)| **size > 1)
            .map(|((c, &s), _)| {
                if s == 1 {
                    c.clone()
                } else {
                    format!("{c} * {s}u")
                }
            })
            .collect();
        if terms.is_empty() {
            "0u".to_string()
        } else {
            terms.join(" + ")
        }
    }

    /// For base element `idx`, whether the strided view (`view_shape`,
    /// `layout`) contains it and at which row-major view index. The view's
    /// dims are peeled off in order of decreasing stride, which inverts
    /// every non-overlapping view of a row-major base (slices with steps,
    /// selects, permutations, diagonals).
    fn scatter_source(
        &mut self,
        view_shape: &[usize],
        layout: &Layout,
        idx: &str,
    ) -> (String, String) {
        let view_strides = contiguous_strides(view_shape);
        let mut dims: Vec<usize> = (0..view_shape.len())
            .filter(|&d| view_shape[d] > 1)
            .collect();
        dims.sort_by(|&a, &b| layout.strides[b].cmp(&layout.strides[a]));
        let off = layout.offset;
        if numel(view_shape) == 0 {
            return ("false".to_string(), "0u".to_string());
        }
        let mut conds = vec![format!("{idx} >= {off}u")];
        let mut rest = self.emit("r", "u32", &format!("{idx} - {off}u"));
        let mut terms = Vec::new();
        for d in dims {
            let s = layout.strides[d];
            let c = self.emit("c", "u32", &format!("{rest} / {s}u"));
            rest = self.emit("r", "u32", &format!("{rest} % {s}u"));
            conds.push(format!("{c} < {}u", view_shape[d]));
            terms.push(format!("{c} * {}u", view_strides[d]));
        }
        conds.push(format!("{rest} == 0u"));
        let hit = self.emit("h", "bool", &conds.join(" && "));
        let src = if terms.is_empty() {
            "0u".to_string()
        } else {
            terms.join(" + ")
        };
        // Out-of-view elements read view element 0 (and discard it).
        let src_idx = self.emit("j", "u32", &format!("select(0u, {src}, {hit})"));
        (hit, src_idx)
    }

    /// A variable with the buffer position of row-major element `idx` of
    /// `shape` stored with `layout` (`idx` itself when that is the identity).
    fn index_var(&mut self, shape: &[usize], layout: &Layout, idx: &str) -> String {
        if numel(shape) == 0 {
            // No element exists; the (discarded) read may go anywhere.
            return "0u".to_string();
        }
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

/// A literal of `dtype` (splatted to a `vec4` when `vec`).
fn lit(dtype: DType, v: i32, vec: bool) -> String {
    let scalar = match dtype {
        DType::F32 => format!("{v}.0"),
        DType::I32 => format!("{v}i"),
        _ => format!("{v}u"),
    };
    if vec {
        format!("vec4<{}>({scalar})", dtype.wgsl_storage_type())
    } else {
        scalar
    }
}

fn unary_expr(u: UnaryOp, dtype: DType, a: &str, vec: bool) -> String {
    let zero = lit(dtype, 0, vec);
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
        // NaN passes through (clamp would turn it into a bound).
        (UnaryOp::Tanh, _) => format!(
            "select(tanh(clamp({a}, {}, {})), {a}, {})",
            lit(dtype, -15, vec),
            lit(dtype, 15, vec),
            is_nan(a, vec)
        ),
        (UnaryOp::Sigmoid, _) => format!("1.0 / (1.0 + exp(-{a}))"),
        (UnaryOp::Relu, DType::F32) => format!("select(max({a}, {zero}), {a}, {})", is_nan(a, vec)),
        (UnaryOp::Relu, _) => format!("max({a}, {zero})"),
        (UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round, d) if d != DType::F32 => a.to_string(),
        (UnaryOp::Floor, _) => format!("floor({a})"),
        (UnaryOp::Ceil, _) => format!("ceil({a})"),
        // WGSL's round() rounds half to even, as PyTorch does.
        (UnaryOp::Round, _) => format!("round({a})"),
        (UnaryOp::Sign, DType::U32) => format!("min({a}, {})", lit(dtype, 1, vec)),
        (UnaryOp::Sign, DType::F32) => format!("select(sign({a}), {zero}, {})", is_nan(a, vec)),
        (UnaryOp::Sign, _) => format!("sign({a})"),
    }
}

/// Whether `a` (an f32 or `vec4<f32>` expression) is NaN, tested on its
/// bits: WGSL lets a compiler assume comparisons never see NaN, and
/// lavapipe's `!=` is false for NaN.
pub(crate) fn is_nan(a: &str, vec: bool) -> String {
    if vec {
        format!("((bitcast<vec4<u32>>({a}) & vec4<u32>(0x7fffffffu)) > vec4<u32>(0x7f800000u))")
    } else {
        format!("((bitcast<u32>({a}) & 0x7fffffffu) > 0x7f800000u)")
    }
}

/// `max` or `min` of two f32 values that is NaN when either is (PyTorch's
/// `maximum`, `minimum`, `amax` and `amin`); WGSL leaves NaN unspecified.
pub(crate) fn nan_extremum(f: &str, a: &str, c: &str, vec: bool) -> String {
    format!(
        "select(select({f}({a}, {c}), {c}, {}), {a}, {})",
        is_nan(c, vec),
        is_nan(a, vec)
    )
}

/// `operand` is the operands' dtype (both share it).
fn binary_expr(b: BinaryOp, operand: DType, a: &str, c: &str, vec: bool) -> String {
    let float = operand == DType::F32;
    match b {
        BinaryOp::Add => format!("{a} + {c}"),
        BinaryOp::Sub => format!("{a} - {c}"),
        BinaryOp::Mul => format!("{a} * {c}"),
        BinaryOp::Div => format!("{a} / {c}"),
        BinaryOp::Pow if vec => format!(
            "vec4<f32>(pow_torch({a}.x, {c}.x), pow_torch({a}.y, {c}.y), pow_torch({a}.z, {c}.z), pow_torch({a}.w, {c}.w))"
        ),
        BinaryOp::Pow => format!("pow_torch({a}, {c})"),
        BinaryOp::Maximum if float => nan_extremum("max", a, c, vec),
        BinaryOp::Minimum if float => nan_extremum("min", a, c, vec),
        BinaryOp::Maximum => format!("max({a}, {c})"),
        BinaryOp::Minimum => format!("min({a}, {c})"),
        BinaryOp::Eq => format!("{a} == {c}"),
        // NaN differs from everything, itself included.
        BinaryOp::Ne if float => {
            format!("(({a} != {c}) | {} | {})", is_nan(a, vec), is_nan(c, vec))
        }
        BinaryOp::Ne => format!("{a} != {c}"),
        BinaryOp::Lt => format!("{a} < {c}"),
        BinaryOp::Le => format!("{a} <= {c}"),
        BinaryOp::Gt => format!("{a} > {c}"),
        BinaryOp::Ge => format!("{a} >= {c}"),
    }
}

fn cast_expr(from: DType, to: DType, a: &str, vec: bool) -> String {
    match (from, to) {
        _ if from == to => a.to_string(),
        (DType::Bool, _) => format!("select({}, {}, {a})", lit(to, 0, vec), lit(to, 1, vec)),
        (_, DType::Bool) => format!("{a} != {}", lit(from, 0, vec)),
        (DType::I32, DType::U32) => format!("bitcast<{}>({a})", value_type(DType::U32, vec)),
        (DType::U32, DType::I32) => format!("bitcast<{}>({a})", value_type(DType::I32, vec)),
        (_, to) => format!("{}({a})", value_type(to, vec)),
    }
}

/// PyTorch's `pow`: defined for negative bases with integral exponents and
/// `pow(x, 0) == 1`, which WGSL's `pow` leaves undefined.
const POW_FUNCTION: &str = include_str!("../../shaders/pow_torch.wgsl");

/// Counter-based random numbers: a hash of (seed, counter), so any element
/// can be generated independently, in any kernel, and identically by the CPU
/// reference (`cpu::rng`).
const RNG_FUNCTIONS: &str = include_str!("../../shaders/rng.wgsl");

#[cfg(test)]
mod tests {
    use super::*;

    /// `x + s1 + s2 + ..` over 4 f32 with `scalars` scalar nodes, each its
    /// own parameter word.
    fn scalar_chain(scalars: usize) -> GraphKey {
        let mut nodes = vec![GNode {
            kind: GKind::Input {
                slot: 0,
                layout: Layout::contiguous(&[4]),
            },
            shape: vec![4],
            dtype: DType::F32,
            inputs: vec![],
        }];
        for p in 0..scalars {
            let prev = nodes.len() - 1;
            nodes.push(GNode {
                kind: GKind::Op {
                    op: Op::Scalar,
                    param_base: p,
                },
                shape: vec![],
                dtype: DType::F32,
                inputs: vec![],
            });
            nodes.push(GNode {
                kind: GKind::Op {
                    op: Op::Binary(BinaryOp::Add),
                    param_base: 0,
                },
                shape: vec![4],
                dtype: DType::F32,
                inputs: vec![prev, nodes.len() - 1],
            });
        }
        GraphKey {
            outputs: vec![nodes.len() - 1],
            nodes,
            fused: true,
            donatable: vec![false],
        }
    }

    fn kernel_of(key: &GraphKey) -> KernelSource {
        generate_kernel(
            key,
            &key.outputs,
            4,
            &|i| i == 0,
            &[],
            &CodegenContext::plain(&Target::lavapipe()),
        )
    }

    #[test]
    fn parameters_are_a_uniform_buffer_up_to_64_kib() {
        let small = kernel_of(&scalar_chain(5));
        assert_eq!(small.uniform_params, Some(32), "5 words: two vec4s");
        assert!(
            small
                .wgsl
                .contains("var<uniform> params: array<vec4<u32>, 2>")
        );
        let most = kernel_of(&scalar_chain(16_384));
        assert_eq!(most.uniform_params, Some(64 << 10));
        let past = kernel_of(&scalar_chain(16_385));
        assert_eq!(past.uniform_params, None);
        assert!(past.wgsl.contains("var<storage, read> params: array<u32>"));
    }

    /// Generating the code of a 20,000-op chain recurses that deep: on a
    /// thread with 256 KiB of stack it must grow the stack, not overflow.
    #[test]
    fn deep_chains_generate_on_a_small_stack() {
        let key = scalar_chain(20_000);
        let source = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || kernel_of(&key))
            .expect("spawn")
            .join()
            .expect("code generation overflowed");
        assert!(source.wgsl.lines().count() > 20_000);
        validate_wgsl_for_test(&source.wgsl);
    }

    fn validate_wgsl_for_test(source: &str) {
        if let Err(e) = crate::codegen::validate_wgsl(source) {
            panic!("{e}");
        }
    }
}
