//! Tuning the matmul kernel of a GPU device: each kernel the adapter can
//! run (tiled, blocked, the lane kernel) timed on shapes of the sizes
//! training steps use, its values checked against an f64 product on
//! sampled rows, and the fastest kept where it beats the adapter's
//! built-in choice by more than the noise margin.

use std::sync::Arc;

use super::Tuning;
use crate::config::{Autotune, DeviceConfig, MatmulChoice};
use crate::kernel::{MatmulKernel, Target};
use crate::runtime::gpu::GpuContext;
use crate::{Device, Tensor};

/// The products timed (m, k, n): a square one, a GPT-sized layer's
/// activations times its weight (768 rows of 128 into 512), a weight
/// gradient's long contraction; `full` adds larger and smaller ones.
pub(crate) fn shapes(mode: Autotune) -> Vec<(usize, usize, usize)> {
    let mut s = vec![(1024, 1024, 1024), (768, 128, 512), (128, 768, 512)];
    if mode == Autotune::Full {
        s.extend([(2048, 2048, 2048), (64, 784, 128), (4096, 512, 512)]);
    }
    s
}

/// The name a choice is stored and printed under.
pub(crate) fn name(choice: MatmulChoice) -> &'static str {
    match choice {
        MatmulChoice::Tiled => "tiled",
        MatmulChoice::Blocked => "blocked",
        MatmulChoice::Lanes => "lanes",
    }
}

/// The choice stored under `name`.
pub(crate) fn parse(name: &str) -> Option<MatmulChoice> {
    [
        MatmulChoice::Tiled,
        MatmulChoice::Blocked,
        MatmulChoice::Lanes,
    ]
    .into_iter()
    .find(|&c| self::name(c) == name)
}

/// The choice a generated kernel corresponds to.
fn choice_of(kernel: MatmulKernel) -> MatmulChoice {
    match kernel {
        MatmulKernel::Tiled => MatmulChoice::Tiled,
        MatmulKernel::Blocked => MatmulChoice::Blocked,
        MatmulKernel::Lanes(_) => MatmulChoice::Lanes,
    }
}

/// The kernels the adapter can run, its built-in choice first: asking
/// for a kernel the adapter cannot run (the lane kernel without a fixed
/// subgroup size) gives another, which is then not a candidate of its own.
pub(crate) fn candidates(ctx: &GpuContext) -> Vec<MatmulChoice> {
    let built = |c| choice_of(ctx.target(c).matmul);
    let mut out = vec![built(None)];
    for c in [
        MatmulChoice::Tiled,
        MatmulChoice::Blocked,
        MatmulChoice::Lanes,
    ] {
        if built(Some(c)) == c && !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// The matmul kernel for a device made with `config` on `ctx`: read from
/// the tuning cache, or timed now and cached; `None` where the config
/// names a kernel or tuning is off.
pub(crate) fn tune(ctx: &Arc<GpuContext>, config: &DeviceConfig) -> Option<Tuning> {
    let mode = super::mode(ctx, config);
    if config.matmul.is_some() || mode == Autotune::Off {
        return None;
    }
    let candidates: Vec<(String, Target)> = candidates(ctx)
        .into_iter()
        .map(|c| {
            let target = ctx.target(Some(c));
            (name(c).to_string(), target)
        })
        .collect();
    Some(super::tune_targets(
        ctx,
        ("matmul", mode),
        &candidates,
        &shapes(mode),
        trial,
    ))
}

/// An `m x k` by `k x n` product on `dev`, its values checked against an
/// f64 product on a few rows; `Err` names what failed (an error or a
/// wrong value).
fn trial(dev: Device, (m, k, n): (usize, usize, usize)) -> Result<super::Trial<'static>, String> {
    let a_host = super::operand(m * k, 1);
    let b_host = super::operand(k * n, 2);
    let set_up = || -> crate::Result<(Tensor, Tensor)> {
        let a = Tensor::from_vec(a_host.clone(), [m, k], &dev)?;
        let b = Tensor::from_vec(b_host.clone(), [k, n], &dev)?;
        let got = a.matmul(&b).to_vec::<f32>()?;
        check(&got, &a_host, &b_host, (m, k, n)).map_err(|message| crate::Error::Device {
            during: "autotune check".to_string(),
            message,
        })?;
        Ok((a, b))
    };
    let (a, b) = set_up().map_err(|e| format!("{m}x{k}x{n}: {e}"))?;
    Ok(Box::new(move || -> crate::Result<()> {
        // Held through the step: a value nothing holds is not computed.
        let product = a.matmul(&b);
        dev.mark_step()?;
        dev.wait()?;
        drop(product);
        Ok(())
    }))
}

/// Checks eight spread rows of `got` against an f64 product.
fn check(
    got: &[f32],
    a: &[f32],
    b: &[f32],
    (m, k, n): (usize, usize, usize),
) -> Result<(), String> {
    let tol = 1e-5 * k as f64 + 1e-5;
    for r in (0..8).map(|i| i * m / 8) {
        for j in 0..n {
            let want: f64 = (0..k)
                .map(|p| f64::from(a[r * k + p]) * f64::from(b[p * n + j]))
                .sum();
            let g = f64::from(got[r * n + j]);
            if (g - want).abs() > tol || g.is_nan() {
                return Err(format!("wrong value at [{r}, {j}]: {g} where {want}"));
            }
        }
    }
    Ok(())
}
