//! Sizes that change between steps (a training set's last, shorter batch;
//! an evaluation at another batch size) reuse the kernels compiled for
//! the first two sizes: each kernel is compiled once generic over the
//! literals that changed, and later sizes only bind new values. A size
//! marked dynamic (`Tensor::mark_dynamic`) is generic from its first.

mod common;

use lazywgpu::nn::{self, Module};
use lazywgpu::optim::{Optimizer, Sgd};
use lazywgpu::{DType, Device, Tensor};

/// The MLP trained: its hidden width, and whether each batch's size is
/// marked dynamic (`Tensor::mark_dynamic`) on the images and labels.
#[derive(Clone, Copy)]
struct Mlp {
    hidden: usize,
    marked: bool,
}

/// The MLP of most tests here: 784-64-10, batches unmarked.
const MLP: Mlp = Mlp {
    hidden: 64,
    marked: false,
};

/// Per step, the loss of an MLP (784-hidden-10, ReLU, cross-entropy,
/// SGD) trained on batches of `sizes`, with the same data on every device.
fn train_mlp(dev: &Device, sizes: &[usize], mlp: Mlp) -> Vec<f32> {
    dev.manual_seed(7);
    let model = nn::Sequential::new()
        .add(nn::Linear::new(784, mlp.hidden, dev))
        .add(nn::ReLU)
        .add(nn::Linear::new(mlp.hidden, 10, dev));
    let mut opt = Sgd::new(model.parameters(), 0.05);
    let mut losses = Vec::new();
    for &batch in sizes {
        let pixels: Vec<f32> = (0..batch * 784)
            .map(|i| ((i * 7919) % 1000) as f32 / 1000.0)
            .collect();
        let labels: Vec<i32> = (0..batch).map(|i| (i * 3 % 10) as i32).collect();
        let x = Tensor::from_vec(pixels, [batch, 784], dev).unwrap();
        let y = Tensor::from_vec(labels, [batch], dev).unwrap();
        assert_eq!(y.dtype(), DType::I32);
        if mlp.marked {
            x.mark_dynamic(0);
            y.mark_dynamic(0);
        }
        opt.zero_grad();
        let loss = nn::functional::cross_entropy(&model.forward(&x), &y);
        loss.backward();
        opt.step();
        dev.mark_step().unwrap();
        losses.push(loss.item::<f32>().unwrap());
    }
    losses
}

/// Trains on `sizes` on the GPU and on the CPU reference, checks the
/// losses agree, and returns the GPU's metrics (`None` without an adapter).
fn train_checked(sizes: &[usize]) -> Option<lazywgpu::MetricsSnapshot> {
    train_mlp_checked(sizes, MLP)
}

/// `train_checked` with another hidden width, or marked batches.
fn train_mlp_checked(sizes: &[usize], mlp: Mlp) -> Option<lazywgpu::MetricsSnapshot> {
    let gpu = common::gpu()?;
    let got = train_mlp(&gpu, sizes, mlp);
    let want = train_mlp(&Device::cpu(), sizes, mlp);
    common::assert_close(&got, &want, 1e-3, 1e-4, "losses");
    Some(gpu.metrics())
}

/// Trains on `sizes` (checked against the CPU reference) and asserts
/// how many graphs compiled; returns the metrics.
fn compiles(sizes: &[usize], graphs: u64) -> Option<lazywgpu::MetricsSnapshot> {
    let m = train_checked(sizes)?;
    assert_eq!(m.counter("graphs_compiled"), graphs, "{sizes:?}: {m}");
    Some(m)
}

#[test]
fn the_issue_sequence_compiles_two_graphs() {
    // 64 compiles; 50, the second size, compiles each kernel generic over
    // its sizes; 33, 17 (a loss of 170 elements, under a reduction's 256,
    // and a single tile of the matmul's 32 rows) and 64 again compile
    // nothing.
    let Some(m) = compiles(&[64, 50, 33, 17, 64], 2) else {
        return;
    };
    assert_eq!(m.counter("graphs_specialized"), 2, "33 and 17: {m}");
    assert_eq!(m.counter("recompiles"), 1, "{m}");
    assert_eq!(m.counter("graph_cache_hits"), 1, "64 again: {m}");
}

