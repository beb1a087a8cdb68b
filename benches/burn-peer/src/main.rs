//! Peer benchmark: burn's wgpu backend, with kernel fusion, on lazywgpu's
//! comparison workloads W1–W6 (see `examples/compare.rs` in the parent repo).
//!
//! Every workload is warmed up first (burn compiles and autotunes kernels on
//! first use, which can take seconds), then timed: the median of N runs, each
//! run ending in a device sync or a readback so that asynchronous work is
//! counted. The medians go to stdout as markdown and to a JSON file that
//! `cargo run --release --example compare -- --peer FILE` reads.
//!
//! ```sh
//! cargo run --release -- --out ../../burn.json
//! cargo run --release -- --quick            # 5 timed runs instead of 11
//! ```

use std::panic::{self, AssertUnwindSafe};
use std::time::{Duration, Instant};

use burn::nn::loss::{CrossEntropyLoss, CrossEntropyLossConfig};
use burn::nn::{Linear, LinearConfig, Relu};
use burn::optim::{GradientsParams, ModuleOptimizer, SgdConfig};
use burn::prelude::*;
use burn::tensor::activation::{sigmoid, softmax};
use burn::tensor::Distribution;
use serde_json::{json, Value};

const W1_N: usize = 4_194_304;
const W2_SIDE: usize = 4096; // W2 sums W2_SIDE * W2_SIDE = 16,777,216 values
const W3_ROWS: usize = 4096;
const W3_COLS: usize = 1024;
const W4_N: usize = 1024;
const W5_BATCH: usize = 64;
const W5_STEPS_PER_BLOCK: usize = 20;
const W5_LR: f64 = 0.01;
const W6_ITERS: usize = 500; // two ops each: 1,000 ops

/// Warm-up policy: at least `min` runs, then keep going (up to `max`) until
/// two consecutive runs agree within 20%, i.e. compilation and autotuning are
/// over and the timings have settled.
struct Warmup {
    min: usize,
    max: usize,
}

const WARM: Warmup = Warmup { min: 3, max: 30 };
/// W5 warms up in blocks of `W5_STEPS_PER_BLOCK` steps; it has the most
/// kernels (forward, backward, update) to compile and tune.
const WARM_W5: Warmup = Warmup { min: 5, max: 30 };

/// Accumulates the time spent warming up across all workloads.
struct Bench {
    runs: usize,
    warmup: Duration,
}

impl Bench {
    /// Warms `f` up, then returns the median of `self.runs` timed calls.
    fn median(&mut self, name: &str, warm: &Warmup, mut f: impl FnMut()) -> Duration {
        let time = |f: &mut dyn FnMut()| {
            let t = Instant::now();
            f();
            t.elapsed()
        };
        let start = Instant::now();
        let mut prev: Option<Duration> = None;
        let mut count = 0;
        for i in 0..warm.max {
            count += 1;
            let t = time(&mut f);
            let settled = prev.is_some_and(|p| {
                let r = t.as_secs_f64() / p.as_secs_f64().max(1e-9);
                (0.8..1.25).contains(&r)
            });
            if i + 1 >= warm.min && settled {
                break;
            }
            prev = Some(t);
        }
        let spent = start.elapsed();
        self.warmup += spent;
        eprintln!("{name}: warm-up {count} runs, {:.1} s", spent.as_secs_f64());
        let mut times: Vec<Duration> = (0..self.runs).map(|_| time(&mut f)).collect();
        times.sort();
        let med = times[times.len() / 2];
        eprintln!(
            "{name}: median {:.3} ms over {} runs (min {:.3}, max {:.3})",
            ms(med),
            times.len(),
            ms(times[0]),
            ms(times[times.len() - 1])
        );
        med
    }
}

/// Waits until the device has executed everything queued so far. Callers keep
/// the result tensor alive across the call: the fusion backend may skip work
/// whose output was already dropped.
fn sync(device: &Device) {
    device.sync().expect("device sync");
}

/// W1: `sigmoid(tanh(x*2+1) - x) * x + 0.5`.
fn w1(x: &Tensor<1>) -> Tensor<1> {
    let t = x.clone().mul_scalar(2.0).add_scalar(1.0).tanh();
    (sigmoid(t - x.clone()) * x.clone()).add_scalar(0.5)
}

/// W2 as two `sum_dim` passes (`[4096, 4096] -> [4096, 1] -> [1]`), read back.
fn w2(x: &Tensor<2>) -> f32 {
    x.clone().sum_dim(1).sum().into_scalar::<f32>()
}

/// W5's model: 784-128-10 with ReLU.
#[derive(Module, Debug)]
struct Mlp {
    hidden: Linear,
    act: Relu,
    out: Linear,
}

