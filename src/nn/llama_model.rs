//! A Llama-style decoder (Llama, Qwen and Mistral's shape): token
//! embeddings, pre-RMSNorm blocks of rotary grouped-query causal
//! attention and a SwiGLU MLP, a final RMSNorm and an output head
//! (optionally tied to the embedding). No biases. Parameter names are
//! Hugging Face's, so its safetensors checkpoints load by name.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::functional::{AttentionOptions, cross_entropy, scaled_dot_product_attention_with};
use super::kv_cache::KvCache;
use super::layers::Linear;
use super::llama::{RMSNorm, RopeLayout, RotaryEmbedding, SwiGlu};
use super::params::{ParamVisitor, Parameters};
use super::sampling::{Sampling, sample_logits};
use super::transformer::Embedding;
use super::{Module, init::normal_param};
use crate::autograd::checkpoint;
use crate::dtype::DType;
use crate::error::Result;
use crate::runtime::device::Device;
use crate::tensor::Tensor;

/// The sizes of a [`Llama`] (Hugging Face's `LlamaConfig` names).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LlamaConfig {
    /// Distinct tokens.
    pub vocab_size: usize,
    /// Model width.
    pub hidden_size: usize,
    /// The MLP's inner width.
    pub intermediate_size: usize,
    /// Decoder blocks.
    pub num_hidden_layers: usize,
    /// Query heads.
    pub num_attention_heads: usize,
    /// Key/value heads (a divisor of the query heads: grouped-query
    /// attention when fewer).
    pub num_key_value_heads: usize,
    /// Longest context the rotary tables cover.
    pub max_position_embeddings: usize,
    /// RMSNorm's epsilon.
    pub rms_norm_eps: f32,
    /// The rotary base.
    pub rope_theta: f32,
    /// The output head is the embedding (no `lm_head.weight`).
    pub tie_word_embeddings: bool,
}

impl LlamaConfig {
    /// A small decoder for character-level text on a CPU: width 128, 4
    /// layers, 4 query and 2 key/value heads, context 64.
    pub fn tiny(vocab_size: usize) -> LlamaConfig {
        LlamaConfig {
            vocab_size,
            hidden_size: 128,
            intermediate_size: 352,
            num_hidden_layers: 4,
            num_attention_heads: 4,
            num_key_value_heads: 2,
            max_position_embeddings: 256,
            rms_norm_eps: 1e-5,
            rope_theta: 10_000.0,
            tie_word_embeddings: false,
        }
    }

    /// Width of one attention head.
    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_attention_heads
    }
}

/// Rotary grouped-query causal self-attention (`q_proj`, `k_proj`,
/// `v_proj`, `o_proj`).
pub struct LlamaAttention {
    /// `C -> heads * head_dim`.
    pub q_proj: Linear,
    /// `C -> kv_heads * head_dim`.
    pub k_proj: Linear,
    /// `C -> kv_heads * head_dim`.
    pub v_proj: Linear,
    /// `heads * head_dim -> C`.
    pub o_proj: Linear,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
}

