//! Batch and group normalisation with PyTorch's semantics: `BatchNorm1d`,
//! `BatchNorm2d` (running statistics as buffers) and `GroupNorm`.
//!
//! Statistics are taken in f32 whatever the input's dtype (f16 and bf16
//! inputs are cast up, the output cast back), and the running statistics
//! are kept in f32, as PyTorch keeps them under autocast.

use std::panic::Location;
use std::sync::atomic::{AtomicBool, Ordering};

use super::init::constant_param;
use super::{Module, ParamVisitor};
use crate::autograd::no_grad;
use crate::dtype::DType;
use crate::runtime::device::Device;
use crate::tensor::Tensor;

/// A tensor of `shape` holding `value`, stored on the device now (not a
/// pending graph), without gradient: a buffer's initial value.
#[track_caller]
fn stored<T: crate::dtype::Element>(shape: &[usize], value: T, dev: &Device) -> Tensor {
    Tensor::from_vec(vec![value; shape.iter().product()], shape.to_vec(), dev)
        .unwrap_or_else(|e| panic!("initialising a buffer of shape {shape:?}: {e}"))
}

/// `[C]` reshaped to broadcast over `[N, C, *]` of rank `rank`.
fn per_channel(t: &Tensor, rank: usize) -> Tensor {
    let mut shape = vec![t.numel() as isize];
    shape.extend(std::iter::repeat_n(1, rank.saturating_sub(2)));
    t.reshape(shape)
}

/// The affine step `y * weight + bias`, each `[C]` broadcast per channel.
fn affine(y: Tensor, weight: Option<&Tensor>, bias: Option<&Tensor>) -> Tensor {
    let rank = y.rank();
    let y = match weight {
        Some(w) => y * per_channel(w, rank),
        None => y,
    };
    match bias {
        Some(b) => y + per_channel(b, rank),
        None => y,
    }
}

/// Batch normalisation over the channel dim 1 of `[N, C]`, `[N, C, L]`
/// (`BatchNorm1d`) or `[N, C, H, W]` (`BatchNorm2d`): PyTorch's
/// `BatchNorm*d`. Shared by both; the type aliases only name the ranks
/// they accept.
///
/// In training, each channel is normalised by the batch's mean and biased
/// variance, and the running statistics are updated in place on the
/// device: `running = (1 - momentum) * running + momentum * batch`, with
/// the unbiased variance, or a cumulative average when `momentum` is
/// `None`. In evaluation the running statistics normalise. Without
/// `track_running_stats` the batch statistics are used in both modes.
///
/// Kernels: in training one reduction for the mean, one for the variance
/// and one elementwise kernel that normalises (and fuses with what
/// follows); the running-statistics update is elementwise and joins those
/// kernels' graph. In evaluation the normalisation is elementwise with
/// per-channel constants, so it fuses into the producer's epilogue (a
/// convolution's matmul).
pub struct BatchNorm {
    /// `[C]`, ones at init (`None` without `affine`).
    pub weight: Option<Tensor>,
    /// `[C]`, zeros at init (`None` without `affine`).
    pub bias: Option<Tensor>,
    /// `[C]` f32, zeros at init (`None` without `track_running_stats`).
    pub running_mean: Option<Tensor>,
    /// `[C]` f32, ones at init (`None` without `track_running_stats`).
    pub running_var: Option<Tensor>,
    /// Training batches seen, a 0-dim i64 as PyTorch's (stored in 32
    /// bits like every i64).
    pub num_batches_tracked: Option<Tensor>,
    /// Weight of the batch in the running update; `None`: cumulative
    /// average over every batch seen.
    pub momentum: Option<f32>,
    /// Added to the variance before its square root.
    pub eps: f32,
    /// The ranks accepted (`[2, 3]` for 1-d, `[4]` for 2-d) and the
    /// layer's name for errors.
    ranks: &'static [usize],
    name: &'static str,
    num_features: usize,
    training: AtomicBool,
}

/// `BatchNorm1d`: batch normalisation of `[N, C]` or `[N, C, L]`.
pub type BatchNorm1d = BatchNorm;
/// `BatchNorm2d`: batch normalisation of `[N, C, H, W]`.
pub type BatchNorm2d = BatchNorm;

