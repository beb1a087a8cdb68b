//! The pieces of a Llama-style decoder against f64 loops written here:
//! `rms_norm` (forward, both gradients, f16/bf16 input, the default eps),
//! on both backends.

mod common;

use common::{assert_close, data, devices};
use lazywgpu::nn::functional::rms_norm;
use lazywgpu::nn::{Module, RMSNorm};
use lazywgpu::{DType, Tensor};

/// `x / sqrt(mean(x^2) + eps) * w` per row, and the gradients of
/// `sum(y * c)` with respect to x and w, in f64.
fn rms_oracle(
    x: &[f32],
    w: &[f32],
    c: &[f32],
    len: usize,
    eps: f64,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut y = vec![0.0f32; x.len()];
    let mut gx = vec![0.0f32; x.len()];
    let mut gw = vec![0.0f64; len];
    for (r, row) in x.chunks(len).enumerate() {
        let n = len as f64;
        let ms = row.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / n;
        let rs = 1.0 / (ms + eps).sqrt();
        let g: Vec<f64> = (0..len)
            .map(|k| f64::from(c[r * len + k]) * f64::from(w[k]))
            .collect();
        let dot: f64 = (0..len).map(|k| g[k] * f64::from(row[k])).sum();
        for k in 0..len {
            let xk = f64::from(row[k]);
            y[r * len + k] = (xk * rs * f64::from(w[k])) as f32;
            gx[r * len + k] = (rs * g[k] - xk * rs.powi(3) / n * dot) as f32;
            gw[k] += f64::from(c[r * len + k]) * xk * rs;
        }
    }
    (y, gx, gw.into_iter().map(|v| v as f32).collect())
}

#[test]
fn rms_norm_and_its_gradients_match_an_f64_loop() {
    for &(rows, len) in &[(1usize, 1usize), (7, 33), (3, 512), (2, 3000)] {
        let x = data(rows * len, 3);
        let w: Vec<f32> = data(len, 5).iter().map(|v| v + 1.5).collect();
        let c = data(rows * len, 9);
        let (y_want, gx_want, gw_want) = rms_oracle(&x, &w, &c, len, 1e-6);
        for dev in devices() {
            let xt = Tensor::from_vec(x.clone(), [rows, len], &dev).unwrap();
            xt.requires_grad_(true);
            let wt = Tensor::from_vec(w.clone(), [len], &dev).unwrap();
            wt.requires_grad_(true);
            let ct = Tensor::from_vec(c.clone(), [rows, len], &dev).unwrap();
            let y = rms_norm(&xt, &[len], Some(&wt), Some(1e-6));
            let what = format!("{rows}x{len} on {}", dev.name());
            assert_close(&y.to_vec::<f32>().unwrap(), &y_want, 1e-5, 1e-5, &what);
            (&y * &ct).sum_all().backward();
            let gx = xt.grad().unwrap().to_vec::<f32>().unwrap();
            assert_close(&gx, &gx_want, 1e-4, 1e-4, &format!("grad x {what}"));
            let gw = wt.grad().unwrap().to_vec::<f32>().unwrap();
            assert_close(&gw, &gw_want, 1e-4, 1e-4, &format!("grad w {what}"));
        }
    }
}

/// Normalised over two trailing dims, the module's default eps (f32's
/// machine epsilon, as PyTorch's `eps=None`), its one parameter named
/// `weight`.
#[test]
fn rms_norm_module_over_two_dims_with_the_default_eps() {
    let (rows, a, b) = (4usize, 3usize, 5usize);
    let x: Vec<f32> = data(rows * a * b, 11);
    let ones = vec![1.0f32; a * b];
    let zeros = vec![0.0f32; rows * a * b];
    let (want, _, _) = rms_oracle(&x, &ones, &zeros, a * b, f64::from(f32::EPSILON));
    for dev in devices() {
        let m = RMSNorm::new(&[a, b], &dev);
        let names: Vec<String> = m.named_parameters().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["weight"]);
        let xt = Tensor::from_vec(x.clone(), [rows, a, b], &dev).unwrap();
        let got = m.forward(&xt).to_vec::<f32>().unwrap();
        assert_close(&got, &want, 1e-5, 1e-6, &dev.name());
        // A row of zeros stays zeros (eps keeps the scale finite).
        let z = Tensor::zeros([2, a, b], &dev);
        let got = m.forward(&z).to_vec::<f32>().unwrap();
        assert!(got.iter().all(|&v| v == 0.0), "{got:?}");
    }
}

