//! Layers, losses and optimisers against plain f64 reference code.

#![allow(clippy::needless_borrows_for_generic_args)]

mod common;

use common::devices;
use lazywgpu::nn::{self, Module, functional as F};
use lazywgpu::optim::{
    Adadelta, Adam, AdamW, Ema, OneCycleLr, Optimizer, ParamGroup, ReduceLrOnPlateau, Scheduler,
    Sgd, StepLr,
};
use lazywgpu::{Device, Tensor};

/// Gradient of `sum(w * c)^2`-like quadratics is easy to write down; the
/// optimisers run on `loss = sum((w - t)^2)` with gradient `2 (w - t)`.
fn quadratic_run(
    dev: &Device,
    make: &dyn Fn(Vec<Tensor>) -> Box<dyn Optimizer>,
    steps: usize,
) -> Vec<f32> {
    let w = Tensor::from_vec(vec![0.5f32, -1.0, 2.0, 0.0], [4], dev).unwrap();
    w.requires_grad_(true);
    let t = Tensor::from_vec(vec![1.0f32, 1.0, -1.0, 0.25], [4], dev).unwrap();
    let mut opt = make(vec![w.clone()]);
    for _ in 0..steps {
        opt.zero_grad();
        let d = &w - &t;
        (&d * &d).sum_all().backward();
        opt.step();
        dev.mark_step().unwrap();
    }
    w.to_vec().unwrap()
}

/// The same updates in f64, written from the papers / PyTorch's docs.
fn reference(kind: &str, steps: usize) -> Vec<f32> {
    let t = [1.0f64, 1.0, -1.0, 0.25];
    let mut w = [0.5f64, -1.0, 2.0, 0.0];
    let (mut m, mut v) = ([0.0f64; 4], [0.0f64; 4]);
    for step in 1..=steps {
        for i in 0..4 {
            let g = 2.0 * (w[i] - t[i]);
            match kind {
                "sgd_momentum" => {
                    // lr 0.1, momentum 0.9, weight decay 0.01, dampening 0.
                    let d = g + 0.01 * w[i];
                    m[i] = if step == 1 { d } else { 0.9 * m[i] + d };
                    w[i] -= 0.1 * m[i];
                }
                "nesterov" => {
                    let d = g;
                    m[i] = if step == 1 { d } else { 0.9 * m[i] + d };
                    w[i] -= 0.1 * (d + 0.9 * m[i]);
                }
                "adam" | "adamw" => {
                    let (lr, b1, b2, eps, wd) = (0.05, 0.9, 0.999, 1e-8, 0.1);
                    let g = if kind == "adam" { g + wd * w[i] } else { g };
                    if kind == "adamw" {
                        w[i] *= 1.0 - lr * wd;
                    }
                    m[i] = b1 * m[i] + (1.0 - b1) * g;
                    v[i] = b2 * v[i] + (1.0 - b2) * g * g;
                    let mh = m[i] / (1.0 - b1.powi(step as i32));
                    let vh = v[i] / (1.0 - b2.powi(step as i32));
                    w[i] -= lr * mh / (vh.sqrt() + eps);
                }
                "adadelta" => {
                    let (lr, rho, eps) = (1.0, 0.9, 1e-6);
                    m[i] = rho * m[i] + (1.0 - rho) * g * g;
                    let delta = (v[i] + eps).sqrt() / (m[i] + eps).sqrt() * g;
                    v[i] = rho * v[i] + (1.0 - rho) * delta * delta;
                    w[i] -= lr * delta;
                }
                _ => unreachable!(),
            }
        }
    }
    w.iter().map(|&x| x as f32).collect()
}

