//! A Llama-shaped decoder on Shakespeare, character by character: RMSNorm,
//! rotary embeddings, grouped-query attention and a SwiGLU MLP (the
//! shape of Llama, Qwen and Mistral, at 0.8M parameters), trained with
//! AdamW (optionally under bf16 autocast, optionally with activation
//! checkpointing), then text generated with a KV cache and top-k/top-p
//! sampling on the device, and the weights saved in Hugging Face's
//! sharded layout.
//!
//! ```sh
//! cargo run --release --example llama                       # 300 iterations
//! cargo run --release --example llama -- --iters 50 --bf16 --checkpointing
//! ```

#[path = "support/cli.rs"]
mod cli;

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use cli::{DeviceArg, at_least_one};
use lazywgpu::amp::autocast;
use lazywgpu::data::{CharDataset, Split, SplitMix64};
use lazywgpu::nn::{self, Llama, LlamaConfig, Parameters, Sampling};
use lazywgpu::optim::{AdamW, Optimizer, ParamGroup, clip_grad_norm_};
use lazywgpu::{DType, Tensor};

/// A small Llama-shaped decoder trained on the Shakespeare shipped in
/// examples/data, then sampled with a KV cache.
#[derive(Parser, Debug)]
#[command(after_help = "Examples:
  cargo run --release --example llama
  cargo run --release --example llama -- --iters 50 --bf16 --checkpointing
  cargo run --release --example llama -- --temperature 0.8 --top-k 20 --top-p 0.9")]
struct Args {
    /// Training iterations
    #[arg(long, value_name = "N", default_value_t = 300)]
    iters: usize,
    /// Sequences a batch
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = at_least_one())]
    batch: usize,
    /// Tokens a sequence
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = at_least_one())]
    block: usize,
    /// Decoder blocks
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = at_least_one())]
    layers: usize,
    /// After training, time generation of 64 and 512 tokens with the KV
    /// cache and without (each token recomputing the whole sequence)
    #[arg(long)]
    bench_generation: bool,
    /// Iterations between loss reads
    #[arg(long, value_name = "N", default_value_t = 25, value_parser = at_least_one())]
    log_interval: usize,
    /// Matrix products in bf16 (autocast), parameters in f32
    #[arg(long)]
    bf16: bool,
    /// Recompute each block's activations in backward
    #[arg(long)]
    checkpointing: bool,
    /// Characters generated after training
    #[arg(long, value_name = "N", default_value_t = 200)]
    generate: usize,
    /// Sampling temperature (0: greedy)
    #[arg(long, default_value_t = 0.8)]
    temperature: f32,
    /// Keep the k most likely characters
    #[arg(long)]
    top_k: Option<usize>,
    /// Keep the most likely characters up to this probability mass
    #[arg(long, default_value_t = 0.95)]
    top_p: f32,
    /// Where the sharded weights go [default: target/lazywgpu-out/llama]
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    #[command(flatten)]
    device: DeviceArg,
}