/// f16 and bf16 input: computed in f32, rounded once to the input's
/// dtype, the default eps that dtype's epsilon; the gradient flows back
/// in that dtype.
#[test]
fn rms_norm_takes_half_precision_input() {
    let (rows, len) = (5usize, 48usize);
    let x: Vec<f32> = data(rows * len, 4).iter().map(|v| v * 3.0).collect();
    for dev in devices() {
        for (dtype, eps, tol) in [
            (DType::F16, 9.765625e-4f64, 5e-3f64),
            (DType::BF16, 7.8125e-3, 4e-2),
        ] {
            let xt = Tensor::from_vec(x.clone(), [rows, len], &dev)
                .unwrap()
                .cast(dtype)
                .detach();
            xt.requires_grad_(true);
            // The oracle sees the input after its rounding to `dtype`.
            let rounded = xt.cast(DType::F32).to_vec::<f32>().unwrap();
            let ones = vec![1.0f32; len];
            let zeros = vec![0.0f32; rows * len];
            let (want, _, _) = rms_oracle(&rounded, &ones, &zeros, len, eps);
            let y = rms_norm(&xt, &[len], None, None);
            assert_eq!(y.dtype(), dtype);
            let got = y.cast(DType::F32).to_vec::<f32>().unwrap();
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                let (g, w) = (f64::from(*g), f64::from(*w));
                assert!(
                    (g - w).abs() <= tol * (1.0 + w.abs()),
                    "{} {dtype}: [{i}] {g} where {w}",
                    dev.name()
                );
            }
            y.cast(DType::F32).sum_all().backward();
            assert_eq!(xt.grad().expect("a gradient").dtype(), dtype);
        }
    }
}

use lazywgpu::nn::functional::{AttentionOptions, scaled_dot_product_attention_with};
use lazywgpu::nn::{KvCache, RopeLayout, RotaryEmbedding, Sampling, sample_logits};

/// Rotary embeddings in both layouts against rotations written here in
/// f64, from a start position, with the gradient of a rotation (its
/// transpose).
#[test]
fn rotary_embeddings_rotate_pairs_by_position() {
    let (b, h, l, d) = (2usize, 3usize, 5usize, 8usize);
    let x = data(b * h * l * d, 21);
    for dev in devices() {
        for layout in [RopeLayout::HalfSplit, RopeLayout::Interleaved] {
            let rope = RotaryEmbedding::new(d, 64, 10_000.0, layout, &dev);
            for start in [0usize, 7] {
                let xt = Tensor::from_vec(x.clone(), [b, h, l, d], &dev).unwrap();
                let got = rope.apply(&xt, start).to_vec::<f32>().unwrap();
                let mut want = vec![0.0f32; x.len()];
                for row in 0..b * h * l {
                    let p = (start + row % l) as f64;
                    for i in 0..d / 2 {
                        let angle = p * 10_000f64.powf(-((2 * i) as f64) / d as f64);
                        let (c, s) = (angle.cos(), angle.sin());
                        let (ia, ib) = match layout {
                            RopeLayout::HalfSplit => (i, i + d / 2),
                            RopeLayout::Interleaved => (2 * i, 2 * i + 1),
                        };
                        let (x1, x2) = (f64::from(x[row * d + ia]), f64::from(x[row * d + ib]));
                        want[row * d + ia] = (x1 * c - x2 * s) as f32;
                        want[row * d + ib] = (x2 * c + x1 * s) as f32;
                    }
                }
                let what = format!("{layout:?} from {start} on {}", dev.name());
                assert_close(&got, &want, 1e-5, 1e-5, &what);
            }
            // A rotation preserves norms: the gradient of |R x|^2 is 2x.
            let xt = Tensor::from_vec(x.clone(), [b, h, l, d], &dev).unwrap();
            xt.requires_grad_(true);
            let y = rope.apply(&xt, 3);
            (&y * &y).sum_all().backward();
            let g = xt.grad().unwrap().to_vec::<f32>().unwrap();
            let twice: Vec<f32> = x.iter().map(|v| 2.0 * v).collect();
            assert_close(&g, &twice, 1e-5, 1e-5, "rotary gradient");
        }
    }
}