/// Options of a [`BatchNorm`] (PyTorch's defaults from `Default`).
#[derive(Clone, Copy, Debug)]
pub struct BatchNormOptions {
    /// Added to the variance (1e-5).
    pub eps: f32,
    /// Running-statistics momentum (`Some(0.1)`); `None` is a cumulative
    /// average.
    pub momentum: Option<f32>,
    /// Learnable weight and bias (true).
    pub affine: bool,
    /// Keep running statistics for evaluation (true).
    pub track_running_stats: bool,
}

impl Default for BatchNormOptions {
    fn default() -> Self {
        BatchNormOptions {
            eps: 1e-5,
            momentum: Some(0.1),
            affine: true,
            track_running_stats: true,
        }
    }
}

impl BatchNorm {
    /// `BatchNorm2d(num_features)` with PyTorch's defaults, for
    /// `[N, C, H, W]` input.
    pub fn new(num_features: usize, dev: &Device) -> BatchNorm {
        BatchNorm::with_options(num_features, BatchNormOptions::default(), dev).rank_2d()
    }

    /// `BatchNorm1d(num_features)` with PyTorch's defaults, for `[N, C]`
    /// or `[N, C, L]` input.
    pub fn new_1d(num_features: usize, dev: &Device) -> BatchNorm {
        BatchNorm::with_options(num_features, BatchNormOptions::default(), dev)
    }

    /// `BatchNorm2d(num_features, ...)` with `options`.
    pub fn new_2d_with(num_features: usize, options: BatchNormOptions, dev: &Device) -> BatchNorm {
        BatchNorm::with_options(num_features, options, dev).rank_2d()
    }

    /// `BatchNorm1d(num_features, ...)` with `options`.
    pub fn with_options(num_features: usize, options: BatchNormOptions, dev: &Device) -> BatchNorm {
        let c = [num_features];
        let (weight, bias) = if options.affine {
            (
                Some(constant_param(&c, 1.0, dev)),
                Some(constant_param(&c, 0.0, dev)),
            )
        } else {
            (None, None)
        };
        let track = options.track_running_stats;
        BatchNorm {
            weight,
            bias,
            running_mean: track.then(|| stored(&c, 0.0f32, dev)),
            running_var: track.then(|| stored(&c, 1.0f32, dev)),
            num_batches_tracked: track.then(|| stored(&[], 0i64, dev)),
            momentum: options.momentum,
            eps: options.eps,
            ranks: &[2, 3],
            name: "BatchNorm1d",
            num_features,
            training: AtomicBool::new(true),
        }
    }

    fn rank_2d(mut self) -> BatchNorm {
        self.ranks = &[4];
        self.name = "BatchNorm2d";
        self
    }

    /// Whether the layer is in training mode (batch statistics).
    pub fn is_training(&self) -> bool {
        self.training.load(Ordering::Relaxed)
    }

    #[track_caller]
    fn check(&self, x: &Tensor) {
        let loc = Location::caller();
        let rank_ok = self.ranks.contains(&x.rank());
        if !rank_ok || x.shape()[1] != self.num_features || !x.dtype().is_float() {
            panic!(
                "{}: expected float input of rank {:?} with {} channels in dim 1, got {:?} ({}) at {loc}",
                self.name,
                self.ranks,
                self.num_features,
                x.shape(),
                x.dtype()
            );
        }
    }
}

impl Module for BatchNorm {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        self.check(x);
        let _op = crate::graph::record_as(self.name);
        let training = self.is_training();
        let count = self.num_batches_tracked.as_ref().filter(|_| training);
        if let Some(count) = count {
            no_grad(|| {
                count.add_(1i64);
            });
        }
        let momentum = match (self.momentum, count) {
            (None, Some(count)) => Momentum::Cumulative(count),
            (m, _) => Momentum::Fixed(m.unwrap_or(0.0)),
        };
        let running = self.running_mean.as_ref().zip(self.running_var.as_ref());
        normalize_batch(
            self.name,
            x,
            running,
            self.weight.as_ref(),
            self.bias.as_ref(),
            training || running.is_none(),
            momentum,
            self.eps,
        )
    }

    fn visit(&self, v: &mut ParamVisitor) {
        v.weight_and_bias(self.weight.as_ref(), self.bias.as_ref());
        for (name, t) in [
            ("running_mean", &self.running_mean),
            ("running_var", &self.running_var),
            ("num_batches_tracked", &self.num_batches_tracked),
        ] {
            if let Some(t) = t {
                v.buffer(name, t);
            }
        }
        v.training_flag(&self.training);
    }
}