impl LlamaAttention {
    /// `x` `[B, T, C]` at positions `start..start + T`; with a cache,
    /// the new keys and values are appended and the queries attend over
    /// everything it holds.
    #[track_caller]
    fn forward(
        &self,
        x: &Tensor,
        (rope, at): (&RotaryEmbedding, &Placement<'_>),
        cache: Option<&mut KvCache>,
    ) -> Result<Tensor> {
        let (b, t) = (x.shape()[0] as isize, x.shape()[1] as isize);
        let d = self.head_dim as isize;
        let heads = |y: Tensor, n: usize| y.reshape([b, t, n as isize, d]).transpose(1, 2);
        let rotate = |y: Tensor| match at.positions {
            Some(p) => rope.apply_at(&y, p),
            None => rope.apply(&y, at.start),
        };
        let q = rotate(heads(self.q_proj.forward(x), self.heads));
        let k = rotate(heads(self.k_proj.forward(x), self.kv_heads));
        let v = heads(self.v_proj.forward(x), self.kv_heads);
        let y = match cache {
            Some(cache) => {
                cache.append_masked(&k, &v, at.mask)?;
                cache.attend(&q, None)
            }
            None => {
                let options = AttentionOptions {
                    is_causal: true,
                    enable_gqa: true,
                    ..AttentionOptions::default()
                };
                scaled_dot_product_attention_with(&q, &k, &v, &options)
            }
        };
        let y = y.transpose(1, 2).reshape([b, t, self.heads as isize * d]);
        Ok(self.o_proj.forward(&y))
    }
}

impl Parameters for LlamaAttention {
    fn visit(&self, v: &mut ParamVisitor) {
        v.module("q_proj", &self.q_proj);
        v.module("k_proj", &self.k_proj);
        v.module("v_proj", &self.v_proj);
        v.module("o_proj", &self.o_proj);
    }
}

/// Where a forward's tokens sit: from position `start` on, or at
/// `positions` `[B, T]` (a row a sequence); `mask` `[B, T]` marks the
/// real tokens of left-padded sequences.
struct Placement<'a> {
    start: usize,
    positions: Option<&'a Tensor>,
    mask: Option<&'a Tensor>,
}

impl Placement<'_> {
    /// Every sequence from position `start` on, no padding.
    fn from(start: usize) -> Placement<'static> {
        Placement {
            start,
            positions: None,
            mask: None,
        }
    }
}

/// One decoder block: `x + attn(norm(x))`, then `x + mlp(norm(x))`.
pub struct LlamaBlock {
    /// Before attention.
    pub input_layernorm: RMSNorm,
    /// The attention.
    pub self_attn: LlamaAttention,
    /// Before the MLP.
    pub post_attention_layernorm: RMSNorm,
    /// The SwiGLU MLP.
    pub mlp: SwiGlu,
}

