//! Grad mode: a per-thread switch that `no_grad` turns off, so optimiser
//! updates and evaluation record no grad functions.

use std::cell::Cell;

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// Whether ops on this thread record grad functions now.
pub fn is_grad_enabled() -> bool {
    GRAD_ENABLED.with(|g| g.get())
}

/// Turns grad mode off on this thread until dropped (then restores what
/// was there before), as PyTorch's `torch.no_grad()` context.
pub struct NoGradGuard {
    previous: bool,
}

impl NoGradGuard {
    /// Turns grad mode off.
    #[allow(clippy::new_without_default)]
    pub fn new() -> NoGradGuard {
        let previous = GRAD_ENABLED.with(|g| g.replace(false));
        NoGradGuard { previous }
    }
}

impl Drop for NoGradGuard {
    fn drop(&mut self) {
        GRAD_ENABLED.with(|g| g.set(self.previous));
    }
}

/// Runs `f` with grad mode off: nothing it records needs or gets gradients.
pub fn no_grad<T>(f: impl FnOnce() -> T) -> T {
    let _guard = NoGradGuard::new();
    f()
}

/// Turns grad mode on on this thread until dropped (then restores what
/// was there before): activation checkpointing records its recomputed
/// forward from inside a backward rule, which runs with grad mode off.
pub(crate) struct EnableGradGuard {
    previous: bool,
}

impl EnableGradGuard {
    /// Turns grad mode on.
    pub(crate) fn new() -> EnableGradGuard {
        let previous = GRAD_ENABLED.with(|g| g.replace(true));
        EnableGradGuard { previous }
    }
}

impl Drop for EnableGradGuard {
    fn drop(&mut self) {
        GRAD_ENABLED.with(|g| g.set(self.previous));
    }
}
