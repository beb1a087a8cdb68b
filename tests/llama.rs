//! The Llama-shaped decoder against PyTorch (`tools/llama_reference.py`,
//! which writes `tests/golden/llama*`): PyTorch's checkpoint in Hugging
//! Face's sharded bf16 layout loads, and fine-tuning from it gives the
//! same 20 training losses in f32 (within 1e-4) and under bf16 autocast
//! (within 2e-3: a bf16 product keeps 8 bits, a relative 2^-9 per
//! rounding, and the loss moved by at most 1.9e-4 here); Hugging Face's
//! parameter names; from trained weights, PyTorch's logits under teacher
//! forcing over 200 positions, and greedy generation with the KV cache
//! giving PyTorch's tokens (computed without a cache) up to the first
//! near-tie; on both backends.

mod common;

use common::devices;
use lazywgpu::amp::autocast;
use lazywgpu::data::{CharDataset, Split, SplitMix64};
use lazywgpu::nn::{self, Llama, LlamaConfig, Parameters, Sampling};
use lazywgpu::optim::{AdamW, Optimizer, ParamGroup, clip_grad_norm_};
use lazywgpu::{DType, Device, Tensor};

const DATA: &str = "examples/data/shakespeare-char/input.txt.gz";

fn golden() -> serde_json::Value {
    let text = std::fs::read_to_string("tests/golden/llama.json").unwrap();
    serde_json::from_str(&text).unwrap()
}

fn numbers(v: &serde_json::Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

fn config(g: &serde_json::Value) -> LlamaConfig {
    let c = &g["config"];
    let n = |k: &str| c[k].as_f64().unwrap();
    LlamaConfig {
        vocab_size: n("vocab_size") as usize,
        hidden_size: n("hidden_size") as usize,
        intermediate_size: n("intermediate_size") as usize,
        num_hidden_layers: n("num_hidden_layers") as usize,
        num_attention_heads: n("num_attention_heads") as usize,
        num_key_value_heads: n("num_key_value_heads") as usize,
        max_position_embeddings: n("max_position_embeddings") as usize,
        rms_norm_eps: n("rms_norm_eps") as f32,
        rope_theta: n("rope_theta") as f32,
        tie_word_embeddings: false,
    }
}

/// The model from PyTorch's weights: `tests/golden/llama_hf` (its bf16
/// shards and index, converted to f32 on load) or one f32 file.
fn model(weights: &str, dev: &Device) -> Llama {
    let m = Llama::new(config(&golden()), dev);
    if weights.ends_with(".safetensors") {
        nn::load_safetensors(&m, weights).unwrap();
    } else {
        let report = nn::hub::load_pretrained(&m, weights, &Default::default()).unwrap();
        assert_eq!(report.converted.len(), report.loaded.len(), "bf16 -> f32");
        assert!(report.unused.is_empty());
    }
    m
}

const INIT: &str = "tests/golden/llama_hf";
const TRAINED: &str = "tests/golden/llama_trained.safetensors";

/// The reference recipe's losses: 20 iterations of 8 x 32 tokens.
fn train(model: &Llama, data: &CharDataset, bf16: bool, dev: &Device) -> Vec<f64> {
    let params = model.params();
    let groups = ParamGroup::decay_matrices_only(params.clone(), 0.1);
    let mut opt = AdamW::with_groups(groups, 1e-3).betas(0.9, 0.95).eps(1e-8);
    let mut rng = SplitMix64::new(1337);
    let mut losses = Vec::new();
    for _ in 0..20 {
        let offsets = data.offsets(Split::Train, &mut rng, 8, 32);
        let (x, y) = data.batch(Split::Train, &offsets, 32, dev).unwrap();
        let logits = if bf16 {
            autocast(DType::BF16, || model.forward(&x))
        } else {
            model.forward(&x)
        };
        let v = model.config.vocab_size as isize;
        let loss = nn::functional::cross_entropy(
            &logits.cast(DType::F32).reshape([-1, v]),
            &y.reshape([-1]),
        );
        loss.backward();
        clip_grad_norm_(&params, 1.0);
        opt.step();
        opt.zero_grad();
        dev.mark_step().unwrap();
        losses.push(f64::from(loss.item::<f32>().unwrap()));
    }
    losses
}

#[test]
fn twenty_losses_match_pytorch_in_f32_and_bf16_autocast() {
    let data = CharDataset::from_file(DATA).unwrap();
    let g = golden();
    for (key, bf16, tol) in [
        ("losses", false, 1e-4),
        ("bf16_autocast_losses", true, 2e-3),
    ] {
        let want = numbers(&g[key]);
        for dev in devices() {
            let m = model(INIT, &dev);
            let got = train(&m, &data, bf16, &dev);
            let worst = got
                .iter()
                .zip(&want)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            eprintln!("{key} on {}: largest difference {worst:.2e}", dev.name());
            for (it, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (a - b).abs() <= tol,
                    "{key} on {}: iteration {it}: {a} where PyTorch has {b}\n got {got:?}\nwant {want:?}",
                    dev.name()
                );
            }
        }
    }
}