impl Mlp {
    fn new(device: &Device) -> Self {
        Self {
            hidden: LinearConfig::new(784, 128).init(device),
            act: Relu::new(),
            out: LinearConfig::new(128, 10).init(device),
        }
    }

    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        self.out.forward(self.act.forward(self.hidden.forward(x)))
    }
}

/// W5's training state: model, loss, burn's SGD optimizer and the fixed batch.
struct Trainer {
    model: Option<Mlp>,
    loss: CrossEntropyLoss,
    optim: ModuleOptimizer,
    x: Tensor<2>,
    y: Tensor<1, Int>,
}

impl Trainer {
    fn new(device: &Device) -> Self {
        Self {
            model: Some(Mlp::new(device)),
            loss: CrossEntropyLossConfig::new().init(device),
            // Plain SGD: no momentum, no weight decay.
            optim: SgdConfig::new().init(),
            x: Tensor::random([W5_BATCH, 784], Distribution::Normal(0.0, 1.0), device),
            y: Tensor::random([W5_BATCH], Distribution::Uniform(0.0, 10.0), device),
        }
    }

    /// One step: forward, cross-entropy, backward, SGD update. Returns the
    /// loss tensor (not read back).
    fn step(&mut self) -> Tensor<1> {
        let model = self.model.take().expect("model");
        let loss = self
            .loss
            .forward(model.forward(self.x.clone()), self.y.clone());
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        self.model = Some(self.optim.step(W5_LR, model, grads));
        loss
    }
}

