//! Kernels for ops that are not elementwise (reductions, softmax, matmul).
//! Each template loops over its own iteration space and asks `Gen` for its
//! operands' values at computed indices, so the elementwise work feeding it
//! (its prologue, views included) is inlined; and it evaluates its
//! epilogue (written nodes that only need the root's value at the same
//! index) right where the result is in a register.

use std::fmt::Write;

use super::emit::Gen;
use super::exprs::{is_nan, nan_extremum, softmax_guard, value_type};
use super::matmul_lanes::matmul_lanes;
use super::wgsl::{
    CodegenContext, KernelSource, TextureUse, WORKGROUP_SIZE, kernel_main, vectorizable,
};
use crate::dtype::DType;
use crate::graph::GraphKey;
use crate::graph::op::{Op, ReduceOp};
use crate::kernel::{
    MatmulKernel, ReduceShape, ReduceStrategy, SoftmaxStrategy, Strategy, choose_reduce,
    choose_softmax,
};
use crate::shape::{contiguous_strides, numel};

/// Generates the kernel of `root` (a reduction, softmax or matmul). It
/// writes `root` itself when `write_root`, and each `epilogue` node.
pub(crate) fn generate_root_kernel(
    key: &GraphKey,
    root: usize,
    write_root: bool,
    epilogue: &[usize],
    stored: &dyn Fn(usize) -> bool,
    cx: &CodegenContext,
) -> KernelSource {
    let matmul_kernel = cx.target.matmul;
    let mut outputs: Vec<usize> = Vec::new();
    if write_root {
        outputs.push(root);
    }
    outputs.extend_from_slice(epilogue);
    let mut g = Gen::new(&key.nodes, stored, &[], false, cx);
    let crate::graph::GKind::Op { op, .. } = &key.nodes[root].kind else {
        unreachable!("kernel roots are ops")
    };
    let mut packs = Vec::new();
    let mut scratch = Vec::new();
    // Whether the outputs are stored four elements at a time (a softmax
    // that writes only itself, see `softmax_per_thread_vec4`).
    let mut vec_out = false;
    let (main, groups, strategy) = match op {
        Op::Reduce { op, axes, parts } => {
            let (main, groups, s) = reduce(&mut g, key, root, *op, axes, *parts, &outputs);
            (main, groups, Strategy::Reduce(s))
        }
        Op::Softmax { axis, log } => {
            let (main, groups, vec, s) = softmax(&mut g, key, root, *axis, *log, &outputs);
            vec_out = vec;
            (main, groups, Strategy::Softmax(s))
        }
        Op::Matmul => {
            let lanes = match matmul_kernel {
                MatmulKernel::Lanes(adapter) => {
                    matmul_lanes(&mut g, key, root, &outputs, stored, adapter)
                }
                _ => None,
            };
            match (lanes, matmul_kernel) {
                (Some(l), kind) => {
                    packs = l.packs;
                    scratch = l.scratch;
                    (l.main, l.groups, Strategy::Matmul(kind))
                }
                (None, MatmulKernel::Tiled) => {
                    let (main, groups) = matmul(&mut g, key, root, &outputs);
                    (main, groups, Strategy::Matmul(MatmulKernel::Tiled))
                }
                (None, _) => {
                    let (main, groups) = matmul_blocked(&mut g, key, root, &outputs);
                    (main, groups, Strategy::Matmul(MatmulKernel::Blocked))
                }
            }
        }
        other => unreachable!("{} is not a kernel root", other.name()),
    };
    let textures = (0..scratch.len())
        .map(|slot| TextureUse { slot, write: false })
        .collect();
    let out_types: Vec<(usize, bool)> = outputs.iter().map(|&o| (o, vec_out)).collect();
    let mut src = g.header(&out_types);
    src.push_str(&main);
    KernelSource {
        wgsl: src,
        uses_params: g.uses_params(),
        uniform_params: g.uniform_params_bytes(),
        read_parts: g.read_parts(),
        write_parts: outputs.iter().map(|&o| g.parts_of(o, vec_out)).collect(),
        reads: g.reads(),
        writes: outputs,
        groups,
        strategy,
        alias_violation: false,
        textures,
        scratch,
        packs,
    }
}

