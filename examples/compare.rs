//! The comparison suite: workloads W1–W7 (defined in `PERFORMANCE.md`:
//! W1 an elementwise chain on 4M f32, W2 a 16M-element sum, W3 a softmax
//! of 4096 x 1024, W4 a 1024^3 matmul, W5 one MLP training step, W6 the
//! host cost per traced op, W7 one training step of the baby GPT of
//! `examples/gpt.rs`) in one process, on
//! lazywgpu's GPU device (fused, and with fusion off), on its CPU reference
//! backend, in plain ndarray, and beside the adapter's physical limit (a
//! hand-written vec4 copy kernel's bandwidth, an empty dispatch's round
//! trip). Medians after warm-up, every run ending in a device wait or a
//! readback; the fused runs and the limits they are divided by alternate
//! in rounds, so that a ratio is not a drift of the machine's speed. Prints a markdown table, writes it to
//! `compare.md` and a bar chart of the speeds relative to each row's
//! baseline to `compare.svg`, in `target/lazywgpu-out/` (or `--out DIR`).
//!
//! ```sh
//! cargo run --release --example compare
//! cargo run --release --example compare -- --quick          # fewer runs
//! cargo run --release --example compare -- --peer burn.json  # add the burn column
//! cargo run --release --example compare -- --json compare.json  # also the figures as JSON
//! ```
//!
//! `--peer FILE` reads medians written by the opt-in burn runner
//! (`benches/burn-peer`, a separate crate so the default build never
//! compiles burn): a JSON object `{"name": .., "w1_ms": .., ..}`.

#[path = "../benches/support/baseline.rs"]
mod baseline;
#[path = "support/cli.rs"]
mod cli;
#[path = "support/gpt_step.rs"]
mod gpt_step;
#[path = "support/mnist_cnn.rs"]
mod mnist_cnn;
#[path = "../benches/support/ndarray_mlp.rs"]
mod ndarray_mlp;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use baseline::median_of;
use clap::Parser;
use cli::OutDir;

use lazywgpu::nn::{self, Module, functional as F};
use lazywgpu::optim::{Adadelta, Optimizer, Sgd};
use lazywgpu::{DType, Device, Tensor};
use ndarray::{Array1, Array2, Axis};
use plotters::prelude::*;

const W1_N: usize = 4_194_304;
const W2_N: usize = 16_777_216;
const W3_ROWS: usize = 4096;
const W3_COLS: usize = 1024;
const W4_N: usize = 1024;

/// One workload's median time under one engine (`None`: not run).
type Cell = Option<Duration>;

struct Row {
    name: &'static str,
    /// W1 only: the same chain as a hand-written vec4 kernel.
    by_hand: Cell,
    /// W5 only: host time of one cache-hit step, traced and submitted
    /// while the device is idle.
    host: Cell,
    /// W5 only: share of the host's busy time hidden behind the device
    /// while steps run back to back.
    hidden: Option<f64>,
    /// W7 only: graphs compiled after the warm-up steps.
    compiles_after_warmup: Option<u64>,
    /// W7 only: the work of one step on the GPU.
    step_work: Option<StepWork>,
    fused: Cell,
    unfused: Cell,
    cpu_backend: Cell,
    ndarray: Cell,
    limit: Cell,
    peer: Cell,
}

fn w1(x: &Tensor) -> Tensor {
    ((x * 2.0 + 1.0).tanh() - x).sigmoid() * x + 0.5
}

/// W1–W4 and W6 on a lazywgpu device.
#[derive(Clone, Copy)]
struct LazyRuns {
    w1: Duration,
    w2: Duration,
    w3: Duration,
    w4: Option<Duration>,
    w6: Duration,
}

impl LazyRuns {
    /// Each workload's median over `rounds`.
    fn median(rounds: &[LazyRuns]) -> LazyRuns {
        let m = |f: fn(&LazyRuns) -> Duration| median(rounds.iter().map(f).collect());
        LazyRuns {
            w1: m(|r| r.w1),
            w2: m(|r| r.w2),
            w3: m(|r| r.w3),
            w4: rounds[0].w4.map(|_| m(|r| r.w4.unwrap_or_default())),
            w6: m(|r| r.w6),
        }
    }
}

/// Rounds of the fused runs and the adapter's limits (see `main`).
const ROUNDS: usize = 3;

