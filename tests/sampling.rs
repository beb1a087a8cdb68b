//! `cumsum` against an f64 running sum, and `multinomial` against the
//! distribution it samples (frequencies over many rows; zero weights never
//! drawn), on both backends.

mod common;

use common::{assert_close, devices};
use lazywgpu::Tensor;

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