/// Code that computes every output's value at `idx` (the root's value there
/// being `result`) and stores it.
pub(super) fn stores(
    g: &mut Gen,
    key: &GraphKey,
    root: usize,
    outputs: &[usize],
    idx: &str,
    result: &str,
) -> String {
    g.scoped(|g| {
        g.seed(root, idx, result);
        for (k, &o) in outputs.iter().enumerate() {
            let v = g.value(o, idx, true, false);
            let v = if key.nodes[o].dtype == DType::Bool {
                format!("select(0u, 1u, {v})")
            } else {
                v
            };
            let stmt = g.store(k, o, idx, &v, false);
            g.body.push_str(&stmt);
        }
    })
}

fn identity(op: ReduceOp, dtype: DType) -> String {
    match (op, dtype) {
        (ReduceOp::Sum, d) => format!("{}(0)", d.wgsl_value_type()),
        (ReduceOp::Prod, d) => format!("{}(1)", d.wgsl_value_type()),
        // Floats start from the table's identity (infinities by their bits).
        (op, DType::F32) => format!("bitcast<f32>({:#010x}u)", (op.identity() as f32).to_bits()),
        (ReduceOp::Max | ReduceOp::ArgMax, DType::I32) => "bitcast<i32>(0x80000000u)".into(),
        (ReduceOp::Max | ReduceOp::ArgMax, _) => "0u".into(),
        (ReduceOp::Min | ReduceOp::ArgMin, DType::I32) => "bitcast<i32>(0x7fffffffu)".into(),
        (ReduceOp::Min | ReduceOp::ArgMin, _) => "0xffffffffu".into(),
    }
}

/// `acc = combine(acc, v)`; for arg ops also the index (`best`, `r`), ties
/// going to the smaller index (PyTorch returns the first extremum). On
/// f32, NaN wins as in PyTorch: `amax`/`amin` are NaN where any element
/// is, and the arg ops return the index of the first NaN.
fn combine(op: ReduceOp, dtype: DType, acc: &str, best: &str, v: &str, r: &str) -> String {
    let float = dtype == DType::F32;
    let arg = |cmp: &str| {
        let plain = format!("{v} {cmp} {acc} || ({v} == {acc} && {r} < {best})");
        let cond = if float {
            let (v_nan, acc_nan) = (is_nan(v, false), is_nan(acc, false));
            format!("({v_nan} && (!{acc_nan} || {r} < {best})) || (!{acc_nan} && ({plain}))")
        } else {
            plain
        };
        format!("if ({cond}) {{ {acc} = {v}; {best} = {r}; }}")
    };
    match op {
        ReduceOp::Sum => format!("{acc} = {acc} + {v};"),
        ReduceOp::Prod => format!("{acc} = {acc} * {v};"),
        ReduceOp::Max if float => format!("{acc} = {};", nan_extremum("max", acc, v, false)),
        ReduceOp::Min if float => format!("{acc} = {};", nan_extremum("min", acc, v, false)),
        ReduceOp::Max => format!("{acc} = max({acc}, {v});"),
        ReduceOp::Min => format!("{acc} = min({acc}, {v});"),
        ReduceOp::ArgMax => arg(">"),
        ReduceOp::ArgMin => arg("<"),
    }
}

/// The position in `shape` (row-major) of the element whose kept dims come
/// from `o` and whose reduced dims (`axes`) come from `r`.
fn split_index(shape: &[usize], axes: &[usize], o: &str, r: &str) -> String {
    let strides = contiguous_strides(shape);
    let mut terms = Vec::new();
    let mut add = |dims: Vec<usize>, var: &str| {
        let mut inner = 1usize;
        let total: usize = dims.iter().map(|&d| shape[d]).product();
        for &d in dims.iter().rev() {
            let size = shape[d];
            if size > 1 {
                let coord = if inner == 1 && size == total {
                    var.to_string()
                } else if inner * size >= total {
                    format!("({var} / {inner}u)")
                } else if inner == 1 {
                    format!("({var} % {size}u)")
                } else {
                    format!("(({var} / {inner}u) % {size}u)")
                };
                terms.push(format!("{coord} * {}u", strides[d]));
            }
            inner *= size;
        }
    };
    add((0..shape.len()).filter(|d| !axes.contains(d)).collect(), o);
    add(axes.to_vec(), r);
    if terms.is_empty() {
        "0u".into()
    } else {
        terms.join(" + ")
    }
}