#[test]
fn sizes_lower_their_kernels_and_a_cached_graph_lowers_none() {
    // Every compiled graph lowers its kernels, also a size whose kernels
    // were all found generic (sizes are not yet symbols bound without
    // lowering); a graph found in the cache lowers nothing. A size after
    // the second binds the kernels the site bound (`kernels_bound`).
    let Some(first) = train_checked(&[64]) else {
        return;
    };
    let per_graph = first.counter("kernels_lowered");
    assert!(per_graph > 0, "{first}");
    let again = train_checked(&[64, 64]).expect("a GPU");
    assert_eq!(again.counter("kernels_lowered"), per_graph, "{again}");
    let other = train_checked(&[64, 50, 33]).expect("a GPU");
    assert_eq!(other.counter("kernels_lowered"), 3 * per_graph, "{other}");
    // 50 binds only the kernels that do not depend on the batch (the
    // same value as at 64); 33 lowers to the kernels 50 bound (generic
    // over the batch, or those same ones): each is bound as it was,
    // compared with that kernel alone and not printed.
    assert_eq!(first.counter("kernels_bound"), 0, "{first}");
    let two = train_checked(&[64, 50]).expect("a GPU");
    let at_50 = two.counter("kernels_bound");
    assert!(at_50 < per_graph / 2, "{two}");
    assert_eq!(other.counter("kernels_bound"), at_50 + per_graph, "{other}");
}

#[test]
fn sizes_across_every_threshold_keep_the_first_strategies() {
    // A first size under the thresholds (17: 24-row tiles, one invocation
    // for the loss), then sizes past them (300: a bias gradient of 300
    // elements, past 256) and down to two rows. A batch of one compiles
    // its own graph (its size-one dims need no index arithmetic) and
    // leaves the generic kernels to the sizes after it.
    let Some(m) = compiles(&[17, 64, 300, 1, 50, 2], 3) else {
        return;
    };
    assert_eq!(m.counter("graphs_specialized"), 3, "300, 50 and 2: {m}");
}

#[test]
fn a_training_set_with_a_partial_last_batch_compiles_once_per_size_kind() {
    // Two epochs of 4 batches of 96 and a last one of 32, as the MNIST
    // example with 8,000 images of batch 96 ends each epoch.
    let epoch = [96, 96, 96, 96, 32];
    let sizes: Vec<usize> = epoch.iter().chain(&epoch).copied().collect();
    let Some(m) = compiles(&sizes, 2) else {
        return;
    };
    assert_eq!(m.counter("graphs_specialized"), 0, "{m}");
    assert_eq!(m.counter("graph_cache_hits"), 8, "{m}");
}

/// The issue's sequence of batch sizes with each batch marked dynamic
/// before its first step: the first compile is already generic over the
/// batch, so every later size binds new values and compiles nothing.
/// Unmarked, the second size compiles too. (A hidden width of 32: one
/// equal to the batch would be taken for a size as well, see
/// `kernel::changing`.)
#[test]
fn a_batch_marked_dynamic_compiles_generic_kernels_at_its_first_size() {
    let sizes = [64, 50, 33, 17, 64, 50, 9];
    let marked = Mlp {
        hidden: 32,
        marked: true,
    };
    let Some(m) = train_mlp_checked(&sizes, marked) else {
        return;
    };
    assert_eq!(m.counter("graphs_compiled"), 1, "{m}");
    assert_eq!(m.counter("graphs_specialized"), 4, "50, 33, 17 and 9: {m}");
    assert_eq!(m.counter("graph_cache_hits"), 2, "64 and 50 again: {m}");
    let unmarked = Mlp {
        marked: false,
        ..marked
    };
    let m = train_mlp_checked(&sizes, unmarked).expect("a GPU");
    assert_eq!(m.counter("graphs_compiled"), 2, "64 and 50: {m}");
}