#[test]
fn parameters_carry_hugging_faces_names() {
    let dev = Device::cpu();
    let m = Llama::new(LlamaConfig::tiny(10), &dev);
    let names: Vec<String> = m.named_params().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names[0], "model.embed_tokens.weight");
    assert_eq!(names[1], "model.layers.0.self_attn.q_proj.weight");
    assert!(names.contains(&"model.layers.3.mlp.down_proj.weight".to_string()));
    assert!(names.contains(&"model.layers.0.post_attention_layernorm.weight".to_string()));
    assert_eq!(names[names.len() - 2], "model.norm.weight");
    assert_eq!(names[names.len() - 1], "lm_head.weight");
    // Tied: the head is the embedding and is not listed twice.
    let tied = Llama::new(
        LlamaConfig {
            tie_word_embeddings: true,
            ..LlamaConfig::tiny(10)
        },
        &dev,
    );
    let names: Vec<String> = tied.named_params().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names.last().unwrap(), "model.norm.weight");
}

/// Logits agree within this (f32 sums in another order over a width of
/// 64 and 176: a few ulps of logits of magnitude ~10).
const LOGIT_TOL: f64 = 1e-3;

#[test]
fn teacher_forced_logits_match_pytorch_over_200_positions() {
    let g = golden();
    let ids: Vec<i32> = numbers(&g["forced_ids"])
        .iter()
        .map(|&v| v as i32)
        .collect();
    let want = numbers(&g["forced_logits"]);
    for dev in devices() {
        let m = model(TRAINED, &dev);
        let x = Tensor::from_vec(ids.clone(), [1, ids.len()], &dev).unwrap();
        let got = m.forward(&x).to_vec::<f32>().unwrap();
        assert_eq!(got.len(), want.len());
        let worst = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (f64::from(*a) - b).abs())
            .fold(0.0, f64::max);
        eprintln!(
            "teacher forcing on {}: largest logit difference {worst:.2e}",
            dev.name()
        );
        assert!(worst <= LOGIT_TOL, "{}: logits off by {worst}", dev.name());
    }
}

#[test]
fn greedy_generation_with_the_cache_gives_pytorchs_tokens() {
    let g = golden();
    let prompt: Vec<i32> = numbers(&g["prompt"]).iter().map(|&v| v as i32).collect();
    let want: Vec<i64> = numbers(&g["generated"]).iter().map(|&v| v as i64).collect();
    // Tokens must agree up to the first step where PyTorch's two best
    // logits are closer than the logits' tolerance.
    let sure = numbers(&g["margins"])
        .iter()
        .take_while(|&&m| m > 2.0 * LOGIT_TOL)
        .count();
    assert!(sure >= 8, "the golden run has near-ties early: {sure}");
    for dev in devices() {
        let m = model(TRAINED, &dev);
        let ids = Tensor::from_vec(prompt.clone(), [1, prompt.len()], &dev).unwrap();
        let greedy = Sampling {
            temperature: 0.0,
            ..Sampling::default()
        };
        let got = m.generate(&ids, want.len(), &greedy).unwrap();
        let got = got.to_vec::<i64>().unwrap();
        assert_eq!(got[..sure], want[..sure], "on {}", dev.name());
    }
}

/// The whole model in bf16 (`to_dtype`): every parameter converted in
/// place, the logits within bf16's precision of the f32 model's, and
/// generation running with bf16 caches.
#[test]
fn a_model_cast_to_bf16_generates() {
    let g = golden();
    let prompt: Vec<i32> = numbers(&g["prompt"]).iter().map(|&v| v as i32).collect();
    for dev in devices() {
        let m = model(TRAINED, &dev);
        let ids = Tensor::from_vec(prompt.clone(), [1, prompt.len()], &dev).unwrap();
        let f32_logits = m.forward(&ids).to_vec::<f32>().unwrap();
        let held = m.params()[0].clone();
        m.to_dtype(DType::BF16);
        assert!(m.params().iter().all(|p| p.dtype() == DType::BF16));
        assert_eq!(held.dtype(), DType::BF16, "a handle held elsewhere follows");
        let logits = m.forward(&ids);
        assert_eq!(logits.dtype(), DType::BF16);
        let logits = logits.cast(DType::F32).to_vec::<f32>().unwrap();
        let scale = f32_logits.iter().fold(0.0f32, |a, v| a.max(v.abs()));
        let worst = logits
            .iter()
            .zip(&f32_logits)
            .fold(0.0f32, |a, (x, y)| a.max((x - y).abs()));
        assert!(
            worst <= 0.05 * scale,
            "bf16 logits off by {worst} (scale {scale})"
        );
        let greedy = Sampling {
            temperature: 0.0,
            ..Sampling::default()
        };
        let out = m.generate(&ids, 8, &greedy).unwrap();
        assert_eq!(out.shape(), [1, 8]);
    }
}