/// A loop running `body` for `var = start, start + step, ..` while `var < len`,
/// for a `start` in `[0, step)` that differs between lanes. Written as
/// `len / step` iterations every lane runs (a loop count the compiler
/// sees is uniform) plus one guarded tail, instead of a loop whose bound
/// differs between lanes: on lavapipe that made a 16M-element sum 2x
/// slower (a probe of both forms: 16 vs 8 ms). The same elements in the
/// same order either way.
fn strided_loop(var: &str, start: &str, step: usize, len: usize, body: &str) -> String {
    let full = len / step;
    let mut code = format!(
        "{{\n    let {var}0 = {start};\n    \
         for (var j = 0u; j < {full}u; j = j + 1u) {{\n    let {var} = {var}0 + j * {step}u;\n{body}    }}\n"
    );
    if !len.is_multiple_of(step) {
        let _ = write!(
            code,
            "    let {var} = {var}0 + {}u;\n    if ({var} < {len}u) {{\n{body}    }}\n",
            full * step
        );
    }
    code.push_str("    }\n");
    code
}

/// The first stage of a split sum (see `Op::Reduce`: part `p` takes the
/// groups of four elements `p, p + parts, ..`) reading each group as one
/// `vec4`, one invocation per part: on lavapipe, where every storage load
/// is a loop over the SIMD lanes, a probe of 16M f32 read in 8 ms this way
/// against 18 ms one element at a time (`ReduceStrategy::SumByFours`, see
/// `choose_reduce` for where it applies).
fn sum_by_fours(
    g: &mut Gen,
    key: &GraphKey,
    root: usize,
    axes: &[usize],
    parts: usize,
    outputs: &[usize],
) -> String {
    let x = key.nodes[root].inputs[0];
    let in_shape = &key.nodes[x].shape;
    let reduced: usize = axes.iter().map(|&d| in_shape[d]).product();
    let dtype = key.nodes[x].dtype;
    let total = numel(&key.nodes[root].shape);
    let load = g.scoped(|g| {
        let i = g.emit("i", "u32", &format!("o * {}u + r4", reduced / 4));
        let v = g.value(x, &i, false, true);
        let _ = writeln!(g.body, "        acc = acc + {v};");
    });
    let st = stores(g, key, root, outputs, "gi", "result");
    let vt = value_type(dtype, true);
    let result_ty = value_type(key.nodes[root].dtype, false);
    format!(
        "\n{head}\
         let o = gi / {parts}u;\n\
         var acc = {vt}();\n\
         {lp}\
         let result: {result_ty} = (acc.x + acc.y) + (acc.z + acc.w);\n{st}}}\n",
        head = kernel_main(WORKGROUP_SIZE as usize, true, total, ""),
        lp = strided_loop("r4", &format!("gi % {parts}u"), parts, reduced / 4, &load),
    )
}