/// The baby GPT's training step over the issue's sequence lengths, the
/// token batches marked dynamic along the sequence, against the CPU
/// reference. Two graphs compile: the first step (AdamW makes its state
/// there: a structure of its own) and the second step's structure at its
/// first length (48); 33, 64 and 17 bind its generic kernels (3 graphs
/// found compiled). The embedding's gradient sorts its token ids, whose
/// sort keeps one workgroup size over these lengths; the loss's sum over
/// `12 * t * 78` logits keeps its loop tail at 64, where that is a
/// multiple of the workgroup's 256 (before the tail was kept, 64 compiled
/// again). Where reductions split as for a GPU
/// (`common::gpu_schedules`), that sum is split in stages, into a power
/// of two of parts (1,024 for 64 and 48, 512 for 33, 256 for 17), with
/// the same counts. Before the part count was a power of two it was
/// `12 * t * 78 / 32`, a floor division that the generic kernels'
/// literals did not follow: 33 and 17 compiled (4 and 1, measured on an
/// H100 too).
#[test]
fn a_gpt_step_over_marked_sequence_lengths_compiles_once_per_structure() {
    use lazywgpu::data::{CharDataset, Split, SplitMix64};
    use lazywgpu::nn::{Gpt, GptConfig, Parameters};
    use lazywgpu::optim::AdamW;
    let Some(gpu) = common::gpu() else { return };
    let data = CharDataset::from_file("examples/data/shakespeare-char/input.txt.gz").unwrap();
    let lengths = [64usize, 48, 33, 64, 17];
    let run = |dev: &Device| -> Vec<f32> {
        dev.manual_seed(3);
        let model = Gpt::new(GptConfig::baby(data.vocab_size()), dev);
        let mut opt = AdamW::new(model.params(), 1e-3);
        let mut rng = SplitMix64::new(1);
        let mut losses = Vec::new();
        for &t in &lengths {
            let offsets = data.offsets(Split::Train, &mut rng, 12, t);
            let (x, y) = data.batch(Split::Train, &offsets, t, dev).unwrap();
            x.mark_dynamic(1);
            y.mark_dynamic(1);
            let loss = model.loss(&x, &y);
            loss.backward();
            opt.step();
            opt.zero_grad();
            dev.mark_step().unwrap();
            losses.push(loss.item::<f32>().unwrap());
        }
        losses
    };
    let got = run(&gpu);
    let want = run(&Device::cpu());
    common::assert_close(&got, &want, 1e-3, 1e-4, "losses");
    let m = gpu.metrics();
    assert_eq!(m.counter("graphs_compiled"), 2, "compiles: {m}");
    assert_eq!(m.counter("graphs_specialized"), 3, "{m}");
}

/// A mark stays on the tensor through an in-place op: the step after
/// it reads the tensor's new value, which is generic at its first size
/// too. Two graphs compile (the in-place scale, the row sums), both at
/// the first size.
#[test]
fn a_mark_stays_through_an_in_place_op() {
    let Some(dev) = common::gpu() else { return };
    for rows in [64usize, 50, 33] {
        let host = common::data(rows * 24, rows as u64);
        let x = Tensor::from_vec(host.clone(), [rows, 24], &dev)
            .unwrap()
            .mark_dynamic(0);
        x.mul_(2.0);
        dev.mark_step().unwrap();
        let got = x.sum([1], false).to_vec::<f32>().unwrap();
        let want: Vec<f32> = (0..rows)
            .map(|r| (0..24).map(|c| 2.0 * host[r * 24 + c] as f64).sum::<f64>() as f32)
            .collect();
        common::assert_close(&got, &want, 1e-5, 1e-5, "row sums");
    }
    let m = dev.metrics();
    assert_eq!(m.counter("graphs_compiled"), 2, "{m}");
    assert_eq!(m.counter("graphs_specialized"), 4, "{m}");
}

#[test]
#[should_panic(expected = "mark_dynamic: dim 2 is out of range for a tensor of shape [3, 4]")]
fn marking_a_dim_the_tensor_lacks_panics_at_the_call() {
    Tensor::zeros([3, 4], &Device::cpu()).mark_dynamic(2);
}

/// One trace site reducing over a dimension whose size grows from a few
/// elements past 65,535 (lavapipe ends any shader loop there, silently):
/// the strategy chosen at the first sizes must not be kept where its
/// loops would run past the adapter's limit. Sum, mean, max, argmax,
/// softmax and logsumexp over the transposed (strided) rows, against f64
/// loops written here.
#[test]
fn a_reduced_dimension_growing_past_the_loop_limit_stays_right() {
    let Some(dev) = common::gpu() else { return };
    let cols = 263;
    for rows in [5usize, 8, 70_000] {
        let values: Vec<f32> = common::data(rows * cols, rows as u64);
        let x = Tensor::from_vec(values.clone(), [rows, cols], &dev).unwrap();
        let xt = x.t(); // [cols, rows]: each output reduces `rows` elements.
        let outs = [
            xt.sum([1], false),
            xt.mean([1], false),
            xt.max([1], false),
            xt.argmax(1, false).float(),
            xt.softmax(1).narrow(1, rows - 1, 1).reshape([cols]),
            xt.logsumexp([1], false),
        ];
        dev.mark_step().unwrap();
        let host = &values;
        let column = |c: usize| (0..rows).map(move |r| host[r * cols + c] as f64);
        let mut want: [Vec<f32>; 6] = Default::default();
        for c in 0..cols {
            let sum: f64 = column(c).sum();
            let max = column(c).fold(f64::NEG_INFINITY, f64::max);
            let arg = column(c).position(|v| v == max).unwrap();
            let lse = max + column(c).map(|v| (v - max).exp()).sum::<f64>().ln();
            let last = values[(rows - 1) * cols + c] as f64;
            want[0].push(sum as f32);
            want[1].push((sum / rows as f64) as f32);
            want[2].push(max as f32);
            want[3].push(arg as f32);
            want[4].push((last - lse).exp() as f32);
            want[5].push(lse as f32);
        }
        // (name, rtol, atol): f32 sums of 70,000 terms of [-1, 1).
        let checks = [
            ("sum", 1e-4, 1e-2),
            ("mean", 1e-4, 1e-6),
            ("max", 0.0, 0.0),
            ("argmax", 0.0, 0.0),
            ("softmax", 1e-3, 1e-9),
            ("logsumexp", 1e-5, 1e-4),
        ];
        for ((out, want), (name, rtol, atol)) in outs.iter().zip(&want).zip(checks) {
            let got = out.to_vec::<f32>().unwrap();
            common::assert_close(&got, want, rtol, atol, &format!("{name} over {rows}"));
        }
        dev.mark_step().unwrap();
    }
}

