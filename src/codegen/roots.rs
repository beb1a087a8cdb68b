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
use super::lane_packs::ScratchOperand;
use super::matmul::{matmul, matmul_blocked, matmul_class};
use super::matmul_coop::matmul_coop;
use super::matmul_lanes::{lanes_fit, matmul_lanes};
use super::norm::normalize;
use super::radix::{radix_count, radix_scatter};
use super::reduce::reduce;
use super::reduce_ir::Reduction;
use super::scan::scan;
use super::softmax::softmax;
use super::sort::{merge_runs, sort};
use super::topk::topk_select;
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
    aliases: &[(usize, usize)],
    cx: &CodegenContext,
) -> KernelSource {
    let mut outputs: Vec<usize> = Vec::new();
    if write_root {
        outputs.push(root);
    }
    outputs.extend_from_slice(epilogue);
    let mut g = Gen::new(&key.nodes, stored, aliases, cx);
    g.set_checks(key.checked);
    let only_root = write_root && epilogue.is_empty();
    let built = build_root(&mut g, key, (root, &outputs, only_root), stored);
    let textures = (built.scratch.iter().enumerate())
        .map(|(slot, &(_, name))| TextureUse {
            slot,
            write: false,
            name,
        })
        .collect();
    let launch = Launch {
        groups: built.groups,
        strategy: built.strategy,
        textures,
    };
    let source = g.kernel_source((outputs, built.vec_out), built.entry, built.body, launch);
    KernelSource {
        scratch: built.scratch.iter().map(|&(size, _)| size).collect(),
        packs: built.packs,
        ..source
    }
}

/// Dispatches on the root's op to its kernel builder. `only_root`: the
/// kernel writes the root and no epilogue (which a sort requires, as it
/// works in its own output).
fn build_root(
    g: &mut Gen,
    key: &GraphKey,
    (root, outputs, only_root): (usize, &[usize], bool),
    stored: &dyn Fn(usize) -> bool,
) -> RootKernel {
    let crate::graph::GKind::Op { op, param_base } = &key.nodes[root].kind else {
        unreachable!("kernel roots are ops")
    };
    match op {
        Op::Reduce { op, axes, parts } => {
            let red = Reduction {
                root,
                op: *op,
                axes,
                parts: *parts,
                outputs,
            };
            let (entry, body, groups, s) = reduce(g, key, &red);
            RootKernel::plain((entry, body, groups), Strategy::Reduce(s))
        }
        Op::Softmax { axis, log } => {
            let ((entry, body), groups, vec, s) = softmax(g, key, root, *axis, *log, outputs);
            // Whether the outputs are stored four elements at a time (a
            // softmax that writes only itself, see
            // `softmax_per_thread_vec4`).
            RootKernel {
                vec_out: vec,
                ..RootKernel::plain((entry, body, groups), Strategy::Softmax(s))
            }
        }
        Op::Matmul => matmul_root(g, key, (root, outputs), stored),
        Op::Normalize { rms } | Op::NormalizeBackward { rms } => {
            let backward = matches!(op, Op::NormalizeBackward { .. });
            let (built, vec4) = normalize(g, key, root, *param_base, (backward, *rms), outputs);
            RootKernel::plain(built, Strategy::RowNorm { vec4 })
        }
        Op::Attention { causal } => {
            let built = attention(g, key, root, *param_base, *causal, outputs);
            RootKernel::plain(built, Strategy::Attention)
        }
        Op::Scan { op, axis, chunk } => {
            let built = scan(g, key, root, (*op, *axis, *chunk), outputs);
            RootKernel::plain(built, Strategy::Scan)
        }
        op if op.works_in_its_output() => {
            assert!(
                only_root,
                "{} works in its own output: no epilogue (schedule::epilogues)",
                op.name()
            );
            sorting_root(g, key, root, op)
        }
        other => unreachable!("{} is not a kernel root", other.name()),
    }
}

