//! All-reduce bandwidth between ranks, three ways, on the buffer sizes of
//! `tools/mpi_allreduce.c` (Open MPI's `MPI_Allreduce` alone, the
//! baseline): `ProcessGroup::all_reduce_vec` on host data (MPI behind
//! lazywgpu's collective thread: what a data-parallel bucket pays once it
//! is on the host), and `ProcessGroup::all_reduce` of a tensor on the
//! device (readback, all-reduce, upload: what one blocking call on a
//! tensor pays). Each figure is the median of 50 calls, each after a
//! barrier, as rank 0 saw it.
//!
//! ```sh
//! cargo build --release --features mpi --example allreduce
//! mpirun -np 2 target/release/examples/allreduce
//! tools/allreduce-bench.sh     # both, and the table
//! ```

#[path = "support/cli.rs"]
mod cli;

use std::time::Instant;

use clap::Parser;
use lazywgpu::Tensor;
use lazywgpu::distributed::{self, ReduceOp};

/// All-reduce time per buffer size on host data and on device tensors, as
/// rank 0 of an MPI job sees it (run under mpirun).
#[derive(Parser, Debug)]
struct Args {
    #[command(flatten)]
    device: cli::DeviceArg,
}

const ITERS: usize = 50;
const WARMUP: usize = 5;

/// The median time of `call(setup())` over `ITERS` calls (after
/// `WARMUP`), each after `barrier()`; `setup` is not timed.
fn median_us<T>(
    mut setup: impl FnMut() -> T,
    mut call: impl FnMut(T) -> lazywgpu::Result<()>,
    barrier: impl Fn(),
) -> lazywgpu::Result<f64> {
    let mut times = Vec::with_capacity(ITERS);
    for it in 0..WARMUP + ITERS {
        let input = setup();
        barrier();
        let t0 = Instant::now();
        call(input)?;
        if it >= WARMUP {
            times.push(t0.elapsed().as_secs_f64() * 1e6);
        }
    }
    times.sort_by(f64::total_cmp);
    Ok(times[ITERS / 2])
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Args = cli::parse();
    let group = distributed::init()?;
    let dev = args.device.open()?;
    let rank = group.rank();
    if rank == 0 {
        println!("# {} ranks, device {}", group.world_size(), dev.name());
        println!("# bytes host_us tensor_us");
    }
    let barrier = || group.barrier().expect("barrier");
    let mut bytes = 4096usize;
    while bytes <= 64 << 20 {
        let n = bytes / 4;
        let data: Vec<f32> = (0..n)
            .map(|i| (i % 1000) as f32 * 0.001 + rank as f32)
            .collect();
        let host = median_us(
            || data.clone(),
            |d| group.all_reduce_vec(d, ReduceOp::Sum).map(|_| ()),
            barrier,
        )?;
        let t = Tensor::from_vec(data.clone(), [n], &dev)?;
        let tensor = median_us(
            || (),
            |()| {
                group.all_reduce(&t, ReduceOp::Sum)?;
                // The upload is queued: wait for it, as the next use would.
                dev.mark_step()?;
                dev.wait()
            },
            barrier,
        )?;
        if rank == 0 {
            println!("{bytes} {host:.1} {tensor:.1}");
        }
        bytes *= 4;
    }
    Ok(())
}
