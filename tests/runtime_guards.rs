//! The runtime tells the user what went wrong and where: recompiles are
//! explained (and can be capped), a graph that keeps growing without
//! `mark_step()` is reported with the line that extends it, and tensors
//! kept alive across steps are reported with the lines that made them.

mod common;

use lazywgpu::{Device, Error, Tensor};

/// One training step of a 784-32-10 MLP on a batch of `batch` (fixed
/// data): forward, loss, backward, SGD update, `mark_step`. Returns the
/// loss.
fn mlp_step(dev: &Device, w1: &Tensor, w2: &Tensor, batch: usize) -> lazywgpu::Result<f32> {
    let x = batch_of(dev, batch);
    let h = x.matmul(w1).relu();
    let y = h.matmul(w2);
    let loss = (&y * &y).mean_all();
    loss.backward();
    lazywgpu::no_grad(|| {
        for w in [w1, w2] {
            let g = w.grad().expect("a gradient");
            w.sub_(&(&g * 0.01));
            w.zero_grad();
        }
    });
    dev.mark_step()?;
    loss.item::<f32>()
}

/// The input batch (its line is the one a batch-size change changes).
fn batch_of(dev: &Device, batch: usize) -> Tensor {
    let data: Vec<f32> = (0..batch * 784).map(|i| ((i % 97) as f32) / 97.0).collect();
    Tensor::from_vec(data, [batch, 784], dev).expect("data")
}

fn weights(dev: &Device) -> (Tensor, Tensor) {
    dev.manual_seed(3);
    let w1 = &Tensor::randn([784, 32], dev) * 0.05;
    let w2 = &Tensor::randn([32, 10], dev) * 0.05;
    w1.requires_grad_(true);
    w2.requires_grad_(true);
    (w1, w2)
}

#[test]
fn a_recompile_is_explained_with_what_changed_and_where() {
    let Some(dev) = common::gpu() else { return };
    let (w1, w2) = weights(&dev);
    // The second step compiles again (the initial weights are stored now):
    // warm-up, not warned about.
    mlp_step(&dev, &w1, &w2, 64).unwrap();
    mlp_step(&dev, &w1, &w2, 64).unwrap();
    mlp_step(&dev, &w1, &w2, 64).unwrap();
    assert!(dev.metrics().warnings().is_empty(), "{}", dev.metrics());
    assert_eq!(dev.metrics().counter("recompiles"), 0);
    mlp_step(&dev, &w1, &w2, 50).unwrap();
    let metrics = dev.metrics();
    let warning = metrics
        .warnings()
        .iter()
        .find(|w| w.contains("recompiling"))
        .unwrap_or_else(|| panic!("no recompile warning: {metrics}"));
    assert!(warning.contains("50"), "{warning}");
    assert!(warning.contains("64"), "{warning}");
    assert!(warning.contains("tests/runtime_guards.rs:"), "{warning}");
    assert!(metrics.counter("recompiles") >= 1);
}

/// AdamW's moments start as zeros, values the first step's graph reads
/// as few shared inputs; from the second step each is stored on its own.
/// The second step compiles again with the same ops and more inputs:
/// warm-up, not a recompile (the diffusion example's U-Net warned here).
#[test]
fn an_optimizers_state_stored_after_its_first_step_is_warm_up() {
    use lazywgpu::nn::{self, Module};
    use lazywgpu::optim::{AdamW, Optimizer};
    let Some(dev) = common::gpu() else { return };
    dev.manual_seed(1);
    let model = nn::Sequential::new()
        .add(nn::Linear::new(784, 32, &dev))
        .add(nn::ReLU)
        .add(nn::Linear::new(32, 10, &dev));
    let mut opt = AdamW::new(model.parameters(), 1e-3);
    for _ in 0..3 {
        let y = model.forward(&batch_of(&dev, 16));
        let loss = (&y * &y).mean_all();
        loss.backward();
        opt.step();
        opt.zero_grad();
        dev.mark_step().unwrap();
        loss.item::<f32>().unwrap();
    }
    let metrics = dev.metrics();
    assert_eq!(metrics.counter("recompiles"), 0, "{metrics}");
    assert!(metrics.warnings().is_empty(), "{metrics}");
}

/// The warm-up allowance is the site's second graph only: a structure
/// that keeps changing (each read wired differently, same shapes) is a
/// recompile from its third graph on, and past a budget of none an error.
#[test]
fn a_structure_that_keeps_changing_is_warm_up_once_only() {
    let Some(dev) = common::gpu() else { return };
    dev.set_recompile_budget(0);
    let a = Tensor::from_vec(vec![1.0f32, 2.0], [2], &dev).unwrap();
    let b = Tensor::from_vec(vec![3.0f32, 5.0], [2], &dev).unwrap();
    // The same ops on the same lines, wired three ways: (x - y) * w + v.
    let wired = |k: usize| {
        let [x, y, w, v] = [[&a, &b, &a, &b], [&b, &a, &b, &a], [&a, &b, &b, &a]][k];
        let z = &(&(x - y) * w) + v;
        z.to_vec::<f32>()
    };
    assert_eq!(wired(0).unwrap(), vec![1.0, -1.0]);
    assert_eq!(
        wired(1).unwrap(),
        vec![7.0, 17.0],
        "the second graph: warm-up"
    );
    let err = wired(2).expect_err("the third graph is a recompile past the budget");
    assert!(matches!(err, Error::RecompileBudget { .. }), "{err}");
}

