//! Elementwise kernels that work four elements at a time while some of
//! their reads cannot (a transposed view, a column broadcast, a causal
//! mask made of `arange`s, a flip): those are computed a lane at a time
//! and gathered into vectors. Values against f64 loops written here,
//! with NaN and infinities, with and without rows of whole groups of
//! four; which way each kernel ran, from its dumped plan. Also the
//! gradient of an attention projection's q, k and v head views, whose
//! three scatters are assembled four at a time where heads are a
//! multiple of four wide.

mod common;

use lazywgpu::{Device, DeviceConfig, Tensor};

/// A GPU device dumping its kernels into a directory of its own (`None`:
/// no adapter; `common::gpu` fails the test instead under
/// `LAZYWGPU_REQUIRE_GPU=1`).
fn dumping_device(tag: &str) -> Option<(Device, std::path::PathBuf)> {
    common::gpu()?;
    let dir = std::env::temp_dir().join(format!("lazywgpu-gathered-{tag}-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    let config = DeviceConfig {
        dump_dir: Some(dir.clone()),
        ..DeviceConfig::default()
    };
    Some((Device::gpu_with(config).expect("a GPU device"), dir))
}

/// `(a + b.t() * c).tril(1) + d.flip([1])` for `a` and `d` [m, n], `b`
/// [n, m] and `c` [m, 1], in f64, NaN and infinities carried as PyTorch does
/// (`tril` zeroes what it drops, NaN included).
fn mixed_oracle([a, b, c, d]: [&[f32]; 4], (m, n): (usize, usize)) -> Vec<f32> {
    let mut out = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            let kept = (j as i64 - i as i64) <= 1;
            let inner = a[i * n + j] as f64 + b[j * m + i] as f64 * c[i] as f64;
            let lower = if kept { inner } else { 0.0 };
            out.push((lower + d[i * n + (n - 1 - j)] as f64) as f32);
        }
    }
    out
}

#[test]
fn reads_that_cannot_be_vectors_are_gathered_a_lane_at_a_time() {
    for (m, n) in [(6, 10), (5, 8), (7, 9), (3, 7), (64, 36), (1, 4)] {
        let Some((dev, dir)) = dumping_device(&format!("{m}x{n}")) else {
            return;
        };
        let mut a = common::data(m * n, 1);
        let mut b = common::data(n * m, 2);
        let c = common::data(m, 3);
        let d = common::data(m * n, 4);
        a[0] = f32::NAN;
        b[n * m - 1] = f32::INFINITY;
        // (0, 1): kept by `tril(1)`.
        a[1] = f32::NEG_INFINITY;
        let (ta, tb) = (
            Tensor::from_vec(a.clone(), [m, n], &dev).unwrap(),
            Tensor::from_vec(b.clone(), [n, m], &dev).unwrap(),
        );
        let tc = Tensor::from_vec(c.clone(), [m, 1], &dev).unwrap();
        let td = Tensor::from_vec(d.clone(), [m, n], &dev).unwrap();
        let y = (&ta + &tb.t() * &tc).tril(1) + td.flip([1]);
        let got = y.to_vec::<f32>().unwrap();
        let what = format!("{m}x{n}");
        let want = mixed_oracle([&a, &b, &c, &d], (m, n));
        common::assert_close(&got, &want, 1e-6, 1e-6, &what);
        let plans = common::dumped_plans(&dir);
        let elementwise: Vec<&String> = (plans.iter())
            .filter(|p| p.contains("strategy: Elementwise"))
            .collect();
        assert_eq!(elementwise.len(), 1, "{what}: one kernel:\n{plans:#?}");
        // Four at a time where rows are whole groups of four (so that
        // a batch of any size keeps them).
        let fours = n % 4 == 0;
        let plan = elementwise[0];
        assert!(
            plan.contains(&format!("Elementwise {{ vec4: {fours} }}")),
            "{what}:\n{plan}"
        );
        assert!(
            plan.contains("candidates: vec4 gathering n"),
            "{what}:\n{plan}"
        );
        assert_eq!(plan.contains("lanes("), fours, "{what}:\n{plan}");
        std::fs::remove_dir_all(&dir).ok();
    }
}

#[test]
fn a_value_read_both_as_vectors_and_by_lanes_keeps_its_kernel_scalar() {
    let (m, n) = (8, 12);
    let Some((dev, dir)) = dumping_device("both") else {
        return;
    };
    let a = common::data(m * n, 5);
    let ta = Tensor::from_vec(a.clone(), [m, n], &dev).unwrap();
    // One buffer bound once: as vectors for `a`, by lanes for its flip.
    let got = (&ta * 2.0 + ta.flip([1])).to_vec::<f32>().unwrap();
    let want: Vec<f32> = (0..m * n)
        .map(|e| (2.0 * a[e] as f64 + a[e / n * n + (n - 1 - e % n)] as f64) as f32)
        .collect();
    common::assert_close(&got, &want, 1e-6, 1e-6, "a * 2 + a.flip");
    let plans = common::dumped_plans(&dir);
    let plan = (plans.iter())
        .find(|p| p.contains("strategy: Elementwise"))
        .expect("an elementwise kernel");
    assert!(plan.contains("Elementwise { vec4: false }"), "{plan}");
    std::fs::remove_dir_all(&dir).ok();
}