/// Attention in f64: q `[bh, L, E]` per head against the key/value head
/// `kv_of(head)`, keeping key j for query i where `keep(i, j)`.
#[allow(clippy::too_many_arguments)]
fn attention_f64(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    (heads, kv_heads): (usize, usize),
    (l, s, e): (usize, usize, usize),
    scale: f64,
    keep: &dyn Fn(usize, usize) -> bool,
) -> Vec<f32> {
    let group = heads / kv_heads;
    let batch = q.len() / (heads * l * e);
    let mut out = vec![0.0f32; q.len()];
    for bi in 0..batch {
        for h in 0..heads {
            let kvh = bi * kv_heads + h / group;
            let qh = bi * heads + h;
            for i in 0..l {
                let scores: Vec<f64> = (0..s)
                    .map(|j| {
                        if !keep(i, j) {
                            return f64::NEG_INFINITY;
                        }
                        (0..e)
                            .map(|c| {
                                f64::from(q[(qh * l + i) * e + c])
                                    * f64::from(k[(kvh * s + j) * e + c])
                            })
                            .sum::<f64>()
                            * scale
                    })
                    .collect();
                let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let w: Vec<f64> = scores.iter().map(|x| (x - m).exp()).collect();
                let total: f64 = w.iter().sum();
                for c in 0..e {
                    let acc: f64 = (0..s)
                        .map(|j| w[j] * f64::from(v[(kvh * s + j) * e + c]))
                        .sum();
                    out[(qh * l + i) * e + c] = (acc / total) as f32;
                }
            }
        }
    }
    out
}

#[test]
fn grouped_query_attention_with_both_causal_alignments() {
    let (b, hq, hkv, l, s, e) = (2usize, 6usize, 2usize, 3usize, 7usize, 8usize);
    let q = data(b * hq * l * e, 1);
    let k = data(b * hkv * s * e, 2);
    let v = data(b * hkv * s * e, 3);
    for dev in devices() {
        let qt = Tensor::from_vec(q.clone(), [b, hq, l, e], &dev).unwrap();
        let kt = Tensor::from_vec(k.clone(), [b, hkv, s, e], &dev).unwrap();
        let vt = Tensor::from_vec(v.clone(), [b, hkv, s, e], &dev).unwrap();
        for (causal, lower_right) in [(false, false), (true, false), (true, true)] {
            let options = AttentionOptions {
                is_causal: causal,
                lower_right,
                scale: Some(0.3),
                enable_gqa: true,
                ..AttentionOptions::default()
            };
            let got = scaled_dot_product_attention_with(&qt, &kt, &vt, &options);
            assert_eq!(got.shape(), [b, hq, l, e]);
            let keep =
                |i: usize, j: usize| !causal || if lower_right { j <= i + s - l } else { j <= i };
            let want = attention_f64(&q, &k, &v, (hq, hkv), (l, s, e), 0.3, &keep);
            let what = format!(
                "causal {causal} lower_right {lower_right} on {}",
                dev.name()
            );
            assert_close(&got.to_vec::<f32>().unwrap(), &want, 1e-4, 1e-5, &what);
        }
        // A bool mask with a head dim of one, broadcast over the groups.
        let mask: Vec<bool> = (0..b * l * s).map(|i| i % 3 != 1).collect();
        let mt = Tensor::from_vec(mask.clone(), [b, 1, l, s], &dev).unwrap();
        let options = AttentionOptions {
            attn_mask: Some(&mt),
            enable_gqa: true,
            ..AttentionOptions::default()
        };
        let got = scaled_dot_product_attention_with(&qt, &kt, &vt, &options);
        // The mask is the same for both batch entries only where rows
        // repeat; check the first batch entry.
        let keep = |i: usize, j: usize| mask[i * s + j];
        let scale = 1.0 / (e as f64).sqrt();
        let want = attention_f64(&q, &k, &v, (hq, hkv), (l, s, e), scale, &keep);
        let n = hq * l * e;
        let got = got.to_vec::<f32>().unwrap();
        assert_close(&got[..n], &want[..n], 1e-4, 1e-5, "masked gqa");
    }
}