impl LlamaBlock {
    /// The block on `x` `[B, T, C]` at positions `start..`, appending to
    /// `cache` when given.
    #[track_caller]
    fn forward(
        &self,
        x: &Tensor,
        at: (&RotaryEmbedding, &Placement<'_>),
        cache: Option<&mut KvCache>,
    ) -> Result<Tensor> {
        let h = self.input_layernorm.forward(x);
        let x = x + self.self_attn.forward(&h, at, cache)?;
        let h = self.post_attention_layernorm.forward(&x);
        Ok(&x + self.mlp.forward(&h))
    }
}

impl Parameters for LlamaBlock {
    fn visit(&self, v: &mut ParamVisitor) {
        v.module("self_attn", &self.self_attn);
        v.module("mlp", &self.mlp);
        v.module("input_layernorm", &self.input_layernorm);
        v.module("post_attention_layernorm", &self.post_attention_layernorm);
    }
}

/// The decoder without its head (Hugging Face's `LlamaModel`, named
/// `model` in the checkpoint).
pub struct LlamaModel {
    /// `[vocab, C]`.
    pub embed_tokens: Embedding,
    /// The blocks (shared, so that a checkpointed block's recomputation
    /// can hold one).
    pub layers: Vec<Arc<LlamaBlock>>,
    /// The final RMSNorm.
    pub norm: RMSNorm,
}

impl Parameters for LlamaModel {
    fn visit(&self, v: &mut ParamVisitor) {
        v.module("embed_tokens", &self.embed_tokens);
        for (i, block) in self.layers.iter().enumerate() {
            v.module(&format!("layers.{i}"), block.as_ref());
        }
        v.module("norm", &self.norm);
    }
}

/// A Llama-style decoder-only transformer (see the module docs). Names:
/// `model.embed_tokens.weight`, `model.layers.{i}.self_attn.{q,k,v,o}_proj.weight`,
/// `model.layers.{i}.mlp.{gate,up,down}_proj.weight`,
/// `model.layers.{i}.input_layernorm.weight`,
/// `model.layers.{i}.post_attention_layernorm.weight`, `model.norm.weight`
/// and `lm_head.weight` (absent when tied).
pub struct Llama {
    /// The sizes.
    pub config: LlamaConfig,
    /// The decoder.
    pub model: LlamaModel,
    /// The output head `[vocab, C]` (the embedding's own tensor when
    /// tied).
    pub lm_head: Linear,
    rope: Arc<RotaryEmbedding>,
    /// Whether training forwards recompute each block in backward
    /// (activation checkpointing) instead of keeping its activations.
    checkpointing: AtomicBool,
}

impl Llama {
    /// A model with Hugging Face's init: `normal(0, 0.02)` for embeddings
    /// and projections, RMSNorm weights 1.
    #[track_caller]
    pub fn new(config: LlamaConfig, dev: &Device) -> Llama {
        let (c, h, kv) = (
            config.hidden_size,
            config.num_attention_heads,
            config.num_key_value_heads,
        );
        if h == 0 || kv == 0 || !c.is_multiple_of(h) || !h.is_multiple_of(kv) {
            panic!(
                "Llama::new: hidden_size {c} must divide into {h} heads, and the heads into {kv} key/value heads, at {}",
                std::panic::Location::caller()
            );
        }
        let d = config.head_dim();
        let linear = |inp: usize, out: usize| Linear {
            weight: normal_param(&[out, inp], 0.02, dev),
            bias: None,
        };
        let eps = config.rms_norm_eps;
        let layers = (0..config.num_hidden_layers)
            .map(|_| {
                Arc::new(LlamaBlock {
                    input_layernorm: RMSNorm::with_eps(&[c], eps, dev),
                    self_attn: LlamaAttention {
                        q_proj: linear(c, h * d),
                        k_proj: linear(c, kv * d),
                        v_proj: linear(c, kv * d),
                        o_proj: linear(h * d, c),
                        heads: h,
                        kv_heads: kv,
                        head_dim: d,
                    },
                    post_attention_layernorm: RMSNorm::with_eps(&[c], eps, dev),
                    mlp: SwiGlu {
                        gate_proj: linear(c, config.intermediate_size),
                        up_proj: linear(c, config.intermediate_size),
                        down_proj: linear(config.intermediate_size, c),
                    },
                })
            })
            .collect();
        let embed_tokens = Embedding::normal(config.vocab_size, c, 0.02, dev);
        let lm_head = if config.tie_word_embeddings {
            Linear {
                weight: embed_tokens.weight.clone(),
                bias: None,
            }
        } else {
            linear(c, config.vocab_size)
        };
        let rope = Arc::new(RotaryEmbedding::new(
            d,
            config.max_position_embeddings,
            config.rope_theta,
            RopeLayout::HalfSplit,
            dev,
        ));
        Llama {
            config,
            model: LlamaModel {
                embed_tokens,
                layers,
                norm: RMSNorm::with_eps(&[c], eps, dev),
            },
            lm_head,
            rope,
            checkpointing: AtomicBool::new(false),
        }
    }

    /// Turns activation checkpointing on or off for training forwards
    /// (Hugging Face's `gradient_checkpointing_enable`): each block's
    /// activations are recomputed in backward (see [`checkpoint`]), so a
    /// step holds one block's activations at a time, for about a third
    /// more compute.
    pub fn set_gradient_checkpointing(&self, on: bool) {
        self.checkpointing.store(on, Ordering::Relaxed);
    }

    /// Logits `[B, T, vocab]` for token ids `[B, T]`, causal over the
    /// whole sequence (training).
    #[track_caller]
    pub fn forward(&self, ids: &Tensor) -> Tensor {
        let at = Placement::from(0);
        self.run(ids, &at, None)
            .expect("no cache: nothing can fill up")
    }