/// The median of `d` (the upper one of an even count).
fn median(mut d: Vec<Duration>) -> Duration {
    d.sort();
    d[d.len() / 2]
}

fn run_lazy(dev: &Device, runs: usize, with_w4: bool) -> lazywgpu::Result<LazyRuns> {
    dev.manual_seed(0);
    let x1 = Tensor::rand([W1_N], dev);
    let x2 = Tensor::rand([W2_N], dev);
    let x3 = Tensor::randn([W3_ROWS, W3_COLS], dev);
    let a = Tensor::randn([W4_N, W4_N], dev);
    let b = Tensor::randn([W4_N, W4_N], dev);
    dev.mark_step()?;
    dev.wait()?;
    let sync = |t: &Tensor| {
        let _keep = t;
        dev.mark_step().expect("step");
        dev.wait().expect("wait");
    };
    let w1t = median_of(runs, || sync(&w1(&x1)));
    let w2t = median_of(runs, || {
        x2.sum_all().item::<f32>().expect("read");
    });
    let w3t = median_of(runs, || sync(&x3.softmax(-1)));
    let w4t = with_w4.then(|| median_of(runs.min(5), || sync(&a.matmul(&b))));
    let w6t = median_of(runs, || {
        let mut x = Tensor::from_vec(vec![1.0f32], [1], dev).expect("upload");
        for _ in 0..500 {
            x = x * 1.0001 + 0.0001;
        }
        x.item::<f32>().expect("read");
    }) / 1000;
    Ok(LazyRuns {
        w1: w1t,
        w2: w2t,
        w3: w3t,
        w4: w4t,
        w6: w6t,
    })
}

/// The median time of one step over `blocks` blocks of `steps` steps run
/// back to back (asynchronously), each block ending in a device wait.
fn time_in_blocks(
    dev: &Device,
    step: &mut dyn FnMut() -> lazywgpu::Result<()>,
    steps: usize,
    blocks: usize,
) -> lazywgpu::Result<Duration> {
    let mut times = Vec::with_capacity(blocks);
    for _ in 0..blocks {
        let t = Instant::now();
        for _ in 0..steps {
            step()?;
        }
        dev.wait()?;
        times.push(t.elapsed() / steps as u32);
    }
    Ok(median(times))
}

/// A closure running one classifier training step of `model` on `(x, y)`
/// (cross-entropy, `opt`), ended by `mark_step`.
fn classifier_step<'a>(
    dev: &'a Device,
    model: &'a nn::Sequential,
    opt: &'a mut dyn Optimizer,
    (x, y): (&'a Tensor, &'a Tensor),
) -> impl FnMut() -> lazywgpu::Result<()> + 'a {
    move || {
        opt.zero_grad();
        let loss = F::cross_entropy(&model.forward(x), y);
        loss.backward();
        opt.step();
        dev.mark_step()
    }
}

/// The work of one step, from the device's counters: kernels launched,
/// bytes the kernels bind for reading and writing, matmul FLOPs.
#[derive(Clone, Copy)]
struct StepWork {
    kernels: f64,
    read: f64,
    written: f64,
    flops: f64,
}

impl StepWork {
    /// The counters' growth from `before` to now on `dev`, over `steps`.
    fn since(dev: &Device, before: &lazywgpu::MetricsSnapshot, steps: usize) -> StepWork {
        let now = dev.metrics();
        let per = |name: &str| (now.counter(name) - before.counter(name)) as f64 / steps as f64;
        StepWork {
            kernels: per("kernel_launches"),
            read: per("kernel_bytes_read"),
            written: per("kernel_bytes_written"),
            flops: per("matmul_flops"),
        }
    }
}

/// W7: steady-state time of one training step of the baby GPT recipe
/// (`examples/gpt.rs`: batch 12 x 64 characters, AdamW, clipping), steps
/// back to back in blocks that end in a wait; also the graphs compiled
/// after the warm-up steps (should be 0) and the work of a step.
fn run_w7(
    dev: &Device,
    steps: usize,
    blocks: usize,
) -> lazywgpu::Result<(Duration, u64, StepWork)> {
    let mut step = gpt_step::trainer(dev)?;
    for _ in 0..3 {
        step()?;
    }
    dev.wait()?;
    let before = dev.metrics();
    let compiled = before.counter("graphs_compiled");
    let time = time_in_blocks(dev, &mut step, steps, blocks)?;
    let after = dev.metrics().counter("graphs_compiled") - compiled;
    let work = StepWork::since(dev, &before, steps * blocks);
    Ok((time, after, work))
}