/// Decoding with a cache (a prompt of 4, then one position at a time)
/// gives what causal attention over the whole sequence gives, and after
/// the first steps compiles nothing more.
#[test]
fn kv_cache_decoding_matches_full_attention_and_stops_compiling() {
    let (b, hq, hkv, total, e, cap) = (1usize, 4usize, 2usize, 12usize, 8usize, 16usize);
    let q = data(b * hq * total * e, 4);
    let k = data(b * hkv * total * e, 5);
    let v = data(b * hkv * total * e, 6);
    let scale = 1.0 / (e as f64).sqrt();
    let want = attention_f64(&q, &k, &v, (hq, hkv), (total, total, e), scale, &|i, j| {
        j <= i
    });
    for dev in devices() {
        let full = |x: &[f32], heads: usize| {
            Tensor::from_vec(x.to_vec(), [b, heads, total, e], &dev).unwrap()
        };
        let (qt, kt, vt) = (full(&q, hq), full(&k, hkv), full(&v, hkv));
        let mut cache = KvCache::new(b, hkv, cap, e, DType::F32, &dev);
        let mut got = vec![0.0f32; q.len()];
        let mut compiled = Vec::new();
        let mut pos = 0;
        while pos < total {
            let step = if pos == 0 { 4 } else { 1 };
            cache
                .append(&kt.narrow(2, pos, step), &vt.narrow(2, pos, step))
                .unwrap();
            let y = cache.attend(&qt.narrow(2, pos, step), None);
            let y = y.to_vec::<f32>().unwrap();
            for h in 0..hq {
                for i in 0..step {
                    let at = (h * total + pos + i) * e;
                    got[at..at + e].copy_from_slice(&y[(h * step + i) * e..(h * step + i + 1) * e]);
                }
            }
            dev.mark_step().unwrap();
            compiled.push(dev.metrics().counter("graphs_compiled"));
            pos += step;
        }
        assert_close(&got, &want, 1e-4, 1e-5, &format!("cache on {}", dev.name()));
        assert_eq!(cache.len(), total);
        // Past the capacity: an error, the cache unchanged.
        let more = kt.narrow(2, 0, 5);
        let err = cache.append(&more, &more).unwrap_err();
        assert!(err.to_string().contains("capacity of 16"), "{err}");
        assert_eq!(cache.len(), total);
        if dev.is_gpu() {
            assert!(compiled[0] > 0, "the prompt's step compiled");
            // The last five decoding steps compiled nothing.
            let tail = &compiled[compiled.len() - 5..];
            assert!(
                tail.iter().all(|&c| c == tail[0]),
                "compiles per step: {compiled:?}"
            );
        }
    }
}

#[test]
fn sampling_greedy_top_k_and_top_p() {
    for dev in devices() {
        // Probabilities (after softmax) 0.5, 0.25, 0.125, 0.125.
        let logits: Vec<f32> = [0.5f32, 0.25, 0.125, 0.125]
            .iter()
            .map(|p| p.ln())
            .collect();
        let rows = 4000;
        let lt = Tensor::from_vec(logits.clone(), [1, 4], &dev)
            .unwrap()
            .expand([rows as isize, 4]);
        let greedy = Sampling {
            temperature: 0.0,
            ..Sampling::default()
        };
        let g = sample_logits(&lt, &greedy).to_vec::<i64>().unwrap();
        assert!(g.iter().all(|&t| t == 0));
        let count = |how: &Sampling| {
            dev.manual_seed(9);
            let mut c = [0usize; 4];
            for t in sample_logits(&lt, how).to_vec::<i64>().unwrap() {
                c[t as usize] += 1;
            }
            c
        };
        // Top-2: tokens 0 and 1 only, in proportion 2:1.
        let c = count(&Sampling {
            top_k: Some(2),
            ..Sampling::default()
        });
        assert_eq!(c[2] + c[3], 0, "{c:?}");
        assert!((2450..2900).contains(&c[0]), "{c:?}");
        // Top-p 0.6: 0.5 alone is below 0.6, so tokens 0 and 1 are kept.
        let c = count(&Sampling {
            top_p: Some(0.6),
            ..Sampling::default()
        });
        assert_eq!(c[2] + c[3], 0, "{c:?}");
        // Top-p 0.4: token 0 alone.
        let c = count(&Sampling {
            top_p: Some(0.4),
            ..Sampling::default()
        });
        assert_eq!(c[0], rows, "{c:?}");
        // Plain sampling reaches all four.
        let c = count(&Sampling::default());
        assert!(c.iter().all(|&n| n > 300), "{c:?}");
    }
}
