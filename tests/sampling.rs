//! `cumsum` against an f64 running sum, and `multinomial` against the
//! distribution it samples (frequencies over many rows; zero weights never
//! drawn), on both backends; `rand`/`randn`'s Philox streams the same on
//! both, past 2^32 numbers too, with the moments they should have.

mod common;

use common::{assert_close, devices, gpu};
use lazywgpu::{Device, Tensor};

#[test]
fn cumsum_matches_running_sums_along_every_axis() {
    let shape = [3usize, 5, 4];
    let data: Vec<f32> = (0..60)
        .map(|i| ((i * 37 % 23) as f32 - 11.0) / 4.0)
        .collect();
    for dev in devices() {
        let x = Tensor::from_vec(data.clone(), shape, &dev).unwrap();
        for axis in 0..3 {
            let got: Vec<f32> = x.cumsum(axis as isize).to_vec().unwrap();
            let mut want = vec![0.0f32; 60];
            for i in 0..3 {
                for j in 0..5 {
                    for k in 0..4 {
                        let idx = [i, j, k];
                        let mut acc = 0.0f64;
                        for t in 0..=idx[axis] {
                            let mut at = idx;
                            at[axis] = t;
                            acc += data[at[0] * 20 + at[1] * 4 + at[2]] as f64;
                        }
                        want[i * 20 + j * 4 + k] = acc as f32;
                    }
                }
            }
            assert_close(
                &got,
                &want,
                1e-5,
                1e-5,
                &format!("cumsum axis {axis} on {}", dev.name()),
            );
        }
    }
}

#[test]
fn multinomial_draws_in_proportion_and_never_zero_weights() {
    let weights = [0.2f32, 0.0, 1.2, 0.6]; // probabilities 0.1, 0, 0.6, 0.3
    let rows = 6000;
    for dev in devices() {
        dev.manual_seed(5);
        let w = Tensor::from_vec(weights.to_vec(), [1, 4], &dev)
            .unwrap()
            .expand([rows as isize, 4]);
        let draws: Vec<i32> = w.multinomial().to_vec().unwrap();
        assert_eq!(draws.len(), rows);
        let mut counts = [0usize; 4];
        for &d in &draws {
            counts[d as usize] += 1;
        }
        assert_eq!(counts[1], 0, "a zero weight was drawn on {}", dev.name());
        for (k, &p) in [0.1f64, 0.0, 0.6, 0.3].iter().enumerate() {
            let freq = counts[k] as f64 / rows as f64;
            // Five standard deviations of a binomial proportion.
            let sd = (p * (1.0 - p) / rows as f64).sqrt();
            assert!(
                (freq - p).abs() <= 5.0 * sd + 1e-9,
                "category {k}: frequency {freq}, probability {p} on {}",
                dev.name()
            );
        }
    }
}

/// 2^32: where a 32-bit counter would wrap.
const TWO_32: u64 = 1 << 32;

/// `numel` uniforms and `numel` normals drawn on `dev` from position
/// `counter` of seed `seed`'s stream.
fn draws_at(dev: &Device, seed: u64, counter: u64, numel: usize) -> (Vec<f32>, Vec<f32>) {
    dev.manual_seed(seed);
    dev.set_rng_counter(counter);
    let uniform = Tensor::rand([numel], dev).to_vec().unwrap();
    dev.set_rng_counter(counter);
    let normal = Tensor::randn([numel], dev).to_vec().unwrap();
    (uniform, normal)
}

#[test]
fn rand_streams_are_the_same_on_gpu_and_cpu_around_two_to_the_32() {
    let Some(gpu) = gpu() else { return };
    let cpu = Device::cpu();
    // From the start, draws ending just below 2^32, one crossing it (the
    // offset's low word carries within the kernel), one past it, and one
    // crossing 2^64 (the position wraps).
    for counter in [0, TWO_32 - 3000, TWO_32 - 1000, TWO_32 + 7, u64::MAX - 5] {
        let (want_u, want_n) = draws_at(&cpu, 0x5eed_0000_0000_0042, counter, 3000);
        let (got_u, got_n) = draws_at(&gpu, 0x5eed_0000_0000_0042, counter, 3000);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got_u), bits(&want_u), "uniforms from {counter:#x}");
        assert_close(
            &got_n,
            &want_n,
            1e-4,
            1e-4,
            &format!("normals from {counter:#x}"),
        );
    }
}

#[test]
fn draws_at_two_to_the_32_plus_k_differ_from_draws_at_k() {
    for dev in devices() {
        for k in [0, 12345] {
            let (low_u, low_n) = draws_at(&dev, 3, k, 1000);
            let (high_u, high_n) = draws_at(&dev, 3, TWO_32 + k, 1000);
            // Independent 24-bit uniforms agree with probability 2^-24.
            let same_u = low_u.iter().zip(&high_u).filter(|(a, b)| a == b).count();
            let same_n = low_n.iter().zip(&high_n).filter(|(a, b)| a == b).count();
            assert!(
                same_u <= 1 && same_n <= 1,
                "{same_u} uniforms and {same_n} normals of 1000 repeat 2^32 on from {k} on {}",
                dev.name()
            );
        }
    }
}

/// Mean and (population) variance.
fn moments(xs: &[f32]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
    let var = xs
        .iter()
        .map(|&x| (f64::from(x) - mean).powi(2))
        .sum::<f64>()
        / n;
    (mean, var)
}

#[test]
fn a_million_uniforms_and_normals_have_the_expected_moments() {
    let n = 1_000_000;
    for dev in devices() {
        let (uniform, normal) = draws_at(&dev, 11, TWO_32 - 500_000, n);
        assert!(uniform.iter().all(|u| (0.0..1.0).contains(u)));
        assert!(normal.iter().all(|z| z.is_finite()));
        // Bounds of about five standard errors: a uniform's mean has sd
        // 0.289e-3 and its variance 0.075e-3; a normal's 1e-3 and 1.41e-3.
        let (mean, var) = moments(&uniform);
        assert!(
            (mean - 0.5).abs() < 1.5e-3,
            "uniform mean {mean} on {}",
            dev.name()
        );
        assert!(
            (var - 1.0 / 12.0).abs() < 4e-4,
            "uniform variance {var} on {}",
            dev.name()
        );
        let (mean, var) = moments(&normal);
        assert!(mean.abs() < 5e-3, "normal mean {mean} on {}", dev.name());
        assert!(
            (var - 1.0).abs() < 7e-3,
            "normal variance {var} on {}",
            dev.name()
        );
    }
}

#[test]
fn a_new_counter_each_step_never_recompiles() {
    let Some(dev) = gpu() else { return };
    dev.manual_seed(1);
    let x = Tensor::randn([64, 64], &dev);
    dev.mark_step().unwrap();
    let mut sums = Vec::new();
    for step in 0..4 {
        if step == 2 {
            // Past 2^32: the offset's high word is a parameter like the low one.
            dev.set_rng_counter(TWO_32 + 9);
        }
        let keep = Tensor::rand([64, 64], &dev).ge(0.5);
        let y = keep.where_cond(&x * 2.0, 0.0);
        sums.push(y.sum_all().item::<f32>().unwrap());
    }
    let m = dev.metrics();
    assert_eq!(
        m.counter("graphs_compiled"),
        2,
        "the randn, then every step: {m}"
    );
    assert!(
        sums.windows(2).all(|w| w[0] != w[1]),
        "each step draws anew: {sums:?}"
    );
}
