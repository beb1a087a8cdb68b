//! Kernel choices one device hands another, so that both generate the
//! same kernels: under data parallelism rank 0's device tunes (or reads
//! its winners from its cache) and every rank pins its choices
//! (`distributed::DataParallel::new`), where each rank tuning for itself
//! could pick other kernels (another machine's timings, another cache),
//! and ranks would then round their gradients differently.
//!
//! The choices travel as a line of text (`KernelChoices::text`), which a
//! rank without a GPU sends empty; each rank rebuilds the kernels for its
//! own adapter from the names (`KernelChoices::target`), where a kernel
//! the adapter cannot run falls back as a named one does (the lane kernel
//! to the blocked one). What follows from an adapter's own facts (its
//! binding limits, its loop limit, where reductions, scans and sorts are
//! split, rows per workgroup) stays each rank's: ranks on adapters of one
//! kind run the same kernels, ranks on different kinds of adapter the
//! same tuned choices.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::matmul::choice_of;
use crate::config::MatmulChoice;
use crate::dtype::DType;
use crate::kernel::{MatmulClass, MatmulKernel, ReduceRule, Target};
use crate::runtime::gpu::GpuContext;

/// The kernel choices a device made: its matmul kernel, the rule by
/// which reductions pick theirs, and the kernel of each class of matmul
/// sizes tuned so far.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KernelChoices {
    pub matmul: MatmulChoice,
    pub reduce_rule: ReduceRule,
    pub classes: BTreeMap<MatmulClass, MatmulChoice>,
}

impl KernelChoices {
    /// The choices `target` holds, with `classes` (a class tuner's).
    pub fn of(target: &Target, classes: &BTreeMap<MatmulClass, MatmulKernel>) -> KernelChoices {
        KernelChoices {
            matmul: choice_of(target.matmul),
            reduce_rule: target.reduce_rule,
            classes: (classes.iter())
                .map(|(&class, &kernel)| (class, choice_of(kernel)))
                .collect(),
        }
    }

    /// One line: `matmul=lanes reduce=tree-from-4096` and a
    /// `class=f32/0/5/4/3:tiled` per class (dtype, then the buckets of
    /// batch, rows, contraction and columns).
    pub fn text(&self) -> String {
        let mut text = format!(
            "matmul={} reduce={}",
            self.matmul.name(),
            self.reduce_rule.name()
        );
        for (class, choice) in &self.classes {
            let MatmulClass {
                dtype,
                batch,
                m,
                k,
                n,
            } = class;
            let _ = write!(text, " class={dtype}/{batch}/{m}/{k}/{n}:{}", choice.name());
        }
        text
    }

    /// The choices `text` (as `text` writes it) holds; `None` where any
    /// part is not one.
    pub fn parse(text: &str) -> Option<KernelChoices> {
        let mut words = text.split_whitespace();
        let matmul = MatmulChoice::named(words.next()?.strip_prefix("matmul=")?)?;
        let reduce_rule = ReduceRule::parse(words.next()?.strip_prefix("reduce=")?)?;
        let mut classes = BTreeMap::new();
        for word in words {
            let (class, choice) = word.strip_prefix("class=")?.split_once(':')?;
            let mut parts = class.split('/');
            let dtype: DType = parts.next()?.parse().ok()?;
            let mut bucket = || parts.next()?.parse::<u8>().ok();
            let class = MatmulClass {
                dtype,
                batch: bucket()?,
                m: bucket()?,
                k: bucket()?,
                n: bucket()?,
            };
            if parts.next().is_some() {
                return None;
            }
            classes.insert(class, MatmulChoice::named(choice)?);
        }
        Some(KernelChoices {
            matmul,
            reduce_rule,
            classes,
        })
    }

    /// `target` (made for `ctx`'s adapter) generating these choices, each
    /// kernel as this adapter builds the one named (the blocked kernel
    /// where it cannot run the lane kernel, say), every matmul class's
    /// kernel fixed (none tuned).
    pub fn target(&self, ctx: &GpuContext, target: &Target) -> Target {
        let kernel = |choice: MatmulChoice| ctx.target(Some(choice)).matmul;
        Target {
            matmul: kernel(self.matmul),
            reduce_rule: self.reduce_rule,
            matmul_by_class: Some(
                (self.classes.iter())
                    .map(|(&class, &choice)| (class, kernel(choice)))
                    .collect(),
            ),
            ..target.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(dtype: DType, m: u8) -> MatmulClass {
        MatmulClass {
            dtype,
            batch: 0,
            m,
            k: 4,
            n: 3,
        }
    }

    #[test]
    fn choices_read_back_from_their_text() {
        let choices = KernelChoices {
            matmul: MatmulChoice::Lanes,
            reduce_rule: ReduceRule {
                tree_from: 4096,
                by_fours: false,
            },
            classes: BTreeMap::from([
                (class(DType::F32, 5), MatmulChoice::Tiled),
                (class(DType::F16, 2), MatmulChoice::Coop),
            ]),
        };
        let text = choices.text();
        assert_eq!(
            text,
            "matmul=lanes reduce=tree-from-4096-no-fours class=f32/0/5/4/3:tiled class=f16/0/2/4/3:coop"
        );
        assert_eq!(KernelChoices::parse(&text), Some(choices.clone()));
        let none = KernelChoices {
            classes: BTreeMap::new(),
            ..choices
        };
        assert_eq!(KernelChoices::parse(&none.text()), Some(none));
    }

    #[test]
    fn text_that_is_not_choices_is_refused() {
        for text in [
            "",
            "matmul=lanes",
            "matmul=fast reduce=tree-from-256",
            "reduce=tree-from-256 matmul=lanes",
            "matmul=lanes reduce=tree-from-0",
            "matmul=lanes reduce=tree-from-256 class=f32/0/5/4:tiled",
            "matmul=lanes reduce=tree-from-256 class=f32/0/5/4/3/2:tiled",
            "matmul=lanes reduce=tree-from-256 class=f99/0/5/4/3:tiled",
            "matmul=lanes reduce=tree-from-256 class=f32/0/5/4/3:quick",
            "matmul=lanes reduce=tree-from-256 extra",
        ] {
            assert_eq!(KernelChoices::parse(text), None, "{text:?}");
        }
    }
}
