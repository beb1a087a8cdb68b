//! A kernel lowered at one graph, launched at another of the same
//! structure without lowering it again: what a new size of a trace site
//! needs once its kernels hold (`runtime::gpu::rebind`). The kernel and
//! its WGSL stay; its grid, the values of its dynamic sizes, its scratch
//! textures' extents and which packing kernels a copy replaces are
//! computed from the expressions lowering recorded, at the new graph's
//! numbers.

use super::lane_packs::operand_copy;
use super::source::KernelSource;
use crate::graph::GraphKey;
use crate::kernel::generic::{DynamicSizes, groups_at};
use crate::kernel::sizes::Leaf;

/// `source` as a graph `key` whose numbers are `at` launches it (its
/// packing kernels' copies read `key`'s values, `stored` saying which
/// lie in memory), or `None` where a number the launch needs is not an
/// expression of the graph's numbers, or a size does not fit the slot it
/// is read from. The caller has checked that `key` is the lowered
/// graph's structure but for its numbers and that every guard of
/// `source` holds at `at`.
pub(crate) fn source_at(
    source: &KernelSource,
    key: &GraphKey,
    stored: &dyn Fn(usize) -> bool,
    at: &dyn Fn(Leaf) -> usize,
) -> Option<KernelSource> {
    let mut packs = Vec::with_capacity(source.packs.len());
    for (slot, pack) in source.packs.iter().enumerate() {
        let packing = pack.packed.as_ref()?.at(at);
        let copy = operand_copy(key, stored, &packing, slot);
        packs.push(KernelSource {
            copy,
            packed: Some(packing),
            ..dispatch_at(pack, at)?
        });
    }
    // Each scratch texture is the one its packing kernel fills.
    if source.scratch.len() != packs.len() {
        return None;
    }
    let scratch = (packs.iter())
        .map(|p| p.packed.as_ref().map(|packing| packing.texture_size()))
        .collect::<Option<Vec<_>>>()?;
    Some(KernelSource {
        scratch,
        packs,
        ..dispatch_at(source, at)?
    })
}

/// One dispatch of `source` at numbers `at`: its grid and its sizes'
/// values there; its packing kernels left out.
fn dispatch_at(source: &KernelSource, at: &dyn Fn(Leaf) -> usize) -> Option<KernelSource> {
    let groups = groups_at(&source.kernel.entry, &source.dynamic, at)?;
    let values = source.dynamic.values_at(at)?;
    Some(KernelSource {
        wgsl: source.wgsl.clone(),
        ir: String::new(),
        reads: source.reads.clone(),
        writes: source.writes.clone(),
        groups,
        strategy: source.strategy,
        scratch: source.scratch.clone(),
        packs: Vec::new(),
        copy: None,
        packed: None,
        dynamic: DynamicSizes {
            exprs: source.dynamic.exprs.clone(),
            values,
            pinned: false,
        },
        candidates: source.candidates.clone(),
        guards: source.guards.clone(),
        kernel: source.kernel.clone(),
    })
}

/// Whether `a` and `b` launch alike: one kernel text, grid, sizes'
/// values, scratch textures and copies, their packing kernels too (what
/// `source_at` computes, against what lowering gave). Says what differs.
pub(crate) fn launch_difference(a: &KernelSource, b: &KernelSource) -> Option<String> {
    let one = |a: &KernelSource, b: &KernelSource| -> Option<String> {
        if a.wgsl != b.wgsl {
            return Some("its WGSL".to_string());
        }
        if a.groups != b.groups {
            return Some(format!("workgroups {} against {}", a.groups, b.groups));
        }
        if a.dynamic.values != b.dynamic.values {
            return Some(format!(
                "sizes {:?} against {:?}",
                a.dynamic.values, b.dynamic.values
            ));
        }
        if a.scratch != b.scratch {
            return Some(format!("scratch {:?} against {:?}", a.scratch, b.scratch));
        }
        if a.copy != b.copy {
            return Some(format!("copy {:?} against {:?}", a.copy, b.copy));
        }
        None
    };
    if a.packs.len() != b.packs.len() {
        return Some(format!(
            "{} packing kernels against {}",
            a.packs.len(),
            b.packs.len()
        ));
    }
    for (d, (pa, pb)) in a.packs.iter().zip(&b.packs).enumerate() {
        if let Some(why) = one(pa, pb) {
            return Some(format!("packing kernel {d}: {why}"));
        }
    }
    one(a, b)
}
