//! Running one step's pending work as a sequence of submissions, each
//! ending in a readback that the host can take while the device runs the
//! next: how data-parallel training overlaps the all-reduce of one bucket
//! of gradients with the backward pass of the layers before it.
//!
//! Stage `k` computes what its reads need that no earlier stage computed
//! (the first also what else the program holds pending). Every node is
//! computed once, in the first stage that needs it, and stored (an extra
//! output of that stage's graph) only when a later stage reads it. One pass over the
//! pending nodes decides both, so the split is linear in the graph.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::mpsc::Receiver;

use super::device::{Backend, Device};
use super::gpu::GpuContext;
use crate::error::Result;
use crate::graph::{Node, NodeState};
use crate::shape::numel;

/// A readback that a stage asked for: its words arrive once the stage has
/// run, without waiting for later stages.
pub(crate) enum StagedRead {
    /// On the host already (the CPU backend, or a value stored earlier).
    Host(Vec<u32>),
    /// Copied by the stage's command buffer into a mapped buffer (32-bit
    /// values: one word each).
    Mapped {
        ctx: Arc<GpuContext>,
        staging: wgpu::Buffer,
        mapped: Receiver<std::result::Result<(), wgpu::BufferAsyncError>>,
    },
}

impl StagedRead {
    /// Waits for the stage (only) and returns the value's elements as
    /// 32-bit patterns. Callable from another thread than the one that
    /// queued the stages.
    pub fn wait(self) -> Result<Vec<u32>> {
        match self {
            StagedRead::Host(bits) => Ok(bits),
            StagedRead::Mapped {
                ctx,
                staging,
                mapped,
            } => ctx.read_when_mapped(&staging, mapped, "staged readback"),
        }
    }
}

/// For each stage (`roots[k]`: the nodes stage `k` must produce), the
/// nodes it computes that a later stage reads, which it must store. A node
/// belongs to the first stage that reaches it.
fn stored_by_stage(roots: &[Vec<Arc<Node>>]) -> Vec<Vec<Arc<Node>>> {
    let mut stage_of: HashMap<u64, usize> = HashMap::new();
    let mut stored: Vec<Vec<Arc<Node>>> = vec![Vec::new(); roots.len()];
    let mut is_stored: HashSet<u64> = HashSet::new();
    // A node first reached from stage `k` belongs to it; a node reached
    // again from a later stage is stored by the stage it belongs to.
    let mut reach = |node: &Arc<Node>,
                     k: usize,
                     stack: &mut Vec<Arc<Node>>,
                     stored: &mut Vec<Vec<Arc<Node>>>| {
        if !node.is_pending() {
            return;
        }
        match stage_of.get(&node.id) {
            None => {
                stage_of.insert(node.id, k);
                stack.push(node.clone());
            }
            Some(&j) if j < k => {
                if is_stored.insert(node.id) {
                    stored[j].push(node.clone());
                }
            }
            Some(_) => {}
        }
    };
    for (k, stage_roots) in roots.iter().enumerate() {
        let mut stack = Vec::new();
        for root in stage_roots {
            reach(root, k, &mut stack, &mut stored);
        }
        while let Some(node) = stack.pop() {
            let inputs = match &*node.state() {
                NodeState::Pending(p) => p.inputs.clone(),
                NodeState::Ready(_) => Vec::new(),
            };
            for input in &inputs {
                reach(input, k, &mut stack, &mut stored);
            }
        }
    }
    stored
}

