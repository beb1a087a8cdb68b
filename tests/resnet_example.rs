//! The building blocks of `examples/resnet.rs`, at a tiny size: its
//! network (shared through examples/support/resnet_model.rs) trains
//! three steps on a few MNIST digits from a `DataLoader`, cropped on the
//! device, with BatchNorm in training mode, SGD with Nesterov momentum
//! and weight decay under a one-cycle rate and label-smoothed
//! cross-entropy: the loss is finite and falls, the running statistics
//! move, `eval()` gives finite logits, and the state dict carries
//! PyTorch's names (`layer2.0.downsample.1.running_mean`).

mod common;

#[path = "../examples/support/resnet_model.rs"]
mod resnet_model;

use common::devices;
use lazywgpu::data::augment::{Compose, Normalize, RandomCrop};
use lazywgpu::data::{DataLoader, Mnist};
use lazywgpu::nn::Module;
use lazywgpu::nn::functional::{self as F, CrossEntropyOptions};
use lazywgpu::optim::{OneCycleLr, Optimizer, Scheduler, Sgd};
use lazywgpu::{Device, no_grad};
use resnet_model::{ResNet, ResNetConfig};

const TINY: ResNetConfig = ResNetConfig {
    in_channels: 1,
    widths: [4, 4, 8, 8],
    blocks: [1, 1, 1, 1],
    classes: 10,
};

/// torchvision's state-dict names for [`TINY`]: the stem, a block without
/// downsample (same width, stride 1), three with one, the classifier.
fn pytorch_names() -> Vec<String> {
    let bn = |p: &str| {
        [
            "weight",
            "bias",
            "running_mean",
            "running_var",
            "num_batches_tracked",
        ]
        .map(|s| format!("{p}.{s}"))
        .to_vec()
    };
    let mut names = vec!["conv1.weight".to_string()];
    names.extend(bn("bn1"));
    for stage in 1..=4 {
        let b = format!("layer{stage}.0");
        names.push(format!("{b}.conv1.weight"));
        names.extend(bn(&format!("{b}.bn1")));
        names.push(format!("{b}.conv2.weight"));
        names.extend(bn(&format!("{b}.bn2")));
        if stage > 1 {
            names.push(format!("{b}.downsample.0.weight"));
            names.extend(bn(&format!("{b}.downsample.1")));
        }
    }
    names.extend(["fc.weight".to_string(), "fc.bias".to_string()]);
    names
}

#[test]
fn state_dict_names_follow_torchvision() {
    let net = ResNet::new(TINY, &Device::cpu());
    let names: Vec<String> = net.state_dict().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, pytorch_names());
    let params: Vec<String> = net.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert!(
        params
            .iter()
            .all(|n| !n.contains("running") && !n.contains("tracked"))
    );
    // conv, BN weight and bias per BN, fc weight and bias.
    assert_eq!(params.len(), 1 + 2 + 4 * 6 + 3 * 3 + 2);
}

fn three_steps(dev: &Device) -> Vec<f32> {
    dev.manual_seed(3);
    let net = ResNet::new(TINY, dev);
    // Torchvision's initialisation: BN weight 1, bias 0; Kaiming fan-out
    // convolutions (std sqrt(2 / (4 * 9)) for the stem's 4 outputs).
    let state = net.state_dict();
    let get = |name: &str| {
        state
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.to_vec::<f32>().expect("read"))
            .expect(name)
    };
    assert!(get("layer1.0.bn1.weight").iter().all(|&w| w == 1.0));
    assert!(get("layer1.0.bn1.bias").iter().all(|&b| b == 0.0));
    let w = get("conv1.weight");
    let std = (w.iter().map(|x| x * x).sum::<f32>() / w.len() as f32).sqrt();
    assert!(
        (0.5..1.6).contains(&(std / (2.0f32 / 36.0).sqrt())),
        "stem std {std}"
    );

    let mnist = common::mnist();
    let loader = DataLoader::new(mnist.split(true), 16, dev).shuffle(1);
    let (x, y) = loader
        .epoch(0)
        .next()
        .expect("a batch")
        .expect("the batch loads");
    let augment = Compose::new(5)
        .then(RandomCrop {
            size: 28,
            padding: 2,
        })
        .then(Normalize {
            mean: vec![0.1307],
            std: vec![0.3081],
        });
    let mut opt = Sgd::new(net.parameters(), 0.05)
        .momentum(0.9)
        .nesterov(true)
        .weight_decay(5e-4);
    let mut sched = Scheduler::new(&mut opt, OneCycleLr::new(0.05, 3).cycle_momentum(false));
    let smoothing = CrossEntropyOptions {
        label_smoothing: 0.1,
        ..Default::default()
    };
    net.train();
    let mut losses = Vec::new();
    for _ in 0..3 {
        // The same crops each step: the same batch, so the loss must fall.
        let x = augment.apply(&x, 0).expect("augment");
        opt.zero_grad();
        let loss = F::cross_entropy_with(&net.forward(&x), &y, &smoothing);
        loss.backward();
        opt.step();
        sched.step(&mut opt);
        dev.mark_step().expect("step");
        losses.push(loss.item::<f32>().expect("loss"));
    }
    let state = net.state_dict();
    let tracked = state
        .iter()
        .find(|(n, _)| n == "layer2.0.downsample.1.num_batches_tracked")
        .expect("a nested buffer");
    assert_eq!(tracked.1.item::<i64>().expect("count"), 3);
    let rm = state
        .iter()
        .find(|(n, _)| n == "bn1.running_mean")
        .expect("bn1.running_mean")
        .1
        .to_vec::<f32>()
        .expect("read");
    assert!(rm.iter().any(|&m| m != 0.0), "running mean moved");
    net.eval();
    let logits = no_grad(|| {
        net.forward(
            &Mnist::batch(&mnist.test_images, &mnist.test_labels, 0, 4, dev)
                .expect("test")
                .0,
        )
    });
    assert_eq!(logits.shape(), &[4, 10]);
    assert!(
        logits
            .to_vec::<f32>()
            .expect("read")
            .iter()
            .all(|v| v.is_finite())
    );
    losses
}