#[test]
fn optimisers_match_reference_updates() {
    type Make = Box<dyn Fn(Vec<Tensor>) -> Box<dyn Optimizer>>;
    let cases: Vec<(&str, Make)> = vec![
        (
            "sgd_momentum",
            Box::new(|p| Box::new(Sgd::new(p, 0.1).momentum(0.9).weight_decay(0.01))),
        ),
        (
            "nesterov",
            Box::new(|p| Box::new(Sgd::new(p, 0.1).momentum(0.9).nesterov(true))),
        ),
        (
            "adam",
            Box::new(|p| Box::new(Adam::new(p, 0.05).weight_decay(0.1))),
        ),
        (
            "adamw",
            Box::new(|p| Box::new(AdamW::new(p, 0.05).weight_decay(0.1))),
        ),
        ("adadelta", Box::new(|p| Box::new(Adadelta::new(p, 1.0)))),
    ];
    for dev in devices() {
        for (kind, make) in &cases {
            let got = quadratic_run(&dev, make.as_ref(), 7);
            let want = reference(kind, 7);
            common::assert_close(
                &got,
                &want,
                1e-4,
                1e-5,
                &format!("{kind} on {}", dev.name()),
            );
        }
    }
}

#[test]
fn step_lr_decays_every_step_size_epochs() {
    let dev = Device::cpu();
    let p = Tensor::zeros([1], &dev);
    let mut opt = Sgd::new(vec![p], 1.0);
    let mut s = StepLr::new(&opt, 2, 0.5);
    let mut lrs = Vec::new();
    for _ in 0..5 {
        s.step(&mut opt);
        lrs.push(opt.lr());
    }
    assert_eq!(lrs, vec![1.0, 0.5, 0.5, 0.25, 0.25]);
}

#[test]
fn losses_match_f64_loops() {
    for dev in devices() {
        let logits: Vec<f32> = (0..15).map(|i| ((i * 7) % 11) as f32 * 0.3 - 1.2).collect();
        let target = vec![2i32, 0, 4];
        let x = Tensor::from_vec(logits.clone(), [3, 5], &dev).unwrap();
        let y = Tensor::from_vec(target.clone(), [3], &dev).unwrap();
        let mut want = 0.0f64;
        for r in 0..3 {
            let row = &logits[r * 5..r * 5 + 5];
            let lse = row.iter().map(|&v| (v as f64).exp()).sum::<f64>().ln();
            want += lse - row[target[r] as usize] as f64;
        }
        want /= 3.0;
        let got = F::cross_entropy(&x, &y).item::<f32>().unwrap() as f64;
        assert!((got - want).abs() < 1e-5, "cross_entropy {got} vs {want}");
        let p = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], [3], &dev).unwrap();
        let q = Tensor::from_vec(vec![1.5f32, 2.0, 1.0], [3], &dev).unwrap();
        let mse = F::mse_loss(&p, &q).item::<f32>().unwrap();
        assert!((mse - (0.25 + 4.0) / 3.0).abs() < 1e-6);
    }
}

#[test]
fn dropout_zeroes_about_p_and_scales_the_rest() {
    for dev in devices() {
        dev.manual_seed(3);
        let d = nn::Dropout::new(0.25);
        let x = Tensor::ones([100_000], &dev);
        let v: Vec<f32> = d.forward(&x).to_vec().unwrap();
        let zeros = v.iter().filter(|&&e| e == 0.0).count() as f64 / v.len() as f64;
        assert!((zeros - 0.25).abs() < 0.01, "dropped fraction {zeros}");
        assert!(v.iter().all(|&e| e == 0.0 || (e - 1.0 / 0.75).abs() < 1e-6));
        // A second call draws a new mask (a new counter, same graph).
        let w: Vec<f32> = d.forward(&x).to_vec().unwrap();
        assert_ne!(v, w);
        d.set_training(false);
        assert_eq!(d.forward(&x).to_vec::<f32>().unwrap(), vec![1.0; 100_000]);
    }
}

