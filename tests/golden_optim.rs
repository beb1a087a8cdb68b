//! Golden values from PyTorch for the learning-rate schedules (OneCycleLR,
//! MultiStepLR, ReduceLROnPlateau), momentum cycling through SGD, Adam
//! and AdamW, SGD over parameter groups and the exponential moving
//! average of weights (tests/golden/optim.json, written by
//! tools/golden_optim.py). The schedules are host arithmetic, checked
//! once; the updates run on the CPU reference and on the GPU.

#![allow(clippy::needless_borrows_for_generic_args)]

mod common;

use common::devices;
use lazywgpu::optim::{
    Adam, AdamW, AnnealStrategy, Ema, MultiStepLr, OneCycleLr, Optimizer, ParamGroup, PlateauMode,
    ReduceLrOnPlateau, Scheduler, Sgd, ThresholdMode,
};
use lazywgpu::{Device, Tensor, no_grad};
use serde_json::Value;

const GOLDEN: &str = include_str!("golden/optim.json");

fn golden() -> Value {
    serde_json::from_str(GOLDEN).expect("golden JSON")
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("a number, not {v}"))
}

fn f32_of(v: &Value) -> f32 {
    num(v) as f32
}

fn usize_of(v: &Value) -> usize {
    v.as_u64().unwrap_or_else(|| panic!("a count, not {v}")) as usize
}

fn list(v: &Value) -> &Vec<Value> {
    v.as_array().unwrap_or_else(|| panic!("a list, not {v}"))
}

fn floats(v: &Value) -> Vec<f32> {
    list(&v["data"]).iter().map(f32_of).collect()
}

fn tensor(v: &Value, dev: &Device) -> Tensor {
    let shape: Vec<usize> = list(&v["shape"]).iter().map(usize_of).collect();
    Tensor::from_vec(floats(v), shape, dev).expect("golden tensor")
}

/// A leaf parameter holding `v`.
fn param(v: &Value, dev: &Device) -> Tensor {
    let p = tensor(v, dev);
    p.requires_grad_(true);
    p
}

/// Whether `got` is within `atol + rtol * |want|` of `want`.
fn near(got: f64, want: f64, rtol: f64, atol: f64) -> bool {
    (got - want).abs() <= atol + rtol * want.abs()
}

/// Rates and momenta are f32 in the optimisers, f64 in PyTorch.
#[track_caller]
fn assert_rate(got: f32, want: f64, what: &str) {
    assert!(
        near(got as f64, want, 1e-6, 1e-12),
        "{what}: {got}, PyTorch {want}"
    );
}

/// Compares a tensor with a golden one: `what` names the case and step.
#[track_caller]
fn assert_tensor(got: &Tensor, want: &Value, what: &str) {
    let got: Vec<f32> = got.to_vec().expect("readback");
    common::assert_close(&got, &floats(want), 1e-4, 2e-6, what);
}

/// Each group's learning rate.
fn group_lrs(opt: &dyn Optimizer) -> Vec<f32> {
    (0..opt.group_count()).map(|g| opt.group_lr(g)).collect()
}

/// An SGD with one single-parameter group per rate, for the schedules.
fn sgd_with_rates(rates: &[Value]) -> Sgd {
    let dev = Device::cpu();
    let groups = rates
        .iter()
        .map(|r| ParamGroup::new(vec![Tensor::zeros([1], &dev)]).lr(f32_of(r)))
        .collect();
    Sgd::with_groups(groups, 0.1)
}

/// The golden `args` of a OneCycleLR as the builder spells them.
fn one_cycle(args: &Value) -> OneCycleLr {
    let anneal = match args["anneal_strategy"].as_str() {
        Some("cos") => AnnealStrategy::Cos,
        Some("linear") => AnnealStrategy::Linear,
        other => panic!("anneal_strategy {other:?}"),
    };
    OneCycleLr::new(f32_of(&args["max_lr"]), usize_of(&args["total_steps"]))
        .pct_start(f32_of(&args["pct_start"]))
        .anneal_strategy(anneal)
        .three_phase(args["three_phase"].as_bool().expect("three_phase"))
        .div_factor(f32_of(&args["div_factor"]))
        .final_div_factor(f32_of(&args["final_div_factor"]))
        .cycle_momentum(args["cycle_momentum"].as_bool().expect("cycle_momentum"))
        .base_momentum(f32_of(&args["base_momentum"]))
        .max_momentum(f32_of(&args["max_momentum"]))
}