fn reduce(
    g: &mut Gen,
    key: &GraphKey,
    root: usize,
    op: ReduceOp,
    axes: &[usize],
    parts: usize,
    outputs: &[usize],
) -> (String, usize, ReduceStrategy) {
    let x = key.nodes[root].inputs[0];
    let in_shape = key.nodes[x].shape.clone();
    let in_dtype = key.nodes[x].dtype;
    let vt = in_dtype.wgsl_value_type();
    let reduced: usize = axes.iter().map(|&d| in_shape[d]).product();
    let outer: usize = (0..in_shape.len())
        .filter(|d| !axes.contains(d))
        .map(|d| in_shape[d])
        .product();
    let total = outer * parts;
    let arg = op.is_arg();
    let id = identity(op, in_dtype);
    let rank = in_shape.len();
    let strategy = choose_reduce(ReduceShape {
        op,
        dtype: in_dtype,
        reduced,
        parts,
        trailing: axes
            .iter()
            .enumerate()
            .all(|(i, &d)| d == rank - axes.len() + i),
        vectorizable: vectorizable(&key.nodes, x, g.stored, false),
    });
    if strategy == ReduceStrategy::SumByFours {
        let main = sum_by_fours(g, key, root, axes, parts, outputs);
        return (main, total.div_ceil(WORKGROUP_SIZE as usize), strategy);
    }
    let index = split_index(&in_shape, axes, "o", "r");
    let element = g.scoped(|g| {
        let i = g.emit("i", "u32", &index);
        let v = g.value(x, &i, false, false);
        let _ = writeln!(
            g.body,
            "        {}",
            combine(op, in_dtype, "acc", "best", &v, "r")
        );
    });
    // Split reductions step over groups of four elements (`r4`); plain
    // ones over elements (`r`).
    let (var, steps, load) = if parts > 1 {
        let mut load = String::new();
        for q in 0..4 {
            let guard = if reduced.is_multiple_of(4) {
                String::new()
            } else {
                format!("if (r < {reduced}u) ")
            };
            let _ = writeln!(
                load,
                "    {{ let r = r4 * 4u + {q}u; {guard}{{\n{element}    }} }}"
            );
        }
        ("r4", reduced.div_ceil(4), load)
    } else {
        ("r", reduced, element)
    };
    let result_expr = if arg {
        "i32(best)".to_string()
    } else {
        "acc".to_string()
    };
    let result_ty = value_type(key.nodes[root].dtype, false);
    // Many short reductions: one invocation per output. Long ones: a
    // workgroup per output, threads striding the chunk, then a tree.
    if strategy == ReduceStrategy::PerInvocation {
        let st = stores(g, key, root, outputs, "gi", "result");
        let main = format!(
            "\n{head}\
             let o = gi / {parts}u;\n\
             var acc: {vt} = {id};\n\
             var best: u32 = 0xffffffffu;\n\
             {lp}\
             let result: {result_ty} = {result_expr};\n{st}}}\n",
            head = kernel_main(WORKGROUP_SIZE as usize, true, total, ""),
            lp = strided_loop(var, &format!("gi % {parts}u"), parts, steps, &load),
        );
        return (main, total.div_ceil(WORKGROUP_SIZE as usize), strategy);
    }
    let st = stores(g, key, root, outputs, "gi", "result");
    let merge = combine(
        op,
        in_dtype,
        "red_v[lid]",
        "red_i[lid]",
        "red_v[lid + s]",
        "red_i[lid + s]",
    );
    let main = format!(
        "\nvar<workgroup> red_v: array<{vt}, {WORKGROUP_SIZE}>;\n\
         var<workgroup> red_i: array<u32, {WORKGROUP_SIZE}>;\n\
         {head}\
         let o = gi / {parts}u;\n\
         var acc: {vt} = {id};\n\
         var best: u32 = 0xffffffffu;\n\
         {lp}\
         red_v[lid] = acc;\n\
         red_i[lid] = best;\n\
         workgroupBarrier();\n\
         for (var s = {half}u; s > 0u; s = s >> 1u) {{\n\
             if (lid < s) {{ {merge} }}\n\
             workgroupBarrier();\n\
         }}\n\
         if (lid == 0u) {{\n\
             acc = red_v[0];\n\
             best = red_i[0];\n\
             let result: {result_ty} = {result_expr};\n{st}    }}\n}}\n",
        half = WORKGROUP_SIZE / 2,
        head = kernel_main(WORKGROUP_SIZE as usize, false, total, ""),
        lp = strided_loop(
            var,
            &format!("gi % {parts}u + lid * {parts}u"),
            WORKGROUP_SIZE as usize * parts,
            steps,
            &load
        ),
    );
    (main, total, strategy)
}