/// Runs one workload, turning a panic inside burn into an error message.
fn guarded<T>(name: &str, f: impl FnOnce() -> T) -> Result<T, String> {
    panic::catch_unwind(AssertUnwindSafe(f)).map_err(|e| {
        let msg = e
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| e.downcast_ref::<&str>().copied())
            .unwrap_or("non-string panic payload");
        eprintln!("{name} panicked: {msg}");
        format!("{name} panicked inside burn: {msg}")
    })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let out = match args.iter().position(|a| a == "--out") {
        Some(i) => args.get(i + 1).expect("--out needs a file").clone(),
        None => "burn.json".to_string(),
    };
    let runs = if quick { 5 } else { 11 };
    let name = format!("burn {} wgpu+fusion", env!("BURN_VERSION"));

    // With only the `wgpu` backend feature enabled, the default device is
    // burn's Wgpu backend, wrapped in burn's kernel fuser by the `fusion`
    // feature (also on by default in burn-wgpu).
    let device = Device::default();
    eprintln!("{name}: device {device:?}, {runs} timed runs per workload");

    let mut bench = Bench {
        runs,
        warmup: Duration::ZERO,
    };
    let mut notes: Vec<String> = Vec::new();
    let total = Instant::now();

    // W1: elementwise chain on 4M f32, checked once against the host.
    let w1_ms = guarded("W1", || {
        let x = Tensor::<1>::random([W1_N], Distribution::Default, &device);
        let got = w1(&x).into_data().try_into_vec::<f32>().expect("f32 data");
        let xs = x.to_data().try_into_vec::<f32>().expect("f32 data");
        let err = xs
            .iter()
            .zip(&got)
            .map(|(&v, &g)| {
                let want = 1.0 / (1.0 + (v - (v * 2.0 + 1.0).tanh()).exp()) * v + 0.5;
                (want - g).abs()
            })
            .fold(0.0f32, f32::max);
        if err > 1e-4 {
            notes.push(format!("W1 result differs from the host by up to {err}"));
        }
        ms(bench.median("W1", &WARM, || {
            let y = w1(&x);
            sync(&device);
            drop(y);
        }))
    })
    .map_err(|m| notes.push(m))
    .ok();

    // W2: sum of 16M f32 to a scalar, against the exact (f64) host sum.
    let mut w2_correct = false;
    let w2_ms = guarded("W2", || {
        let n = W2_SIDE * W2_SIDE;
        let host: Vec<f32> = (0..n).map(|i| (i % 997) as f32 / 997.0).collect();
        let expected: f64 = host.iter().map(|&v| v as f64).sum();
        let x = Tensor::<2>::from_data(TensorData::new(host, [W2_SIDE, W2_SIDE]), &device);
        let close = |v: f32| ((v as f64 - expected) / expected).abs() < 1e-4;
        let got = w2(&x);
        w2_correct = close(got);
        eprintln!("W2: two-pass sum {got}, expected {expected} (correct: {w2_correct})");
        // For the record: burn's one-call full reduction on the same data.
        let full = x.clone().reshape([n]).sum().into_scalar::<f32>();
        if !close(full) {
            notes.push(format!(
                "W2: burn's full sum() gives {full} (expected {expected}); timed as two sum_dim passes"
            ));
        }
        ms(bench.median("W2", &WARM, || {
            w2(&x);
        }))
    })
    .map_err(|m| notes.push(m))
    .ok();

    // W3: softmax of 4096 x 1024 along the last dim.
    let w3_ms = guarded("W3", || {
        let x = Tensor::<2>::random([W3_ROWS, W3_COLS], Distribution::Normal(0.0, 1.0), &device);
        ms(bench.median("W3", &WARM, || {
            let y = softmax(x.clone(), 1);
            sync(&device);
            drop(y);
        }))
    })
    .map_err(|m| notes.push(m))
    .ok();

    // W4: 1024^3 matmul.
    let w4_ms = guarded("W4", || {
        let a = Tensor::<2>::random([W4_N, W4_N], Distribution::Normal(0.0, 1.0), &device);
        let b = Tensor::<2>::random([W4_N, W4_N], Distribution::Normal(0.0, 1.0), &device);
        ms(bench.median("W4", &WARM, || {
            let c = a.clone().matmul(b.clone());
            sync(&device);
            drop(c);
        }))
    })
    .map_err(|m| notes.push(m))
    .ok();

    // W5: steady-state MLP training step, on Autodiff<Wgpu+fusion>. Steps run
    // back to back in blocks of 20 that end in a sync; time per step is the
    // median block's time / 20.
    let w5_ms = guarded("W5", || {
        let ad = device.clone().autodiff();
        let mut trainer = Trainer::new(&ad);
        let first = trainer.step().into_scalar::<f32>();
        let block = ms(bench.median("W5 (20-step block)", &WARM_W5, || {
            let mut loss = None;
            for _ in 0..W5_STEPS_PER_BLOCK {
                loss = Some(trainer.step());
            }
            sync(&ad);
            drop(loss);
        }));
        let last = trainer.step().into_scalar::<f32>();
        eprintln!("W5: loss {first} at step 1, {last} at the end");
        if !last.is_finite() || last >= first {
            notes.push(format!("W5: loss did not fall ({first} -> {last})"));
        }
        block / W5_STEPS_PER_BLOCK as f64
    })
    .map_err(|m| notes.push(m))
    .ok();

    // W6: 1,000 dependent scalar ops on a 1-element tensor, then a readback.
    let w6_us = guarded("W6", || {
        let per_run = bench.median("W6", &WARM, || {
            let mut x = Tensor::<1>::from_floats([1.0f32], &device);
            for _ in 0..W6_ITERS {
                x = x.mul_scalar(1.0001).add_scalar(0.0001);
            }
            x.into_scalar::<f32>();
        });
        per_run.as_secs_f64() * 1e6 / (2 * W6_ITERS) as f64
    })
    .map_err(|m| notes.push(m))
    .ok();

    let cell =
        |v: Option<f64>, unit: &str| v.map_or("failed".to_string(), |v| format!("{v:.3} {unit}"));
    println!("| workload | {name} |");
    println!("| --- | --- |");
    println!("| W1 chain 4M f32 | {} |", cell(w1_ms, "ms"));
    println!(
        "| W2 sum 16M f32 (two sum_dim passes, correct: {w2_correct}) | {} |",
        cell(w2_ms, "ms")
    );
    println!("| W3 softmax 4096x1024 | {} |", cell(w3_ms, "ms"));
    println!("| W4 matmul 1024^3 | {} |", cell(w4_ms, "ms"));
    println!(
        "| W5 MLP train step (burn SGD optimizer, lr {W5_LR}) | {} |",
        cell(w5_ms, "ms")
    );
    println!("| W6 dispatch overhead | {} |", cell(w6_us, "us/op"));
    println!(
        "warm-up {:.1} s, total {:.1} s",
        bench.warmup.as_secs_f64(),
        total.elapsed().as_secs_f64()
    );

    let mut json = json!({
        "name": name,
        "w1_ms": w1_ms,
        "w2_ms": w2_ms,
        "w3_ms": w3_ms,
        "w4_ms": w4_ms,
        "w5_ms": w5_ms,
        "w6_us_per_op": w6_us,
        "w2_correct": w2_correct,
        "warmup_s": bench.warmup.as_secs_f64(),
    });
    if !notes.is_empty() {
        json["notes"] = Value::from(notes.join("; "));
    }
    let text = serde_json::to_string_pretty(&json).expect("json");
    std::fs::write(&out, text + "\n").unwrap_or_else(|e| panic!("writing {out}: {e}"));
    eprintln!("wrote {out}");
}