/// A dropout mask read by the forward pass and by its gradient in one
/// step is drawn once (written by a kernel of its own, which runs before
/// its readers): one kernel draws random numbers. Values: the gradient
/// is the mask over `1 - p`, as the CPU reference draws it.
#[test]
fn a_dropout_mask_read_forward_and_backward_is_drawn_once() {
    let Some(_) = common::gpu() else { return };
    let dir = std::env::temp_dir().join(format!("lazywgpu-mask-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    let config = lazywgpu::DeviceConfig {
        dump_dir: Some(dir.clone()),
        ..Default::default()
    };
    let gpu = Device::gpu_with(config).unwrap();
    let grads = |dev: &Device| -> (Vec<f32>, f32) {
        dev.manual_seed(5);
        let x = Tensor::from_vec(common::data(64 * 300, 1), [64, 300], dev).unwrap();
        x.requires_grad_(true);
        let y = nn::Dropout::new(0.3).forward(&(&x * 2.0)).sum_all();
        y.backward();
        dev.mark_step().unwrap();
        (x.grad().unwrap().to_vec().unwrap(), y.item().unwrap())
    };
    let (got, got_sum) = grads(&gpu);
    let (want, want_sum) = grads(&Device::cpu());
    assert_eq!(got, want, "the gradient's mask");
    assert!((got_sum - want_sum).abs() <= 1e-3 * want_sum.abs().max(1.0));
    assert!(
        got.iter()
            .all(|&g| g == 0.0 || (g - 2.0 / 0.7).abs() < 1e-5)
    );
    let drawing = common::dumped_plans(&dir)
        .iter()
        .filter(|p| p.contains("rng_uniform"))
        .count();
    assert_eq!(drawing, 1, "kernels drawing random numbers");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn default_init_is_bounded_by_one_over_sqrt_fan_in() {
    let dev = Device::cpu();
    let l = nn::Linear::new(400, 30, &dev);
    let bound = 1.0 / 20.0;
    let w: Vec<f32> = l.weight.to_vec().unwrap();
    assert!(w.iter().all(|&v| v.abs() <= bound));
    // Uniform: the variance is bound^2 / 3.
    let var = w.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / w.len() as f64;
    assert!((var / (bound as f64 * bound as f64 / 3.0) - 1.0).abs() < 0.1);
    assert!(l.weight.requires_grad() && l.weight.is_leaf());
    let c = nn::Conv2d::new(3, 8, 5, &dev);
    let cw: Vec<f32> = c.weight.to_vec().unwrap();
    assert!(cw.iter().all(|&v| v.abs() <= 1.0 / (75.0f32).sqrt()));
}

#[test]
fn save_and_load_round_trip_through_safetensors() {
    let dev = Device::cpu();
    let a = nn::Sequential::new()
        .add(nn::Linear::new(3, 4, &dev))
        .add(nn::ReLU)
        .add(nn::Linear::new(4, 2, &dev));
    let names: Vec<String> = a.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["0.weight", "0.bias", "2.weight", "2.bias"]);
    let path = std::env::temp_dir().join(format!("lazywgpu-{}.safetensors", std::process::id()));
    nn::save_safetensors(&a, &path).unwrap();
    let b = nn::Sequential::new()
        .add(nn::Linear::new(3, 4, &dev))
        .add(nn::ReLU)
        .add(nn::Linear::new(4, 2, &dev));
    nn::load_safetensors(&b, &path).unwrap();
    for ((_, p), (_, q)) in a.named_parameters().iter().zip(b.named_parameters()) {
        assert_eq!(p.to_vec::<f32>().unwrap(), q.to_vec::<f32>().unwrap());
    }
    // A model whose shapes differ is refused with the name and shapes.
    let c = nn::Sequential::new().add(nn::Linear::new(5, 4, &dev));
    let err = nn::load_safetensors(&c, &path).unwrap_err().to_string();
    assert!(err.contains("0.weight") && err.contains("[4, 3]"), "{err}");
    let missing = nn::load_safetensors(&a, "/nonexistent/x.safetensors").unwrap_err();
    assert!(missing.to_string().contains("/nonexistent/x.safetensors"));
    std::fs::remove_file(&path).ok();
}

#[test]
fn pytorch_spellings_name_the_same_types() {
    let dev = Device::cpu();
    let p = Tensor::zeros([1], &dev);
    let mut opt: lazywgpu::optim::SGD = lazywgpu::optim::SGD::new(vec![p], 0.5);
    let mut s: lazywgpu::optim::StepLR = lazywgpu::optim::StepLR::new(&opt, 1, 0.5);
    s.step(&mut opt);
    assert_eq!(opt.lr(), 0.25);
    let multi: lazywgpu::optim::MultiStepLR = lazywgpu::optim::MultiStepLR::new(vec![1], 0.5);
    let mut m = Scheduler::new(&mut opt, multi);
    m.step(&mut opt);
    assert_eq!(opt.lr(), 0.125);
    let cycle: lazywgpu::optim::OneCycleLR = lazywgpu::optim::OneCycleLR::new(1.0, 10);
    Scheduler::new(&mut opt, cycle);
    assert!((opt.lr() - 1.0 / 25.0).abs() < 1e-8, "{}", opt.lr());
    let mut plateau: lazywgpu::optim::ReduceLROnPlateau =
        lazywgpu::optim::ReduceLROnPlateau::new().patience(0);
    plateau.step(&mut opt, 1.0);
    plateau.step(&mut opt, 2.0);
    assert!((opt.lr() - 1.0 / 250.0).abs() < 1e-9, "{}", opt.lr());
}

/// Builds an optimiser over the given parameters.
type MakeOptimizer = dyn Fn(Vec<Tensor>) -> Box<dyn Optimizer>;

/// Losses of `steps` full-batch steps of a small MLP under `make`'s
/// optimiser, optionally stopping after `split` steps to save a
/// checkpoint and resuming into fresh objects with another init.
fn mlp_losses(
    make: &dyn Fn(Vec<Tensor>) -> Box<dyn Optimizer>,
    steps: usize,
    split: Option<usize>,
) -> Vec<f32> {
    let dev = Device::cpu();
    let x = Tensor::from_vec(
        (0..24).map(|i| (i as f32 * 0.37).sin()).collect(),
        [6, 4],
        &dev,
    )
    .unwrap();
    let y = Tensor::from_vec(vec![0i32, 2, 1, 0, 1, 2], [6], &dev).unwrap();
    let build = |seed: u64| {
        dev.manual_seed(seed);
        nn::Sequential::new()
            .add(nn::Linear::new(4, 5, &dev))
            .add(nn::ReLU)
            .add(nn::Linear::new(5, 3, &dev))
    };
    let path = std::env::temp_dir().join(format!(
        "lazywgpu-optim-resume-{}.safetensors",
        std::process::id()
    ));
    let mut model = build(7);
    let mut opt = make(model.parameters());
    let mut losses = Vec::new();
    for step in 0..steps {
        if split == Some(step) {
            nn::save_checkpoint(&path, &model, opt.as_ref(), &Default::default()).unwrap();
            model = build(99);
            opt = make(model.parameters());
            nn::load_checkpoint(&path, &model, opt.as_mut()).unwrap();
            std::fs::remove_file(&path).ok();
        }
        opt.zero_grad();
        let loss = F::cross_entropy(&model.forward(&x), &y);
        loss.backward();
        opt.step();
        losses.push(loss.item::<f32>().unwrap());
    }
    losses
}

#[test]
fn sgd_momentum_and_adadelta_state_survive_a_checkpoint() {
    let makers: [(&str, &MakeOptimizer); 3] = [
        ("sgd momentum", &|p| {
            Box::new(Sgd::new(p, 0.1).momentum(0.9))
        }),
        ("sgd nesterov", &|p| {
            Box::new(Sgd::new(p, 0.1).momentum(0.9).nesterov(true))
        }),
        ("adadelta", &|p| Box::new(Adadelta::new(p, 1.0))),
    ];
    for (name, make) in makers {
        let all = mlp_losses(make, 8, None);
        let resumed = mlp_losses(make, 8, Some(4));
        assert_eq!(resumed, all, "{name}: resumed losses differ");
    }
}

/// A small model trained for 8 steps with `opt`'s momentum cycled by a
/// OneCycleLr and an Ema whose decay changes every step: after step 2
/// (SGD's momentum buffers exist from step 1 on) nothing compiles, as the
/// momentum, the rate and the decay are runtime parameters.
fn cycling_compiles_nothing_on(dev: &Device, make: &MakeOptimizer, what: &str) {
    dev.manual_seed(5);
    let model = nn::Linear::new(4, 3, dev);
    let x = Tensor::from_vec(common::data(8 * 4, 1), [8, 4], dev).unwrap();
    let y = Tensor::from_vec(common::data(8 * 3, 2), [8, 3], dev).unwrap();
    let mut opt = make(model.parameters());
    let mut sched = Scheduler::new(opt.as_mut(), OneCycleLr::new(0.05, 8));
    let mut ema = Ema::new(&model.parameters(), 0.9);
    let (mut compiled_after_2, mut momenta) = (0, Vec::new());
    for step in 0..8 {
        opt.zero_grad();
        F::mse_loss(&model.forward(&x), &y).backward();
        opt.step();
        ema.set_decay(0.9 + 0.01 * step as f32);
        ema.update(&model.parameters());
        sched.step(opt.as_mut());
        dev.mark_step().unwrap();
        momenta.push(opt.group_momentum(0).unwrap());
        let compiled = dev.metrics().counter("graphs_compiled");
        if step == 2 {
            compiled_after_2 = compiled;
        } else if step > 2 {
            assert_eq!(
                compiled, compiled_after_2,
                "{what}: step {step} compiled a graph"
            );
        }
    }
    assert!(compiled_after_2 > 0, "{what}: the counter counts");
    momenta.dedup();
    assert_eq!(
        momenta.len(),
        8,
        "{what}: the momentum changes every step: {momenta:?}"
    );
    for p in ema.shadow().iter().chain(&model.parameters()) {
        let v: Vec<f32> = p.to_vec().unwrap();
        assert!(v.iter().all(|e| e.is_finite()), "{what}: {v:?}");
    }
}

#[test]
fn momentum_cycling_and_ema_decay_compile_nothing() {
    let Some(dev) = common::gpu() else { return };
    let makers: [(&str, &MakeOptimizer); 3] = [
        ("sgd", &|p| Box::new(Sgd::new(p, 0.1).momentum(0.9))),
        ("sgd nesterov", &|p| {
            Box::new(Sgd::new(p, 0.1).momentum(0.9).nesterov(true))
        }),
        ("adamw", &|p| Box::new(AdamW::new(p, 0.1))),
    ];
    for (what, make) in makers {
        cycling_compiles_nothing_on(&dev, make, what);
    }
}

#[test]
fn groups_keep_their_own_momentum_and_set_momentum_sets_every_group() {
    let dev = Device::cpu();
    let (a, b) = (Tensor::zeros([2], &dev), Tensor::zeros([3], &dev));
    let groups = || {
        vec![
            ParamGroup::new(vec![a.clone()]).momentum(0.5),
            ParamGroup::new(vec![b.clone()]).lr(0.01),
        ]
    };
    let mut sgd = Sgd::with_groups(groups(), 0.1).momentum(0.9);
    assert_eq!(sgd.group_momentum(0), Some(0.5));
    assert_eq!(sgd.group_momentum(1), Some(0.9));
    assert_eq!((sgd.group_lr(0), sgd.group_lr(1)), (0.1, 0.01));
    sgd.set_momentum(0.8);
    assert_eq!(
        (sgd.group_momentum(0), sgd.group_momentum(1)),
        (Some(0.8), Some(0.8))
    );
    // Adam's momentum is beta1.
    let mut adam = Adam::with_groups(groups(), 0.1).betas(0.7, 0.99);
    assert_eq!(adam.group_momentum(0), Some(0.5));
    assert_eq!(adam.group_momentum(1), Some(0.7));
    adam.set_group_momentum(1, 0.85);
    assert_eq!(adam.group_momentum(1), Some(0.85));
    assert_eq!(Adadelta::new(vec![a.clone()], 1.0).group_momentum(0), None);
}

#[test]
fn momentum_buffers_of_groups_are_numbered_across_groups() {
    let dev = Device::cpu();
    let a = Tensor::from_vec(vec![1.0f32, 2.0], [2], &dev).unwrap();
    let b = Tensor::from_vec(vec![3.0f32], [1], &dev).unwrap();
    let c = Tensor::from_vec(vec![4.0f32, 5.0], [2], &dev).unwrap();
    for p in [&a, &b, &c] {
        p.requires_grad_(true);
    }
    let groups = vec![
        ParamGroup::new(vec![a.clone()]),
        ParamGroup::new(vec![b.clone(), c.clone()]).momentum(0.0),
    ];
    let mut opt = Sgd::with_groups(groups, 0.1).momentum(0.9);
    ((&a * &a).sum_all() + (&b * &b).sum_all() + (&c * &c).sum_all()).backward();
    opt.step();
    // Only the first group has momentum: one buffer, of parameter 0.
    let names: Vec<String> = opt.state().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["momentum_buffer.0"]);
    opt.set_group_momentum(1, 0.5);
    opt.step();
    let names: Vec<String> = opt.state().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "momentum_buffer.0",
            "momentum_buffer.1",
            "momentum_buffer.2"
        ]
    );
    assert_eq!(opt.params().len(), 3);
}