#[test]
fn the_recompile_budget_turns_the_next_recompile_into_an_error_naming_the_line() {
    let Some(dev) = common::gpu() else { return };
    dev.set_recompile_budget(1);
    let (w1, w2) = weights(&dev);
    mlp_step(&dev, &w1, &w2, 64).unwrap();
    mlp_step(&dev, &w1, &w2, 50).unwrap(); // recompile 1: within the budget
    let err = mlp_step(&dev, &w1, &w2, 33).expect_err("recompile 2 is over the budget");
    let Error::RecompileBudget {
        count,
        budget,
        change,
        location,
        ..
    } = &err
    else {
        panic!("wanted RecompileBudget, got {err}");
    };
    assert_eq!((*count, *budget), (2, 1));
    assert!(change.contains("33"), "{change}");
    assert!(location.starts_with("tests/runtime_guards.rs:"), "{err}");
    assert!(err.to_string().contains(location.as_str()));
    // Lifting the budget lets it compile.
    dev.set_recompile_budget(None);
    let loss = mlp_step(&dev, &w1, &w2, 33).unwrap();
    assert!(loss.is_finite());
}

/// Past the budget, the error names the guard the new sizes crossed, as
/// the warning does: an elementwise kernel over `3 * t` elements works on
/// `vec4`s while that is a multiple of four (`t` = 8, then 12: one
/// generic kernel), and `t = 7` crosses that guard.
#[test]
fn a_recompile_past_the_budget_names_the_guard_its_sizes_crossed() {
    let Some(dev) = common::gpu() else { return };
    dev.set_recompile_budget(1);
    let run = |t: usize| -> lazywgpu::Result<Vec<f32>> {
        let x = Tensor::from_vec(vec![0.5f32; 3 * t], [t, 3], &dev)?;
        let y = (x.exp() * 2.0).to_vec::<f32>();
        dev.mark_step()?;
        y
    };
    run(8).unwrap();
    run(12).unwrap();
    let err = run(7).expect_err("a second recompile, past the budget");
    let Error::RecompileBudget { change, .. } = &err else {
        panic!("wanted RecompileBudget, got {err}");
    };
    assert!(
        change.contains("not generic over the new sizes: kernel 0 (")
            && change.contains("% 4 == 0` held at 36, not at 21 (elements computed four at a time"),
        "{err}"
    );
    dev.set_recompile_budget(None);
    let want = (2.0 * 0.5f64.exp()) as f32;
    for got in run(7).unwrap() {
        assert!((got - want).abs() <= 1e-6 * want, "{got} vs {want}");
    }
}

/// `w -= 0.01 * g` in a loop that reads a value of `w` every 100
/// iterations and never calls `mark_step()`: each read runs the whole
/// history. Returns the device's graph-growth warnings.
fn update_loop(step_barrier: bool) -> Option<Vec<String>> {
    let dev = common::gpu()?;
    let w = Tensor::randn([256], &dev);
    for i in 0..300 {
        let g = &w * 2.0;
        w.sub_(&(&g * 0.005));
        if step_barrier {
            dev.mark_step().unwrap();
        }
        if i % 100 == 99 {
            let total = w.sum_all().item::<f32>().unwrap();
            assert!(total.is_finite());
        }
    }
    let metrics = dev.metrics();
    assert_eq!(
        metrics.counter("graph_growth_warnings") as usize,
        metrics
            .warnings()
            .iter()
            .filter(|w| w.contains("keeps growing"))
            .count()
    );
    Some(
        metrics
            .warnings()
            .iter()
            .filter(|w| w.contains("keeps growing"))
            .cloned()
            .collect(),
    )
}

#[test]
fn a_graph_that_keeps_growing_is_reported_once_with_the_line_extending_it() {
    let Some(warnings) = update_loop(false) else {
        return;
    };
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    // The line of `w.sub_(..)` in `update_loop`, and the advice.
    let line = format!(
        "tests/runtime_guards.rs:{}",
        line_of("w.sub_(&(&g * 0.005));")
    );
    assert!(warnings[0].contains(&line), "{line} not in {}", warnings[0]);
    assert!(warnings[0].contains("mark_step()"), "{}", warnings[0]);
}

