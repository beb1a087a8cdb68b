//! `--data-parallel` for the examples: the backward pass with the
//! gradients averaged over ranks (joining the MPI job is
//! `cli::DataParallelArgs::join`).

use lazywgpu::Tensor;
use lazywgpu::amp::GradScaler;
use lazywgpu::distributed::{DataParallel, SyncStats};

/// `loss.backward()` (of the scaled loss with an f16 `scaler`), then, with
/// `ddp`, the gradients replaced by their mean over ranks (its figures
/// added to `sync`).
pub fn backward(
    loss: &Tensor,
    scaler: Option<&GradScaler>,
    ddp: Option<&mut DataParallel>,
    sync: &mut SyncStats,
) -> lazywgpu::Result<()> {
    match scaler {
        Some(scaler) => scaler.scale(loss).backward(),
        None => loss.backward(),
    }
    if let Some(ddp) = ddp {
        sync.accumulate(&ddp.sync_gradients()?);
    }
    Ok(())
}
