//! Data parallelism across processes under MPI (feature `mpi`): each test
//! starts `mpirun -np 2` on this test binary, which runs one of the
//! `rank_*` functions below on both ranks (they are `#[ignore]`d so that a
//! plain run does not start them outside MPI). Every job has a time limit
//! far past what it takes (minutes for seconds of work): a hang fails the
//! test instead of stalling CI, and no outcome depends on the machine's
//! speed.
//!
//! `.ci/run` runs this file with `cargo test --release --features mpi
//! --test distributed_mpi`; it needs `mpirun` (Debian's `openmpi-bin`).

mod common;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::parity::{self, Model};
use lazywgpu::distributed::{self, ProcessGroup, ReduceOp};
use lazywgpu::{Device, Tensor};

/// What a job printed and how it ended.
struct Job {
    success: bool,
    output: String,
}

/// Runs `rank_fn` (a test of this binary) on two ranks under `mpirun`,
/// killing the job past `limit`.
fn mpirun(rank_fn: &str, env: &[(&str, &str)], limit: Duration) -> Job {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut cmd = Command::new("mpirun");
    cmd.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "--bind-to",
        "none",
        "--tag-output",
        "-np",
        "2",
    ])
    .arg(exe)
    .args([
        "--exact",
        rank_fn,
        "--include-ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    // Containers often forbid the cross-memory attach that Open MPI's
    // shared-memory transport tries first.
    .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
    .env("LAZYWGPU_REQUIRE_GPU", "1")
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .expect("mpirun (Debian: apt-get install openmpi-bin libopenmpi-dev)");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for mpirun") {
            break Some(status);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = format!(
        "{}{}",
        out_reader.join().unwrap_or_default(),
        err_reader.join().unwrap_or_default()
    );
    assert!(
        status.is_some(),
        "{rank_fn}: the job was still running after {limit:?} (a hang); output:\n{output}"
    );
    Job {
        success: status.is_some_and(|s| s.success()),
        output,
    }
}

#[track_caller]
fn assert_job_passed(job: &Job, what: &str) {
    assert!(job.success, "{what} failed under mpirun:\n{}", job.output);
    // Both ranks ran to the end (see `passed`).
    for rank in 0..2 {
        assert!(
            job.output.contains(&format!("rank {rank} of 2 passed")),
            "{what}: rank {rank} did not report passing:\n{}",
            job.output
        );
    }
}

/// Printed by a rank function that reached its end.
fn passed(g: &ProcessGroup) {
    println!("rank {} of {} passed", g.rank(), g.world_size());
}

#[test]
fn collectives_across_two_processes() {
    let job = mpirun("rank_collectives", &[], Duration::from_secs(120));
    assert_job_passed(&job, "collectives");
}

#[test]
fn two_ranks_with_batch_32_match_one_process_with_batch_64_mlp() {
    let job = mpirun("rank_parity_mlp", &[], Duration::from_secs(300));
    assert_job_passed(&job, "MLP parity");
}

#[test]
fn two_ranks_with_batch_32_match_one_process_with_batch_64_gpt() {
    let job = mpirun("rank_parity_gpt", &[], Duration::from_secs(300));
    assert_job_passed(&job, "GPT parity");
}

#[test]
fn a_rank_that_panics_ends_the_job_with_its_error() {
    let job = mpirun("rank_1_panics", &[], Duration::from_secs(120));
    assert!(!job.success, "the job succeeded:\n{}", job.output);
    assert!(
        job.output.contains("rank 1 fails on purpose")
            && job
                .output
                .contains("rank 1 of 2 panicked; aborting the MPI job"),
        "{}",
        job.output
    );
}

#[test]
fn a_killed_rank_ends_the_job() {
    // The collective timeout is the backstop; mpirun notices the death
    // first. The output says which ended the job (no bound on how long it
    // took: the job's limit is the hang guard).
    let job = mpirun(
        "rank_1_is_killed",
        &[("LAZYWGPU_COLLECTIVE_TIMEOUT", "30")],
        Duration::from_secs(120),
    );
    assert!(!job.success, "the job succeeded:\n{}", job.output);
    assert!(
        job.output.contains("signal 9") || job.output.contains("did not complete within"),
        "{}",
        job.output
    );
}

#[test]
fn a_rank_that_stops_calling_collectives_times_out_the_others() {
    let job = mpirun(
        "rank_1_stalls",
        &[("LAZYWGPU_COLLECTIVE_TIMEOUT", "3")],
        Duration::from_secs(120),
    );
    assert!(!job.success, "the job succeeded:\n{}", job.output);
    assert!(
        job.output
            .contains("rank 0 of 2: all_reduce: all_reduce did not complete within 3s"),
        "{}",
        job.output
    );
}

// ---- What each rank runs (under mpirun only) ----

fn group() -> ProcessGroup {
    let g = distributed::init().expect("MPI init");
    assert_eq!(g.world_size(), 2, "these functions expect mpirun -np 2");
    g
}

#[test]
#[ignore = "runs on each rank under mpirun (see collectives_across_two_processes)"]
fn rank_collectives() {
    let g = group();
    let dev = common::gpu().expect("GPU");
    let rank = g.rank();
    // all_reduce: NaN and infinities as PyTorch keeps them.
    let mine: Vec<f32> = (0..1000).map(|i| (i * (rank + 1)) as f32 * 0.25).collect();
    let t = Tensor::from_vec(mine, [1000], &dev).unwrap();
    g.all_reduce(&t, ReduceOp::Sum).unwrap();
    let want: Vec<f32> = (0..1000).map(|i| (i * 3) as f32 * 0.25).collect();
    assert_eq!(t.to_vec::<f32>().unwrap(), want);
    let special = [f32::NAN, 1.0, f32::INFINITY, -1.0];
    let t = Tensor::from_vec(vec![special[rank], special[rank + 2]], [2], &dev).unwrap();
    g.all_reduce(&t, ReduceOp::Max).unwrap();
    let got = t.to_vec::<f32>().unwrap();
    assert!(got[0].is_nan() && got[1] == f32::INFINITY, "{got:?}");
    let t = Tensor::from_vec(vec![rank as f32; 3], [3], &dev).unwrap();
    g.all_reduce(&t, ReduceOp::Mean).unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap(), vec![0.5; 3]);
    // broadcast of an i32 tensor from rank 1, then a barrier.
    let t = Tensor::from_vec(vec![rank as i32 + 40; 4], [4], &dev).unwrap();
    g.broadcast(&t, 1).unwrap();
    assert_eq!(t.to_vec::<i32>().unwrap(), vec![41; 4]);
    g.barrier().unwrap();
    passed(&g);
}

