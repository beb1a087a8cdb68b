//! Differential property tests: random shapes (rank 0–4, size-1 and empty
//! dims, broadcasting, strided inputs) and random chains of up to 10 ops
//! give the same values on the GPU (fused, and unfused) and on the CPU
//! reference; a third test seeds the leaves with NaN, infinities and
//! signed zeros, which must land in the same places on both (NaN matches
//! only NaN, an infinity only the same infinity).
//!
//! Tolerances for f32: rtol 1e-5 / atol 1e-6 when only exact ops (add, sub,
//! mul, neg, abs, relu, max/min, floor/ceil/round, sign, where, movement)
//! are involved; rtol 2e-4 / atol 2e-5 once a transcendental op (exp, log,
//! sqrt, rsqrt, recip, div, sin, cos, tanh, sigmoid, pow) is in the chain,
//! since WGSL leaves their precision to the driver (a few ulp, amplified
//! by later ops).

#![allow(clippy::needless_borrows_for_generic_args)]

mod common;

use common::{assert_close, gpu};
use lazywgpu::{Device, Tensor};
use proptest::prelude::*;

/// One step of a random program applied to the running value `x`.
#[derive(Clone, Debug)]
enum Step {
    Unary(u8),
    /// Binary op with a new leaf broadcast against `x`: (op, which dims of
    /// the leaf are 1, leading dims dropped, leaf stored transposed).
    Binary(u8, u8, usize, bool),
    BinaryScalar(u8, f32),
    /// `where(x > leaf, x, other_leaf)`.
    Where(u8),
    /// Transpose two dims.
    Transpose(usize, usize),
    /// Unsqueeze at 0 and expand that dim to 2 (if rank < 5).
    ExpandLeading,
    /// Flatten then reshape back (a reshape round trip).
    ReshapeRoundTrip,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0u8..16).prop_map(Step::Unary),
        (0u8..7, any::<u8>(), 0usize..3, any::<bool>())
            .prop_map(|(o, m, d, t)| Step::Binary(o, m, d, t)),
        (0u8..7, -2.0f32..2.0).prop_map(|(o, v)| Step::BinaryScalar(o, v)),
        any::<u8>().prop_map(Step::Where),
        (0usize..5, 0usize..5).prop_map(|(a, b)| Step::Transpose(a, b)),
        Just(Step::ExpandLeading),
        Just(Step::ReshapeRoundTrip),
    ]
}

fn shape() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(
        prop_oneof![Just(1usize), 2usize..5, Just(0usize).prop_map(|z| z)],
        0..=4,
    )
    .prop_map(|mut s| {
        // Keep empty dims rare: at most the first dim may be 0.
        for d in s.iter_mut().skip(1) {
            if *d == 0 {
                *d = 3;
            }
        }
        s
    })
}

/// Deterministic leaf data in [-2, 2) from a tiny LCG (independent of the
/// library's own generator).
fn leaf_data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
        })
        .collect()
}

/// Values every kernel path must carry as PyTorch does.
const SPECIAL: [f32; 5] = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0];

