//! What a GPU device generates kernels with: the report of its adapter
//! and choices, and the choices it hands another device or takes from
//! one (data parallelism: rank 0's, `tune::pinned`).

use std::sync::MutexGuard;

use super::{Backend, Device};
use crate::runtime::gpu::GpuCaches;
use crate::tune::pinned::KernelChoices;

impl Device {
    /// The adapter this device runs on, its limits and the kernels the
    /// library chose for it (`None` on the CPU backend).
    pub fn adapter(&self) -> Option<crate::AdapterReport> {
        match &self.inner.backend {
            Backend::Gpu(ctx, target) => {
                let tunings = self
                    .inner
                    .tuning
                    .lock()
                    .map(|t| t.clone())
                    .unwrap_or_default();
                let caches = self.gpu_caches();
                let pinned = caches.pinned_target();
                let mut report = crate::AdapterReport::of(ctx, pinned.unwrap_or(target), tunings);
                report.kernels_pinned = pinned.is_some();
                Some(report)
            }
            Backend::Cpu => None,
        }
    }

    /// The kernel choices this device generates with (`None` on the CPU
    /// backend): what `pin_kernel_choices` gives another device.
    pub(crate) fn kernel_choices(&self) -> Option<KernelChoices> {
        match &self.inner.backend {
            Backend::Gpu(_, target) => Some(self.gpu_caches().kernel_choices(target)),
            Backend::Cpu => None,
        }
    }

    /// Generates with `choices` (another device's) from now on, tuning
    /// no class of matmul sizes (on the CPU backend, nothing).
    pub(crate) fn pin_kernel_choices(&self, choices: KernelChoices) {
        if let Backend::Gpu(ctx, target) = &self.inner.backend {
            self.gpu_caches().pin(ctx, choices, target);
        }
    }

    /// The device's compiled work, locked (a panic that poisoned the lock
    /// left nothing half-changed that later compiles read).
    pub(super) fn gpu_caches(&self) -> MutexGuard<'_, GpuCaches> {
        (self.inner.gpu_caches.lock()).unwrap_or_else(|e| e.into_inner())
    }
}