thread_local! {
    /// Where the last panic of this thread was raised, while one is
    /// expected (the hook stays quiet for it).
    static EXPECTED: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// The message of the panic `f` raises, and the file it names as the
/// panic's place (the caller's, for `#[track_caller]` functions).
fn panic_message(f: impl FnOnce()) -> (String, String) {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let place = info.location().map(|l| l.file().to_string());
            let quiet = EXPECTED.with(|e| e.borrow().is_some());
            if quiet {
                EXPECTED.with(|e| *e.borrow_mut() = place);
            } else {
                default(info);
            }
        }));
    });
    EXPECTED.with(|e| *e.borrow_mut() = Some(String::new()));
    let payload = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).expect_err("a panic");
    let place = EXPECTED.with(|e| e.borrow_mut().take()).unwrap_or_default();
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    (message, place)
}

#[test]
fn misuse_panics_name_the_operation_and_the_values() {
    let cases: Vec<((String, String), &str)> = vec![
        (
            panic_message(|| {
                Adadelta::new(vec![Tensor::zeros([2], &Device::cpu())], 1.0).set_momentum(0.9)
            }),
            "set_group_momentum: lazywgpu::optim::adadelta::Adadelta has no momentum",
        ),
        (
            panic_message(|| {
                let mut opt = Adadelta::new(vec![Tensor::zeros([2], &Device::cpu())], 1.0);
                Scheduler::new(&mut opt, OneCycleLr::new(0.1, 10));
            }),
            "has no momentum or beta1",
        ),
        (
            panic_message(|| {
                let mut opt = Sgd::new(vec![Tensor::zeros([2], &Device::cpu())], 1.0);
                let mut s = Scheduler::new(&mut opt, OneCycleLr::new(0.1, 2));
                for _ in 0..3 {
                    s.step(&mut opt);
                }
            }),
            "OneCycleLr: stepped 3 times, past total_steps 2",
        ),
        (
            panic_message(|| {
                OneCycleLr::new(0.1, 0);
            }),
            "total_steps must be positive",
        ),
        (
            panic_message(|| {
                OneCycleLr::new(0.1, 10).pct_start(1.5);
            }),
            "pct_start: 1.5 is not between 0 and 1",
        ),
        (
            panic_message(|| {
                // Phase 0 ends at step 0: PyTorch divides by zero.
                let mut opt = Sgd::new(vec![Tensor::zeros([2], &Device::cpu())], 1.0);
                Scheduler::new(&mut opt, OneCycleLr::new(0.1, 2).pct_start(0.5));
            }),
            "phase 0 is empty at step 0",
        ),
        (
            panic_message(|| {
                ReduceLrOnPlateau::new().factor(1.0);
            }),
            "factor: 1 must be below 1",
        ),
        (
            panic_message(|| {
                Ema::new(&[Tensor::zeros([2], &Device::cpu())], 1.5);
            }),
            "Ema::new: decay 1.5 is not between 0 and 1",
        ),
        (
            panic_message(|| {
                let mut ema = Ema::new(&[Tensor::zeros([2], &Device::cpu())], 0.9);
                ema.update(&[Tensor::zeros([3], &Device::cpu())]);
            }),
            "Ema::update: tensor 0 has shape [3], its average [2]",
        ),
        (
            panic_message(|| {
                Ema::new(
                    &[Tensor::zeros([2], &Device::cpu()).cast(lazywgpu::DType::I32)],
                    0.9,
                );
            }),
            "Ema::new: tensor 0 has dtype i32",
        ),
        (
            panic_message(|| {
                Sgd::new(vec![Tensor::zeros([2], &Device::cpu())], 1.0).set_group_lr(2, 0.1);
            }),
            "set_group_lr: group 2 of an optimiser with 1 groups",
        ),
    ];
    for ((message, place), want) in cases {
        assert!(message.contains(want), "{message:?} does not say {want:?}");
        assert!(
            place.ends_with("nn_optim.rs"),
            "{message:?} is placed in {place}, not in the caller"
        );
    }
}
