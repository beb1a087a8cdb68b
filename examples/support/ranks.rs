//! `--data-parallel` for the examples: this process's place in an MPI job.

use lazywgpu::distributed::{self, ProcessGroup};

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