fn softmax(
    g: &mut Gen,
    key: &GraphKey,
    root: usize,
    axis: usize,
    log: bool,
    outputs: &[usize],
) -> (String, usize, bool, SoftmaxStrategy) {
    let x = key.nodes[root].inputs[0];
    let shape = key.nodes[x].shape.clone();
    let len = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let rows = numel(&shape) / len.max(1);
    let vectorizable = vectorizable(&key.nodes, x, g.stored, false);
    let strategy = choose_softmax(len, rows, inner, vectorizable);
    match strategy {
        SoftmaxStrategy::RowPerInvocationVec4 => {
            let (main, groups, vec_out) =
                softmax_per_thread_vec4(g, key, root, x, (len, rows), log, outputs);
            return (main, groups, vec_out, strategy);
        }
        SoftmaxStrategy::RowPerInvocation => {
            let (main, groups) =
                softmax_per_thread(g, key, root, x, (len, inner, rows), log, outputs);
            return (main, groups, false, strategy);
        }
        SoftmaxStrategy::RowPerWorkgroup => {}
    }
    // Element k of row `gi`.
    let at = format!("((gi / {inner}u) * {len}u + k) * {inner}u + gi % {inner}u");
    let pass = |g: &mut Gen, tail: &dyn Fn(&mut Gen, &str, &str)| {
        g.scoped(|g| {
            let i = g.emit("i", "u32", &at);
            let v = g.value(x, &i, false, false);
            tail(g, &i, &v);
        })
    };
    let max_loop = pass(g, &|g, _, v| {
        let _ = writeln!(
            g.body,
            "        m = {};",
            nan_extremum("max", "m", v, false)
        );
    });
    let sum_loop = pass(g, &|g, _, v| {
        let _ = writeln!(g.body, "        s = s + exp({v} - m);");
    });
    let write_loop = pass(g, &|g, i, v| {
        let expr = if log {
            format!("({v} - m) - log(s)")
        } else {
            format!("exp({v} - m) / s")
        };
        let result = g.emit("y", "f32", &softmax_guard(&expr, "m", "s", false));
        let st = stores(g, key, root, outputs, i, &result);
        g.body.push_str(&st);
    });
    let half = WORKGROUP_SIZE / 2;
    let tree = |op: &str| {
        format!(
            "    red_v[lid] = {op};\n    workgroupBarrier();\n    \
             for (var t = {half}u; t > 0u; t = t >> 1u) {{\n        \
             if (lid < t) {{ red_v[lid] = {}; }}\n        workgroupBarrier();\n    }}\n",
            if op == "m" {
                nan_extremum("max", "red_v[lid]", "red_v[lid + t]", false)
            } else {
                "red_v[lid] + red_v[lid + t]".to_string()
            }
        )
    };
    let main = format!(
        "\nvar<workgroup> red_v: array<f32, {WORKGROUP_SIZE}>;\n\
         {}\
         var m = bitcast<f32>(0xff800000u);\n\
         for (var k = lid; k < {len}u; k = k + {WORKGROUP_SIZE}u) {{\n{max_loop}    }}\n\
         {}    m = red_v[0];\n    workgroupBarrier();\n\
         var s = 0.0;\n\
         for (var k = lid; k < {len}u; k = k + {WORKGROUP_SIZE}u) {{\n{sum_loop}    }}\n\
         {}    s = red_v[0];\n\
         for (var k = lid; k < {len}u; k = k + {WORKGROUP_SIZE}u) {{\n{write_loop}    }}\n}}\n",
        kernel_main(WORKGROUP_SIZE as usize, false, rows, ""),
        tree("m"),
        tree("s")
    );
    (main, rows, false, strategy)
}

/// `softmax_per_thread` for rows along the last axis whose length is a
/// multiple of four, read as `vec4`s (and written as `vec4`s when the
/// softmax is the kernel's only output): on lavapipe every storage access
/// is a loop over the SIMD lanes, so a quarter of them is most of the
/// cost (4096x1024: 17-18 ms -> 8.6-9.4 ms, interleaved runs). Three
/// passes (max, sum of exponentials, write) take two exponentials an
/// element where the online pass took three. Returns whether the outputs
/// are stored as `vec4`s.
fn softmax_per_thread_vec4(
    g: &mut Gen,
    key: &GraphKey,
    root: usize,
    x: usize,
    (len, rows): (usize, usize),
    log: bool,
    outputs: &[usize],
) -> (String, usize, bool) {
    let len4 = len / 4;
    // Each pass reads group `k` of the row as `v` at vec4 index `i`.
    let pass = |g: &mut Gen, f: &dyn Fn(&mut Gen, &str, &str)| {
        g.scoped(|g| {
            let i = g.emit("i", "u32", &format!("gi * {len4}u + k"));
            let v = g.value(x, &i, false, true);
            f(g, &i, &v);
        })
    };
    let max_pass = pass(g, &|g, _, v| {
        let _ = writeln!(
            g.body,
            "        m4 = {};",
            nan_extremum("max", "m4", v, true)
        );
    });
    let sum_pass = pass(g, &|g, _, v| {
        let _ = writeln!(g.body, "        s4 = s4 + exp({v} - vec4<f32>(m));");
    });
    let whole_vec4 = outputs == [root] && key.nodes[root].dtype == DType::F32;
    let write_pass = pass(g, &|g, i, v| {
        let expr = if log {
            format!("({v} - vec4<f32>(m)) - vec4<f32>(ls)")
        } else {
            format!("exp({v} - vec4<f32>(m)) * rs")
        };
        let y = g.emit("y", "vec4<f32>", &softmax_guard(&expr, "m", "s", true));
        if whole_vec4 {
            let st = g.store(0, root, i, &y, true);
            g.body.push_str(&st);
            return;
        }
        for q in 0..4 {
            let idx = g.emit("idx", "u32", &format!("{i} * 4u + {q}u"));
            let result = g.emit("r", "f32", &format!("{y}[{q}]"));
            let st = stores(g, key, root, outputs, &idx, &result);
            g.body.push_str(&st);
        }
    });
    let main = format!(
        "\n{head}\
         var m4 = vec4<f32>(bitcast<f32>(0xff800000u));\n\
         for (var k = 0u; k < {len4}u; k = k + 1u) {{\n{max_pass}    }}\n\
         let m = {m};\n\
         var s4 = vec4<f32>(0.0);\n\
         for (var k = 0u; k < {len4}u; k = k + 1u) {{\n{sum_pass}    }}\n\
         let s = (s4.x + s4.y) + (s4.z + s4.w);\n\
         let ls = log(s);\n\
         let rs = 1.0 / s;\n\
         for (var k = 0u; k < {len4}u; k = k + 1u) {{\n{write_pass}    }}\n}}\n",
        head = kernel_main(WORKGROUP_SIZE as usize, true, rows, ""),
        m = nan_extremum(
            "max",
            &nan_extremum("max", "m4.x", "m4.y", false),
            &nan_extremum("max", "m4.z", "m4.w", false),
            false
        ),
    );
    (main, rows.div_ceil(WORKGROUP_SIZE as usize), whole_vec4)
}