/// W5: steady-state time of one MLP training step (784-128-10, ReLU,
/// batch 64, cross-entropy, SGD lr 0.01), input generated on the device.
/// Also returns the graphs compiled after step 2 (should be 0), the
/// median host time of a step (trace, collect, encode and submit, with the
/// device idle so that nothing waits for it), and the share of the host's
/// busy time hidden behind the device while steps run back to back
/// (`MetricsSnapshot::hidden_host_fraction`; GPU devices only).
fn run_w5(dev: &Device, steps: usize) -> lazywgpu::Result<W5> {
    dev.manual_seed(0);
    let model = nn::Sequential::new()
        .add(nn::Linear::new(784, 128, dev))
        .add(nn::ReLU)
        .add(nn::Linear::new(128, 10, dev));
    let mut opt = Sgd::new(model.parameters(), 0.01);
    let x = Tensor::randn([64, 784], dev);
    let y = (Tensor::rand([64], dev) * 10.0).floor().cast(DType::I32);
    let mut step = classifier_step(dev, &model, &mut opt, (&x, &y));
    for _ in 0..3 {
        step()?;
    }
    dev.wait()?;
    dev.reset_metrics();
    let step_time = time_in_blocks(dev, &mut step, steps, 5)?;
    let hidden = dev.metrics().hidden_host_fraction();
    let mut host = Vec::new();
    for _ in 0..steps {
        dev.wait()?;
        let t = Instant::now();
        step()?;
        host.push(t.elapsed());
    }
    dev.wait()?;
    Ok(W5 {
        step: step_time,
        compiles: dev.metrics().counter("graphs_compiled"),
        host: median(host),
        hidden,
    })
}

/// W5's figures (see `run_w5`).
struct W5 {
    step: Duration,
    compiles: u64,
    host: Duration,
    hidden: Option<f64>,
}

/// One of the extra rows (GPU fused only): its name, median time and
/// its own figure.
struct Extra {
    name: String,
    time: Duration,
    figure: String,
}

/// The language-model ops: top-k over a GPT-2 vocabulary, a sort of a
/// million elements, running sums along the vocabulary.
fn run_lm_ops(dev: &Device, runs: usize) -> lazywgpu::Result<Vec<Extra>> {
    let mut out = Vec::new();
    dev.manual_seed(0);
    let logits = Tensor::randn([8, 50_257], dev);
    let million = Tensor::randn([1 << 20], dev);
    dev.mark_step()?;
    dev.wait()?;
    let lm_ops: [(&str, &dyn Fn() -> Tensor); 3] = [
        ("topk 8x50257 k=50", &|| logits.topk(50, -1, true).0),
        ("argsort 2^20", &|| million.argsort(0, false)),
        ("cumsum 8x50257", &|| logits.cumsum(-1)),
    ];
    for (name, op) in lm_ops {
        let t = median_of(runs.min(5), || {
            let y = op();
            dev.mark_step().expect("step");
            dev.wait().expect("wait");
            drop(y);
        });
        out.push(Extra {
            name: name.to_string(),
            time: t,
            figure: format!("{:.2} ms", t.as_secs_f64() * 1e3),
        });
    }
    Ok(out)
}

