//! A GPT (decoder-only transformer) in nanoGPT's form: token and learned
//! position embeddings, pre-LayerNorm blocks of causal self-attention and
//! a GELU MLP, a final LayerNorm, and an output head tied to the token
//! embedding. No biases, no dropout.

use super::Module;
use super::functional::cross_entropy;
use super::init::normal_param;
use super::layers::Linear;
use super::params::{ParamVisitor, Parameters};
use super::transformer::{CausalSelfAttention, Embedding, LayerNorm};
use crate::optim::{AdamW, ParamGroup, Scheduler, WarmupCosine};
use crate::runtime::device::Device;
use crate::tensor::Tensor;

/// The sizes of a [`Gpt`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GptConfig {
    /// Distinct tokens.
    pub vocab_size: usize,
    /// Longest context (rows of the position embedding).
    pub block_size: usize,
    /// Transformer blocks.
    pub n_layer: usize,
    /// Attention heads per block.
    pub n_head: usize,
    /// Embedding width.
    pub n_embd: usize,
}

impl GptConfig {
    /// nanoGPT's "baby GPT" for `shakespeare_char` on a CPU: 4 layers,
    /// 4 heads, width 128, context 64.
    pub fn baby(vocab_size: usize) -> GptConfig {
        GptConfig {
            vocab_size,
            block_size: 64,
            n_layer: 4,
            n_head: 4,
            n_embd: 128,
        }
    }
}

/// The MLP of a block: `Linear(C, 4C)`, exact GELU, `Linear(4C, C)`.
pub struct Mlp {
    /// `Linear(C, 4C)`.
    pub fc: Linear,
    /// `Linear(4C, C)`.
    pub proj: Linear,
}

impl Module for Mlp {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        self.proj.forward(&self.fc.forward(x).gelu())
    }

    fn visit(&self, v: &mut ParamVisitor) {
        v.module("fc", &self.fc);
        v.module("proj", &self.proj);
    }
}

/// One pre-LayerNorm block: `x + attn(ln1(x))`, then `x + mlp(ln2(x))`.
pub struct Block {
    /// Before attention.
    pub ln1: LayerNorm,
    /// Causal self-attention.
    pub attn: CausalSelfAttention,
    /// Before the MLP.
    pub ln2: LayerNorm,
    /// The MLP.
    pub mlp: Mlp,
}

impl Parameters for Block {
    fn visit(&self, v: &mut ParamVisitor) {
        v.module("ln1", &self.ln1);
        v.module("attn", &self.attn);
        v.module("ln2", &self.ln2);
        v.module("mlp", &self.mlp);
    }
}

impl Block {
    /// Records the block on `x` `[B, T, C]`.
    #[track_caller]
    pub fn forward(&self, x: &Tensor) -> Tensor {
        let x = x + self.attn.forward(&self.ln1.forward(x));
        &x + self.mlp.forward(&self.ln2.forward(&x))
    }
}

/// A decoder-only transformer over token ids (see the module docs).
/// Parameter names follow nanoGPT's layout with short names: `wte.weight`,
/// `wpe.weight`, `blocks.{i}.ln1.weight`, `blocks.{i}.attn.qkv.weight`,
/// `blocks.{i}.attn.proj.weight`, `blocks.{i}.ln2.weight`,
/// `blocks.{i}.mlp.fc.weight`, `blocks.{i}.mlp.proj.weight`,
/// `ln_f.weight`; the head is `wte` itself and is not listed twice.
pub struct Gpt {
    /// The sizes.
    pub config: GptConfig,
    /// Token embedding `[vocab, C]`, also the output head.
    pub wte: Embedding,
    /// Position embedding `[block, C]`.
    pub wpe: Embedding,
    /// The blocks.
    pub blocks: Vec<Block>,
    /// The final LayerNorm.
    pub ln_f: LayerNorm,
}

impl Gpt {
    /// A model with GPT-2's init: `normal(0, 0.02)` for embeddings and
    /// linear weights, `normal(0, 0.02 / sqrt(2 n_layer))` for the two
    /// residual output projections, LayerNorm weights 1.
    pub fn new(config: GptConfig, dev: &Device) -> Gpt {
        let c = config.n_embd;
        let std = 0.02;
        let proj_std = 0.02 / (2.0 * config.n_layer as f32).sqrt();
        let blocks = (0..config.n_layer)
            .map(|_| Block {
                ln1: LayerNorm::no_bias(&[c], dev),
                attn: CausalSelfAttention::new(c, config.n_head, std, proj_std, dev),
                ln2: LayerNorm::no_bias(&[c], dev),
                mlp: Mlp {
                    fc: Linear {
                        weight: normal_param(&[4 * c, c], std, dev),
                        bias: None,
                    },
                    proj: Linear {
                        weight: normal_param(&[c, 4 * c], proj_std, dev),
                        bias: None,
                    },
                },
            })
            .collect();
        Gpt {
            config,
            wte: Embedding::normal(config.vocab_size, c, std, dev),
            wpe: Embedding::normal(config.block_size, c, std, dev),
            blocks,
            ln_f: LayerNorm::no_bias(&[c], dev),
        }
    }

    /// Logits `[B, T, vocab]` for token ids `[B, T]` (`T <= block_size`).
    #[track_caller]
    pub fn forward(&self, ids: &Tensor) -> Tensor {
        let s = ids.shape();
        if s.len() != 2 || s[1] > self.config.block_size || s[1] == 0 {
            panic!(
                "Gpt::forward: expects ids [B, T] with 0 < T <= {}, got {s:?} at {}",
                self.config.block_size,
                std::panic::Location::caller()
            );
        }
        let t = s[1];
        let positions = self.wpe.weight.narrow(0, 0, t);
        let mut x = self.wte.forward(ids) + positions;
        for block in &self.blocks {
            x = block.forward(&x);
        }
        self.ln_f.forward(&x).matmul(&self.wte.weight.t())
    }

    /// Mean cross-entropy of the next-token predictions for `ids` against
    /// `targets` (both `[B, T]`), over all positions.
    #[track_caller]
    pub fn loss(&self, ids: &Tensor, targets: &Tensor) -> Tensor {
        let logits = self.forward(ids);
        let v = self.config.vocab_size;
        cross_entropy(&logits.reshape([-1, v as isize]), &targets.reshape([-1]))
    }
}

impl Gpt {
    /// nanoGPT's optimiser and schedule for this model (its
    /// `shakespeare_char` recipe): AdamW with learning rate 1e-3, betas
    /// (0.9, 0.99), eps 1e-8 and weight decay 0.1 on matrices only, warmed
    /// up over 100 steps, then cosine decay to 1e-4 at step 2,000. Call
    /// the scheduler's `step` after each optimiser step.
    pub fn nanogpt_optimizer(&self) -> (AdamW, Scheduler<WarmupCosine>) {
        let groups = ParamGroup::decay_matrices_only(self.params(), 0.1);
        let mut opt = AdamW::with_groups(groups, 1e-3).betas(0.9, 0.99).eps(1e-8);
        let schedule = WarmupCosine {
            warmup: 100,
            total: 2000,
            min_lr: 1e-4,
        };
        let sched = Scheduler::new(&mut opt, schedule);
        (opt, sched)
    }
}

impl Parameters for Gpt {
    fn visit(&self, v: &mut ParamVisitor) {
        v.module("wte", &self.wte);
        v.module("wpe", &self.wpe);
        for (i, b) in self.blocks.iter().enumerate() {
            v.module(&format!("blocks.{i}"), b);
        }
        v.module("ln_f", &self.ln_f);
    }
}