/// Both graphs below record their output on this line.
fn squash(x: &Tensor) -> Tensor {
    x.sigmoid()
}

/// Two graphs whose outputs are recorded on one source line (inside a
/// helper), read in turn over five sizes: each keeps its own record of
/// the site, so each compiles at its first two sizes and then reuses its
/// kernels generic over the size, as two graphs on two lines do. Before,
/// the graphs replaced each other's record: 10 compiles, none reused.
#[test]
fn two_graphs_with_outputs_on_one_line_keep_their_own_generic_kernels() {
    let Some(dev) = common::gpu() else { return };
    let sigmoid = |v: f64| 1.0 / (1.0 + (-v).exp());
    for n in [5usize, 6, 7, 8, 9] {
        let host: Vec<f32> = (0..n).map(|i| i as f32 / 4.0 - 1.0).collect();
        let x = Tensor::from_vec(host.clone(), [n], &dev).unwrap();
        let a = squash(&x);
        let got_a = a.to_vec::<f32>().unwrap(); // graph A: x -> sigmoid
        let got_b = squash(&(&a * 2.0)).to_vec::<f32>().unwrap(); // graph B
        let want_a: Vec<f32> = host.iter().map(|&v| sigmoid(v as f64) as f32).collect();
        let want_b: Vec<f32> = host
            .iter()
            .map(|&v| sigmoid(2.0 * sigmoid(v as f64)) as f32)
            .collect();
        common::assert_close(&got_a, &want_a, 1e-6, 1e-6, "sigmoid(x)");
        common::assert_close(&got_b, &want_b, 1e-6, 1e-6, "sigmoid(2 sigmoid(x))");
    }
    let m = dev.metrics();
    assert_eq!(m.counter("graphs_compiled"), 4, "{m}");
    assert_eq!(m.counter("graphs_specialized"), 6, "{m}");
}

/// A size that crosses a guard of a kernel's code (an elementwise kernel
/// over `3 * t` elements reads and writes four at a time while that is a
/// multiple of four, at `t = 8` and `12`, and cannot at `t = 7`) compiles
/// that kernel again, and the recompile warning names the kernel, the op
/// and line it computes, and the guard its sizes crossed (`kernel::sizes`).
/// Values against an f64 oracle at every size.
#[test]
fn a_recompile_warning_names_the_kernel_guard_the_sizes_crossed() {
    let Some(dev) = common::gpu() else { return };
    for t in [8usize, 12, 7] {
        let n = 3 * t;
        let data: Vec<f32> = (0..n).map(|i| (i % 7) as f32 * 0.125).collect();
        let x = Tensor::from_vec(data.clone(), [t, 3], &dev).unwrap();
        let got = (x.exp() * 2.0).to_vec::<f32>().unwrap();
        for (g, &v) in got.iter().zip(&data) {
            let want = (v as f64).exp() * 2.0;
            assert!(
                (*g as f64 - want).abs() <= 1e-6 * want,
                "t {t}: {g} vs {want}"
            );
        }
        dev.mark_step().unwrap();
    }
    let m = dev.metrics();
    assert_eq!(m.counter("recompiles"), 2, "{m}");
    let last = m.warnings().last().expect("a recompile warning");
    // The guard: the output's element count (its two dimensions), the
    // test, its values before and now, the choice it made, and the op and
    // line that recorded the node whose dimensions it reads.
    assert!(
        last.contains("not generic over the new sizes: kernel 0 (")
            && last
                .contains("% 4 == 0` held at 36, not at 21 (elements computed four at a time; n")
            && last.contains(" recorded at tests/dynamic_shapes.rs:"),
        "{last}"
    );
}
