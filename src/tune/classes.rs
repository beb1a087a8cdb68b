//! Per-class matmul tuning: the first time a graph with a matmul of a
//! class (`kernel::MatmulClass`: dtype and sizes in buckets) is compiled
//! on a device with tuning on, each matmul kernel the adapter can run is
//! timed on a product of that class, and the fastest generates that
//! class's products from then on. Winners are cached on disk per class
//! and adapter, like the adapter-wide tunings (`tuned`), so later runs
//! read them and time nothing. A process starts timing a class only
//! while it has spent less than a budget of seconds timing classes (a
//! timing under way may run past it, one per thread compiling); a class
//! met after that, whose winner neither the process nor the cache has,
//! keeps the device's kernel (and is timed by a later run). Cached
//! winners are used whatever the budget.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::Tuning;
use super::matmul::{ClassWorkload, candidates, choice_of, class_trial};
use crate::config::{Autotune, DeviceConfig, MatmulChoice};
use crate::graph::op::Op;
use crate::graph::{GKind, GraphKey};
use crate::kernel::{
    CPU_TIMED_MACS, GPU_TIMED_MACS, MatmulClass, MatmulKernel, Precedents, Strategy, Target,
};
use crate::metrics::Metrics;
use crate::runtime::gpu::GpuContext;

/// Seconds of timing a process may spend on classes in `mode`: a few
/// for `fast` (the default on GPUs), a minute for `full`.
fn budget(mode: Autotune) -> Duration {
    Duration::from_secs(if mode == Autotune::Full { 60 } else { 5 })
}

/// Seconds this process has spent timing classes, on every device.
static SPENT: Mutex<Duration> = Mutex::new(Duration::ZERO);

/// One device's per-class choices and what it needs to make more.
pub(crate) struct ClassTuner {
    ctx: Arc<GpuContext>,
    mode: Autotune,
    /// The kernel each class seen so far generates with on this device:
    /// tuned, read from the cache, or the device's own where the budget
    /// was spent (kept, so that the device never changes a class's
    /// kernel; devices of one process agree on every class tuned, which
    /// they share through the tunings' memo).
    chosen: BTreeMap<MatmulClass, MatmulKernel>,
    /// The device's tunings, where each class's is added for its report.
    tunings: Arc<Mutex<Vec<Tuning>>>,
    metrics: Arc<Metrics>,
}

impl ClassTuner {
    /// The tuner of a device made with `config` on `ctx`, or `None` where
    /// the config names a matmul kernel or tuning is off.
    pub fn new(
        ctx: &Arc<GpuContext>,
        config: &DeviceConfig,
        tunings: Arc<Mutex<Vec<Tuning>>>,
        metrics: Arc<Metrics>,
    ) -> Option<ClassTuner> {
        let mode = super::mode(ctx, config);
        (config.matmul.is_none() && mode != Autotune::Off).then(|| ClassTuner {
            ctx: ctx.clone(),
            mode,
            chosen: BTreeMap::new(),
            tunings,
            metrics,
        })
    }

    /// The kernel of each class met so far.
    pub fn chosen(&self) -> &BTreeMap<MatmulClass, MatmulKernel> {
        &self.chosen
    }

    /// Whether every matmul class of `key` that `target_for` would tune
    /// has its kernel already (so that it times nothing).
    pub fn knows_classes_of(&self, key: &GraphKey, precedents: Option<&Precedents>) -> bool {
        let lent = |node| {
            precedents
                .and_then(|p| p.get(node))
                .is_some_and(|s| matches!(s, Strategy::Matmul { .. }))
        };
        matmul_classes(key, &lent)
            .iter()
            .all(|c| self.chosen.contains_key(c))
    }

    /// `target` with a kernel for the class of every matmul in `key`,
    /// each class not seen before tuned first (or read from the cache);
    /// matmuls whose trace site lends them a kernel (`precedents`, see
    /// `codegen::roots::matmul_kind`) need none and tune nothing.
    pub fn target_for(
        &mut self,
        target: &Target,
        key: &GraphKey,
        precedents: Option<&Precedents>,
    ) -> Target {
        let mut by_class = BTreeMap::new();
        let lent = |node| {
            precedents
                .and_then(|p| p.get(node))
                .is_some_and(|s| matches!(s, Strategy::Matmul { .. }))
        };
        for class in matmul_classes(key, &lent) {
            let kernel = match self.chosen.get(&class) {
                Some(&k) => k,
                None => {
                    let k = self.choose(target, class);
                    self.chosen.insert(class, k);
                    k
                }
            };
            by_class.insert(class, kernel);
        }
        Target {
            matmul_by_class: Some(by_class),
            ..target.clone()
        }
    }