fn main() -> lazywgpu::Result<()> {
    let args: Args = cli::parse();
    let dev = args.device.open()?;
    let data = CharDataset::from_file("examples/data/shakespeare-char/input.txt.gz")?;
    dev.manual_seed(1337);
    let config = LlamaConfig {
        num_hidden_layers: args.layers,
        max_position_embeddings: 1024,
        ..LlamaConfig::tiny(data.vocab_size())
    };
    let model = Llama::new(config, &dev);
    model.set_gradient_checkpointing(args.checkpointing);
    println!(
        "{} parameters on {}; {} layers, {} query and {} key/value heads{}{}",
        model.num_params(),
        dev.name(),
        config.num_hidden_layers,
        config.num_attention_heads,
        config.num_key_value_heads,
        if args.bf16 { ", bf16 autocast" } else { "" },
        if args.checkpointing {
            ", activation checkpointing"
        } else {
            ""
        },
    );
    let params = model.params();
    let groups = ParamGroup::decay_matrices_only(params.clone(), 0.1);
    let mut opt = AdamW::with_groups(groups, 3e-3).betas(0.9, 0.95).eps(1e-8);
    let mut rng = SplitMix64::new(1337);
    let start = Instant::now();
    let mut after_first = None;
    for it in 0..args.iters {
        if it == 1 {
            // The first step compiles; the rest show the steady rate.
            after_first = Some(Instant::now());
        }
        let offsets = data.offsets(Split::Train, &mut rng, args.batch, args.block);
        let (x, y) = data.batch(Split::Train, &offsets, args.block, &dev)?;
        let loss = if args.bf16 {
            let logits = autocast(DType::BF16, || model.forward(&x));
            let v = config.vocab_size as isize;
            nn::functional::cross_entropy(
                &logits.cast(DType::F32).reshape([-1, v]),
                &y.reshape([-1]),
            )
        } else {
            model.loss(&x, &y)
        };
        loss.backward();
        clip_grad_norm_(&params, 1.0);
        opt.step();
        opt.zero_grad();
        dev.mark_step()?;
        if (it + 1) % args.log_interval == 0 || it + 1 == args.iters {
            println!("iter {:4}: loss {:.4}", it + 1, loss.item::<f32>()?);
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let steady = after_first.map_or(0.0, |t| t.elapsed().as_secs_f64() / (args.iters - 1) as f64);
    println!(
        "trained {} iterations in {secs:.1} s ({steady:.2} s a step after the first); peak device memory {:.1} MB",
        args.iters,
        dev.metrics().counter("peak_bytes_live") as f64 / 1e6,
    );
    println!(
        "final validation loss {:.4} (20 batches of {} x {})",
        validation_loss(&model, &data, (args.batch, args.block), &dev)?,
        args.batch,
        args.block
    );
    if args.bench_generation {
        return bench_generation(&model, &data, &dev);
    }

    let prompt = data.encode("ROMEO:");
    let ids: Vec<i32> = prompt.iter().map(|&t| t as i32).collect();
    let ids = Tensor::from_vec(ids, [1, prompt.len()], &dev)?;
    let how = Sampling {
        temperature: args.temperature,
        top_k: args.top_k,
        top_p: Some(args.top_p),
    };
    let start = Instant::now();
    let tokens = model.generate(&ids, args.generate, &how)?;
    let tokens: Vec<u32> = tokens.to_vec::<i64>()?.iter().map(|&t| t as u32).collect();
    let secs = start.elapsed().as_secs_f64();
    println!("---\nROMEO:{}\n---", data.decode(&tokens));
    println!(
        "generated {} characters in {secs:.2} s ({:.1} per second, KV cache, {} compiles in all)",
        tokens.len(),
        tokens.len() as f64 / secs.max(1e-9),
        dev.metrics().counter("graphs_compiled"),
    );
    let out = args
        .out
        .unwrap_or_else(|| PathBuf::from("target/lazywgpu-out/llama"));
    nn::hub::save_sharded(&model, &out, 1 << 20, Some(DType::BF16))?;
    println!(
        "weights (bf16, Hugging Face's sharded layout) in {}",
        out.display()
    );
    Ok(())
}

/// The mean loss over 20 validation batches (offsets from splitmix64
/// seeded 4242, as `tools/llama_reference.py --example-run` draws them).
fn validation_loss(
    model: &Llama,
    data: &CharDataset,
    (batch, block): (usize, usize),
    dev: &lazywgpu::Device,
) -> lazywgpu::Result<f32> {
    let mut rng = SplitMix64::new(4242);
    let mut total = 0.0;
    for _ in 0..20 {
        let offsets = data.offsets(Split::Val, &mut rng, batch, block);
        let (x, y) = data.batch(Split::Val, &offsets, block, dev)?;
        let loss = lazywgpu::no_grad(|| model.loss(&x, &y));
        total += loss.item::<f32>()?;
    }
    Ok(total / 20.0)
}

/// Tokens per second generating 64 and 512 tokens greedily after a
/// prompt, with the KV cache and without it (each token recomputing the
/// whole sequence), and the graphs each compiled.
fn bench_generation(
    model: &Llama,
    data: &CharDataset,
    dev: &lazywgpu::Device,
) -> lazywgpu::Result<()> {
    let prompt: Vec<i32> = data.encode("ROMEO:").iter().map(|&t| t as i32).collect();
    let greedy = Sampling {
        temperature: 0.0,
        ..Sampling::default()
    };
    for n in [64usize, 512] {
        let ids = Tensor::from_vec(prompt.clone(), [1, prompt.len()], dev)?;
        let compiled = dev.metrics().counter("graphs_compiled");
        let start = Instant::now();
        let cached = model.generate(&ids, n, &greedy)?.to_vec::<i64>()?;
        let with = start.elapsed().as_secs_f64();
        let compiles = dev.metrics().counter("graphs_compiled") - compiled;
        let compiled = dev.metrics().counter("graphs_compiled");
        let start = Instant::now();
        let mut seq = prompt.clone();
        for _ in 0..n {
            let x = Tensor::from_vec(seq.clone(), [1, seq.len()], dev)?;
            let logits = model.forward(&x);
            let next = logits.select(1, seq.len() - 1).argmax(1, false);
            seq.push(next.to_vec::<i32>()?[0]);
        }
        let without = start.elapsed().as_secs_f64();
        let recompiles = dev.metrics().counter("graphs_compiled") - compiled;
        let same = seq[prompt.len()..]
            .iter()
            .zip(&cached)
            .take_while(|(a, b)| i64::from(**a) == **b)
            .count();
        println!(
            "{n} tokens: {:.1} tokens/s with the cache ({compiles} graphs compiled), {:.1} without ({recompiles} compiled): {:.1}x; the first {same} tokens agree",
            n as f64 / with,
            n as f64 / without,
            without / with,
        );
    }
    Ok(())
}
