//! One training step of the baby GPT recipe (`examples/gpt.rs`: batch
//! 12 x 64 characters of Shakespeare, AdamW, clipping at 1.0), shared by
//! the comparison suite's W7 and the `gpt_step_profile` example.

use lazywgpu::Device;
use lazywgpu::data::{CharDataset, Split, SplitMix64};
use lazywgpu::nn::{Gpt, GptConfig, Parameters};
use lazywgpu::optim::{Optimizer, clip_grad_norm_};

/// A closure that runs one step on `dev` and ends it with `mark_step`.
pub fn trainer(dev: &Device) -> lazywgpu::Result<impl FnMut() -> lazywgpu::Result<()> + '_> {
    dev.manual_seed(0);
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/data/shakespeare-char/input.txt.gz"
    );
    let data = CharDataset::from_file(path)?;
    let model = Gpt::new(GptConfig::baby(data.vocab_size()), dev);
    let params = model.params();
    let (mut opt, _) = model.nanogpt_optimizer();
    let mut rng = SplitMix64::new(1337);
    Ok(move || {
        let offsets = data.offsets(Split::Train, &mut rng, 12, 64);
        let (x, y) = data.batch(Split::Train, &offsets, 64, dev)?;
        let loss = model.loss(&x, &y);
        loss.backward();
        clip_grad_norm_(&params, 1.0);
        opt.step();
        opt.zero_grad();
        dev.mark_step()
    })
}
