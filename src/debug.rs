//! Seeing inside: graph dumps (`LAZYWGPU_DUMP=DIR`) and verification of
//! GPU results against the CPU reference (`LAZYWGPU_VERIFY=1`).

use std::fmt::Write as _;
use std::path::Path;

use crate::codegen::KernelSource;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::graph::{GKind, Graph, GraphKey};
use crate::kernel::Binding;
use crate::schedule::Plan;

/// One line per node: `%i = op(%a, %b) : [shape] dtype  @ file:line:col`.
pub(crate) fn ir_text(graph: &Graph) -> String {
    let key = &graph.key;
    let mut out = format!(
        "graph {:016x}: {} nodes, outputs {:?}, fusion {}\n",
        graph.hash,
        key.nodes.len(),
        key.outputs,
        if key.fused { "on" } else { "off" }
    );
    for (i, n) in key.nodes.iter().enumerate() {
        let args: Vec<String> = n.inputs.iter().map(|a| format!("%{a}")).collect();
        let op = match &n.kind {
            GKind::Input { slot, layout } => format!(
                "input[{slot}] strides {:?} offset {}{}",
                layout.strides,
                layout.offset,
                if key.donatable[*slot] {
                    " (donatable)"
                } else {
                    ""
                }
            ),
            GKind::Op { op, param_base } => match op {
                crate::graph::op::Op::Scalar => format!("scalar(param {param_base})"),
                other => format!("{:?}", other).to_lowercase(),
            },
        };
        let mark = if key.outputs.contains(&i) {
            "  # output"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "%{i} = {op}({}) : {:?} {}  @ {}{mark}",
            args.join(", "),
            n.shape,
            n.dtype,
            graph.locations[i]
        );
    }
    out
}

/// The graph as Graphviz DOT: inputs as boxes, outputs doubled.
pub(crate) fn dot(graph: &Graph) -> String {
    let key: &GraphKey = &graph.key;
    let mut out = format!("digraph g{:016x} {{\n  rankdir=TB;\n", graph.hash);
    for (i, n) in key.nodes.iter().enumerate() {
        let (label, shape) = match &n.kind {
            GKind::Input { slot, .. } => (format!("input {slot}"), "box"),
            GKind::Op { op, .. } => (op.name().to_string(), "ellipse"),
        };
        let periph = if key.outputs.contains(&i) { 2 } else { 1 };
        let _ = writeln!(
            out,
            "  n{i} [label=\"%{i} {label}\\n{:?} {}\\n{}\", shape={shape}, peripheries={periph}];",
            n.shape,
            n.dtype,
            graph.locations[i].to_string().replace('"', "'")
        );
        for a in &n.inputs {
            let _ = writeln!(out, "  n{a} -> n{i};");
        }
    }
    out.push_str("}\n");
    out
}

/// Writes the IR, the DOT graph and each kernel's WGSL (with the packing
/// kernels dispatched before it, as `kernelK.packJ`) under `dir`, named by
/// the graph hash. Failures are logged, never fatal.
pub(crate) fn dump(
    dir: &Path,
    (graph, plan): (&Graph, &Plan),
    kernels: &[&KernelSource],
    origins: &[String],
) {
    let stem = format!("{:016x}", graph.hash);
    let mut files: Vec<(String, String)> = vec![
        (format!("{stem}.ir.txt"), ir_text(graph)),
        (format!("{stem}.dot"), dot(graph)),
    ];
    let releases = plan.releases(&graph.key);
    for (k, source) in kernels.iter().enumerate() {
        let name = format!("{stem}.kernel{k}");
        files.push((format!("{name}.wgsl"), source.wgsl.to_string()));
        let planned = planned_text((plan, k), &releases[k], origins);
        let text = plan_text(&name, source, &planned, origins);
        files.push((format!("{name}.plan.txt"), text));
        for (j, pack) in source.packs.iter().enumerate() {
            let name = format!("{name}.pack{j}");
            files.push((format!("{name}.wgsl"), pack.wgsl.to_string()));
            let text = plan_text(&name, pack, "", origins);
            files.push((format!("{name}.plan.txt"), text));
        }
    }
    if let Err(e) = std::fs::create_dir_all(dir) {
        log::warn!("LAZYWGPU_DUMP: cannot create {}: {e}", dir.display());
        return;
    }
    for (name, text) in files {
        if let Err(e) = std::fs::write(dir.join(&name), text) {
            log::warn!("LAZYWGPU_DUMP: cannot write {name}: {e}");
        }
    }
}

/// What the scheduler planned for kernel `k` (`schedule::plan`), as
/// text: the stored values it reads, the values whose buffers its outputs
/// write over, and the intermediates released once it is encoded.
fn planned_text((plan, k): (&Plan, usize), releases: &[usize], origins: &[String]) -> String {
    let label = |n: usize| origins.get(n).map_or("?", String::as_str);
    let kernel = &plan.kernels[k];
    let mut text = String::from("planned reads:");
    for &r in &kernel.reads {
        let _ = write!(text, "\n  n{r} {}", label(r));
    }
    for (o, x) in plan.takes(k) {
        let _ = write!(text, "\nn{o} writes over n{x} {}", label(x));
    }
    if !releases.is_empty() {
        let listed: Vec<String> = releases.iter().map(|n| format!("n{n}")).collect();
        let _ = write!(text, "\nreleased once encoded: {}", listed.join(", "));
    }
    text.push('\n');
    text
}

