//! Code for a graph's planned kernels (`schedule::plan`): each kernel
//! lowered once, with the stored values, outputs and aliases its plan
//! gives.

use super::{CodegenContext, KernelSource, generate_root_kernel, lower_kernel};
use crate::graph::GraphKey;
use crate::kernel::reads_output_off_its_stores;
use crate::schedule::{KernelKind, KernelPlan, Plan};

/// The code of each of `plan`'s kernels, in order, each lowered once as
/// planned. A kernel whose code reads an aliased value elsewhere than at
/// the elements it stores there is lowered again without its aliases
/// (so without its donations): the graph rules that out
/// for what it decides (`schedule::reads_only_at_own_element`), but a
/// root's strategy decides which invocation stores each element.
pub(crate) fn generate(key: &GraphKey, cx: &CodegenContext, plan: &mut Plan) -> Vec<KernelSource> {
    (0..plan.kernels.len())
        .map(|k| match generate_planned(key, cx, plan, k) {
            Some(source) => source,
            None => {
                plan.kernels[k].aliases.clear();
                generate_planned(key, cx, plan, k).expect("a kernel without aliases lowers")
            }
        })
        .collect()
}

/// Kernel `k` of `plan` lowered, or `None` where its aliases do not hold
/// in its code (see `generate`).
fn generate_planned(
    key: &GraphKey,
    cx: &CodegenContext,
    plan: &Plan,
    k: usize,
) -> Option<KernelSource> {
    let KernelPlan { group, aliases, .. } = &plan.kernels[k];
    let stored = |n: usize| plan.stored_before(key, k, n);
    match group.kind {
        KernelKind::Elementwise => {
            let lowered = lower_kernel(key, &group.outputs, group.numel, &stored, aliases, cx);
            if !aliases.is_empty() && lowered.reads_donated_elsewhere() {
                log::error!(
                    "kernel {k}: inputs {aliases:?} were judged safe to donate but are read elsewhere; not donated"
                );
                debug_assert!(false, "donation analysis and code generation disagree");
                return None;
            }
            Some(lowered.render())
        }
        KernelKind::Root { node, write_root } => {
            let epilogue = &group.outputs;
            let source =
                generate_root_kernel(key, node, write_root, epilogue, &stored, aliases, cx);
            if !aliases.is_empty() && reads_output_off_its_stores(&source.kernel.body) {
                log::debug!(
                    "kernel {k}: root {node} reads a donated input off its stores; not donated"
                );
                return None;
            }
            Some(source)
        }
    }
}