/// The extra rows: matmuls of 1024^3 in f16 and bf16 (and of 4096^3 in
/// f32, f16 and bf16 when `big`), top-k, sort and running sums of a
/// language model's sizes, and one training step of PyTorch's MNIST
/// example network (batch 64, cross-entropy, Adadelta lr 1.0, dropout on),
/// timed in blocks of steps that end in a wait.
fn run_extra(dev: &Device, runs: usize, big: bool) -> lazywgpu::Result<Vec<Extra>> {
    let mut out = Vec::new();
    let mut sizes = vec![(1024usize, DType::F16), (1024, DType::BF16)];
    if big {
        sizes.extend([(4096, DType::F32), (4096, DType::F16), (4096, DType::BF16)]);
    }
    for (n, dtype) in sizes {
        dev.manual_seed(0);
        let a = Tensor::randn([n, n], dev).cast(dtype);
        let b = Tensor::randn([n, n], dev).cast(dtype);
        dev.mark_step()?;
        dev.wait()?;
        let t = median_of(runs.min(5), || {
            let c = a.matmul(&b);
            dev.mark_step().expect("step");
            dev.wait().expect("wait");
            drop(c);
        });
        out.push(Extra {
            name: format!("matmul {n}^3 {dtype}"),
            time: t,
            figure: format!(
                "{:.1} GFLOP/s",
                2.0 * (n as f64).powi(3) / t.as_secs_f64() / 1e9
            ),
        });
    }
    out.extend(run_lm_ops(dev, runs)?);
    dev.manual_seed(0);
    let model = mnist_cnn::cnn(dev);
    let mut opt = Adadelta::new(model.parameters(), 1.0);
    let x = Tensor::randn([64, 1, 28, 28], dev);
    let y = (Tensor::rand([64], dev) * 10.0).floor().cast(DType::I32);
    let mut step = classifier_step(dev, &model, &mut opt, (&x, &y));
    for _ in 0..3 {
        step()?;
    }
    dev.wait()?;
    let steps = if dev.adapter().is_some_and(|a| a.device_type == "Cpu") {
        2
    } else {
        10
    };
    let t = time_in_blocks(dev, &mut step, steps, 3)?;
    out.push(Extra {
        name: "MNIST CNN train step".to_string(),
        time: t,
        figure: format!("{:.1} steps/s", 1.0 / t.as_secs_f64()),
    });
    Ok(out)
}

fn ndarray_runs(runs: usize) -> [Duration; 6] {
    let x1 = Array1::from_shape_fn(W1_N, |i| (i % 1000) as f32 / 250.0 - 2.0);
    let x2 = Array1::from_shape_fn(W2_N, |i| (i % 997) as f32 / 997.0);
    let x3 = Array2::from_shape_fn((W3_ROWS, W3_COLS), |(i, j)| {
        ((i * 31 + j) % 101) as f32 / 50.0
    });
    let a = Array2::from_shape_fn((W4_N, W4_N), |(i, j)| ((i * 7 + j) % 13) as f32 * 0.1);
    let b = a.t().to_owned();
    let sig = |v: f32| 1.0 / (1.0 + (-v).exp());
    let w1 = median_of(runs, || {
        std::hint::black_box(x1.mapv(|v| sig((v * 2.0 + 1.0).tanh() - v) * v + 0.5));
    });
    let w2 = median_of(runs, || {
        std::hint::black_box(x2.sum());
    });
    let w3 = median_of(runs, || {
        let m = x3.map_axis(Axis(1), |r| r.fold(f32::NEG_INFINITY, |a, &b| a.max(b)));
        let mut e = &x3 - &m.insert_axis(Axis(1));
        e.mapv_inplace(f32::exp);
        let s = e.sum_axis(Axis(1)).insert_axis(Axis(1));
        std::hint::black_box(e / s);
    });
    let w4 = median_of(runs.min(5), || {
        std::hint::black_box(a.dot(&b));
    });
    let mut mlp = ndarray_mlp::Mlp::new();
    let w5 = median_of(runs, || {
        for _ in 0..10 {
            mlp.step(0.01);
        }
    }) / 10;
    let w6 = median_of(runs, || {
        let mut x = Array1::from_elem(1, 1.0f32);
        for _ in 0..500 {
            x = x * 1.0001 + 0.0001;
        }
        std::hint::black_box(x);
    }) / 1000;
    [w1, w2, w3, w4, w5, w6]
}

fn ms(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 1e-3 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{:.2} µs", s * 1e6)
    }
}

/// The cell text: time and the workload's own figure.
fn figure(row: usize, d: Duration) -> String {
    let s = d.as_secs_f64();
    match row {
        0 => format!("{} ({:.2} GB/s)", ms(d), (W1_N * 8) as f64 / s / 1e9),
        1 => format!("{} ({:.2} GB/s read)", ms(d), (W2_N * 4) as f64 / s / 1e9),
        2 => ms(d),
        3 => format!(
            "{} ({:.1} GFLOP/s)",
            ms(d),
            2.0 * (W4_N as f64).powi(3) / s / 1e9
        ),
        4 => format!("{} ({:.0} steps/s)", ms(d), 1.0 / s),
        6 => format!("{} ({:.2} steps/s)", ms(d), 1.0 / s),
        _ if s < 1e-6 => format!("{:.1} ns/op", s * 1e9),
        _ => format!("{:.2} µs/op", s * 1e6),
    }
}

