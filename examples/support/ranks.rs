//! `--data-parallel` for the examples: this process's place in an MPI job,
//! and the backward pass with the gradients averaged over ranks.

use lazywgpu::Tensor;
use lazywgpu::amp::GradScaler;
use lazywgpu::distributed::{self, DataParallel, ProcessGroup, SyncStats};

/// The MPI group when `data_parallel` is set (the process must run under
/// `mpirun` and the example be built with `--features mpi`), with this
/// process's rank and the number of ranks; `(None, 0, 1)` otherwise.
pub fn join(data_parallel: bool) -> lazywgpu::Result<(Option<ProcessGroup>, usize, usize)> {
    if !data_parallel {
        return Ok((None, 0, 1));
    }
    let group = distributed::init()?;
    let (rank, ranks) = (group.rank(), group.world_size());
    Ok((Some(group), rank, ranks))
}

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