/// The kernel of a root that works in its own output: a sort and the
/// parts a long one is lowered to, and the top-k select.
fn sorting_root(g: &mut Gen, key: &GraphKey, root: usize, op: &Op) -> RootKernel {
    match *op {
        Op::Sort {
            axis,
            descending,
            run,
        } => RootKernel::plain(sort(g, key, root, (axis, descending, run)), Strategy::Sort),
        Op::MergeRuns {
            axis,
            descending,
            run,
        } => {
            let built = merge_runs(g, key, root, (axis, descending, run));
            RootKernel::plain(built, Strategy::Sort)
        }
        Op::RadixCount(pass) => RootKernel::plain(radix_count(g, key, root, pass), Strategy::Sort),
        Op::RadixScatter(pass) => {
            RootKernel::plain(radix_scatter(g, key, root, pass), Strategy::Sort)
        }
        Op::TopkSelect { k, largest } => {
            RootKernel::plain(topk_select(g, key, root, (k, largest)), Strategy::Select)
        }
        ref other => unreachable!("{} does not work in its own output", other.name()),
    }
}

/// A matmul root's kernel: the lane kernel where the target has one and
/// the operands fit its textures, the cooperative-matrix kernel for an
/// `f16` product where the target has one, else the tiled or the blocked
/// kernel.
fn matmul_root(
    g: &mut Gen,
    key: &GraphKey,
    (root, outputs): (usize, &[usize]),
    stored: &dyn Fn(usize) -> bool,
) -> RootKernel {
    let kind = matmul_kind(g.context(), key, root);
    let dtype = key.nodes[root].dtype;
    let cx = g.context();
    let fits = |adapter| lanes_fit(cx, key, root, stored, adapter);
    g.candidates = (cx
        .target
        .adapter_matmuls
        .candidates(dtype, &fits)
        .into_iter())
    .map(|(c, valid)| (c.name().to_string(), valid))
    .collect();
    if let MatmulKernel::Lanes(adapter) = kind {
        let Some(l) = matmul_lanes(g, key, root, outputs, stored, adapter) else {
            return tiled_or_blocked(g, key, (root, outputs), MatmulKernel::Blocked);
        };
        return RootKernel {
            entry: l.entry,
            body: l.body,
            groups: l.groups,
            strategy: Strategy::Matmul {
                kernel: kind,
                tile: Some(l.tile),
                vec4_out: l.vec4_out,
            },
            vec_out: l.vec4_out,
            packs: l.packs,
            scratch: l.scratch,
        };
    }
    if let MatmulKernel::Coop(adapter) = kind
        && dtype == DType::F16
    {
        let built = matmul_coop(g, key, (root, outputs), adapter);
        return RootKernel::plain(
            built,
            Strategy::Matmul {
                kernel: kind,
                tile: None,
                // Its f32 output tile is stored an element at a time.
                vec4_out: false,
            },
        );
    }
    tiled_or_blocked(g, key, (root, outputs), kind)
}

/// The tiled kernel (for `kind` tiled, or a kernel that fell back to
/// it), else the blocked one.
fn tiled_or_blocked(
    g: &mut Gen,
    key: &GraphKey,
    (root, outputs): (usize, &[usize]),
    kind: MatmulKernel,
) -> RootKernel {
    let (kernel, (built, fours)) = if matches!(kind, MatmulKernel::Tiled | MatmulKernel::Coop(_)) {
        (MatmulKernel::Tiled, matmul(g, key, root, outputs))
    } else {
        (MatmulKernel::Blocked, matmul_blocked(g, key, root, outputs))
    };
    let strategy = Strategy::Matmul {
        kernel,
        tile: None,
        vec4_out: fours,
    };
    RootKernel {
        vec_out: fours,
        ..RootKernel::plain(built, strategy)
    }
}

/// The matmul kernel to try for `root`: its class's, where the target has
/// per-class choices (tuning on) and the trace site compiled no matmul
/// there before; else the kernel the site's earlier sizes generated
/// (a site keeps its kernel, as it keeps its other strategies, so that a
/// size marked dynamic crossing into another class reuses its kernels
/// instead of compiling again); with tuning off, the target's.
fn matmul_kind(cx: CodegenContext, key: &GraphKey, root: usize) -> MatmulKernel {
    let target = cx.target;
    if target.matmul_by_class.is_none() {
        return target.matmul;
    }
    match cx.precedent(root) {
        Some(Strategy::Matmul { kernel, .. }) => kernel,
        _ => target.matmul_for(matmul_class(key, root)),
    }
}