/// Rank 0 also trains the single-process reference and compares; rank 1
/// compares its parameters with rank 0's (broadcast).
fn rank_parity(model: Model) {
    let g = group();
    let dev = common::gpu().expect("GPU");
    let rank = g.rank();
    let single = (rank == 0).then(|| parity::train(model, &Device::gpu().unwrap(), None));
    let trained = parity::train(model, &dev, Some(g));
    // Rank 1's parameters are rank 0's, bit for bit.
    let ddp = trained.ddp.as_ref().expect("a data-parallel run");
    for (i, mine) in trained.params.iter().enumerate() {
        let root = Tensor::from_vec(mine.clone(), [mine.len()], &dev).unwrap();
        ddp.group().broadcast(&root, 0).unwrap();
        assert_eq!(
            &root.to_vec::<f32>().unwrap(),
            mine,
            "parameter {i}: rank {rank} differs from rank 0"
        );
    }
    if let Some(single) = single {
        parity::assert_parity(model, &single, std::slice::from_ref(&trained));
    }
    passed(ddp.group());
}

#[test]
#[ignore = "runs on each rank under mpirun"]
fn rank_parity_mlp() {
    rank_parity(Model::Mlp);
}

#[test]
#[ignore = "runs on each rank under mpirun"]
fn rank_parity_gpt() {
    rank_parity(Model::Gpt);
}

/// Three steps of all-reduces, then `fail` on rank 1 while rank 0 goes on.
fn rank_fails_after_three_steps(fail: impl FnOnce()) {
    let g = group();
    let mut fail = Some(fail);
    for step in 0..1000 {
        if step == 3 && g.rank() == 1 {
            if let Some(f) = fail.take() {
                f();
            }
        }
        g.all_reduce_vec(vec![1.0; 1024], ReduceOp::Sum).unwrap();
    }
    panic!(
        "rank {} finished 1000 all-reduces that should have failed",
        g.rank()
    );
}

#[test]
#[ignore = "runs on each rank under mpirun"]
fn rank_1_panics() {
    rank_fails_after_three_steps(|| panic!("rank 1 fails on purpose"));
}

#[test]
#[ignore = "runs on each rank under mpirun"]
fn rank_1_is_killed() {
    rank_fails_after_three_steps(|| {
        let pid = std::process::id().to_string();
        let _ = Command::new("kill").args(["-9", &pid]).status();
        std::thread::sleep(Duration::from_secs(600));
    });
}

#[test]
#[ignore = "runs on each rank under mpirun"]
fn rank_1_stalls() {
    rank_fails_after_three_steps(|| std::thread::sleep(Duration::from_secs(600)));
}