    /// Logits for ids `[B, T]` at positions `caches[0].len()..`, each
    /// layer's keys and values appended to its cache (one cache a layer,
    /// see [`Llama::new_caches`]); [`Error::CacheFull`](crate::Error::CacheFull)
    /// past their capacity.
    #[track_caller]
    pub fn forward_cached(&self, ids: &Tensor, caches: &mut [KvCache]) -> Result<Tensor> {
        let start = caches.first().map_or(0, KvCache::len);
        let at = Placement::from(start);
        self.run(ids, &at, Some(caches))
    }

    /// [`Llama::forward_cached`] for left-padded sequences: `positions`
    /// `[B, T]` (each sequence's own, counting its real tokens only) and
    /// `mask` `[B, T]` (true for real tokens; padding is never attended
    /// to).
    #[track_caller]
    pub fn forward_cached_masked(
        &self,
        ids: &Tensor,
        caches: &mut [KvCache],
        positions: &Tensor,
        mask: &Tensor,
    ) -> Result<Tensor> {
        let start = caches.first().map_or(0, KvCache::len);
        let at = Placement {
            start,
            positions: Some(positions),
            mask: Some(mask),
        };
        self.run(ids, &at, Some(caches))
    }

    /// One empty cache a layer for `batch` sequences of up to `capacity`
    /// positions, in `dtype`.
    pub fn new_caches(&self, batch: usize, capacity: usize, dtype: DType) -> Vec<KvCache> {
        let dev = self.model.embed_tokens.weight.device();
        (0..self.config.num_hidden_layers)
            .map(|_| {
                let (kv, d) = (self.config.num_key_value_heads, self.config.head_dim());
                KvCache::new(batch, kv, capacity, d, dtype, dev)
            })
            .collect()
    }

    #[track_caller]
    fn run(
        &self,
        ids: &Tensor,
        at: &Placement<'_>,
        caches: Option<&mut [KvCache]>,
    ) -> Result<Tensor> {
        let start = at.start;
        let s = ids.shape();
        if s.len() != 2 || s[1] == 0 || start + s[1] > self.rope.max_len() {
            panic!(
                "Llama: expects ids [B, T] with positions {start}..{start}+T within {}, got {s:?} at {}",
                self.rope.max_len(),
                std::panic::Location::caller()
            );
        }
        let mut x = self.model.embed_tokens.forward(ids);
        let checkpointed = caches.is_none() && self.checkpointing.load(Ordering::Relaxed);
        let mut caches = caches.map(|c| c.iter_mut());
        for block in &self.model.layers {
            if checkpointed {
                let (block, rope) = (block.clone(), self.rope.clone());
                x = checkpoint(&[&x], move |xs| {
                    let at = Placement::from(start);
                    block
                        .forward(&xs[0], (&rope, &at), None)
                        .expect("no cache: nothing can fill up")
                });
                continue;
            }
            let cache = caches.as_mut().and_then(|c| c.next());
            x = block.forward(&x, (&self.rope, at), cache)?;
        }
        Ok(self.lm_head.forward(&self.model.norm.forward(&x)))
    }

    /// Mean cross-entropy of the next-token predictions for `ids`
    /// against `targets` (both `[B, T]`).
    #[track_caller]
    pub fn loss(&self, ids: &Tensor, targets: &Tensor) -> Tensor {
        let v = self.config.vocab_size as isize;
        let logits = self.forward(ids);
        cross_entropy(&logits.reshape([-1, v]), &targets.reshape([-1]))
    }

    /// `new_tokens` tokens after `prompt` `[B, T]` (ids), each from the
    /// last position's logits by `how`, with one KV cache a layer of
    /// `T + new_tokens` positions in the model's dtype (after
    /// [`Parameters::to_dtype`], bf16 say): the prompt runs once, then one
    /// position a step (the same compiled graph every step). Returns the
    /// new ids `[B, new_tokens]` (`i64`).
    #[track_caller]
    pub fn generate(&self, prompt: &Tensor, new_tokens: usize, how: &Sampling) -> Result<Tensor> {
        self.decode(prompt, None, new_tokens, how)
    }