#[test]
fn one_cycle_rates_and_momenta_match_pytorch() {
    let golden = golden();
    for case in list(&golden["one_cycle"]) {
        let name = case["name"].as_str().expect("name");
        let mut opt = Sgd::new(vec![Tensor::zeros([1], &Device::cpu())], 0.01).momentum(0.9);
        let mut sched = Scheduler::new(&mut opt, one_cycle(&case["args"]));
        for (step, want) in list(&case["lrs"]).iter().enumerate() {
            if step > 0 {
                sched.step(&mut opt);
            }
            let what = format!("{name} step {step}");
            assert_rate(opt.lr(), num(want), &format!("{what}: lr"));
            assert_rate(sched.lr(), num(want), &format!("{what}: Scheduler::lr"));
            let momentum = opt.group_momentum(0).expect("SGD has a momentum");
            match case["momenta"].as_array() {
                Some(m) => assert_rate(momentum, num(&m[step]), &format!("{what}: momentum")),
                // Not cycled: the optimiser's own stays.
                None => assert_eq!((momentum, sched.momentum()), (0.9, None), "{what}"),
            }
        }
    }
}

#[test]
fn multi_step_rates_match_pytorch() {
    let golden = golden();
    for case in list(&golden["multi_step"]) {
        let name = case["name"].as_str().expect("name");
        let milestones = list(&case["milestones"]).iter().map(usize_of).collect();
        let schedule = MultiStepLr::new(milestones, f32_of(&case["gamma"]));
        let mut opt = sgd_with_rates(list(&case["base_lrs"]));
        let mut sched = Scheduler::new(&mut opt, schedule);
        for (step, want) in list(&case["lrs"]).iter().enumerate() {
            if step > 0 {
                sched.step(&mut opt);
            }
            for (g, (&got, want)) in group_lrs(&opt).iter().zip(list(want)).enumerate() {
                assert_rate(got, num(want), &format!("{name} step {step} group {g}"));
            }
        }
    }
}

/// The golden `args` of a ReduceLROnPlateau as the builder spells them.
fn plateau(args: &Value) -> ReduceLrOnPlateau {
    let mode = match args["mode"].as_str() {
        Some("min") => PlateauMode::Min,
        Some("max") => PlateauMode::Max,
        other => panic!("mode {other:?}"),
    };
    let threshold_mode = match args["threshold_mode"].as_str() {
        Some("rel") => ThresholdMode::Rel,
        Some("abs") => ThresholdMode::Abs,
        other => panic!("threshold_mode {other:?}"),
    };
    ReduceLrOnPlateau::new()
        .mode(mode)
        .factor(num(&args["factor"]))
        .patience(usize_of(&args["patience"]))
        .threshold(num(&args["threshold"]))
        .threshold_mode(threshold_mode)
        .cooldown(usize_of(&args["cooldown"]))
        .min_lr(f32_of(&args["min_lr"]))
        .eps(num(&args["eps"]))
}

#[test]
fn reduce_on_plateau_rates_match_pytorch() {
    let golden = golden();
    for case in list(&golden["plateau"]) {
        let name = case["name"].as_str().expect("name");
        let mut opt = sgd_with_rates(list(&case["base_lrs"]));
        let mut sched = plateau(&case["args"]);
        let metrics = list(&case["metrics"]).iter().zip(list(&case["lrs"]));
        for (step, (metric, want)) in metrics.enumerate() {
            // Python's repr, parsed exactly: some metrics sit on the
            // threshold's edge.
            let metric: f64 = metric.as_str().expect("metric").parse().expect("a float");
            sched.step(&mut opt, metric);
            for (g, (&got, want)) in group_lrs(&opt).iter().zip(list(want)).enumerate() {
                assert_rate(
                    got,
                    num(want),
                    &format!("{name} step {step} (metric {metric}) group {g}"),
                );
            }
        }
        assert_eq!(sched.steps(), list(&case["metrics"]).len());
    }
}

/// The golden per-group options over the builder's defaults.
fn sgd_groups(case: &Value, params: Vec<Tensor>) -> Sgd {
    let groups = params.into_iter().zip(list(&case["groups"])).map(|(p, g)| {
        let mut group = ParamGroup::new(vec![p]);
        group.lr = g["lr"].as_f64().map(|v| v as f32);
        group.momentum = g["momentum"].as_f64().map(|v| v as f32);
        group.weight_decay = g["weight_decay"].as_f64().map(|v| v as f32);
        group
    });
    let d = &case["defaults"];
    Sgd::with_groups(groups.collect(), f32_of(&d["lr"]))
        .momentum(f32_of(&d["momentum"]))
        .dampening(f32_of(&d["dampening"]))
        .weight_decay(f32_of(&d["weight_decay"]))
        .nesterov(d["nesterov"].as_bool().expect("nesterov"))
}