impl Device {
    /// Computes `stages` in order, the first with everything else the
    /// program holds pending except the nodes in `replaced` (values the
    /// caller is about to overwrite). Stage `k` computes and stores the
    /// nodes `stages[k]` and reads their values back, one after another;
    /// each readback is handed to `on_read` as soon as its stage is
    /// queued, before the next is, and completes as the device gets
    /// through the stages.
    pub(crate) fn realize_in_stages(
        &self,
        stages: &[Vec<Arc<Node>>],
        replaced: &[Arc<Node>],
        mut on_read: impl FnMut(StagedRead),
    ) -> Result<()> {
        let replaced: HashSet<u64> = replaced.iter().map(|n| n.id).collect();
        let rest: Vec<Arc<Node>> = self
            .pending_bases()
            .into_iter()
            .filter(|n| !replaced.contains(&n.id))
            .collect();
        // The rest (a loss the program reads later, say) joins the first
        // stage, which has the forward pass already: split off into a
        // stage of its own it would make the first stage store the
        // forward values it reads.
        let mut roots: Vec<Vec<Arc<Node>>> = stages.to_vec();
        match roots.first_mut() {
            Some(first) => first.extend(rest),
            None => roots.push(rest),
        }
        for (k, stored) in stored_by_stage(&roots).iter().enumerate() {
            let mut outputs = roots[k].clone();
            outputs.retain(|n| n.is_pending());
            outputs.extend(stored.iter().cloned());
            match stages.get(k) {
                Some(reads) => on_read(self.stage_reading(reads, &outputs)?),
                None if !outputs.is_empty() => self.realize(&outputs)?,
                None => {}
            }
        }
        Ok(())
    }

    /// Queues one stage: computes `outputs` (which start with `reads`
    /// where those are pending) and, where it can, copies `reads` into one
    /// mapped buffer in the same command buffer. That needs the reads
    /// pending, distinct and of one 32-bit dtype; otherwise they are
    /// computed and read back one by one, now.
    fn stage_reading(&self, reads: &[Arc<Node>], outputs: &[Arc<Node>]) -> Result<StagedRead> {
        let count: usize = reads.iter().map(|r| numel(&r.shape)).sum();
        let ctx = match &self.inner.backend {
            Backend::Gpu(ctx, _) => Some(ctx.clone()),
            Backend::Cpu => None,
        };
        let distinct = reads.iter().map(|r| r.id).collect::<HashSet<_>>().len() == reads.len();
        let copyable = reads
            .iter()
            .all(|r| r.is_pending() && r.dtype == reads[0].dtype && r.dtype.size_in_bytes() == 4);
        match ctx {
            Some(ctx) if count > 0 && distinct && copyable && !self.checking_results() => {
                let staging = self.realize_into_staging(&ctx, outputs, reads.len(), count)?;
                let mapped = ctx.map_after_submitted(&staging);
                Ok(StagedRead::Mapped {
                    ctx,
                    staging,
                    mapped,
                })
            }
            _ => {
                if !outputs.is_empty() {
                    self.realize(outputs)?;
                }
                let mut bits = Vec::with_capacity(count);
                for read in reads {
                    bits.extend(pollster::block_on(self.read_bits(read))?);
                }
                Ok(StagedRead::Host(bits))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Device, Tensor};

    /// Two reads sharing a prefix: the shared node is computed once (in
    /// the first stage) and stored for the second.
    #[test]
    fn a_node_shared_by_two_stages_is_computed_once_and_stored() {
        let dev = Device::cpu();
        let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], [3], &dev).unwrap();
        let shared = x.mul(2.0).add(1.0);
        let a = shared.sum_all();
        let b = shared.mul(3.0);
        let roots = vec![vec![a.node()], vec![b.node()], vec![]];
        let stored = super::stored_by_stage(&roots);
        assert_eq!(stored[0].len(), 1);
        assert_eq!(stored[0][0].id, shared.node().id);
        assert!(stored[1].is_empty());
        let mut values: Vec<Vec<f32>> = Vec::new();
        let stages = [vec![a.node()], vec![b.node(), a.node()]];
        dev.realize_in_stages(&stages, &[], |r| {
            values.push(r.wait().unwrap().into_iter().map(f32::from_bits).collect())
        })
        .unwrap();
        assert_eq!(values, vec![vec![15.0], vec![9.0, 15.0, 21.0, 15.0]]);
    }
}
