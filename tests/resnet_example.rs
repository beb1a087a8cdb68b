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