fn sgd_groups_on(dev: &Device, case: &Value) {
    let name = case["name"].as_str().expect("name");
    let inputs = &case["inputs"];
    let (x, y) = (tensor(&inputs["x"], dev), tensor(&inputs["y"], dev));
    let (w, b) = (param(&inputs["w"], dev), param(&inputs["b"], dev));
    let mut opt = sgd_groups(case, vec![w.clone(), b.clone()]);
    assert_eq!(opt.group_count(), 2);
    for (step, want) in list(&case["steps"]).iter().enumerate() {
        opt.zero_grad();
        let r = x.matmul(&w) + &b - &y;
        (&r * &r).sum_all().backward();
        opt.step();
        dev.mark_step().expect("step");
        let what = format!("{name} on {} step {step}", dev.name());
        assert_tensor(&w, &want[0], &format!("{what}: w"));
        assert_tensor(&b, &want[1], &format!("{what}: b"));
    }
}

#[test]
fn sgd_parameter_groups_match_pytorch() {
    let golden = golden();
    for dev in devices() {
        for case in list(&golden["sgd_groups"]) {
            sgd_groups_on(&dev, case);
        }
    }
}

/// The golden optimiser of a momentum-cycling case.
fn cycled_optimizer(case: &Value, w: &Tensor) -> Box<dyn Optimizer> {
    let a = &case["opt_args"];
    let (lr, wd) = (f32_of(&a["lr"]), f32_of(&a["weight_decay"]));
    let params = vec![w.clone()];
    match case["optimizer"].as_str() {
        Some("sgd") => Box::new(
            Sgd::new(params, lr)
                .momentum(f32_of(&a["momentum"]))
                .weight_decay(wd)
                .nesterov(a["nesterov"].as_bool().expect("nesterov")),
        ),
        Some("adam") => Box::new(Adam::new(params, lr).weight_decay(wd)),
        Some("adamw") => Box::new(AdamW::new(params, lr).weight_decay(wd)),
        other => panic!("optimizer {other:?}"),
    }
}

fn momentum_cycling_on(dev: &Device, case: &Value) {
    let name = case["name"].as_str().expect("name");
    let (a, t) = (tensor(&case["a"], dev), tensor(&case["t"], dev));
    let w = param(&case["w"], dev);
    let mut opt = cycled_optimizer(case, &w);
    let mut sched = Scheduler::new(opt.as_mut(), one_cycle(&case["schedule"]));
    let (lrs, momenta) = (list(&case["lrs"]), list(&case["momenta"]));
    for (step, want) in list(&case["params"]).iter().enumerate() {
        opt.zero_grad();
        let d = &w - &t;
        (&a * &(&d * &d)).sum_all().backward();
        opt.step();
        sched.step(opt.as_mut());
        dev.mark_step().expect("step");
        let what = format!("{name} on {} step {step}", dev.name());
        assert_tensor(&w, want, &what);
        assert_rate(opt.lr(), num(&lrs[step + 1]), &format!("{what}: lr"));
        let momentum = opt.group_momentum(0).expect("a momentum");
        assert_rate(
            momentum,
            num(&momenta[step + 1]),
            &format!("{what}: momentum"),
        );
    }
}

#[test]
fn momentum_cycling_matches_pytorch() {
    let golden = golden();
    for dev in devices() {
        for case in list(&golden["momentum_cycling"]) {
            momentum_cycling_on(&dev, case);
        }
    }
}

fn ema_on(dev: &Device, case: &Value) {
    let params: Vec<Tensor> = list(&case["inits"]).iter().map(|v| param(v, dev)).collect();
    let decays = list(&case["decays"]);
    let mut ema = Ema::new(&params, f32_of(&decays[0]));
    let steps = decays
        .iter()
        .zip(list(&case["updates"]))
        .zip(list(&case["averages"]));
    for (step, ((decay, values), want)) in steps.enumerate() {
        no_grad(|| {
            for (p, v) in params.iter().zip(list(values)) {
                p.copy_(&tensor(v, dev));
            }
        });
        ema.set_decay(f32_of(decay));
        ema.update(&params);
        dev.mark_step().expect("step");
        for (k, (avg, want)) in ema.shadow().iter().zip(list(want)).enumerate() {
            let what = format!("EMA on {} update {step} tensor {k}", dev.name());
            assert_tensor(avg, want, &what);
        }
    }
    assert_eq!(ema.updates(), decays.len());
    // Evaluating with the average: copied into the parameters in place.
    ema.copy_to(&params);
    for (k, (p, want)) in params
        .iter()
        .zip(list(&case["averages"][decays.len() - 1]))
        .enumerate()
    {
        assert_tensor(
            p,
            want,
            &format!("EMA copy_to on {} tensor {k}", dev.name()),
        );
    }
}

#[test]
fn ema_of_weights_matches_pytorch() {
    let golden = golden();
    for dev in devices() {
        ema_on(&dev, &golden["ema"]);
    }
}
