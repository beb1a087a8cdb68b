//! Kernels for ops that are not elementwise (reductions, softmax, matmul).
//! Each kernel builder loops over its own iteration space and asks `Gen`
//! for its operands' values at computed indices, so the elementwise work
//! feeding it (its prologue, views included) is inlined; and it evaluates
//! its epilogue (written nodes that only need the root's value at the
//! same index) right where the result is in a register. This file
//! dispatches on the root's op and stores the epilogue; the builders are
//! in `reduce.rs`, `softmax.rs`, `norm.rs`, `attention.rs`, `matmul.rs`
//! and `matmul_lanes.rs`.

use super::attention::attention;
use super::emit::Gen;
use super::matmul::{matmul, matmul_blocked};
use super::matmul_lanes::{LANE_OPERANDS, matmul_lanes};
use super::norm::normalize;
use super::reduce::reduce;
use super::reduce_ir::Reduction;
use super::scan::scan;
use super::softmax::softmax;
use super::sort::sort;
use super::wgsl::{CodegenContext, KernelSource, Launch, TextureUse};
use crate::dtype::DType;
use crate::graph::GraphKey;
use crate::graph::op::Op;
use crate::kernel::Entry;
use crate::kernel::ir::{Check, Expr, Inst};
use crate::kernel::{MatmulKernel, Strategy};

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
    let mut outputs: Vec<usize> = Vec::new();
    if write_root {
        outputs.push(root);
    }
    outputs.extend_from_slice(epilogue);
    let mut g = Gen::new(&key.nodes, stored, &[], cx);
    g.set_checks(key.checked);
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
            let red = Reduction {
                root,
                op: *op,
                axes,
                parts: *parts,
                outputs: &outputs,
            };
            let (entry, body, groups, s) = reduce(&mut g, key, &red);
            ((entry, body), groups, Strategy::Reduce(s))
        }
        Op::Softmax { axis, log } => {
            let (main, groups, vec, s) = softmax(&mut g, key, root, *axis, *log, &outputs);
            vec_out = vec;
            (main, groups, Strategy::Softmax(s))
        }
        Op::Matmul => {
            let m = matmul_root(&mut g, key, (root, &outputs), stored);
            packs = m.packs;
            scratch = m.scratch;
            ((m.entry, m.body), m.groups, m.strategy)
        }
        Op::Normalize { rms } | Op::NormalizeBackward { rms } => {
            let crate::graph::GKind::Op { param_base, .. } = &key.nodes[root].kind else {
                unreachable!("kernel roots are ops")
            };
            let backward = matches!(op, Op::NormalizeBackward { .. });
            let (entry, body, groups) =
                normalize(&mut g, key, root, *param_base, (backward, *rms), &outputs);
            ((entry, body), groups, Strategy::RowNorm)
        }
        Op::Attention { causal } => {
            let crate::graph::GKind::Op { param_base, .. } = &key.nodes[root].kind else {
                unreachable!("kernel roots are ops")
            };
            let (entry, body, groups) =
                attention(&mut g, key, root, *param_base, *causal, &outputs);
            ((entry, body), groups, Strategy::Attention)
        }
        Op::Scan { op, axis } => {
            let (entry, body, groups) = scan(&mut g, key, root, (*op, *axis), &outputs);
            ((entry, body), groups, Strategy::Scan)
        }
        Op::Sort { axis, descending } => {
            assert!(
                write_root && epilogue.is_empty(),
                "a sort works in its own output (schedule::epilogues)"
            );
            let (entry, body, groups) = sort(&mut g, key, root, (*axis, *descending));
            ((entry, body), groups, Strategy::Sort)
        }
        other => unreachable!("{} is not a kernel root", other.name()),
    };
    let textures = (0..scratch.len())
        .map(|slot| TextureUse {
            slot,
            write: false,
            name: LANE_OPERANDS[slot],
        })
        .collect();
    let launch = Launch {
        groups,
        strategy,
        textures,
    };
    let (entry, body) = main;
    let source = g.kernel_source((outputs, vec_out), entry, body, launch);
    KernelSource {
        scratch,
        packs,
        ..source
    }
}

/// A matmul root's kernel: the lane kernel where the target has one and
/// the operands fit its textures, else the tiled or the blocked kernel.
fn matmul_root(
    g: &mut Gen,
    key: &GraphKey,
    (root, outputs): (usize, &[usize]),
    stored: &dyn Fn(usize) -> bool,
) -> MatmulRoot {
    let kind = g.context().target.matmul;
    if let MatmulKernel::Lanes(adapter) = kind
        && let Some(l) = matmul_lanes(g, key, root, outputs, stored, adapter)
    {
        return MatmulRoot {
            entry: l.entry,
            body: l.body,
            groups: l.groups,
            strategy: Strategy::Matmul {
                kernel: kind,
                tile: Some(l.tile),
            },
            packs: l.packs,
            scratch: l.scratch,
        };
    }
    let (kernel, (entry, body, groups)) = if kind == MatmulKernel::Tiled {
        (MatmulKernel::Tiled, matmul(g, key, root, outputs))
    } else {
        (MatmulKernel::Blocked, matmul_blocked(g, key, root, outputs))
    };
    MatmulRoot {
        entry,
        body,
        groups,
        strategy: Strategy::Matmul { kernel, tile: None },
        packs: Vec::new(),
        scratch: Vec::new(),
    }
}

/// A matmul root's kernel and what it needs dispatched first.
struct MatmulRoot {
    entry: Entry,
    body: Vec<Inst>,
    groups: usize,
    strategy: Strategy,
    /// The lane kernel's packing kernels.
    packs: Vec<KernelSource>,
    /// The lane kernel's scratch textures.
    scratch: Vec<(u32, u32, u32)>,
}

/// A root kernel's entry and body.
pub(super) type RootBody = (Entry, Vec<Inst>);

/// Lowers, into the current block, every output's value at `idx` (the
/// root's value there being `result`) and its store.
pub(super) fn store_outputs(
    g: &mut Gen,
    key: &GraphKey,
    (root, outputs): (usize, &[usize]),
    idx: &Expr,
    result: &Expr,
) {
    store_outputs_by(g, key, (root, outputs), (idx, false), result);
}

/// `store_outputs`, four elements at a time when `vec` (`idx` then
/// indexes `vec4`s and `result` is one).
pub(super) fn store_outputs_by(
    g: &mut Gen,
    key: &GraphKey,
    (root, outputs): (usize, &[usize]),
    (idx, vec): (&Expr, bool),
    result: &Expr,
) {
    g.seed(root, idx, result.clone(), vec);
    if key.nodes[root].dtype == DType::F32 {
        let value = result.clone();
        g.check(Check::Nan { value, vec }, root);
    }
    for (k, &o) in outputs.iter().enumerate() {
        let v = g.value(o, idx, true, vec);
        let stmt = g.store(k, o, idx, v, vec);
        g.push(stmt);
    }
}