#[test]
fn a_loop_with_a_step_barrier_is_not_reported() {
    let Some(warnings) = update_loop(true) else {
        return;
    };
    assert!(warnings.is_empty(), "{warnings:?}");
}

/// The 1-based line of this file whose text (trimmed) is `text`.
fn line_of(text: &str) -> usize {
    let source = include_str!("runtime_guards.rs");
    source
        .lines()
        .position(|l| l.trim() == text)
        .map(|i| i + 1)
        .unwrap_or_else(|| panic!("no line {text:?}"))
}

/// A small training loop that keeps each step's loss tensor (`keep`) or
/// only its value. Returns the leak warnings and the live tensors' groups.
fn training_loop(dev: &Device, keep: bool) -> (Vec<String>, Vec<lazywgpu::LiveTensorGroup>) {
    let w = Tensor::randn([16, 4], dev);
    w.requires_grad_(true);
    let x = Tensor::randn([8, 16], dev);
    let mut history: Vec<Tensor> = Vec::new();
    let mut values: Vec<f32> = Vec::new();
    for _ in 0..20 {
        let y = x.matmul(&w);
        let loss = (&y * &y).sum_all();
        loss.backward();
        lazywgpu::no_grad(|| {
            let g = w.grad().expect("a gradient");
            w.sub_(&(&g * 0.01));
            w.zero_grad();
        });
        dev.mark_step().unwrap();
        if keep {
            history.push(loss);
        } else {
            values.push(loss.item::<f32>().unwrap());
        }
    }
    let warnings = dev
        .metrics()
        .warnings()
        .iter()
        .filter(|w| w.contains("live tensors grew"))
        .cloned()
        .collect();
    (warnings, dev.live_tensors())
}

#[test]
fn tensors_kept_across_steps_are_reported_with_the_line_that_made_them() {
    for dev in common::devices() {
        let (warnings, groups) = training_loop(&dev, true);
        assert_eq!(warnings.len(), 1, "{}: {warnings:?}", dev.name());
        let line = format!(
            "tests/runtime_guards.rs:{}",
            line_of("let loss = (&y * &y).sum_all();")
        );
        assert!(warnings[0].contains(&line), "{line} not in {}", warnings[0]);
        // live_tensors: the kept losses are the largest group, by line.
        assert!(groups[0].location.starts_with(&line), "{groups:?}");
        assert_eq!(groups[0].count, 20, "{groups:?}");
        assert_eq!(groups[0].bytes, 20 * 4);
        assert_eq!(dev.metrics().counter("leak_warnings"), 1);
    }
}

#[test]
fn a_clean_training_loop_is_not_reported() {
    for dev in common::devices() {
        let (warnings, groups) = training_loop(&dev, false);
        assert!(warnings.is_empty(), "{}: {warnings:?}", dev.name());
        assert!(groups.iter().all(|g| g.count < 20), "{groups:?}");
        assert_eq!(dev.metrics().counter("leak_warnings"), 0);
    }
}

#[test]
fn each_step_reports_host_device_and_hidden_time() {
    let Some(dev) = common::gpu() else { return };
    let (w1, w2) = weights(&dev);
    for _ in 0..3 {
        mlp_step(&dev, &w1, &w2, 64).unwrap();
    }
    dev.reset_metrics();
    let steps = 6;
    for _ in 0..steps {
        mlp_step(&dev, &w1, &w2, 64).unwrap();
    }
    let m = dev.metrics();
    let t = |name: &str| m.timer(name).unwrap_or_else(|| panic!("no {name}"));
    for name in ["step_wall", "step_host", "step_device", "step_hidden"] {
        assert_eq!(t(name).count, steps, "{name}: {m}");
    }
    let (wall, host, device, hidden) = (
        t("step_wall").total,
        t("step_host").total,
        t("step_device").total,
        t("step_hidden").total,
    );
    assert!(host <= wall && hidden <= host && hidden <= device, "{m}");
    // Every step reads its loss, so the device ran each step's work.
    assert!(device > std::time::Duration::ZERO, "{m}");
    let fraction = m.hidden_host_fraction().expect("steps were recorded");
    assert!((0.0..=1.0).contains(&fraction), "{fraction}");
}

#[test]
fn switching_a_device_mode_is_not_a_recompile() {
    let Some(dev) = common::gpu() else { return };
    dev.set_recompile_budget(0);
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], [4], &dev).unwrap();
    for checks in [false, true, false] {
        dev.set_checks(checks);
        let y = (&x * 2.0).exp().to_vec::<f32>().unwrap();
        assert_eq!(y.len(), 4);
    }
    dev.set_fusion(false);
    (&x * 2.0).exp().to_vec::<f32>().unwrap();
    let m = dev.metrics();
    assert_eq!(m.counter("recompiles"), 0, "{m}");
    assert!(m.warnings().is_empty(), "{m}");
}
