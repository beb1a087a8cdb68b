//! Process groups and data parallelism with ranks as threads of this
//! process (`ProcessGroup::local`): collectives against plain loops, and
//! two ranks with batch 32 each against one process with batch 64 after
//! 20 SGD steps, for the MNIST MLP and a GPT. The same checks across
//! processes under `mpirun` are in `tests/distributed_mpi.rs`.

mod common;

use std::sync::Barrier;
use std::time::Duration;

use common::parity::{self, Model};
use lazywgpu::distributed::{DataParallel, ProcessGroup, ReduceOp};
use lazywgpu::{DType, Device, DeviceConfig, Error, MatmulChoice, Tensor};

/// Runs `f(rank, group)` on one thread per rank and returns the results
/// in rank order.
fn on_ranks<T: Send>(world: usize, f: impl Fn(usize, ProcessGroup) -> T + Sync) -> Vec<T> {
    let groups = ProcessGroup::local(world).unwrap();
    std::thread::scope(|s| {
        let handles: Vec<_> = groups
            .into_iter()
            .enumerate()
            .map(|(rank, g)| {
                let f = &f;
                s.spawn(move || f(rank, g))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Each rank's values: rank r's element i, with NaN and infinities on
/// some ranks.
fn rank_values(rank: usize, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| match (i, rank) {
            (0, 1) => f32::NAN,
            (1, 0) => f32::INFINITY,
            _ => ((i * 7 + rank * 13) % 23) as f32 * 0.37 - 4.0,
        })
        .collect()
}

#[test]
fn all_reduce_matches_a_plain_loop_for_each_op() {
    let devices = common::devices();
    let world = 3;
    let n = 1000;
    for dev in &devices {
        for op in [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Min] {
            let results = on_ranks(world, |rank, g| {
                let t = Tensor::from_vec(rank_values(rank, n), [10, 100], dev).unwrap();
                g.all_reduce(&t, op).unwrap();
                assert_eq!(t.shape(), &[10, 100]);
                t.to_vec::<f32>().unwrap()
            });
            let expected: Vec<f32> = (0..n)
                .map(|i| {
                    let v: Vec<f64> = (0..world).map(|r| rank_values(r, n)[i] as f64).collect();
                    if v.iter().any(|x| x.is_nan()) {
                        return f32::NAN;
                    }
                    (match op {
                        ReduceOp::Sum => v.iter().sum::<f64>(),
                        ReduceOp::Mean => v.iter().sum::<f64>() / world as f64,
                        ReduceOp::Max => v.iter().cloned().fold(f64::MIN, f64::max),
                        ReduceOp::Min => v.iter().cloned().fold(f64::MAX, f64::min),
                    }) as f32
                })
                .collect();
            for (rank, got) in results.iter().enumerate() {
                common::assert_close(
                    got,
                    &expected,
                    1e-6,
                    1e-6,
                    &format!("{op:?} on rank {rank} ({dev:?})"),
                );
                // Every rank holds the same bits.
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(got),
                    bits(&results[0]),
                    "{op:?}: rank {rank} differs from rank 0"
                );
            }
        }
    }
}

#[test]
fn broadcast_copies_the_root_value_of_any_dtype_and_view() {
    // Without an adapter, on the CPU backend.
    let dev = common::gpu().unwrap_or_else(Device::cpu);
    let results = on_ranks(2, |rank, g| {
        // i32, f16 and a non-contiguous f32 view.
        let ints = Tensor::from_vec(vec![rank as i32 * 10 - 7; 5], [5], &dev).unwrap();
        let halves = Tensor::from_vec(vec![0.1f32 + rank as f32; 6], [2, 3], &dev)
            .unwrap()
            .half();
        let base = Tensor::from_vec(
            (0..6).map(|i| (i + 100 * rank) as f32).collect(),
            [2, 3],
            &dev,
        )
        .unwrap();
        let view = base.t();
        g.broadcast(&ints, 1).unwrap();
        g.broadcast(&halves, 1).unwrap();
        g.broadcast(&view, 1).unwrap();
        g.barrier().unwrap();
        assert_eq!(halves.dtype(), DType::F16);
        (
            ints.to_vec::<i32>().unwrap(),
            halves.to_f32_vec().unwrap(),
            view.to_vec::<f32>().unwrap(),
        )
    });
    for (ints, halves, view) in results {
        assert_eq!(ints, vec![3; 5]);
        assert_eq!(halves, vec![half::f16::from_f32(1.1).to_f32(); 6]);
        assert_eq!(view, vec![100.0, 103.0, 101.0, 104.0, 102.0, 105.0]);
    }
}

#[test]
fn a_rank_that_leaves_or_calls_another_collective_fails_the_others_instead_of_hanging() {
    // A timeout far past the test's work: rank 0 must learn that rank 1
    // left from the group itself, not from its clock (a timeout's error
    // would not name the rank that left).
    let results = on_ranks(2, |rank, g| {
        g.set_timeout(Duration::from_secs(60));
        if rank == 1 {
            drop(g); // leaves without a collective
            return None;
        }
        Some(g.all_reduce_vec(vec![1.0; 4], ReduceOp::Sum).unwrap_err())
    });
    let err = results[0].as_ref().unwrap();
    assert!(matches!(err, Error::Collective { rank: 0, .. }), "{err}");
    assert!(err.to_string().contains("rank 1 left the group"), "{err}");

    let results = on_ranks(2, |rank, g| {
        if rank == 0 {
            g.barrier().unwrap_err()
        } else {
            g.all_reduce_vec(vec![1.0], ReduceOp::Sum).unwrap_err()
        }
    });
    for err in &results {
        assert!(
            err.to_string().contains("while another rank called"),
            "{err}"
        );
    }

    // A rank that never calls: the other times out. Rank 1 stays in the
    // group until rank 0 has its error (not for a fixed time, which a
    // slow machine could outlast before rank 0 even calls).
    let rank_0_has_failed = Barrier::new(2);
    let results = on_ranks(2, |rank, g| {
        g.set_timeout(Duration::from_millis(300));
        if rank == 1 {
            rank_0_has_failed.wait();
            drop(g);
            return None;
        }
        let err = g.barrier().unwrap_err();
        rank_0_has_failed.wait();
        Some(err)
    });
    let err = results[0].as_ref().unwrap();
    assert!(err.to_string().contains("timed out"), "{err}");
}

fn parity_on(model: Model, devices: [Device; 2]) {
    let single = parity::train(model, &devices[0], None);
    let ranks = on_ranks(2, |rank, g| parity::train(model, &devices[rank], Some(g)));
    parity::assert_parity(model, &single, &ranks);
    // The ranks apply the same averaged gradients to the same parameters.
    if devices[0].is_gpu() == devices[1].is_gpu() {
        assert_eq!(
            ranks[0].params, ranks[1].params,
            "{model:?}: the ranks diverged"
        );
    }
    for trained in &ranks {
        let sync = &trained.sync;
        assert_eq!(sync.buckets, parity::STEPS * trained.buckets.len());
        assert_eq!(
            sync.bytes,
            parity::STEPS * 4 * trained.buckets.iter().sum::<usize>()
        );
        assert!(sync.communication > Duration::ZERO && sync.hidden <= sync.communication);
    }
    if let Model::Mlp = model {
        // The first layer's weight alone, then the rest.
        assert_eq!(ranks[0].buckets, vec![10 + 1280 + 128, 784 * 128]);
    }
}

#[test]
fn two_gpu_ranks_with_batch_32_match_one_process_with_batch_64_mlp() {
    let (Some(a), Some(b)) = (common::gpu(), common::gpu()) else {
        return;
    };
    parity_on(Model::Mlp, [a, b]);
}

#[test]
fn two_gpu_ranks_with_batch_32_match_one_process_with_batch_64_gpt() {
    let (Some(a), Some(b)) = (common::gpu(), common::gpu()) else {
        return;
    };
    parity_on(Model::Gpt, [a, b]);
}

#[test]
fn a_gpu_rank_and_a_cpu_rank_train_together() {
    let Some(gpu) = common::gpu() else { return };
    parity_on(Model::Mlp, [gpu, Device::cpu()]);
}

#[test]
fn the_wrapper_broadcasts_rank_0_parameters_and_buckets_from_the_last() {
    let devices = [Device::cpu(), Device::cpu()];
    let results = on_ranks(2, |rank, g| {
        let w = Tensor::full([3, 4], rank as f32 + 1.0, &devices[rank])
            .requires_grad_(true)
            .clone();
        let b = Tensor::full([4], -(rank as f32), &devices[rank])
            .requires_grad_(true)
            .clone();
        let ddp = DataParallel::with_bucket_bytes(g, vec![w.clone(), b.clone()], 16).unwrap();
        (
            ddp.bucket_sizes(),
            w.to_vec::<f32>().unwrap(),
            b.to_vec::<f32>().unwrap(),
        )
    });
    for (sizes, w, b) in results {
        assert_eq!(sizes, vec![4, 12]);
        assert_eq!(w, vec![1.0; 12]);
        assert_eq!(b, vec![0.0; 4]);
    }
}

#[test]
fn each_adapter_is_a_device_and_the_first_and_last_train_together() {
    let Some(first) = common::gpu() else { return };
    let devices = Device::gpus().unwrap();
    assert!(!devices.is_empty());
    assert_eq!(devices[0].name(), first.name());
    let names: std::collections::HashSet<String> = devices.iter().map(Device::name).collect();
    assert_eq!(
        names.len(),
        devices.len(),
        "an adapter listed twice: {names:?}"
    );
    // On a machine with two GPUs this is two adapters; on lavapipe, two
    // ranks on the one. Each rank has a `Device` value of its own (its
    // own seed and pending work), hence a second call.
    let again = Device::gpus().unwrap();
    parity_on(
        Model::Mlp,
        [devices[0].clone(), again[again.len() - 1].clone()],
    );
}

#[test]
fn batch_norm_buffers_follow_rank_0_at_each_synchronisation() {
    use lazywgpu::nn::{self, Module};
    // Each rank trains a BatchNorm on its own data: the running statistics
    // differ after the forward, and equal rank 0's after the sync.
    let results = on_ranks(2, |rank, group| {
        let dev = Device::cpu();
        dev.manual_seed(5);
        let bn = nn::BatchNorm1d::new_1d(3, &dev);
        let mut ddp = DataParallel::new(group, bn.parameters())
            .and_then(|d| d.with_buffers(bn.buffers()))
            .expect("wrap");
        let x = Tensor::from_vec(
            (0..12)
                .map(|i| (i * (rank + 1)) as f32)
                .collect::<Vec<f32>>(),
            [4, 3],
            &dev,
        )
        .expect("x");
        bn.forward(&x).sum_all().backward();
        let rm = bn.running_mean.as_ref().expect("running mean");
        let before = rm.to_vec::<f32>().expect("read");
        ddp.sync_gradients().expect("sync");
        let after = rm.to_vec::<f32>().expect("read");
        let count = bn.num_batches_tracked.as_ref().expect("count");
        (before, after, count.item::<i64>().expect("read"))
    });
    assert_ne!(
        results[0].0, results[1].0,
        "each rank's own statistics first"
    );
    assert_eq!(
        results[1].1, results[0].0,
        "rank 1 takes rank 0's running mean"
    );
    assert_eq!(results[0].1, results[0].0, "rank 0 keeps its own");
    assert_eq!((results[0].2, results[1].2), (1, 1));
}

/// Under data parallelism every rank generates rank 0's kernels: rank 0's
/// device names the blocked matmul, rank 1's the lane kernel (lavapipe's
/// own choice). After `DataParallel::new` both report and run rank 0's,
/// so one product of the same values is the same bits on both ranks, and
/// right against an f64 oracle.
#[test]
fn data_parallel_ranks_generate_rank_0s_kernels() {
    if common::gpu().is_none() {
        return;
    }
    let (m, k, n) = (37usize, 70usize, 45usize);
    let value = |i: usize, seed: usize| ((i * 31 + seed * 17) % 29) as f32 * 0.07 - 1.0;
    let x: Vec<f32> = (0..m * k).map(|i| value(i, 1)).collect();
    let w: Vec<f32> = (0..k * n).map(|i| value(i, 2)).collect();
    let results = on_ranks(2, |rank, g| {
        let matmul = [MatmulChoice::Blocked, MatmulChoice::Lanes][rank];
        let dump =
            std::env::temp_dir().join(format!("lazywgpu-pinned-{}-rank{rank}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dump);
        let config = DeviceConfig {
            matmul: Some(matmul),
            dump_dir: Some(dump.clone()),
            ..DeviceConfig::from_env()
        };
        let dev = Device::gpu_with(config).unwrap();
        let before = dev.adapter().unwrap();
        // Each rank starts from its own weights: rank 0's are broadcast.
        let own: Vec<f32> = w.iter().map(|v| v + rank as f32).collect();
        let weight = Tensor::from_vec(own, [k, n], &dev).unwrap();
        weight.requires_grad_(true);
        let _ddp = DataParallel::new(g, vec![weight.clone()]).unwrap();
        let after = dev.adapter().unwrap();
        let xs = Tensor::from_vec(x.clone(), [m, k], &dev).unwrap();
        let product = xs.matmul(&weight.detach()).to_vec::<f32>().unwrap();
        // The matmul kernel the rank compiled, as its dump's plan names it.
        let compiled = matmul_kernels_dumped(&dump);
        let _ = std::fs::remove_dir_all(&dump);
        (before, after, product, compiled)
    });
    let (before_0, after_0, product_0, compiled_0) = &results[0];
    let (before_1, after_1, product_1, compiled_1) = &results[1];
    assert!(after_0.kernels_pinned && after_1.kernels_pinned);
    if before_1.matmul_kernel.starts_with("lanes") {
        // The ranks' own choices differ where the adapter runs lanes.
        assert_ne!(before_0.matmul_kernel, before_1.matmul_kernel);
    }
    assert!(
        !compiled_0.is_empty() && compiled_0.iter().all(|k| k == "Blocked"),
        "rank 0 compiled {compiled_0:?}"
    );
    assert_eq!(compiled_1, compiled_0, "rank 1's matmul kernels");
    assert_eq!(after_0.matmul_kernel, before_0.matmul_kernel);
    assert_eq!(
        after_1.matmul_kernel, before_0.matmul_kernel,
        "rank 1 made {} and kept it",
        before_1.matmul_kernel
    );
    assert_eq!(after_1.reduce_rule, after_0.reduce_rule);
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<u32>>();
    assert_eq!(bits(product_0), bits(product_1), "the ranks' products");
    let want = common::matmul_f64(&x, &w, (1, m, k, n));
    common::assert_close(product_0, &want, 1e-4, 1e-4, "rank 0's product");
}

/// The matmul kernel of each matmul in the plans dumped under `dir`
/// (`strategy: Matmul { kernel: Blocked, .. }` names `Blocked`).
fn matmul_kernels_dumped(dir: &std::path::Path) -> Vec<String> {
    let plans = common::dumped_plans(dir);
    (plans.iter().flat_map(|plan| plan.lines()))
        .filter_map(|line| line.strip_prefix("strategy: Matmul { kernel: "))
        .map(|rest| rest.chars().take_while(|c| c.is_alphanumeric()).collect())
        .collect()
}