/// Hugging Face's sharded layout: saved in bf16 shards with an index,
/// loaded back into an f32 model (converted), a tied checkpoint into an
/// untied model (the head filled from the embedding), renamed entries.
#[test]
fn sharded_checkpoints_round_trip_with_conversion_and_ties() {
    use lazywgpu::nn::hub::{INDEX_FILE, LoadOptions, load_pretrained, save_sharded};
    let dev = Device::cpu();
    let dir = std::env::temp_dir().join(format!("lazywgpu-shards-{}", std::process::id()));
    let m = model(TRAINED, &dev);
    save_sharded(&m, &dir, 100_000, Some(DType::BF16)).unwrap();
    let shards = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy().ends_with(".safetensors")
        })
        .count();
    // 206 kB of bf16 in shards of at most 100 kB.
    assert_eq!(shards, 3, "{shards} shards");
    // Into a fresh f32 model: every entry converted from bf16.
    dev.manual_seed(5);
    let fresh = Llama::new(config(&golden()), &dev);
    let report = load_pretrained(&fresh, dir.join(INDEX_FILE), &LoadOptions::default()).unwrap();
    assert_eq!(report.loaded.len(), m.named_params().len());
    assert_eq!(report.converted.len(), report.loaded.len());
    assert!(report.unused.is_empty());
    for ((name, a), (_, b)) in m.named_params().iter().zip(fresh.named_params()) {
        let want = a
            .cast(DType::BF16)
            .cast(DType::F32)
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(b.to_vec::<f32>().unwrap(), want, "{name}");
    }
    std::fs::remove_dir_all(&dir).ok();

    // A tied model's checkpoint has no lm_head; an untied model takes it
    // from the embedding.
    let tied_cfg = LlamaConfig {
        tie_word_embeddings: true,
        ..LlamaConfig::tiny(20)
    };
    let tied = Llama::new(tied_cfg, &dev);
    save_sharded(&tied, &dir, usize::MAX, None).unwrap();
    let untied = Llama::new(LlamaConfig::tiny(20), &dev);
    let options = LoadOptions {
        tied: &[("lm_head.weight", "model.embed_tokens.weight")],
        ..LoadOptions::default()
    };
    let report = load_pretrained(&untied, &dir, &options).unwrap();
    assert_eq!(report.tied, ["lm_head.weight"]);
    assert_eq!(
        untied.lm_head.weight.to_vec::<f32>().unwrap(),
        tied.model.embed_tokens.weight.to_vec::<f32>().unwrap()
    );
    // Without the tie the head is missing: an error naming it.
    let err = load_pretrained(&untied, &dir, &LoadOptions::default()).unwrap_err();
    assert!(err.to_string().contains("lm_head.weight"), "{err}");
    std::fs::remove_dir_all(&dir).ok();

    // Renamed entries: a checkpoint whose names lack the `model.` prefix.
    let plain_dir = dir.with_extension("plain");
    let renamed = Llama::new(config(&golden()), &dev);
    let entries: Vec<(String, Tensor)> = m
        .named_params()
        .into_iter()
        .map(|(n, t)| (n.trim_start_matches("model.").to_string(), t))
        .collect();
    std::fs::create_dir_all(&plain_dir).unwrap();
    let file = plain_dir.join("model.safetensors");
    nn::save_safetensors(&Named(entries), &file).unwrap();
    let rename = |n: &str| n.trim_start_matches("model.").to_string();
    let options = LoadOptions {
        rename: Some(&rename),
        ..LoadOptions::default()
    };
    load_pretrained(&renamed, &plain_dir, &options).unwrap();
    std::fs::remove_dir_all(&plain_dir).ok();
    let again = renamed;
    assert_eq!(
        again.lm_head.weight.to_vec::<f32>().unwrap(),
        m.lm_head.weight.to_vec::<f32>().unwrap()
    );
}

/// A list of named tensors as a model (to write a checkpoint with other
/// names).
struct Named(Vec<(String, Tensor)>);

impl Parameters for Named {
    fn visit(&self, v: &mut nn::ParamVisitor) {
        for (name, t) in &self.0 {
            v.param(name, t);
        }
    }
}

/// Prompts of different lengths, left-padded in one batch, give the
/// tokens each gives alone (greedy, with the cache).
#[test]
fn batched_generation_with_left_padding_matches_one_prompt_at_a_time() {
    let g = golden();
    let text: Vec<i32> = numbers(&g["forced_ids"])
        .iter()
        .map(|&v| v as i32)
        .collect();
    let prompts = vec![
        text[..3].to_vec(),
        text[10..18].to_vec(),
        text[40..45].to_vec(),
    ];
    let greedy = Sampling {
        temperature: 0.0,
        ..Sampling::default()
    };
    for dev in devices() {
        let m = model(TRAINED, &dev);
        let batched = m.generate_batch(&prompts, 12, &greedy).unwrap();
        assert_eq!(batched.shape(), [3, 12]);
        let batched = batched.to_vec::<i64>().unwrap();
        for (i, p) in prompts.iter().enumerate() {
            let ids = Tensor::from_vec(p.clone(), [1, p.len()], &dev).unwrap();
            let alone = m
                .generate(&ids, 12, &greedy)
                .unwrap()
                .to_vec::<i64>()
                .unwrap();
            assert_eq!(
                batched[i * 12..(i + 1) * 12],
                alone[..],
                "prompt {i} on {}",
                dev.name()
            );
        }
    }
}
