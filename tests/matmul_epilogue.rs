//! A matmul's epilogue (a bias, relu, a scale, a residual, an in-place
//! update of a stored tensor) stored four columns at a time where every
//! output's rows are a multiple of four long, one element at a time
//! elsewhere: values against f64 loops written here, for each matmul
//! kernel, and which way each product stored, from its dumped plan. A
//! product whose rows change length between steps stays generic.

mod common;

use lazywgpu::{Device, DeviceConfig, MatmulChoice, Tensor};

/// A device computing products with `kernel`, dumping into a directory
/// of its own (`None`: no GPU adapter; `common::gpu` fails the test
/// instead under `LAZYWGPU_REQUIRE_GPU=1`).
fn device(kernel: MatmulChoice, tag: &str) -> Option<(Device, std::path::PathBuf)> {
    common::gpu()?;
    let dir = std::env::temp_dir().join(format!("lazywgpu-epilogue-{tag}-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    let config = DeviceConfig {
        matmul: Some(kernel),
        dump_dir: Some(dir.clone()),
        ..DeviceConfig::default()
    };
    Some((Device::gpu_with(config).expect("a GPU device"), dir))
}

/// The inputs of the epilogue's product: `a`, `b`, the bias, the
/// residual `r` and the stored tensor `p` updated in place.
struct Inputs {
    a: Vec<f32>,
    b: Vec<f32>,
    bias: Vec<f32>,
    r: Vec<f32>,
    p: Vec<f32>,
}

/// The epilogue's two results in f64: `y = relu(a @ b + bias) * 0.5 + r`
/// and `p - 0.25 * y`, with NaN propagated as PyTorch does (relu of NaN
/// is NaN).
fn oracle(
    Inputs { a, b, bias, r, p }: &Inputs,
    (bsz, m, k, n): (usize, usize, usize, usize),
) -> (Vec<f32>, Vec<f32>) {
    let mut y = Vec::with_capacity(bsz * m * n);
    let mut updated = Vec::with_capacity(bsz * m * n);
    for e in 0..bsz * m * n {
        let (bi, i, j) = (e / (m * n), e / n % m, e % n);
        let dot: f64 = (0..k)
            .map(|q| a[bi * m * k + i * k + q] as f64 * b[q * n + j] as f64)
            .sum();
        let pre = dot + bias[j] as f64;
        let relu = if pre.is_nan() { pre } else { pre.max(0.0) };
        let v = relu * 0.5 + r[e] as f64;
        y.push(v as f32);
        updated.push((p[e] as f64 - 0.25 * v) as f32);
    }
    (y, updated)
}

/// The dumped plan of the matmul kernel, if it ran on the adapter's
/// matmul (its strategy line names `Matmul`).
fn matmul_plan(dir: &std::path::Path) -> String {
    let plans = common::dumped_plans(dir);
    let found: Vec<&String> = plans
        .iter()
        .filter(|p| p.contains("strategy: Matmul"))
        .collect();
    assert_eq!(found.len(), 1, "one matmul kernel:\n{plans:#?}");
    found[0].clone()
}

#[test]
fn epilogues_are_stored_four_columns_at_a_time_where_rows_allow() {
    // (batch, m, k, n): rows of 64, 36 and 4 columns store fours; 6 and
    // 33 one element at a time; 70 rows pass two lane tiles.
    let shapes = [
        (1, 37, 20, 64),
        (2, 9, 33, 36),
        (3, 16, 12, 4),
        (1, 5, 7, 6),
        (1, 70, 10, 33),
    ];
    for kernel in [
        MatmulChoice::Lanes,
        MatmulChoice::Tiled,
        MatmulChoice::Blocked,
    ] {
        for (s, &(bsz, m, k, n)) in shapes.iter().enumerate() {
            let tag = format!("{kernel:?}-{s}");
            let Some((dev, dir)) = device(kernel, &tag) else {
                return;
            };
            let mut a = common::data(bsz * m * k, 1 + s as u64);
            a[3] = f32::NAN;
            let mut b = common::data(k * n, 2 + s as u64);
            b[n + 1] = f32::INFINITY;
            let inputs = Inputs {
                a,
                b,
                bias: common::data(n, 3),
                r: common::data(bsz * m * n, 4),
                p: common::data(bsz * m * n, 5),
            };
            let tensor = |v: &[f32], shape: &[usize]| {
                Tensor::from_vec(v.to_vec(), shape.to_vec(), &dev).unwrap()
            };
            let at = tensor(&inputs.a, &[bsz, m, k]);
            let bt = tensor(&inputs.b, &[k, n]);
            let biast = tensor(&inputs.bias, &[n]);
            let rt = tensor(&inputs.r, &[bsz, m, n]);
            let pt = tensor(&inputs.p, &[bsz, m, n]);
            dev.mark_step().unwrap();
            let y = (at.matmul(&bt) + &biast).relu() * 0.5 + &rt;
            pt.sub_(&y * 0.25);
            dev.mark_step().unwrap();
            let (want_y, want_p) = oracle(&inputs, (bsz, m, k, n));
            let what = format!("{kernel:?} {bsz}x{m}x{k}x{n}");
            common::assert_close(&y.to_vec::<f32>().unwrap(), &want_y, 1e-4, 1e-4, &what);
            common::assert_close(&pt.to_vec::<f32>().unwrap(), &want_p, 1e-4, 1e-4, &what);
            let plan = matmul_plan(&dir);
            let fours = n % 4 == 0;
            assert!(
                plan.contains(&format!("vec4_out: {fours}")),
                "{what}: stored fours {fours}:\n{plan}"
            );
            let writes_fours = plan.lines().any(|l| l.contains(": f32x4 = write n"));
            assert_eq!(writes_fours, fours, "{what}:\n{plan}");
            std::fs::remove_dir_all(&dir).ok();
        }
    }
}

/// `relu(x @ w)` at a helper's line: the products of one trace site.
fn product(x: &Tensor, w: &Tensor) -> Tensor {
    x.matmul(w).relu()
}

/// Row lengths 64, 48, 33, 64, 17, unmarked then marked dynamic. Where
/// unmarked, 64 stores fours; at 48 the rows' length changed, so the site
/// stores one element at a time from there on: that crosses a guard
/// (the lane matmul's lanes by its columns, which the recompile warning
/// names; a GPU's tiled matmul names its output's stores), and 48 compiles a kernel generic over the rows' length, which
/// 33, 64 and 17 bind. Where marked, no size stores fours and one graph
/// compiles, generic over the marked size from the first.
#[test]
fn a_product_whose_rows_change_length_stays_generic() {
    for (marked, graphs) in [(false, 2), (true, 1)] {
        let Some(dev) = common::gpu() else { return };
        let (m, k) = (8, 16);
        let a = common::data(m * k, 9);
        let x = Tensor::from_vec(a.clone(), [m, k], &dev).unwrap();
        for n in [64usize, 48, 33, 64, 17] {
            let b = common::data(k * n, n as u64);
            let w = Tensor::from_vec(b.clone(), [k, n], &dev).unwrap();
            if marked {
                w.mark_dynamic(1);
            }
            let got = product(&x, &w).to_vec::<f32>().unwrap();
            let want: Vec<f32> = common::matmul_f64(&a, &b, (1, m, k, n))
                .into_iter()
                .map(|v| v.max(0.0))
                .collect();
            common::assert_close(&got, &want, 1e-4, 1e-4, &format!("rows of {n}"));
            dev.mark_step().unwrap();
        }
        let metrics = dev.metrics();
        let what = format!("marked {marked}: {metrics}");
        assert_eq!(metrics.counter("graphs_compiled"), graphs, "{what}");
        if !marked {
            let warning = metrics.warnings().last().cloned().unwrap_or_default();
            // The lane matmul (lavapipe's) names the guard its lanes
            // crossed; the tiled one (a GPU's), which keeps its lanes,
            // stores one element at a time once the rows' length is seen
            // to change, and names that change of its output binding.
            let lanes = dev
                .adapter()
                .is_some_and(|a| a.matmul_kernel.starts_with("lanes"));
            let why = match lanes {
                true => "guard `(n1[1] /^ 4) == 16` held at 16, not at 12",
                false => "`out0: f32x4 = write n3` -> `out0: f32 = write n3`",
            };
            assert!(
                warning.contains("not generic over the new sizes: kernel 0 (")
                    && warning.contains(why),
                "the reason 48 compiles again is named: {warning}"
            );
        }
    }
}
