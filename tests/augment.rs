//! Device-side augmentation (`data::augment`) against a plain host loop
//! that applies the same draws, on the CPU reference and the GPU, and
//! against PyTorch replaying the draws from splitmix64
//! (tools/golden_augment.py wrote tests/golden/augment.json).

mod common;

use common::{assert_close, data, devices};
use lazywgpu::Tensor;
use lazywgpu::data::augment::{
    Compose, Draws, Normalize, RandomCrop, RandomHorizontalFlip, Transform,
};
use lazywgpu::data::{SplitMix64, shuffled_batches};

/// A CIFAR-like recipe with an uneven image (height 7, width 6).
fn recipe(seed: u64) -> Compose {
    Compose::new(seed)
        .then(RandomCrop {
            size: 5,
            padding: 2,
        })
        .then(RandomHorizontalFlip { p: 0.5 })
        .then(Normalize {
            mean: vec![0.1, -0.2, 0.3],
            std: vec![0.5, 2.0, 0.25],
        })
}

/// Crop (zero padding), flip and normalise `x` (`[b, c, h, w]`) with the
/// given draws, one pixel at a time.
fn host_augment(
    x: &[f32],
    [b, c, h, w]: [usize; 4],
    (size, padding): (usize, usize),
    draws: &[Draws],
    (mean, std): (&[f32], &[f32]),
) -> Vec<f32> {
    let (Draws::Crops(crops), Draws::Flips(flips)) = (&draws[0], &draws[1]) else {
        panic!("unexpected draws {draws:?}");
    };
    let mut out = Vec::with_capacity(b * c * size * size);
    for n in 0..b {
        let (top, left) = crops[n];
        for ch in 0..c {
            for i in 0..size {
                for j in 0..size {
                    let j = if flips[n] { size - 1 - j } else { j };
                    // Coordinates in the padded image, back to the input.
                    let (y, xx) = (
                        (top + i) as isize - padding as isize,
                        (left + j) as isize - padding as isize,
                    );
                    let inside = (0..h as isize).contains(&y) && (0..w as isize).contains(&xx);
                    let v = if inside {
                        x[((n * c + ch) * h + y as usize) * w + xx as usize]
                    } else {
                        0.0
                    };
                    out.push((v - mean[ch]) / std[ch]);
                }
            }
        }
    }
    out
}

#[test]
fn augmentation_matches_a_host_loop_on_every_device() {
    let shape = [4, 3, 7, 6];
    let x = data(shape.iter().product(), 3);
    let augment = recipe(99);
    let (mut flipped, mut kept, mut corners) = (0, 0, std::collections::HashSet::new());
    for dev in devices() {
        let batch = Tensor::from_vec(x.clone(), shape, &dev).unwrap();
        for step in 0..6 {
            let draws = augment.draws(step, &shape);
            let Draws::Flips(flips) = &draws[1] else {
                unreachable!()
            };
            flipped += flips.iter().filter(|&&f| f).count();
            kept += flips.iter().filter(|&&f| !f).count();
            if let Draws::Crops(c) = &draws[0] {
                corners.extend(c.iter().copied());
            }
            let want = host_augment(
                &x,
                shape,
                (5, 2),
                &draws,
                (&[0.1, -0.2, 0.3], &[0.5, 2.0, 0.25]),
            );
            let got = augment.apply(&batch, step).unwrap();
            assert_eq!(got.shape(), &[4, 3, 5, 5]);
            assert_close(
                &got.to_vec::<f32>().unwrap(),
                &want,
                1e-6,
                1e-6,
                &format!("{} step {step}", dev.name()),
            );
            dev.mark_step().unwrap();
        }
    }
    // The draws cover both flip outcomes and many crop positions
    // (corners reach into the padding on both sides).
    assert!(flipped > 4 && kept > 4, "{flipped} flips, {kept} kept");
    assert!(corners.len() > 10, "{corners:?}");
}

