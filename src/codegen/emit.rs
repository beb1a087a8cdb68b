//! `Gen`: expression emission shared by every kernel template. Each
//! node's value at an index is emitted once as a `let` (memoised by node
//! and index variable), so shared subexpressions are computed once and a
//! chain of a thousand ops is a thousand short lines, not one deep
//! expression. Movement ops become index arithmetic; stored data is read
//! through its layout (strides and offset), buffers past one binding in
//! parts. Scalars and other runtime values are read from the `params`
//! buffer, never written into the code.

use std::collections::HashMap;
use std::fmt::Write;

use crate::dtype::DType;
use crate::graph::op::{BinaryOp, Op, UnaryOp};
use crate::graph::{GKind, GNode};
use crate::shape::{Layout, contiguous_strides, numel};

use super::exprs::*;
use super::source::CodegenContext;
use super::wgsl::UNIFORM_PARAMS_BYTES;

/// Stack left before a recursive walk over the graph grows it, and by how
/// much it grows (see `Gen::value`).
const STACK_RED_ZONE: usize = 64 << 10;
const STACK_GROWTH: usize = 1 << 20;

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
    uses_erf: bool,
    aliases: &'a [(usize, usize)],
    kernel_vec: bool,
    alias_violation: bool,
    /// The target (binding part size) and node labels for annotations.
    cx: CodegenContext<'a>,
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
            uses_erf: false,
            aliases,
            kernel_vec,
            alias_violation: false,
            cx: *cx,
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
        // Reads, then writes, each buffer in its parts.
        let reads = self
            .reads
            .iter()
            .enumerate()
            .map(|(k, &n)| ("in", "read", k, n));
        let writes = outputs
            .iter()
            .enumerate()
            .map(|(k, &n)| ("out", "read_write", k, n));
        for (prefix, access, k, (n, vec)) in reads.chain(writes) {
            let ty = storage_type(self.nodes[n].dtype, vec);
            for name in part_names(&format!("{prefix}{k}"), self.parts_of(n, vec)) {
                let _ = writeln!(
                    src,
                    "@group(0) @binding({binding}) var<storage, {access}> {name}: array<{ty}>;"
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
        if self.uses_erf {
            src.push_str(ERF_FUNCTIONS);
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
        bytes.div_ceil(self.part_bytes()).max(1)
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
        let chain = part_chain((parts, self.part_bytes()), vec, &q, |part, local| {
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
            parts => part_chain((parts, self.part_bytes()), vec, idx, |part, local| {
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
    /// Whether an aliased (donated) input was read other than at the
    /// invocation's own element (see `KernelSource::alias_violation`).
    pub fn alias_violation(&self) -> bool {
        self.alias_violation
    }

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
        self.cx
    }

    /// Bytes one storage binding covers (`Target::binding_part_bytes`).
    fn part_bytes(&self) -> usize {
        self.cx.target.binding_part_bytes
    }

    /// ` // n{node} {origin}` when annotating, else nothing.
    fn origin_comment(&self, n: usize) -> String {
        match self.cx.origins {
            Some(origins) => format!("  // n{n} {}", origins[n]),
            None => String::new(),
        }
    }

    pub(super) fn param(&mut self, slot: usize, dtype: DType) -> String {
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
                    self.uses_erf |= matches!(u, UnaryOp::Erf | UnaryOp::Gelu);
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
                Op::Pad(pads) => self.pad_value(n, &pads, base, idx, vec),
                Op::Flip(axes) => self.flip_value(n, &axes, idx, vec),
                Op::Gather(axis) => self.gather_value(n, axis, idx, vec),
                Op::ScatterAdd(axis) => self.scatter_add_value(n, axis, idx),
                Op::Reduce { .. }
                | Op::Softmax { .. }
                | Op::Matmul
                | Op::Normalize
                | Op::NormalizeBackward
                | Op::Attention { .. } => {
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
        if self.cx.origins.is_some() && self.last_emitted.as_deref() == Some(var.as_str()) {
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

    /// `Pad`: the source element where `idx` falls inside it, else the
    /// fill value (parameter `base`).
    fn pad_value(
        &mut self,
        n: usize,
        pads: &[(usize, usize)],
        base: usize,
        idx: &str,
        vec: bool,
    ) -> String {
        let node = &self.nodes[n];
        let (input, shape, dtype) = (node.inputs[0], node.shape.clone(), node.dtype);
        let ty = value_type(dtype, vec);
        let src_shape = self.nodes[input].shape.clone();
        let coords = self.coords(&shape, idx);
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
        let v = self.value(input, &j, false, vec);
        let fill = self.param(base, dtype);
        self.emit("v", &ty, &format!("select({fill}, {v}, {inside})"))
    }

    /// `Flip`: the source element with the flipped coordinates reversed.
    fn flip_value(&mut self, n: usize, axes: &[usize], idx: &str, vec: bool) -> String {
        let (input, shape) = (self.nodes[n].inputs[0], self.nodes[n].shape.clone());
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
        self.value(input, &j, false, vec)
    }

    /// `Gather`: the source element whose `axis` coordinate is the index
    /// read at `idx` (clamped into range).
    fn gather_value(&mut self, n: usize, axis: usize, idx: &str, vec: bool) -> String {
        let node = &self.nodes[n];
        let (x, index, shape) = (node.inputs[0], node.inputs[1], node.shape.clone());
        let x_shape = self.nodes[x].shape.clone();
        let mut coords = self.coords(&shape, idx);
        let k = self.value(index, idx, false, false);
        let top = x_shape[axis].max(1) as i64 - 1;
        coords[axis] = format!("u32(clamp({k}, 0i, {top}i))");
        let j = self.ravel(&x_shape, &coords);
        let j = self.emit("j", "u32", &j);
        self.value(x, &j, false, vec)
    }

    /// `ScatterAdd`: the base element plus every source element along
    /// `axis` whose index names this position (a loop over the source's
    /// extent along `axis`).
    fn scatter_add_value(&mut self, n: usize, axis: usize, idx: &str) -> String {
        let node = &self.nodes[n];
        let (inputs, shape) = (node.inputs.clone(), node.shape.clone());
        let ty = value_type(node.dtype, false);
        let src_shape = self.nodes[inputs[2]].shape.clone();
        let coords = self.coords(&shape, idx);
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
            let _ = writeln!(
                g.body,
                "        if (u32({k}) == {target} && {k} >= 0i) {{ {acc} = {acc} + {v}; }}"
            );
        });
        let _ = writeln!(
            self.body,
            "    if ({}) {{\n    for (var {loop_var} = 0u; {loop_var} < {}u; {loop_var} = {loop_var} + 1u) {{\n{body}    }}\n    }}",
            inside.join(" && "),
            src_shape[axis]
        );
        acc
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