    /// The kernel for `class`: its tuning's winner (this process's, the
    /// cache directory's, or timed now while the budget lasts), or
    /// `target`'s own where the budget is spent or the winner cannot be
    /// generated.
    fn choose(&self, target: &Target, class: MatmulClass) -> MatmulKernel {
        let Some(tuning) = self.tune(target, class) else {
            log::info!(
                "autotune: matmul [{class}] keeps the device's kernel (the {:?} budget of {:.0} s is spent)",
                self.mode,
                budget(self.mode).as_secs_f64()
            );
            return target.matmul;
        };
        *SPENT.lock().unwrap_or_else(|e| e.into_inner()) += Duration::from_secs_f64(tuning.seconds);
        if !tuning.from_cache {
            self.metrics
                .record("autotune", Duration::from_secs_f64(tuning.seconds));
        }
        log::info!("autotune {tuning}");
        let kernel = MatmulChoice::named(&tuning.winner).map(|c| self.ctx.target(Some(c)).matmul);
        if let Ok(mut all) = self.tunings.lock() {
            all.push(tuning);
        }
        kernel.unwrap_or(target.matmul)
    }

    /// The tuning of `class` (`target`'s kernel first, then every other
    /// kernel the adapter can run): this process's or the cache's, else
    /// timed now if the process has budget left, else `None`.
    fn tune(&self, target: &Target, class: MatmulClass) -> Option<Tuning> {
        let own = choice_of(target.matmul);
        let mut choices = vec![own];
        choices.extend(
            candidates(&self.ctx, class.dtype)
                .into_iter()
                .filter(|&c| c != own),
        );
        let named: Vec<(String, Target)> = choices
            .into_iter()
            .map(|c| (c.name().to_string(), self.ctx.target(Some(c))))
            .collect();
        let max_macs = if self.ctx.info.device_type == wgpu::DeviceType::Cpu {
            CPU_TIMED_MACS
        } else {
            GPU_TIMED_MACS
        };
        let work = ClassWorkload {
            class: Some(class),
            dtype: class.dtype,
            sizes: class.timed_sizes(max_macs),
        };
        let budget = budget(self.mode);
        let may_time = || *SPENT.lock().unwrap_or_else(|e| e.into_inner()) < budget;
        let tuning = super::tune_targets_if(
            &self.ctx,
            ("matmul", self.mode),
            &named,
            &[work],
            class_trial,
            &may_time,
        )?;
        Some(Tuning {
            class: Some(class.to_string()),
            ..tuning
        })
    }
}

/// The classes of the matmuls in `key` but those `skip` names, each once,
/// in node order.
pub(crate) fn matmul_classes(key: &GraphKey, skip: &dyn Fn(usize) -> bool) -> Vec<MatmulClass> {
    let mut classes = Vec::new();
    for (i, node) in key.nodes.iter().enumerate() {
        if let GKind::Op { op: Op::Matmul, .. } = &node.kind
            && !skip(i)
        {
            let class = crate::codegen::matmul_class(key, i);
            if !classes.contains(&class) {
                classes.push(class);
            }
        }
    }
    classes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Graph;
    use crate::{Device, Tensor};

    #[test]
    fn a_graph_lists_each_matmul_class_once() {
        let dev = Device::cpu();
        let t = |shape: &[usize]| {
            let n = shape.iter().product();
            Tensor::from_vec(vec![0.5f32; n], shape, &dev).expect("input")
        };
        let w = t(&[784, 128]);
        let products = [
            t(&[64, 784]).matmul(&w),
            t(&[50, 784]).matmul(&w),
            t(&[784, 64]).matmul(&t(&[64, 128])),
            t(&[12, 64, 16]).matmul(&t(&[12, 16, 64])),
        ];
        let nodes: Vec<_> = products.iter().map(Tensor::node).collect();
        let key = Graph::collect(&nodes, true).key;
        let classes = matmul_classes(&key, &|_| false);
        let text: Vec<String> = classes.iter().map(|c| c.to_string()).collect();
        assert_eq!(
            text,
            [
                "f32 1 x 17..64 x 257..1024 x 65..256",
                "f32 1 x 257..1024 x 17..64 x 65..256",
                "f32 5..16 x 17..64 x 5..16 x 17..64",
            ]
        );
    }
}