thread_local! {
    /// Whether leaves made on this thread include `SPECIAL` values.
    static WITH_SPECIALS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn leaf(shape: &[usize], transposed: bool, seed: u64, dev: &Device) -> Tensor {
    let n: usize = shape.iter().product();
    let mut data = leaf_data(n, seed);
    if WITH_SPECIALS.with(|w| w.get()) {
        // About one element in four, chosen by the data itself.
        for (i, v) in data.iter_mut().enumerate() {
            let pick = (v.to_bits() as usize ^ i) % 20;
            if pick < SPECIAL.len() {
                *v = SPECIAL[pick];
            }
        }
    }
    if transposed && shape.len() >= 2 {
        let r = shape.len();
        let mut stored = shape.to_vec();
        stored.swap(r - 1, r - 2);
        Tensor::from_vec(data, stored, dev)
            .unwrap()
            .transpose(-1, -2)
    } else {
        Tensor::from_vec(data, shape.to_vec(), dev).unwrap()
    }
}

fn unary(x: &Tensor, op: u8) -> (Tensor, bool) {
    let exact = matches!(op, 0 | 1 | 4 | 10 | 11 | 12 | 13);
    let y = match op {
        0 => x.neg(),
        1 => x.abs(),
        2 => x.tanh(),
        3 => x.sigmoid(),
        4 => x.relu(),
        5 => x.sin(),
        6 => x.cos(),
        7 => x.tanh().exp(),
        8 => (x.abs() + 1.0).log(),
        9 => x.abs().sqrt(),
        10 => x.floor(),
        11 => x.ceil(),
        12 => x.round(),
        13 => x.sign(),
        14 => (x.abs() + 1.0).recip(),
        _ => (x.abs() + 1.0).rsqrt(),
    };
    (y, exact)
}

fn binary(x: &Tensor, y: &Tensor, op: u8) -> (Tensor, bool) {
    match op {
        0 => (x + y, true),
        1 => (x - y, true),
        2 => (x * y, true),
        3 => (x.maximum(y), true),
        4 => (x.minimum(y), true),
        5 => (x / (y.abs() + 1.0), false),
        _ => ((x.abs() + 0.5).pow(y.tanh()), false),
    }
}

fn binary_scalar(x: &Tensor, v: f32, op: u8) -> (Tensor, bool) {
    match op {
        0 => (x + v, true),
        1 => (v - x, true),
        2 => (x * v, true),
        3 => (x.maximum(v), true),
        4 => (x.minimum(v), true),
        5 => (x / (v.abs() + 1.0), false),
        _ => ((x.abs() + 0.5).pow(v), false),
    }
}

/// Builds the program on `dev`; returns the result and whether only exact
/// ops were used.
fn build(shape0: &[usize], steps: &[Step], dev: &Device) -> (Tensor, bool) {
    let mut x = leaf(shape0, false, 1, dev);
    let mut exact = true;
    for (i, s) in steps.iter().enumerate() {
        let seed = 100 + i as u64;
        let (y, e) = match s {
            Step::Unary(op) => unary(&x, *op),
            Step::Binary(op, mask, drop, transposed) => {
                let shape = x.shape().to_vec();
                let drop = (*drop).min(shape.len());
                let lshape: Vec<usize> = shape[drop..]
                    .iter()
                    .enumerate()
                    .map(|(k, &d)| if mask >> k & 1 == 1 { 1 } else { d })
                    .collect();
                let l = leaf(&lshape, *transposed, seed, dev);
                binary(&x, &l, *op)
            }
            Step::BinaryScalar(op, v) => binary_scalar(&x, *v, *op),
            Step::Where(mask) => {
                let shape = x.shape().to_vec();
                let lshape: Vec<usize> = shape
                    .iter()
                    .enumerate()
                    .map(|(k, &d)| if mask >> k & 1 == 1 { 1 } else { d })
                    .collect();
                let a = leaf(&lshape, false, seed, dev);
                let b = leaf(&shape, true, seed + 1000, dev);
                (x.gt(&a).where_cond(&x, &b), true)
            }
            Step::Transpose(a, b) => {
                let r = x.rank();
                if r == 0 {
                    (x.clone(), true)
                } else {
                    (x.transpose((a % r) as isize, (b % r) as isize), true)
                }
            }
            Step::ExpandLeading => {
                if x.rank() < 5 {
                    let mut target: Vec<isize> = vec![2];
                    target.extend(x.shape().iter().map(|&d| d as isize));
                    (x.unsqueeze(0).expand(target), true)
                } else {
                    (x.clone(), true)
                }
            }
            Step::ReshapeRoundTrip => {
                let shape = x.shape().to_vec();
                (x.reshape([-1]).reshape(shape), true)
            }
        };
        x = y;
        exact &= e;
    }
    (x, exact)
}

fn check(shape0: &[usize], steps: &[Step], fused: bool) {
    let Some(gpu) = gpu() else { return };
    gpu.set_fusion(fused);
    let cpu = Device::cpu();
    let (g, exact) = build(shape0, steps, &gpu);
    let (c, _) = build(shape0, steps, &cpu);
    assert_eq!(g.shape(), c.shape());
    let (rtol, atol) = if exact { (1e-5, 1e-6) } else { (2e-4, 2e-5) };
    let gv = g.to_vec::<f32>().unwrap();
    let cv = c.to_vec::<f32>().unwrap();
    assert_close(
        &gv,
        &cv,
        rtol,
        atol,
        &format!("shape {shape0:?} steps {steps:?} fused {fused}"),
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn random_chains_match_cpu_fused(shape0 in shape(), steps in prop::collection::vec(step(), 1..=10)) {
        check(&shape0, &steps, true);
    }

    #[test]
    fn random_chains_with_nan_and_infinities_match_cpu(shape0 in shape(), steps in prop::collection::vec(step(), 1..=10), fused in any::<bool>()) {
        WITH_SPECIALS.with(|w| w.set(true));
        check(&shape0, &steps, fused);
        WITH_SPECIALS.with(|w| w.set(false));
    }

    #[test]
    fn random_chains_match_cpu_unfused(shape0 in shape(), steps in prop::collection::vec(step(), 1..=10)) {
        check(&shape0, &steps, false);
    }
}