/// Softmax with one invocation per row, for many rows: no workgroup
/// barriers (dear on CPU drivers such as lavapipe), and an online max/sum
/// pass (the running sum is rescaled when the max grows), so the row is
/// read twice instead of three times.
fn softmax_per_thread(
    g: &mut Gen,
    key: &GraphKey,
    root: usize,
    x: usize,
    (len, inner, rows): (usize, usize, usize),
    log: bool,
    outputs: &[usize],
) -> (String, usize) {
    let at = format!("((gi / {inner}u) * {len}u + k) * {inner}u + gi % {inner}u");
    let stats = g.scoped(|g| {
        let i = g.emit("i", "u32", &at);
        let v = g.value(x, &i, false, false);
        let _ = writeln!(
            g.body,
            "        let mn = {};\n        s = s * exp(m - mn) + exp({v} - mn);\n        m = mn;",
            nan_extremum("max", "m", &v, false)
        );
    });
    let write = g.scoped(|g| {
        let i = g.emit("i", "u32", &at);
        let v = g.value(x, &i, false, false);
        let expr = if log {
            format!("({v} - m) - ls")
        } else {
            format!("exp({v} - m) * rs")
        };
        let result = g.emit("y", "f32", &softmax_guard(&expr, "m", "s", false));
        let st = stores(g, key, root, outputs, &i, &result);
        g.body.push_str(&st);
    });
    let main = format!(
        "\n{head}\
         // Starts at the lowest finite value so that exp(m - mn) is never nan.\n\
         var m = -3.4028235e38;\n\
         var s = 0.0;\n\
         for (var k = 0u; k < {len}u; k = k + 1u) {{\n{stats}    }}\n\
         let ls = log(s);\n\
         let rs = 1.0 / s;\n\
         for (var k = 0u; k < {len}u; k = k + 1u) {{\n{write}    }}\n}}\n",
        head = kernel_main(WORKGROUP_SIZE as usize, true, rows, ""),
    );
    (main, rows.div_ceil(WORKGROUP_SIZE as usize))
}

/// Code loading four elements of `node` into the vec4 `slot` (a matmul
/// tile's slot, or a texel the lane matmul packs): lane `q` at row-major
/// index `index(q)` when `in_bounds(q)`, else 0, after the `prelude` that
/// names the coordinates.
pub(super) fn tile_load(
    g: &mut Gen,
    node: usize,
    prelude: &str,
    in_bounds: impl Fn(usize) -> String,
    index: impl Fn(usize) -> String,
    slot: &str,
) -> String {
    g.scoped(|g| {
        let _ = writeln!(g.body, "{prelude}");
        let lanes: Vec<String> = (0..4)
            .map(|q| {
                let ok = g.emit("ok", "bool", &in_bounds(q));
                let i = g.emit("i", "u32", &format!("select(0u, {}, {ok})", index(q)));
                let v = g.value(node, &i, false, false);
                format!("select(0.0, {v}, {ok})")
            })
            .collect();
        let _ = writeln!(g.body, "    {slot} = vec4<f32>({});", lanes.join(", "));
    })
}

/// The operands and sizes of a matmul root, and its 64x64 output tiles.
pub(super) struct MatmulDims {
    pub a: usize,
    pub b: usize,
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub tiles_n: usize,
    /// Output tiles per batch entry.
    pub tiles_mn: usize,
    /// Workgroups: one per output tile of every batch entry.
    pub groups: usize,
}