#[test]
fn three_training_steps_lower_the_loss() {
    for dev in devices() {
        let losses = three_steps(&dev);
        assert!(
            losses.iter().all(|l| l.is_finite()),
            "{}: losses {losses:?}",
            dev.name()
        );
        assert!(
            losses[0] > losses[1] && losses[1] > losses[2],
            "{}: losses {losses:?} do not fall",
            dev.name()
        );
    }
}

/// The example's default network (widths 8, 16, 32, 64, a block a
/// stage).
const EXAMPLE: ResNetConfig = ResNetConfig {
    in_channels: 1,
    widths: [8, 16, 32, 64],
    blocks: [1, 1, 1, 1],
    classes: 10,
};

/// The example's first `steps` training losses from the initial weights
/// `tools/resnet_reference.py` exported: its batches (the loader's order
/// for seed 0, epoch 1), its crops (Compose seed 0), its optimiser and
/// schedule over the epoch's 125 steps.
fn example_losses(dev: &Device, steps: usize, total_steps: usize) -> Vec<f32> {
    let net = ResNet::new(EXAMPLE, dev);
    let golden = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/resnet");
    lazywgpu::nn::load_safetensors(&net, golden.join("init.safetensors"))
        .expect("the initial weights load by PyTorch's names");
    let mnist = common::mnist();
    let loader = DataLoader::new(mnist.split(true), 64, dev)
        .shuffle(0)
        .drop_last(true);
    let augment = Compose::new(0)
        .then(RandomCrop {
            size: 28,
            padding: 2,
        })
        .then(Normalize {
            mean: vec![0.1307],
            std: vec![0.3081],
        });
    let mut opt = Sgd::new(net.parameters(), 0.2)
        .momentum(0.9)
        .nesterov(true)
        .weight_decay(5e-4);
    let one_cycle = OneCycleLr::new(0.2, total_steps).cycle_momentum(false);
    let mut sched = Scheduler::new(&mut opt, one_cycle);
    let smoothing = CrossEntropyOptions {
        label_smoothing: 0.1,
        ..Default::default()
    };
    net.train();
    let mut losses = Vec::new();
    for (step, batch) in loader.epoch(1).take(steps).enumerate() {
        let (x, y) = batch.expect("the batch loads");
        let x = augment.apply(&x, step as u64).expect("augment");
        opt.zero_grad();
        let loss = F::cross_entropy_with(&net.forward(&x), &y, &smoothing);
        loss.backward();
        opt.step();
        sched.step(&mut opt);
        dev.mark_step().expect("step");
        losses.push(loss.item::<f32>().expect("loss"));
    }
    losses
}

/// Step for step like PyTorch: the example's first 20 losses against
/// PyTorch's from the same weights, batches and crops
/// (tests/golden/resnet, written by tools/resnet_reference.py).
///
/// Tolerances, from PyTorch's own runs (tools/resnet_reference.py on an
/// AMD EPYC, 2026-11-26): the same script run in f64, or on one thread
/// instead of two, agrees with the golden losses to 2e-4 (relative) for
/// the first 8 steps, then round-off grows with every SGD step under
/// BatchNorm and reaches 6.6e-3 within 20 steps (lavapipe's sums, in
/// another order again, reached 1.4e-2 at step 11). So: the first 8
/// steps within 2e-4, all 20 within 5e-2. A wrong gradient, statistic or
/// rate moves the first steps' losses by far more than 2e-4. The CPU
/// reference runs the first 8 steps (about 4 s a step).
#[test]
fn the_examples_first_twenty_steps_follow_pytorch() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/resnet/losses.json"),
    )
    .expect("tests/golden/resnet/losses.json");
    let golden: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let want: Vec<f64> = golden["losses"]
        .as_array()
        .expect("losses")
        .iter()
        .map(|v| v.as_f64().expect("a number"))
        .collect();
    let total = golden["total_steps"].as_u64().expect("total_steps") as usize;
    for dev in devices() {
        let steps = if dev.is_gpu() { want.len() } else { 8 };
        let started = std::time::Instant::now();
        let got = example_losses(&dev, steps, total);
        assert_eq!(got.len(), steps);
        // The first 8 steps within 2e-4, all 20 within 5e-2 (see above).
        let tolerance = |step: usize| if step < 8 { 2e-4 } else { 5e-2 };
        common::assert_losses_follow(&dev, &got, &want, tolerance, started);
    }
}