#[test]
fn draws_follow_the_documented_generator() {
    let augment = recipe(7);
    let shape = [3, 3, 7, 6];
    assert_eq!(augment.draws(2, &shape), augment.draws(2, &shape));
    assert_ne!(augment.draws(2, &shape), augment.draws(3, &shape));
    assert_ne!(augment.draws(2, &shape), recipe(8).draws(2, &shape));
    // seed ^ (step + 1) * 0xa0761d6478bd642f, then crops (top, left per
    // image over 7 + 4 - 5 + 1 rows and 6 + 4 - 5 + 1 columns), then flips.
    let mut rng = SplitMix64::new(7 ^ 3u64.wrapping_mul(0xa076_1d64_78bd_642f));
    assert_eq!(augment.rng(2), rng);
    let crops: Vec<(usize, usize)> = (0..3)
        .map(|_| {
            let top = (rng.next_u64() % 7) as usize;
            (top, (rng.next_u64() % 6) as usize)
        })
        .collect();
    let flips: Vec<bool> = (0..3)
        .map(|_| ((rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < 0.5)
        .collect();
    assert_eq!(
        augment.draws(2, &shape),
        vec![Draws::Crops(crops), Draws::Flips(flips), Draws::None]
    );
}

#[test]
fn flip_probabilities_zero_and_one() {
    for dev in devices() {
        let x = Tensor::from_vec(data(2 * 3 * 4, 1), [2, 1, 3, 4], &dev).unwrap();
        let mut rng = SplitMix64::new(1);
        for (p, want) in [(0.0, x.clone()), (1.0, x.flip([3]))] {
            let flip = RandomHorizontalFlip { p };
            let draws = flip.draw(&mut rng, x.shape());
            let got = flip.apply(&x, &draws).unwrap();
            assert_eq!(
                got.to_vec::<f32>().unwrap(),
                want.to_vec::<f32>().unwrap(),
                "{} p = {p}",
                dev.name()
            );
        }
    }
}

#[test]
#[should_panic(expected = "RandomCrop: a crop of 12 does not fit a side of 7 padded by 2")]
fn a_crop_larger_than_the_padded_image_panics() {
    let crop = RandomCrop {
        size: 12,
        padding: 2,
    };
    crop.draw(&mut SplitMix64::new(0), &[1, 3, 7, 7]);
}

/// `key`'s array of numbers.
fn floats(v: &serde_json::Value, key: &str) -> Vec<f32> {
    v[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key} is not an array"))
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

#[test]
fn draws_and_pixels_match_pytorch_replaying_them() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/augment.json");
    let golden: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let n = |v: &serde_json::Value| v.as_u64().unwrap() as usize;
    let (size, padding) = (n(&golden["size"]), n(&golden["padding"]));
    let augment = Compose::new(golden["seed"].as_u64().unwrap())
        .then(RandomCrop { size, padding })
        .then(RandomHorizontalFlip {
            p: golden["p"].as_f64().unwrap(),
        })
        .then(Normalize {
            mean: floats(&golden, "mean"),
            std: floats(&golden, "std"),
        });
    let shape: Vec<usize> = golden["input"]["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(n)
        .collect();
    let x = floats(&golden["input"], "data");
    for dev in devices() {
        let batch = Tensor::from_vec(x.clone(), shape.clone(), &dev).unwrap();
        for case in golden["steps"].as_array().unwrap() {
            let step = case["step"].as_u64().unwrap();
            let crops = case["crops"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| (n(&c[0]), n(&c[1])))
                .collect();
            let flips = case["flips"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f.as_bool().unwrap())
                .collect();
            assert_eq!(
                augment.draws(step, &shape),
                vec![Draws::Crops(crops), Draws::Flips(flips), Draws::None],
                "step {step}"
            );
            let got = augment.apply(&batch, step).unwrap();
            assert_close(
                &got.to_vec::<f32>().unwrap(),
                &floats(&case["output"], "data"),
                1e-6,
                1e-6,
                &format!("{} step {step}", dev.name()),
            );
        }
    }
    let s = &golden["shuffle"];
    let want: Vec<Vec<usize>> = s["batches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_array().unwrap().iter().map(n).collect())
        .collect();
    let got = shuffled_batches(
        n(&s["n"]),
        n(&s["batch_size"]),
        s["seed"].as_u64().unwrap(),
        s["epoch"].as_u64().unwrap(),
        false,
    );
    assert_eq!(got, want, "the loader's batch order, as Python replays it");
}