/// What a kernel was decided to be, as text: what it writes, its grid,
/// the guards its choices recorded, the dynamic sizes it reads and how
/// the graph's numbers give them, what was `planned` for it, its bindings in order (each node named with
/// its op and source line), and its body in the kernel IR (`kernel::ir`).
fn plan_text(name: &str, source: &KernelSource, planned: &str, origins: &[String]) -> String {
    let label = |n: usize| origins.get(n).map_or("?", String::as_str);
    let mut text = format!(
        "{name}: {} workgroups\nstrategy: {:?}\n",
        source.groups, source.strategy
    );
    if !source.candidates.is_empty() {
        let listed: Vec<String> = source
            .candidates
            .iter()
            .map(|(name, valid)| {
                let note = if *valid { "" } else { " (not valid here)" };
                format!("{name}{note}")
            })
            .collect();
        let _ = writeln!(text, "candidates: {}", listed.join(", "));
    }
    // The tests of sizes its choices made, each node named once.
    for guard in source.guards.iter() {
        let named: Vec<String> = (guard.size.nodes().into_iter())
            .map(|n| format!("n{n} {}", label(n)))
            .collect();
        let _ = writeln!(text, "guard: {guard}; {}", named.join(", "));
    }
    // The sizes it reads from its sizes binding, and their values here.
    let dynamic = &source.dynamic;
    for (slot, (expr, value)) in dynamic.exprs.iter().zip(&dynamic.values).enumerate() {
        let _ = writeln!(text, "size[{slot}] = {expr} ({value} here)");
    }
    for &w in &source.writes {
        let _ = writeln!(text, "writes n{w} {}", label(w));
    }
    if let Some(c) = &source.copy {
        let _ = writeln!(
            text,
            "done by a copy instead: texture {} {:?}, {} rows a layer from n{} {} at byte {}, {} bytes a row, {} column blocks a matrix",
            c.slot,
            c.size,
            c.rows,
            c.node,
            label(c.node),
            c.offset_bytes,
            c.bytes_per_row,
            c.col_blocks()
        );
    }
    text.push_str(planned);
    let _ = writeln!(text, "bindings:");
    for (i, b) in source.bindings().enumerate() {
        let node = match b {
            Binding::Read { node, .. } | Binding::Write { node, .. } => {
                format!(" ({})", label(node))
            }
            _ => String::new(),
        };
        let _ = writeln!(text, "  {i}: {}{node}", b.describe());
    }
    if !source.scratch.is_empty() {
        let _ = writeln!(
            text,
            "scratch textures (width, height, layers): {:?}",
            source.scratch
        );
    }
    let _ = write!(text, "kernel IR:\n{}", source.ir);
    text
}

/// Compares the GPU's results with the CPU reference's, output by output
/// in graph order, and names the first output that differs.
///
/// f32 outputs may differ by `atol + rtol·|cpu|` (1e-4, 1e-3: drivers
/// implement transcendental functions to a few ulp), f16 and bf16 ones by
/// `atol` and one unit in their last place; other dtypes must be equal.
pub(crate) fn compare(graph: &Graph, gpu: &[Vec<u32>], cpu: &[Vec<u32>]) -> Result<()> {
    let (rtol, atol) = (1e-3f64, 1e-4f64);
    let mut order: Vec<usize> = (0..graph.key.outputs.len()).collect();
    order.sort_by_key(|&k| graph.key.outputs[k]);
    for k in order {
        let node = graph.key.outputs[k];
        let dtype = graph.key.nodes[node].dtype;
        let (mut max_abs, mut max_rel, mut bad) = (0f64, 0f64, false);
        for (&g, &c) in gpu[k].iter().zip(&cpu[k]) {
            let (g, c) = match dtype {
                DType::F32 | DType::F16 | DType::BF16 => (
                    dtype.float_from_bits(g) as f64,
                    dtype.float_from_bits(c) as f64,
                ),
                DType::I32 | DType::I64 => (g as i32 as f64, c as i32 as f64),
                DType::U32 | DType::U8 | DType::Bool => (g as f64, c as f64),
            };
            if (g.is_nan() && c.is_nan()) || g == c {
                continue;
            }
            let abs = (g - c).abs();
            let rel = abs / c.abs().max(f64::MIN_POSITIVE);
            if abs.is_nan() || abs > 0.0 {
                max_abs = max_abs.max(if abs.is_nan() { f64::INFINITY } else { abs });
                max_rel = max_rel.max(if rel.is_nan() { f64::INFINITY } else { rel });
            }
            // A 16-bit result may round the other way from an f32 that
            // differs in its last bits: one unit in its last place.
            let tolerated = match dtype {
                DType::F32 => abs <= atol + rtol * c.abs(),
                DType::F16 => abs <= atol + c.abs() / 1024.0,
                DType::BF16 => abs <= atol + c.abs() / 128.0,
                _ => false,
            };
            if abs.is_nan() || (abs > 0.0 && !tolerated) {
                bad = true;
            }
        }
        if bad || gpu[k].len() != cpu[k].len() {
            let op = match &graph.key.nodes[node].kind {
                GKind::Input { .. } => "input",
                GKind::Op { op, .. } => op.name(),
            };
            return Err(Error::VerifyMismatch {
                graph_hash: graph.hash,
                op,
                location: graph.locations[node].to_string(),
                max_abs,
                max_rel,
            });
        }
    }
    Ok(())
}
