//! The reference's index ops, element by element: pad, flip, gather and
//! scatter-add.

use super::{Arr, reduce, unravel};
use crate::dtype::DType;
use crate::shape::{contiguous_strides, numel};

/// `x` padded to `shape` with the `fill` bits outside `pads`.
pub(super) fn pad(
    x: &Arr,
    shape: &[usize],
    pads: &[(usize, usize)],
    fill: u32,
    dtype: DType,
) -> Arr {
    let (src_shape, bits) = (x.shape(), x.raw_bits());
    let src_strides = contiguous_strides(&src_shape);
    let out: Vec<u32> = (0..numel(shape))
        .map(|i| {
            let mut pos = 0;
            for (d, c) in unravel(shape, i).into_iter().enumerate() {
                let (before, _) = pads[d];
                if c < before || c >= before + src_shape[d] {
                    return fill;
                }
                pos += (c - before) * src_strides[d];
            }
            bits[pos]
        })
        .collect();
    Arr::from_bits(dtype, shape, out)
}

/// `x` reversed along `axes`.
pub(super) fn flip(x: &Arr, shape: &[usize], axes: &[usize], dtype: DType) -> Arr {
    let bits = x.raw_bits();
    let strides = contiguous_strides(shape);
    let out = (0..numel(shape))
        .map(|i| {
            let pos: usize = unravel(shape, i)
                .into_iter()
                .enumerate()
                .map(|(d, c)| if axes.contains(&d) { shape[d] - 1 - c } else { c } * strides[d])
                .sum();
            bits[pos]
        })
        .collect();
    Arr::from_bits(dtype, shape, out)
}

/// `x` at `index` along `axis` (indices clamped into range, as the GPU
/// kernels do).
pub(super) fn gather(x: &Arr, index: &Arr, shape: &[usize], axis: usize, dtype: DType) -> Arr {
    let index = index.to_f64();
    let (x_shape, bits) = (x.shape(), x.raw_bits());
    let x_strides = contiguous_strides(&x_shape);
    let out = (0..numel(shape))
        .map(|i| {
            let k = (index[i] as i64).clamp(0, x_shape[axis].max(1) as i64 - 1) as usize;
            let pos: usize = unravel(shape, i)
                .into_iter()
                .enumerate()
                .map(|(d, c)| if d == axis { k } else { c } * x_strides[d])
                .sum();
            bits[pos]
        })
        .collect();
    Arr::from_bits(dtype, shape, out)
}

/// `inputs` = (base, index, src): the base plus each source element added
/// at its index along `axis` (out-of-range indices dropped).
pub(super) fn scatter_add(inputs: &[&Arr], shape: &[usize], axis: usize, dtype: DType) -> Arr {
    let (index, src) = (inputs[1].to_f64(), inputs[2]);
    let src_shape = src.shape();
    let src_vals = src.to_f64();
    let mut out = inputs[0].to_f64();
    let strides = contiguous_strides(shape);
    for (j, &v) in src_vals.iter().enumerate() {
        let k = index[j] as i64;
        if k < 0 || k as usize >= shape[axis] {
            continue;
        }
        let coords = unravel(&src_shape, j);
        if coords
            .iter()
            .enumerate()
            .any(|(d, &c)| d != axis && c >= shape[d])
        {
            continue;
        }
        let pos: usize = coords
            .iter()
            .enumerate()
            .map(|(d, &c)| if d == axis { k as usize } else { c } * strides[d])
            .sum();
        out[pos] += v;
    }
    Arr::from_bits(dtype, shape, reduce::to_bits(&out, dtype))
}