    /// The decoding loop of [`Llama::generate`] and
    /// [`Llama::generate_batch`]: `prompt` `[B, T]` once, then each
    /// sampled token, with `padded`'s positions and mask `[B, T]` for
    /// left-padded prompts (each next position one past its row's last).
    fn decode(
        &self,
        prompt: &Tensor,
        padded: Option<(Tensor, Tensor)>,
        new_tokens: usize,
        how: &Sampling,
    ) -> Result<Tensor> {
        let (b, t) = (prompt.shape()[0], prompt.shape()[1]);
        let dev = prompt.device().clone();
        let dtype = self.model.embed_tokens.weight.dtype();
        let mut caches = self.new_caches(b, t + new_tokens, dtype);
        let mut next = prompt.clone();
        let mut padded = padded;
        let ones = Tensor::full([b, 1], true, &dev);
        let mut out = Vec::with_capacity(new_tokens);
        for _ in 0..new_tokens {
            let logits = match &padded {
                Some((pos, mask)) => self.forward_cached_masked(&next, &mut caches, pos, mask)?,
                None => self.forward_cached(&next, &mut caches)?,
            };
            let last = logits.select(1, logits.shape()[1] - 1);
            let token = sample_logits(&last, how).reshape([b as isize, 1]);
            out.push(token.clone());
            next = token;
            if let Some((pos, _)) = &padded {
                let after = pos.narrow(1, pos.shape()[1] - 1, 1) + 1i32;
                padded = Some((after, ones.clone()));
            }
            dev.mark_step()?;
        }
        let refs: Vec<&Tensor> = out.iter().collect();
        Ok(if refs.is_empty() {
            Tensor::zeros_dtype([b, 0], DType::I64, &dev)
        } else {
            Tensor::cat(&refs, 1)
        })
    }
}

impl Llama {
    /// [`Llama::generate`] for prompts of different lengths in one batch:
    /// left-padded to the longest, each sequence at its own positions,
    /// padding masked out of every attention. Returns the new ids `[B,
    /// new_tokens]` (`i64`), as generating each prompt alone would.
    #[track_caller]
    pub fn generate_batch(
        &self,
        prompts: &[Vec<i32>],
        new_tokens: usize,
        how: &Sampling,
    ) -> Result<Tensor> {
        let dev = self.model.embed_tokens.weight.device().clone();
        let b = prompts.len();
        let t = prompts.iter().map(Vec::len).max().unwrap_or(0);
        if b == 0 || prompts.iter().any(Vec::is_empty) {
            panic!(
                "Llama::generate_batch: needs at least one prompt, none empty, at {}",
                std::panic::Location::caller()
            );
        }
        let mut ids = Vec::with_capacity(b * t);
        let mut real = Vec::with_capacity(b * t);
        let mut positions = Vec::with_capacity(b * t);
        for p in prompts {
            let pad = t - p.len();
            ids.extend(std::iter::repeat_n(0, pad).chain(p.iter().copied()));
            real.extend((0..t).map(|i| i >= pad));
            positions.extend((0..t).map(|i| i.saturating_sub(pad) as i32));
        }
        let ids = Tensor::from_vec(ids, [b, t], &dev)?;
        let mask = Tensor::from_vec(real, [b, t], &dev)?;
        let positions = Tensor::from_vec(positions, [b, t], &dev)?;
        self.decode(&ids, Some((positions, mask)), new_tokens, how)
    }
}

impl Parameters for Llama {
    fn visit(&self, v: &mut ParamVisitor) {
        v.module("model", &self.model);
        v.module("lm_head", &self.lm_head);
    }
}