pub(super) fn matmul_dims(key: &GraphKey, root: usize) -> MatmulDims {
    let (a, b) = (key.nodes[root].inputs[0], key.nodes[root].inputs[1]);
    let a_shape = &key.nodes[a].shape;
    let r = a_shape.len();
    let (m, k) = (a_shape[r - 2], a_shape[r - 1]);
    let n = key.nodes[b].shape[r - 1];
    let batch: usize = a_shape[..r - 2].iter().product();
    let (tiles_m, tiles_n) = (m.div_ceil(TILE_M), n.div_ceil(TILE_N));
    MatmulDims {
        a,
        b,
        m,
        k,
        n,
        tiles_n,
        tiles_mn: tiles_m * tiles_n,
        groups: batch * tiles_m * tiles_n,
    }
}

/// Code that stages one K step of both tiles in workgroup memory, by a
/// workgroup of `threads` invocations (256 / `threads` slots each). Slot
/// `q` of A holds rows 4(q / 16) .. +3 at column q % 16 of the step, slot
/// `q` of B columns 4(q % 16) .. +3 at row q / 16; each is one vec4.
fn tile_loads(g: &mut Gen, d: &MatmulDims, threads: usize) -> String {
    let (m, k, n) = (d.m, d.k, d.n);
    let mut loads = String::new();
    for s in 0..(TILE_K * 16) / threads {
        let load_a = tile_load(
            g,
            d.a,
            &format!(
                "    let q = lid + {}u;\n    let akk = q % {TILE_K}u;\n    let arow = tm * {TILE_M}u + (q / {TILE_K}u) * 4u;\n    let acol = k0 + akk;",
                threads * s
            ),
            |q| format!("arow + {q}u < {m}u && acol < {k}u"),
            |q| format!("bi * {}u + (arow + {q}u) * {k}u + acol", m * k),
            &format!("ta[akk * 16u + q / {TILE_K}u]"),
        );
        let load_b = tile_load(
            g,
            d.b,
            &format!(
                "    let q = lid + {}u;\n    let bkk = q / 16u;\n    let brow = k0 + bkk;\n    let bcol = tn * {TILE_N}u + (q % 16u) * 4u;",
                threads * s
            ),
            |q| format!("brow < {k}u && bcol + {q}u < {n}u"),
            |q| format!("bi * {}u + brow * {n}u + bcol + {q}u", k * n),
            "tb[bkk * 16u + q % 16u]",
        );
        loads.push_str(&format!("        {{\n{load_a}}}\n        {{\n{load_b}}}\n"));
    }
    loads
}

/// A 64x64-tiled matmul with 64 invocations of 8x8 outputs each (the
/// other kernel has 256 of 4x4). Per K step an invocation reads four vec4
/// from workgroup memory for 64 multiply-adds instead of two for 16, and
/// a workgroup has a quarter of the invocations to step through each
/// barrier: on lavapipe, where a workgroup runs as SIMD loops on one CPU
/// thread and a barrier splits the shader, this was 1.75x faster for
/// 1024^3 (228 vs 400 ms in one run). CPU adapters use it where the lane
/// kernel (`matmul_lanes`, 5x faster again) cannot: operands too large
/// for a texture, or no fixed subgroup size. Real GPUs keep the
/// 256-invocation kernel, which was the one measured on an H100.
fn matmul_blocked(g: &mut Gen, key: &GraphKey, root: usize, outputs: &[usize]) -> (String, usize) {
    let d = matmul_dims(key, root);
    let (m, k, n, tiles_n, tiles_mn, groups) = (d.m, d.k, d.n, d.tiles_n, d.tiles_mn, d.groups);
    let loads = tile_loads(g, &d, 64);
    let st = stores(g, key, root, outputs, "idx", "result");
    let mut inner = String::new();
    let mut decl = String::new();
    for i in 0..8 {
        for h in 0..2 {
            decl.push_str(&format!("    var c{i}_{h} = vec4<f32>(0.0);\n"));
            let av = format!("a{}.{}", i / 4, ["x", "y", "z", "w"][i % 4]);
            inner.push_str(&format!("            c{i}_{h} = c{i}_{h} + {av} * b{h};\n"));
        }
    }
    let mut gather = String::new();
    for i in 0..8 {
        gather.push_str(&format!("c{i}_0, c{i}_1, "));
    }
    let main = format!(
        "\nvar<workgroup> ta: array<vec4<f32>, {slots}>;\n\
         var<workgroup> tb: array<vec4<f32>, {slots}>;\n\
         {head}\
         let bi = gi / {tiles_mn}u;\n\
         let tm = (gi % {tiles_mn}u) / {tiles_n}u;\n\
         let tn = gi % {tiles_n}u;\n\
         let ty = lid / 8u;\n\
         let tx = lid % 8u;\n\
         {decl}\
         for (var k0 = 0u; k0 < {k}u; k0 = k0 + {TILE_K}u) {{\n\
         {loads}\
             workgroupBarrier();\n\
             for (var kk = 0u; kk < {TILE_K}u; kk = kk + 1u) {{\n\
                 let a0 = ta[kk * 16u + ty * 2u];\n\
                 let a1 = ta[kk * 16u + ty * 2u + 1u];\n\
                 let b0 = tb[kk * 16u + tx * 2u];\n\
                 let b1 = tb[kk * 16u + tx * 2u + 1u];\n\
         {inner}\
             }}\n\
             workgroupBarrier();\n\
         }}\n\
         var accs = array<vec4<f32>, 16>({gather});\n\
         for (var i = 0u; i < 8u; i = i + 1u) {{\n\
             for (var j = 0u; j < 8u; j = j + 1u) {{\n\
                 let row = tm * {TILE_M}u + ty * 8u + i;\n\
                 let col = tn * {TILE_N}u + tx * 8u + j;\n\
                 if (row < {m}u && col < {n}u) {{\n\
                     let idx = bi * {mn}u + row * {n}u + col;\n\
                     let result = accs[i * 2u + j / 4u][j % 4u];\n{st}                }}\n\
             }}\n\
         }}\n}}\n",
        mn = m * n,
        slots = TILE_K * 16,
        head = kernel_main(64, false, groups, ""),
    );
    (main, groups)
}