fn parse_peer(path: &Path) -> Result<(String, [Cell; 7]), String> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{shown}: {e}"))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("{shown}: {e}"))?;
    let name = v["name"].as_str().unwrap_or("peer").to_string();
    let keys = [
        "w1_ms",
        "w2_ms",
        "w3_ms",
        "w4_ms",
        "w5_ms",
        "w6_us_per_op",
        "w7_ms",
    ];
    let mut cells = [None; 7];
    for (i, k) in keys.iter().enumerate() {
        cells[i] = v[k].as_f64().map(|x| {
            if i == 5 {
                Duration::from_secs_f64(x * 1e-6)
            } else {
                Duration::from_secs_f64(x * 1e-3)
            }
        });
    }
    Ok((name, cells))
}

fn chart(rows: &[Row], path: &Path, peer: &str) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (960, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let series: [(&str, RGBColor); 5] = [
        ("lazywgpu GPU fused", RGBColor(31, 119, 180)),
        ("GPU fusion off", RGBColor(255, 127, 14)),
        ("lazywgpu CPU backend", RGBColor(44, 160, 44)),
        ("ndarray", RGBColor(148, 103, 189)),
        (peer, RGBColor(214, 39, 40)),
    ];
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "speed relative to each row's baseline (copy kernel for W1-W3, ndarray for W4-W6); higher is better",
            ("sans-serif", 16),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..rows.len() as f64, (0.001f64..100.0).log_scale())?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc("baseline time / time")
        .draw()?;
    for (r, row) in rows.iter().enumerate() {
        let base = if r < 3 { row.limit } else { row.ndarray };
        let cells = [
            row.fused,
            row.unfused,
            row.cpu_backend,
            row.ndarray,
            row.peer,
        ];
        for (s, (cell, (_, color))) in cells.iter().zip(&series).enumerate() {
            if let (Some(c), Some(b)) = (cell, base) {
                let v = (b.as_secs_f64() / c.as_secs_f64()).clamp(0.001, 100.0);
                let x0 = r as f64 + 0.1 + s as f64 * 0.16;
                chart.draw_series([Rectangle::new(
                    [(x0, 0.001), (x0 + 0.14, v)],
                    color.filled(),
                )])?;
            }
        }
        chart.draw_series([Text::new(
            row.name.split(' ').next().unwrap_or("").to_string(),
            (r as f64 + 0.4, 0.0015),
            ("sans-serif", 16),
        )])?;
    }
    for (name, color) in series {
        chart
            .draw_series([Rectangle::new([(0.0, 0.001), (0.0, 0.001)], color.filled())])?
            .label(name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// The comparison suite: W1–W7 on lazywgpu's GPU device (fused and with
/// fusion off), its CPU backend, plain ndarray and the adapter's limits;
/// a markdown table and a bar chart.
#[derive(Parser, Debug)]
struct Args {
    /// Fewer runs per figure (5 instead of 11)
    #[arg(long)]
    quick: bool,
    /// Add the peer's column from the JSON medians written by the opt-in
    /// burn runner (benches/burn-peer)
    #[arg(long, value_name = "FILE")]
    peer: Option<PathBuf>,
    /// Also write the figures as JSON to FILE
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Also time the 4096^3 matmuls on a CPU adapter (always on GPUs;
    /// on lavapipe each takes seconds)
    #[arg(long)]
    big: bool,
    /// Time only the language-model ops (top-k, argsort, cumsum) on the
    /// GPU device, and print their rows
    #[arg(long)]
    lm_ops: bool,
    #[command(flatten)]
    out: OutDir,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Args = cli::parse();
    let runs = if args.quick { 5 } else { 11 };
    let peer = match &args.peer {
        Some(path) => Some(parse_peer(path)?),
        None => None,
    };
    let out_dir = args.out.dir()?;
    if args.lm_ops {
        let dev = Device::gpu()?;
        println!(
            "{}: language-model ops, medians of {}",
            dev.name(),
            runs.min(5)
        );
        for row in run_lm_ops(&dev, runs)? {
            println!("| {} | {} |", row.name, row.figure);
        }
        return Ok(());
    }
    let gpu = Device::gpu();
    let cpu = Device::cpu();
    let machine = match &gpu {
        Ok(d) => d.name(),
        Err(e) => format!("no GPU adapter ({e})"),
    };
    let report = gpu.as_ref().ok().and_then(Device::adapter);
    eprintln!("measuring on {machine} ...");
    if let Some(r) = &report {
        eprintln!("{r}");
    }
    let mut extra = Vec::new();
    let (fused, unfused, w5_fused, w5_unfused, limit, w5_host, w7) = match &gpu {
        Ok(dev) => {
            // The fused runs and the adapter's limits are measured in
            // alternating rounds and each reported as the median of its
            // rounds' medians: this machine's speed drifts by up to 5x over
            // minutes, and a ratio of two figures taken minutes apart
            // measured the drift.
            let copy = baseline::CopyKernel::new();
            let mut fused_rounds = Vec::new();
            let mut limit_rounds = Vec::new();
            for _ in 0..ROUNDS {
                fused_rounds.push(run_lazy(dev, runs, true)?);
                if let Some(c) = &copy {
                    limit_rounds.push([
                        c.time_copy(W1_N, runs),
                        c.time_copy(W2_N, runs),
                        c.time_copy(W3_ROWS * W3_COLS, runs) * 2,
                        c.time_empty(runs),
                        c.time_w1_by_hand(W1_N, runs),
                    ]);
                }
            }
            let fused = LazyRuns::median(&fused_rounds);
            let limit = copy.map(|_| {
                let m = |i: usize| median(limit_rounds.iter().map(|r| r[i]).collect());
                (m(0), m(1), m(2), m(3), m(4))
            });
            let w5 = run_w5(dev, 20)?;
            eprintln!("W5: {} graphs compiled after step 2", w5.compiles);
            eprintln!("W7: GPT training steps ...");
            let w7 = run_w7(dev, 5, if runs > 5 { 5 } else { 3 })?;
            eprintln!("W7: {} graphs compiled after the warm-up", w7.1);
            let on_gpu = dev.adapter().is_some_and(|a| a.device_type != "Cpu");
            eprintln!("extra rows: half-precision matmuls, the MNIST CNN step ...");
            extra = run_extra(dev, runs, args.big || on_gpu)?;
            dev.set_fusion(false);
            let unfused = run_lazy(dev, runs, false)?;
            let w5u = run_w5(dev, 10)?.step;
            dev.set_fusion(true);
            (
                Some(fused),
                Some(unfused),
                Some(w5.step),
                Some(w5u),
                limit,
                Some((w5.host, w5.hidden)),
                Some(w7),
            )
        }
        Err(_) => (None, None, None, None, None, None, None),
    };
    // The matmul classes tuned while the workloads ran (GPU devices with
    // tuning on), with each candidate's time relative to the device's own.
    if let Some(r) = gpu.as_ref().ok().and_then(Device::adapter) {
        for t in &r.matmul_class_tunings {
            eprintln!("tuned {t}");
        }
    }
    eprintln!("CPU reference backend ...");
    let cpu_runs = run_lazy(&cpu, runs.min(5), true)?;
    let w5_cpu = run_w5(&cpu, 10)?.step;
    let (w7_cpu, _, _) = run_w7(&cpu, 2, 1)?;
    eprintln!("ndarray ...");
    let nd = ndarray_runs(runs);
    let peer_cells = peer.as_ref().map(|p| p.1).unwrap_or([None; 7]);
    let peer_name = peer.as_ref().map_or("peer".to_string(), |p| p.0.clone());

    let names = [
        "W1 chain 4M f32",
        "W2 sum 16M f32",
        "W3 softmax 4096x1024",
        "W4 matmul 1024^3",
        "W5 MLP train step",
        "W6 host cost per op",
        "W7 GPT train step",
    ];
    let pick = |r: &Option<LazyRuns>, i: usize| -> Cell {
        r.as_ref().and_then(|r| match i {
            0 => Some(r.w1),
            1 => Some(r.w2),
            2 => Some(r.w3),
            3 => r.w4,
            5 => Some(r.w6),
            _ => None,
        })
    };
    let rows: Vec<Row> = (0..7)
        .map(|i| Row {
            name: names[i],
            by_hand: limit.and_then(|l| (i == 0).then_some(l.4)),
            host: w5_host.filter(|_| i == 4).map(|h| h.0),
            hidden: w5_host.filter(|_| i == 4).and_then(|h| h.1),
            fused: match i {
                4 => w5_fused,
                6 => w7.map(|w| w.0),
                _ => pick(&fused, i),
            },
            unfused: if i == 4 {
                w5_unfused
            } else {
                pick(&unfused, i)
            },
            cpu_backend: match i {
                4 => Some(w5_cpu),
                6 => Some(w7_cpu),
                _ => pick(&Some(cpu_runs), i),
            },
            ndarray: nd.get(i).copied(),
            compiles_after_warmup: w7.map(|w| w.1).filter(|_| i == 6),
            step_work: w7.map(|w| w.2).filter(|_| i == 6),
            limit: limit.and_then(|l| match i {
                0 => Some(l.0),
                1 => Some(l.1),
                2 => Some(l.2),
                4 => Some(l.3),
                _ => None,
            }),
            peer: peer_cells[i],
        })
        .collect();

    let mut md = String::new();
    let _ = writeln!(
        md,
        "Measured {} on {machine}; medians of {runs} runs after warm-up (fused GPU runs and the adapter's limits: median of {ROUNDS} alternating rounds).\n",
        date()
    );
    let _ = writeln!(
        md,
        "| workload | lazywgpu GPU fused | GPU fusion off | lazywgpu CPU backend | ndarray (CPU) | physical limit (same adapter) | {peer_name} | ratio |"
    );
    let _ = writeln!(md, "| --- | --- | --- | --- | --- | --- | --- | --- |");
    for (i, row) in rows.iter().enumerate() {
        let cell = |c: Cell| c.map_or("—".to_string(), |d| figure(i, d));
        let limit_text = match (i, row.limit) {
            (0, Some(d)) => format!(
                "vec4 copy: {}; W1 by hand: {}",
                figure(i, d),
                row.by_hand.map_or("—".to_string(), |h| figure(i, h))
            ),
            (1, Some(d)) => format!("vec4 copy: {}", figure(i, d)),
            (2, Some(d)) => format!("two vec4 copies: {}", ms(d)),
            (4, Some(d)) => format!("empty dispatch round trip: {}", ms(d)),
            _ => "—".to_string(),
        };
        let ratio = ratio_text(i, row);
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            row.name,
            cell(row.fused),
            cell(row.unfused),
            cell(row.cpu_backend),
            cell(row.ndarray),
            limit_text,
            cell(row.peer),
            ratio
        );
    }
    if !extra.is_empty() {
        let _ = writeln!(md, "\n| extra row | lazywgpu GPU fused |\n| --- | --- |");
        for e in &extra {
            let _ = writeln!(md, "| {} | {} ({}) |", e.name, ms(e.time), e.figure);
        }
    }
    println!("{md}");
    let (md_path, svg_path) = (out_dir.join("compare.md"), out_dir.join("compare.svg"));
    std::fs::write(&md_path, &md)?;
    chart(&rows, &svg_path, &peer_name)?;
    eprintln!("wrote {} and {}", md_path.display(), svg_path.display());
    if let Some(path) = &args.json {
        std::fs::write(
            path,
            json(&rows, &extra, &machine, report.as_ref(), runs, &peer_name),
        )?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// The table's figures as JSON: every time in seconds (`null` where not
/// run), the adapter's name and the date, for scripts that collect runs
/// from several machines (`tools/gpu-bench.sh`), with the adapter's
/// driver, limits, subgroup sizes and features.
fn json(
    rows: &[Row],
    extra: &[Extra],
    machine: &str,
    report: Option<&lazywgpu::AdapterReport>,
    runs: usize,
    peer: &str,
) -> String {
    let s = |c: Cell| c.map(|d| d.as_secs_f64());
    let rows: Vec<serde_json::Value> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            serde_json::json!({
                "name": r.name,
                "fused_s": s(r.fused),
                "unfused_s": s(r.unfused),
                "cpu_backend_s": s(r.cpu_backend),
                "ndarray_s": s(r.ndarray),
                "limit_s": s(r.limit),
                "by_hand_s": s(r.by_hand),
                "host_s": s(r.host),
                "hidden_host_fraction": r.hidden,
                "compiles_after_warmup": r.compiles_after_warmup,
                "step_work": r.step_work.map(|w| serde_json::json!({
                    "kernels": w.kernels,
                    "kernel_bytes_read": w.read,
                    "kernel_bytes_written": w.written,
                    "matmul_flops": w.flops,
                })),
                "peer_s": s(r.peer),
                "ratio": ratio_text(i, r),
            })
        })
        .collect();
    let doc = serde_json::json!({
        "date": date(),
        "adapter": machine,
        "adapter_facts": report.map(|r| serde_json::json!({
            "name": r.name,
            "backend": r.backend,
            "device_type": r.device_type,
            "driver": r.driver,
            "vendor_device": [r.vendor_device.0, r.vendor_device.1],
            "max_buffer_bytes": r.max_buffer_bytes,
            "max_storage_binding_bytes": r.max_storage_binding_bytes,
            "max_storage_buffers_per_stage": r.max_storage_buffers_per_stage,
            "max_workgroups_per_dimension": r.max_workgroups_per_dimension,
            "subgroup_sizes": [r.subgroup_sizes.0, r.subgroup_sizes.1],
            "features": r.features,
            "matmul_kernel": r.matmul_kernel,
            "loop_limit": r.loop_limit,
        })),
        "runs": runs,
        "peer": peer,
        "rows": rows,
        "extra": extra
            .iter()
            .map(|e| serde_json::json!({
                "name": e.name,
                "fused_s": e.time.as_secs_f64(),
                "figure": e.figure,
            }))
            .collect::<Vec<_>>(),
    });
    serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// Each row's ratio against its baseline, with the issue's target.
fn ratio_text(i: usize, row: &Row) -> String {
    let f = |c: Cell| c.map(|d| d.as_secs_f64());
    match (
        i,
        f(row.fused),
        f(row.limit),
        f(row.ndarray),
        f(row.unfused),
    ) {
        (0, Some(t), Some(l), _, Some(u)) => format!(
            "{:.2} of copy bandwidth (target ≥ 0.8), {:.2} of the hand-written kernel's speed (≥ 0.9), {:.1}x faster than fusion off (≥ 4)",
            l / t,
            f(row.by_hand).map_or(f64::NAN, |h| h / t),
            u / t
        ),
        (1, Some(t), Some(l), _, _) => format!("{:.2} of copy read bandwidth (≥ 0.7)", l / t),
        (2, Some(t), Some(l), _, _) => format!("{:.2}x two copies' time (≤ 1.5)", t / l),
        (3, Some(t), _, Some(n), _) => format!("{:.2} of ndarray's GFLOP/s (≥ 0.5)", n / t),
        (4, Some(t), _, Some(n), _) => format!(
            "{:.2}x ndarray's steps/s{}{}",
            n / t,
            f(row.peer).map_or(String::new(), |p| format!(", {:.2}x the peer's", p / t)),
            f(row.host).map_or(String::new(), |h| format!(
                "; host {:.0} µs a step, {:.1} % of it (≤ 5 %){}",
                h * 1e6,
                100.0 * h / t,
                row.hidden.map_or(String::new(), |x| format!(
                    ", {:.0} % of the host's time hidden behind the device",
                    100.0 * x
                ))
            ))
        ),
        (5, Some(t), _, _, _) => format!("{:.2} µs/op (≤ 2)", t * 1e6),
        (6, Some(t), _, _, _) => format!(
            "{:.2} steps/s; {} graphs compiled after warm-up{}{}",
            1.0 / t,
            row.compiles_after_warmup.unwrap_or(0),
            row.step_work.map_or(String::new(), |w| format!(
                "; a step: {:.0} kernels, {:.1} MB bound for reading, {:.1} MB written, {:.2} GFLOP of matmuls ({:.1} GFLOP/s)",
                w.kernels,
                w.read / 1e6,
                w.written / 1e6,
                w.flops / 1e9,
                w.flops / 1e9 / t
            )),
            f(row.peer).map_or(String::new(), |p| format!(
                "; {:.2}x the peer's speed",
                p / t
            ))
        ),
        _ => "—".to_string(),
    }
}

fn date() -> String {
    std::process::Command::new("date")
        .arg("+%Y-%m-%d")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map_or_else(|| "(date unknown)".to_string(), |s| s.trim().to_string())
}