/// How running statistics move toward a batch's.
#[derive(Clone, Copy)]
enum Momentum<'a> {
    /// `running = (1 - m) running + m batch`.
    Fixed(f32),
    /// A cumulative average: the batch weighs `1 / count` (the batches
    /// seen, this one included).
    Cumulative(&'a Tensor),
}

/// Batch normalisation of `x` `[N, C, *]` over every dim but 1: by the
/// batch's statistics when `batch_stats` (updating `running` in place,
/// with the unbiased variance), else by `running`. `op` names the caller
/// in errors. Statistics in f32 whatever `x`'s float dtype.
#[allow(clippy::too_many_arguments)]
#[track_caller]
fn normalize_batch(
    op: &str,
    x: &Tensor,
    running: Option<(&Tensor, &Tensor)>,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    batch_stats: bool,
    momentum: Momentum,
    eps: f32,
) -> Tensor {
    let rank = x.rank();
    let c = x.shape().get(1).copied().unwrap_or(0);
    let n = x.numel().checked_div(c).unwrap_or(0);
    if batch_stats && n == 1 {
        panic!(
            "{op}: expected more than 1 value per channel when training, got input size {:?} at {}",
            x.shape(),
            Location::caller()
        );
    }
    let xf = x.cast(DType::F32);
    let y = match running {
        Some((rm, rv)) if !batch_stats => {
            (xf - per_channel(rm, rank)) * per_channel(&(rv + eps).rsqrt(), rank)
        }
        _ => {
            let axes: Vec<isize> = std::iter::once(0).chain(2..rank as isize).collect();
            let mean = xf.mean(axes.clone(), true);
            let centred = &xf - &mean;
            let var = (&centred * &centred).mean(axes, true);
            let y = centred * (&var + eps).rsqrt();
            if let Some((rm, rv)) = running {
                let (mean, var) = (mean.detach().reshape([c]), var.detach().reshape([c]));
                update_running(rm, rv, &mean, &var, n, momentum);
            }
            y
        }
    };
    affine(y, weight, bias).cast(x.dtype())
}

/// Moves `rm` and `rv` toward the batch's `mean` and biased `var` (each
/// `[C]`, over `n` values per channel; the variance enters unbiased), in
/// place and without gradient.
fn update_running(
    rm: &Tensor,
    rv: &Tensor,
    mean: &Tensor,
    var: &Tensor,
    n: usize,
    momentum: Momentum,
) {
    no_grad(|| {
        let unbiased = var * (n as f32 / (n.max(2) - 1) as f32);
        match momentum {
            Momentum::Fixed(m) => {
                rm.copy_(rm * (1.0 - m) + mean * m);
                rv.copy_(rv * (1.0 - m) + unbiased * m);
            }
            Momentum::Cumulative(count) => {
                let factor = count.cast(DType::F32).recip();
                rm.copy_(rm + (mean - rm) * &factor);
                rv.copy_(rv + (unbiased - rv) * &factor);
            }
        }
    });
}

/// Batch normalisation as a function (PyTorch's `F.batch_norm`): `x`
/// `[N, C, *]` normalised per channel by the batch's mean and biased
/// variance when `training` (then `running_mean` and `running_var`, if
/// given, move toward them by `momentum`, in place, with the unbiased
/// variance), or by the running statistics otherwise; then `weight` and
/// `bias` per channel.
///
/// # Panics
/// At the caller's line: outside training without running statistics,
/// with one value per channel in training, or on a non-float input.
#[allow(clippy::too_many_arguments)]
#[track_caller]
pub fn batch_norm(
    x: &Tensor,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    training: bool,
    momentum: f32,
    eps: f32,
) -> Tensor {
    let _op = crate::graph::record_as("batch_norm");
    let running = running_mean.zip(running_var);
    if x.rank() < 2 || !x.dtype().is_float() || (!training && running.is_none()) {
        panic!(
            "batch_norm: expects float input [N, C, *] and, outside training, running statistics; \
             got {:?} ({}), training {training}, running statistics given: {} at {}",
            x.shape(),
            x.dtype(),
            running.is_some(),
            Location::caller()
        );
    }
    normalize_batch(
        "batch_norm",
        x,
        running,
        weight,
        bias,
        training,
        Momentum::Fixed(momentum),
        eps,
    )
}