/// The gradient of `x` [bsz, t, 3 * heads * d] through its q, k and v
/// head views ([bsz, heads, t, d] each), with the loss
/// `sum(2 q) + sum(k^T * k^T) + sum(exp(v))`, in f64: 2, 2x and exp(x)
/// over the three thirds of each row.
fn head_gradient_oracle(x: &[f32], row: usize) -> Vec<f32> {
    let third = row / 3;
    (x.iter().enumerate())
        .map(|(e, &v)| match (e % row) / third {
            0 => 2.0,
            1 => (2.0 * v as f64) as f32,
            _ => (v as f64).exp() as f32,
        })
        .collect()
}

#[test]
fn the_gradient_of_attention_head_views_is_assembled_with_vectors() {
    for (bsz, t, heads, d) in [(2, 5, 2, 4), (1, 3, 3, 8), (2, 4, 2, 3), (1, 7, 1, 5)] {
        for checks in [false, true] {
            let tag = format!("heads-{bsz}-{t}-{heads}-{d}-{checks}");
            let Some((dev, dir)) = dumping_device(&tag) else {
                return;
            };
            dev.set_checks(checks);
            let row = 3 * heads * d;
            let mut data = common::data(bsz * t * row, 7);
            data[1] = f32::NAN;
            data[heads * d + 1] = f32::INFINITY;
            data[2 * heads * d] = f32::NEG_INFINITY;
            let x = Tensor::from_vec(data.clone(), [bsz, t, row], &dev).unwrap();
            x.requires_grad_(true);
            let head = |p: usize| {
                let part = x.slice(2, p * heads * d, (p + 1) * heads * d, 1);
                part.reshape([bsz, t, heads, d]).permute([0, 2, 1, 3])
            };
            let (q, k, v) = (head(0), head(1), head(2));
            let kt = k.transpose(2, 3);
            let loss = (&q * 2.0).sum_all() + (&kt * &kt).sum_all() + v.exp().sum_all();
            loss.backward();
            let grad = x.grad().expect("a gradient").to_vec::<f32>();
            let what = format!("({bsz}, {t}, {heads}, {d}), checks {checks}");
            let grad = grad.unwrap_or_else(|e| panic!("{what}: {e}"));
            common::assert_close(&grad, &head_gradient_oracle(&data, row), 1e-5, 1e-6, &what);
            // The three scatters into x's gradient, summed: four at a
            // time where the heads' rows are whole groups of four.
            let plans = common::dumped_plans(&dir);
            let assembly: Vec<&String> = (plans.iter())
                .filter(|p| p.contains("strategy: Elementwise") && p.matches("(r").count() >= 3)
                .collect();
            assert!(
                !assembly.is_empty(),
                "{what}: no assembly kernel:\n{plans:#?}"
            );
            let fours = d % 4 == 0;
            for plan in assembly {
                let vec4 = format!("Elementwise {{ vec4: {fours} }}");
                assert!(plan.contains(&vec4), "{what}:\n{plan}");
                // Aligned, the scatters and the q and v views are read as
                // vectors; only k's gradient, read through its
                // transpose, is gathered.
                let candidates = (plan.lines())
                    .find(|l| l.starts_with("candidates:"))
                    .unwrap_or_default();
                let gathered = candidates.split([' ', ',']).filter(|w| w.starts_with('n'));
                if fours {
                    assert_eq!(gathered.count(), 1, "{what}:\n{plan}");
                }
            }
            std::fs::remove_dir_all(&dir).ok();
        }
    }
}

/// `where(mask.t(), a, pad(c))` for a bool `mask` [n, m], `a` [m, n] and
/// `c` [m, n - 2] padded by one column each side with 7: a boolean read
/// through a transpose and a padding, each gathered a lane at a time.
#[test]
fn booleans_and_padding_are_gathered_into_vectors() {
    for (m, n) in [(8, 12), (5, 8), (3, 6)] {
        let Some((dev, dir)) = dumping_device(&format!("bool-{m}x{n}")) else {
            return;
        };
        let mask: Vec<bool> = (0..n * m).map(|e| e % 3 != 1).collect();
        let mut a = common::data(m * n, 8);
        a[0] = f32::NAN;
        let c = common::data(m * (n - 2), 9);
        let tm = Tensor::from_vec(mask.clone(), [n, m], &dev).unwrap();
        let ta = Tensor::from_vec(a.clone(), [m, n], &dev).unwrap();
        let tc = Tensor::from_vec(c.clone(), [m, n - 2], &dev).unwrap();
        let y = tm.t().where_cond(&ta, tc.pad(&[(0, 0), (1, 1)], 7.0f32));
        let got = y.to_vec::<f32>().unwrap();
        let want: Vec<f32> = (0..m * n)
            .map(|e| {
                let (i, j) = (e / n, e % n);
                let padded = match j {
                    0 => 7.0,
                    j if j == n - 1 => 7.0,
                    j => c[i * (n - 2) + j - 1],
                };
                if mask[j * m + i] { a[e] } else { padded }
            })
            .collect();
        let what = format!("{m}x{n}");
        common::assert_close(&got, &want, 0.0, 0.0, &what);
        let plans = common::dumped_plans(&dir);
        let plan = (plans.iter())
            .find(|p| p.contains("strategy: Elementwise"))
            .expect("an elementwise kernel");
        let fours = n % 4 == 0;
        assert!(
            plan.contains(&format!("Elementwise {{ vec4: {fours} }}")),
            "{what}:\n{plan}"
        );
        std::fs::remove_dir_all(&dir).ok();
    }
}