/// A root's kernel as its builder made it, and what it needs dispatched
/// first.
struct RootKernel {
    entry: Entry,
    body: Vec<Inst>,
    groups: usize,
    strategy: Strategy,
    /// Whether the outputs are stored four elements at a time.
    vec_out: bool,
    /// The lane kernel's packing kernels.
    packs: Vec<KernelSource>,
    /// The lane kernel's scratch textures, with the names it reads them by.
    scratch: Vec<ScratchOperand>,
}

impl RootKernel {
    /// A kernel with no packing kernels or scratch, storing an element at
    /// a time.
    fn plain((entry, body, groups): (Entry, Vec<Inst>, usize), strategy: Strategy) -> Self {
        RootKernel {
            entry,
            body,
            groups,
            strategy,
            vec_out: false,
            packs: Vec::new(),
            scratch: Vec::new(),
        }
    }
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
    // Every value before any store: an output written into a donated
    // input's buffer must not overwrite it before a later output reads it.
    let values: Vec<Expr> = outputs
        .iter()
        .map(|&o| g.value(o, idx, true, vec))
        .collect();
    for (k, (&o, v)) in outputs.iter().zip(values).enumerate() {
        let stmt = g.store(k, o, idx, v, vec);
        g.push(stmt);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{GKind, Graph};
    use crate::kernel::{MatmulClass, Precedents, Target};
    use crate::{Device, Tensor};

    /// The traced graph of `[rows, 300] @ [300, 50]`, and its matmul node.
    fn product(rows: usize) -> (GraphKey, usize) {
        let dev = Device::cpu();
        let a = Tensor::from_vec(vec![0.5f32; rows * 300], [rows, 300], &dev).expect("a");
        let b = Tensor::from_vec(vec![0.5f32; 300 * 50], [300, 50], &dev).expect("b");
        let key = Graph::collect(&[a.matmul(&b).node()], true).key;
        let node = (key.nodes.iter())
            .position(|n| matches!(n.kind, GKind::Op { op: Op::Matmul, .. }))
            .expect("a matmul");
        (key, node)
    }

    #[test]
    fn a_matmul_takes_its_classs_kernel_unless_its_site_had_one() {
        let ((wide, at), (narrow, nt)) = (product(40), product(9));
        let mut target = Target::lavapipe();
        let class = |rows| MatmulClass::of(DType::F32, (1, rows, 300, 50));
        target.matmul_by_class = Some(
            [
                (class(40), MatmulKernel::Blocked),
                (class(9), MatmulKernel::Tiled),
            ]
            .into(),
        );
        let cx = CodegenContext::plain(&target);
        assert_eq!(matmul_kind(cx, &wide, at), MatmulKernel::Blocked);
        assert_eq!(matmul_kind(cx, &narrow, nt), MatmulKernel::Tiled);
        // The site's first size generated the blocked kernel: its later
        // sizes keep it, whatever their class.
        let mut first = Precedents::default();
        first.record(
            nt,
            Strategy::Matmul {
                kernel: MatmulKernel::Blocked,
                tile: None,
                vec4_out: true,
            },
        );
        let later = CodegenContext {
            precedents: Some(&first),
            ..cx
        };
        assert_eq!(matmul_kind(later, &narrow, nt), MatmulKernel::Blocked);
        // So it does where every class of the graph is lent (no class
        // tuned, the table empty but tuning on).
        let mut lent_all = Target::lavapipe();
        lent_all.matmul_by_class = Some(Default::default());
        let lent_cx = CodegenContext {
            target: &lent_all,
            ..later
        };
        assert_eq!(matmul_kind(lent_cx, &narrow, nt), MatmulKernel::Blocked);
        // Tuning off: the target's kernel, precedent or not.
        let off = Target::lavapipe();
        let off_cx = CodegenContext {
            target: &off,
            ..later
        };
        assert_eq!(matmul_kind(off_cx, &narrow, nt), off.matmul);
    }
}