/// Group normalisation as a function (PyTorch's `F.group_norm`): the
/// channels of `x` `[N, C, *]` in `num_groups` groups, each sample's group
/// normalised by its mean and biased variance (one fused row kernel), then
/// `weight` and `bias` `[C]`.
#[track_caller]
pub fn group_norm(
    x: &Tensor,
    num_groups: usize,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f32,
) -> Tensor {
    let loc = Location::caller();
    let c = x.shape().get(1).copied().unwrap_or(0);
    if x.rank() < 2 || !x.dtype().is_float() || num_groups == 0 || !c.is_multiple_of(num_groups) {
        panic!(
            "group_norm: expected float input [N, C, *] with C divisible by num_groups = {num_groups}, got {:?} ({}) at {loc}",
            x.shape(),
            x.dtype()
        );
    }
    let _op = crate::graph::record_as("group_norm");
    let rows = x.shape()[0] * num_groups;
    let len = x.numel().checked_div(rows).unwrap_or(0);
    let shape: Vec<isize> = x.shape().iter().map(|&d| d as isize).collect();
    let y = x
        .cast(DType::F32)
        .reshape([rows, len])
        .normalize_rows(eps)
        .reshape(shape);
    affine(y, weight, bias).cast(x.dtype())
}

/// Group normalisation (PyTorch's `GroupNorm`): the channels of
/// `[N, C, *]` split into `num_groups` groups, each sample's group
/// normalised by its own mean and biased variance, then a per-channel
/// weight and bias. The same in training and evaluation.
///
/// One fused row kernel (the layer norm's: a row is one sample's group),
/// with the affine step fused after it.
pub struct GroupNorm {
    /// Number of groups the channels split into.
    pub num_groups: usize,
    /// Number of channels `C`.
    pub num_channels: usize,
    /// Added to the variance.
    pub eps: f32,
    /// `[C]`, ones at init (`None` without `affine`).
    pub weight: Option<Tensor>,
    /// `[C]`, zeros at init (`None` without `affine`).
    pub bias: Option<Tensor>,
}

impl GroupNorm {
    /// `GroupNorm(num_groups, num_channels)` with `eps = 1e-5` and an
    /// affine weight and bias. Panics, as PyTorch raises, when the
    /// channels do not divide into the groups.
    #[track_caller]
    pub fn new(num_groups: usize, num_channels: usize, dev: &Device) -> GroupNorm {
        GroupNorm::with_options(num_groups, num_channels, 1e-5, true, dev)
    }

    /// `GroupNorm(num_groups, num_channels, eps, affine)`.
    #[track_caller]
    pub fn with_options(
        num_groups: usize,
        num_channels: usize,
        eps: f32,
        affine: bool,
        dev: &Device,
    ) -> GroupNorm {
        if num_groups == 0 || !num_channels.is_multiple_of(num_groups) {
            panic!(
                "GroupNorm: num_channels ({num_channels}) must be divisible by num_groups ({num_groups}) at {}",
                Location::caller()
            );
        }
        let c = [num_channels];
        GroupNorm {
            num_groups,
            num_channels,
            eps,
            weight: affine.then(|| constant_param(&c, 1.0, dev)),
            bias: affine.then(|| constant_param(&c, 0.0, dev)),
        }
    }
}

impl Module for GroupNorm {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        if x.rank() < 2 || x.shape()[1] != self.num_channels {
            panic!(
                "GroupNorm: expected input [N, {}, *], got {:?} ({}) at {}",
                self.num_channels,
                x.shape(),
                x.dtype(),
                Location::caller()
            );
        }
        group_norm(
            x,
            self.num_groups,
            self.weight.as_ref(),
            self.bias.as_ref(),
            self.eps,
        )
    }

    fn visit(&self, v: &mut ParamVisitor) {
        v.weight_and_bias(self.weight.as_ref(), self.bias.as_ref());
    }
}
