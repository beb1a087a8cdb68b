//! Tuning the matmul kernel of a GPU device: each kernel the adapter can
//! run (tiled, blocked, the lane kernel; for `f16` classes the
//! cooperative-matrix kernel too) timed on shapes of the sizes training
//! steps use, its values checked against an f64 product on sampled rows,
//! and the fastest kept where it beats the adapter's built-in choice by
//! more than the noise margin.

use std::sync::Arc;

use super::Tuning;
use crate::config::{Autotune, DeviceConfig, MatmulChoice};
use crate::kernel::{MatmulClass, MatmulKernel, Target};
use crate::runtime::gpu::GpuContext;
use crate::{DType, Device, Tensor};

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

/// The choice a generated kernel corresponds to.
pub(crate) fn choice_of(kernel: MatmulKernel) -> MatmulChoice {
    match kernel {
        MatmulKernel::Tiled => MatmulChoice::Tiled,
        MatmulKernel::Blocked => MatmulChoice::Blocked,
        MatmulKernel::Lanes(_) => MatmulChoice::Lanes,
        MatmulKernel::Coop(_) => MatmulChoice::Coop,
    }
}

/// The kernels the adapter can run on products of `dtype`
/// (`AdapterMatmuls::candidates`), its built-in choice first.
pub(crate) fn candidates(ctx: &GpuContext, dtype: DType) -> Vec<MatmulChoice> {
    let target = ctx.target(None);
    let mut out = vec![choice_of(target.matmul)];
    for (c, valid) in target.adapter_matmuls.candidates(dtype, &|_| true) {
        if valid && !out.contains(&c) {
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
    let candidates: Vec<(String, Target)> = candidates(ctx, DType::F32)
        .into_iter()
        .map(|c| {
            let target = ctx.target(Some(c));
            (c.name().to_string(), target)
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
    class_trial(
        dev,
        ClassWorkload {
            class: None,
            dtype: DType::F32,
            sizes: (1, m, k, n),
        },
    )
}

/// What a per-class tuning times: products of `dtype`, `sizes` =
/// `(batch, m, k, n)`, for `class` (its `Debug` text is part of the
/// tuning's key: classes whose timed sizes agree are cached apart; `None`
/// for the adapter-wide tuning's shapes).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ClassWorkload {
    #[expect(
        dead_code,
        reason = "read through `Debug` only: it makes the tuning's key"
    )]
    pub class: Option<MatmulClass>,
    pub dtype: DType,
    pub sizes: (usize, usize, usize, usize),
}

/// A workload's product on `dev` (operands made in f32 and cast to its
/// dtype), its first and last batch entries' values checked against an
/// f64 product of the cast operands; `Err` names what failed.
pub(crate) fn class_trial(
    dev: Device,
    work: ClassWorkload,
) -> Result<super::Trial<'static>, String> {
    let (batch, m, k, n) = work.sizes;
    let shape = |rows, cols| -> Vec<usize> {
        if batch == 1 {
            vec![rows, cols]
        } else {
            vec![batch, rows, cols]
        }
    };
    // The values the device holds after the cast, for the f64 check.
    let rounded = |v: Vec<f32>| -> Vec<f32> {
        v.into_iter()
            .map(|x| match work.dtype {
                DType::F16 => half::f16::from_f32(x).to_f32(),
                DType::BF16 => half::bf16::from_f32(x).to_f32(),
                _ => x,
            })
            .collect()
    };
    let a_host = super::operand(batch * m * k, 1);
    let b_host = super::operand(batch * k * n, 2);
    // The first and the last batch entry (a kernel that gets the batch
    // offsets wrong fails the last).
    let entries: Vec<usize> = if batch > 1 {
        vec![0, batch - 1]
    } else {
        vec![0]
    };
    let checked: Vec<(usize, Vec<f32>, Vec<f32>)> = entries
        .iter()
        .map(|&e| {
            let a = rounded(a_host[e * m * k..][..m * k].to_vec());
            let b = rounded(b_host[e * k * n..][..k * n].to_vec());
            (e, a, b)
        })
        .collect();
    let set_up = || -> crate::Result<(Tensor, Tensor)> {
        let a = Tensor::from_vec(a_host.clone(), shape(m, k), &dev)?.cast(work.dtype);
        let b = Tensor::from_vec(b_host.clone(), shape(k, n), &dev)?.cast(work.dtype);
        let got = a.matmul(&b).cast(DType::F32).to_vec::<f32>()?;
        let eps = match work.dtype {
            DType::F16 => 1e-3,
            DType::BF16 => 8e-3,
            _ => 1e-6,
        };
        for (e, a_check, b_check) in &checked {
            let got = &got[e * m * n..][..m * n];
            check(got, a_check, b_check, (m, k, n), eps).map_err(|message| {
                crate::Error::Device {
                    during: "autotune check".to_string(),
                    message: format!("batch entry {e}: {message}"),
                }
            })?;
        }
        // The cast operands stored now, so that every timed run is the
        // same compiled graph (a product of stored values).
        dev.mark_step()?;
        dev.wait()?;
        Ok((a, b))
    };
    let (a, b) = set_up().map_err(|e| format!("{work:?}: {e}"))?;
    Ok(Box::new(move || -> crate::Result<()> {
        // Held through the step: a value nothing holds is not computed.
        let product = a.matmul(&b);
        dev.mark_step()?;
        dev.wait()?;
        drop(product);
        Ok(())
    }))
}

/// Checks eight spread rows of `got` against an f64 product, within
/// `1e-5` per contracted element plus `eps` (the dtype's rounding of the
/// result) of each value.
fn check(
    got: &[f32],
    a: &[f32],
    b: &[f32],
    (m, k, n): (usize, usize, usize),
    eps: f64,
) -> Result<(), String> {
    for r in (0..8).map(|i| i * m / 8) {
        for j in 0..n {
            let want: f64 = (0..k)
                .map(|p| f64::from(a[r * k + p]) * f64::from(b[p * n + j]))
                .sum();
            let tol = 1e-5 * k as f64 + 1e-5 + eps * want.abs();
            let g = f64::from(got[r * n + j]);
            if (g - want).abs() > tol || g.is_nan() {
                return Err(format!("wrong value at [{r}, {j}]: {g} where {want}"));
            }
        }
    }
    Ok(())
}
