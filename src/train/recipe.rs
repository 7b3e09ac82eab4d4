//! Named training recipes: a model configuration and training options taken together from a
//! published reference, so a run can be checked against that reference's number.
//!
//! `nanogpt-cpu` is nanoGPT's CPU recipe for character-level TinyShakespeare (karpathy/nanoGPT
//! README, "I only have a macbook"; `config/train_shakespeare_char.py` with the README's
//! overrides; `train.py` and `model.py` at 3adf61e for everything the command leaves at its
//! default):
//!
//! ```text
//! python train.py config/train_shakespeare_char.py --device=cpu --compile=False --eval_iters=20
//!   --log_interval=1 --block_size=64 --batch_size=12 --n_layer=4 --n_head=4 --n_embd=128
//!   --max_iters=2000 --lr_decay_iters=2000 --dropout=0.0
//! ```
//!
//! which the README reports at validation loss 1.88. The values it implies: 4 pre-LN layers, 4
//! heads, width 128, FFN 512, context 64, no bias in any Linear or LayerNorm (`bias=False`),
//! no dropout, LM head tied to the token embedding; batch 12, 2000 iterations; AdamW β = (0.9,
//! 0.99), ε = 1e-8, weight decay 0.1 on every 2-D tensor (embeddings included); learning rate
//! 1e-3 with linear warm-up over 100 iterations (`lr·(it+1)/(warmup+1)`), cosine to 1e-4 at
//! iteration 2000 (`lr_decay_iters = max_iters`); gradient norm clipped at 1.0; evaluation
//! every 250 iterations on 20 batches (`eval_interval`, `eval_iters`). Initialisation is
//! GPT-2's, as here: `N(0, 0.02)`, residual projections `N(0, 0.02/√(2L))`.
//!
//! The feed-forward GELU is the exact (erf) form, as nanoGPT's `nn.GELU()` (this project's
//! default is GPT-2's tanh form). Not the same, by construction: nanoGPT estimates the
//! validation loss on 20 random batches, `compare` on the whole validation split; the random
//! streams (initialisation, batches) are this project's own.

use super::adamw::AdamWConfig;
use super::invalid;
use super::options::TrainOptions;
use crate::Result;
use crate::init::orthogonal::OrthoMethod;
use crate::model::{AttentionKind, GptConfig, NormPlacement};
use crate::nn::gelu::Gelu;

/// The names [`recipe`] knows.
pub const RECIPES: [&str; 1] = ["nanogpt-cpu"];

/// A named recipe's model (vocabulary 65, replaced by the tokenizer's) and training options
/// (seed 0).
pub fn recipe(name: &str) -> Result<(GptConfig, TrainOptions)> {
    match name {
        "nanogpt-cpu" => Ok(nanogpt_cpu()),
        other => Err(invalid(format!(
            "unknown recipe {other:?}: use one of {}",
            RECIPES.join(", ")
        ))),
    }
}

/// nanoGPT's CPU recipe (see the module documentation).
fn nanogpt_cpu() -> (GptConfig, TrainOptions) {
    let model = GptConfig {
        vocab_size: 65,
        context: 64,
        n_layer: 4,
        n_head: 4,
        d_model: 128,
        d_ff: 512,
        attention: AttentionKind::Softmax,
        norm: NormPlacement::Pre,
        attn_bias: false,
        ffn_bias: false,
        norm_bias: false,
        gelu: Gelu::Erf,
        dropout: 0.0,
        frozen_method: OrthoMethod::Qr.into(),
        frozen_seed: 0,
        position: Default::default(),
        temperature: Default::default(),
        frozen_layers: None,
    };
    let options = TrainOptions {
        steps: 2000,
        lr_decay_steps: None,
        batch: 12,
        lr: 1e-3,
        min_lr: 1e-4,
        warmup: 100,
        grad_clip: 1.0,
        eval_every: 250,
        eval_iters: 20,
        seed: 0,
        adamw: AdamWConfig {
            beta1: 0.9,
            beta2: 0.99,
            eps: 1e-8,
            weight_decay: 0.1,
        },
        freeze_qk_after: None,
    };
    (model, options)
}
