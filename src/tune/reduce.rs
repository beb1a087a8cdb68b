//! Tuning the rule by which a reduction's sizes pick its kernel
//! (`kernel::ReduceRule`: from how many elements an output a workgroup
//! tree reduces it, and whether split sums read four elements at a time):
//! each candidate rule timed on sums from rows of 32 elements to a whole
//! tensor, its values checked against f64 sums, and the fastest kept where
//! it beats the built-in rule by more than the noise margin. A rule, not
//! a kernel per shape: one choice per adapter, read by every reduction
//! the device lowers (forced reductions and a site's kept strategies
//! come first, as without tuning).

use std::sync::Arc;

use super::Tuning;
use crate::config::{Autotune, DeviceConfig};
use crate::kernel::{ReduceRule, Target};
use crate::runtime::gpu::GpuContext;
use crate::{Device, Tensor};

/// One reduction timed: a sum of `[rows, cols]` over `axis` (0: columns,
/// strided; 1: rows), or over every element (`None`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Workload {
    pub rows: usize,
    pub cols: usize,
    pub axis: Option<usize>,
}

/// The reductions timed, 2M elements each: rows of 32, 256, 2,048 and
/// 16,384 (short rows with many outputs, through a row per workgroup),
/// 1,024 strided columns of 2,048, and whole-tensor sums of 2M and 16M
/// (split into parts, where sums by fours apply); `full` adds rows of 64
/// and strided columns of 16M elements.
pub(crate) fn workloads(mode: Autotune) -> Vec<Workload> {
    let w = |rows, cols, axis| Workload { rows, cols, axis };
    let mut s = vec![
        w(65_536, 32, Some(1)),
        w(8192, 256, Some(1)),
        w(1024, 2048, Some(1)),
        w(128, 16_384, Some(1)),
        w(2048, 1024, Some(0)),
        w(2048, 1024, None),
        // 16M: split into 131,072 parts of 128 on GPUs, a regime the 2M
        // sum (parts of 32) does not reach; without it an H100 kept a
        // rule (a tree from 64 elements) that made W2's 16M sum 3.4x
        // slower than the built-in one.
        w(4096, 4096, None),
    ];
    if mode == Autotune::Full {
        s.extend([w(262_144, 64, Some(1)), w(4096, 4096, Some(0))]);
    }
    s
}

/// The reduction rule for a device made with `config` on `ctx`: read from
/// the tuning cache, or timed now and cached; `None` where the config
/// forces a reduction kernel or tuning is off.
pub(crate) fn tune(ctx: &Arc<GpuContext>, config: &DeviceConfig) -> Option<Tuning> {
    let mode = super::mode(ctx, config);
    if config.reduce.is_some() || mode == Autotune::Off {
        return None;
    }
    let target = ctx.target(None);
    let candidates: Vec<(String, Target)> = ReduceRule::candidates(target.reduce_rule)
        .into_iter()
        .map(|rule| (rule.name(), target.clone().with_reduce_rule(rule)))
        .collect();
    Some(super::tune_targets(
        ctx,
        ("reduce", mode),
        &candidates,
        &workloads(mode),
        trial,
    ))
}

/// Workload `w` on `dev`, its values checked against f64 sums; `Err`
/// names what failed (an error or a wrong value).
fn trial(dev: Device, w: Workload) -> Result<super::Trial<'static>, String> {
    let host = super::operand(w.rows * w.cols, 3);
    let sum = move |x: &Tensor| match w.axis {
        Some(axis) => x.sum([axis], false),
        None => x.sum_all(),
    };
    let set_up = || -> crate::Result<Tensor> {
        let x = Tensor::from_vec(host.clone(), [w.rows, w.cols], &dev)?;
        let got = sum(&x).to_vec::<f32>()?;
        check(&got, &host, w).map_err(|message| crate::Error::Device {
            during: "autotune check".to_string(),
            message,
        })?;
        Ok(x)
    };
    let x = set_up().map_err(|e| format!("{w:?}: {e}"))?;
    Ok(Box::new(move || {
        // Held through the step: a value nothing holds is not computed.
        let y = sum(&x);
        dev.mark_step()?;
        dev.wait()?;
        drop(y);
        Ok(())
    }))
}

/// Checks eight spread outputs of `got` and its last against f64 sums of
/// `host`.
fn check(got: &[f32], host: &[f32], w: Workload) -> Result<(), String> {
    let at = |r: usize, c: usize| f64::from(host[r * w.cols + c]);
    let (outputs, reduced) = match w.axis {
        Some(1) => (w.rows, w.cols),
        Some(_) => (w.cols, w.rows),
        None => (1, w.rows * w.cols),
    };
    if got.len() != outputs {
        return Err(format!("{} outputs where {outputs}", got.len()));
    }
    let tol = 1e-6 * reduced as f64 + 1e-4;
    let mut sampled: Vec<usize> = (0..8).map(|i| i * outputs / 8).collect();
    sampled.push(outputs - 1);
    sampled.dedup();
    for o in sampled {
        let want: f64 = match w.axis {
            Some(1) => (0..w.cols).map(|c| at(o, c)).sum(),
            Some(_) => (0..w.rows).map(|r| at(r, o)).sum(),
            None => host.iter().map(|&v| f64::from(v)).sum(),
        };
        let g = f64::from(got[o]);
        if (g - want).abs() > tol || g.is_nan() {
            return Err(format!("wrong sum at output {o}: {g} where {want}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_rejects_a_wrong_sum_and_accepts_a_right_one() {
        let w = Workload {
            rows: 4,
            cols: 8,
            axis: Some(1),
        };
        let host: Vec<f32> = (0..32).map(|i| i as f32 / 8.0).collect();
        let rows: Vec<f32> = (0..4)
            .map(|r| (0..8).map(|c| host[r * 8 + c]).sum())
            .collect();
        assert_eq!(check(&rows, &host, w), Ok(()));
        let mut wrong = rows.clone();
        wrong[2] += 1.0;
        assert!(check(&wrong, &host, w).is_err());
        let columns = Workload { axis: Some(0), ..w };
        let cols: Vec<f32> = (0..8)
            .map(|c| (0..4).map(|r| host[r * 8 + c]).sum())
            .collect();
        assert_eq!(check(&cols, &host, columns), Ok(()));
        let whole = Workload { axis: None, ..w };
        assert_eq!(check(&[host.iter().sum()], &host, whole), Ok(()));
        assert!(check(&[0.0, 0.0], &host, whole).is_err(), "two outputs");
    }
}