/// Output tile of a workgroup (rows, columns), and the K step.
const TILE_M: usize = 64;
const TILE_N: usize = 64;
const TILE_K: usize = 16;

fn matmul(g: &mut Gen, key: &GraphKey, root: usize, outputs: &[usize]) -> (String, usize) {
    let d = matmul_dims(key, root);
    let (m, k, n, tiles_n, tiles_mn, groups) = (d.m, d.k, d.n, d.tiles_n, d.tiles_mn, d.groups);
    let loads = tile_loads(g, &d, 256);
    let st = stores(g, key, root, outputs, "idx", "result");
    let main = format!(
        "\n// A tile: 16 columns of 16 four-row groups; B tile: 16 rows of 16 four-column groups.\n\
         var<workgroup> ta: array<vec4<f32>, 256>;\n\
         var<workgroup> tb: array<vec4<f32>, 256>;\n\
         {head}\
         let bi = gi / {tiles_mn}u;\n\
         let tm = (gi % {tiles_mn}u) / {tiles_n}u;\n\
         let tn = gi % {tiles_n}u;\n\
         let ty = lid / 16u;\n\
         let tx = lid % 16u;\n\
         var acc0 = vec4<f32>(0.0);\n\
         var acc1 = vec4<f32>(0.0);\n\
         var acc2 = vec4<f32>(0.0);\n\
         var acc3 = vec4<f32>(0.0);\n\
         for (var k0 = 0u; k0 < {k}u; k0 = k0 + {TILE_K}u) {{\n\
         {loads}\
             workgroupBarrier();\n\
             for (var kk = 0u; kk < {TILE_K}u; kk = kk + 1u) {{\n\
                 let av = ta[kk * 16u + ty];\n\
                 let bv = tb[kk * 16u + tx];\n\
                 acc0 = acc0 + av.x * bv;\n\
                 acc1 = acc1 + av.y * bv;\n\
                 acc2 = acc2 + av.z * bv;\n\
                 acc3 = acc3 + av.w * bv;\n\
             }}\n\
             workgroupBarrier();\n\
         }}\n\
         var accs = array<vec4<f32>, 4>(acc0, acc1, acc2, acc3);\n\
         for (var i = 0u; i < 4u; i = i + 1u) {{\n\
             for (var j = 0u; j < 4u; j = j + 1u) {{\n\
                 let row = tm * {TILE_M}u + ty * 4u + i;\n\
                 let col = tn * {TILE_N}u + tx * 4u + j;\n\
                 if (row < {m}u && col < {n}u) {{\n\
                     let idx = bi * {mn}u + row * {n}u + col;\n\
                     let result = accs[i][j];\n{st}                }}\n\
             }}\n\
         }}\n}}\n",
        mn = m * n,
        head = kernel_main(256, false, groups, ""),
    );
    (main, groups)
}
