//! `orthoformer train`: train a GPT on a text file (TinyShakespeare by default) or a token
//! folder (`python -m orthoformer.prepare`) into a checkpoint folder, with a progress bar, a
//! metrics log and resume. The flag groups here ([`DataFlags`] from `data_flags`,
//! [`ModelFlags`], [`OptimFlags`]) are shared with `orthoformer compare`.

use std::path::PathBuf;

use anyhow::Context;

use super::Outcome;
use super::common::library_values;
pub use super::data_flags::{DataFlags, folder_line};
use super::train_progress::{BarProgress, interrupt_flag};
use crate::output::outln;
use orthoformer::data::Corpus;
use orthoformer::experiments::compare::attention_name;
use orthoformer::io::file_set::{Input, Output, claim_outputs};
use orthoformer::model::{
    AttentionKind, FrozenDraw, GptConfig, LayerSelect, Position, Temperature,
};
use orthoformer::train::model_choice::ModelChoice;
use orthoformer::train::recipe::recipe;
use orthoformer::train::session::{FreshSpec, ModelRequest, ResumeData, Session};
use orthoformer::train::{AdamWConfig, TrainOptions};

/// Which model.
#[derive(Debug, Clone, clap::Args)]
pub struct ModelFlags {
    /// Model preset: tiny, shakespeare-char, config-a, config-b, seed-003, gpt2-small
    /// [default: train shakespeare-char (4 layers, 4 heads, width 128) with context 64;
    /// compare the recipe's model].
    #[arg(long, conflicts_with = "config")]
    pub preset: Option<String>,
    /// Model configuration file (TOML or JSON with the fields of a preset).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Context length (tokens per training sequence), overriding the preset.
    #[arg(long)]
    pub context: Option<usize>,
    /// Model width `d_model` (the feed-forward width becomes 4x), overriding the preset;
    /// the number of heads stays the preset's.
    #[arg(long)]
    pub width: Option<usize>,
    /// Seed of the model's initialisation (frozen orthogonal weights have their own seed in
    /// the config) [default: --seed; not with compare, where each seed sets it].
    #[arg(long)]
    pub model_seed: Option<u64>,
    /// Positions: `learned` (an absolute position embedding, GPT-2's) or `rope` (rotary
    /// positions on every head's queries and keys, no position embedding), overriding the
    /// preset [default: learned].
    #[arg(long, value_parser = library_values(&Position::ALL.map(Position::name), Position::parse))]
    pub position: Option<Position>,
    /// Attention-score temperature: `fixed` (q·k/√D) or `learned` (one trained scalar per
    /// head multiplying the scores, starting at 1; with frozen Q/K the only trained part of
    /// the score path; softmax variants only), overriding the preset [default: fixed].
    #[arg(long, value_parser = library_values(&Temperature::ALL.map(Temperature::name), Temperature::parse))]
    pub temperature: Option<Temperature>,
    /// Heads per attention, overriding the preset; must divide the width (head width =
    /// width / heads) [default: the preset's].
    #[arg(long)]
    pub n_head: Option<usize>,
    /// How frozen W_Q, W_K are drawn: qr, svd, householder, cayley (random orthogonal), or
    /// gaussian (i.i.d. N(0, 1/width) entries, NOT orthogonal: the equal-scale control, each
    /// head's column of expected squared norm 1 like an orthonormal one) [default: qr].
    #[arg(long, value_parser = library_values(&FrozenDraw::ALL.map(FrozenDraw::name), FrozenDraw::parse))]
    pub frozen_method: Option<FrozenDraw>,
    /// The layers that use the variant's frozen W_Q, W_K: first:N, last:N, all, or layer
    /// numbers such as 0,2,5; the other layers train theirs (softmax, or linear for the
    /// linear variants). Variants that train Q/K are unchanged by it [default: all].
    #[arg(long, value_parser = parse_layers)]
    pub frozen_layers: Option<LayerSelect>,
}

/// Parses `--frozen-layers` (see [`LayerSelect::parse`]).
fn parse_layers(s: &str) -> Result<LayerSelect, String> {
    LayerSelect::parse(s).map_err(|e| {
        e.to_string()
            .trim_start_matches("invalid model configuration: ")
            .to_string()
    })
}

/// Optimisation and evaluation.
#[derive(Debug, Clone, clap::Args)]
pub struct OptimFlags {
    /// Optimizer steps [default: train 600, compare 2000 (the recipe's)].
    #[arg(long)]
    pub steps: Option<usize>,
    /// Sequences per batch [default: train 16, compare 12].
    #[arg(long)]
    pub batch: Option<usize>,
    /// Peak learning rate [default: train 2e-3, compare 1e-3].
    #[arg(long)]
    pub lr: Option<f64>,
    /// Linear warm-up steps [default: train 30, compare 100].
    #[arg(long)]
    pub warmup: Option<usize>,
    /// Learning rate at the end of the cosine decay [default: train 2e-4, compare 1e-4].
    #[arg(long)]
    pub min_lr: Option<f64>,
    /// AdamW decoupled weight decay, on 2-D weights only [default: 0.1].
    #[arg(long)]
    pub weight_decay: Option<f64>,
    /// AdamW β₂ [default: train 0.95, compare 0.99; β₁ is 0.9, ε 1e-8].
    #[arg(long)]
    pub beta2: Option<f64>,
    /// Clip the global gradient norm to this (0: off) [default: 1.0].
    #[arg(long)]
    pub grad_clip: Option<f64>,
    /// Evaluate and checkpoint every this many steps [default: train 50, compare 250].
    #[arg(long)]
    pub eval_every: Option<usize>,
    /// Batches per loss estimate during training [default: train 8, compare 20].
    #[arg(long)]
    pub eval_iters: Option<usize>,
    /// Seed of batch sampling and dropout (compare: the first of its --seeds) [default: 0].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Train W_Q, W_K (and their biases) for this many steps, then freeze them: no update,
    /// no weight decay, AdamW state unchanged, left out of the clipping norm. Resumes
    /// exactly. compare names such a variant NAME-freeze@STEPS (e.g. softmax-freeze@200);
    /// variants with frozen Q/K are unaffected [default: Q/K train to the end].
    #[arg(long)]
    pub freeze_qk_after: Option<usize>,
}

/// Flags of `orthoformer train`.
#[derive(Debug, clap::Args)]
pub struct TrainArgs {
    #[command(flatten)]
    pub data: DataFlags,
    #[command(flatten)]
    pub model: ModelFlags,
    /// Attention: softmax, orthogonal (frozen random orthogonal Q/K), linear, orthogonal-linear,
    /// orthogonal-tied (one frozen matrix as Q and K), identity-q (W_Q = I, W_K trained),
    /// orthogonal-hadamard (frozen SRHT Q/K, fast transform), orthogonal-trained (trainable
    /// W_Q, W_K started at the frozen orthogonal draw: the control that separates freezing
    /// from the initial scale) [default: the preset's].
    #[arg(long)]
    pub attention: Option<String>,
    /// Start from a named recipe's model and options (flags given override it):
    /// nanogpt-cpu = nanoGPT's CPU recipe for character-level TinyShakespeare (4 layers, 4
    /// heads, width 128, context 64, no biases; batch 12, 2000 steps, lr 1e-3 to 1e-4, warm-up
    /// 100, β₂ 0.99, evaluation every 250 steps on 20 batches).
    #[arg(long)]
    pub recipe: Option<String>,
    #[command(flatten)]
    pub optim: OptimFlags,
    /// Steps the cosine decays the learning rate over; later steps run at --min-lr (at least
    /// --warmup) [default: --steps of the first run: --resume with more --steps keeps it, so
    /// the rate never rises again].
    #[arg(long)]
    pub lr_decay_steps: Option<usize>,
    /// Checkpoint folder (created; must not hold a checkpoint unless --resume).
    #[arg(long, default_value = "runs/train")]
    pub out: PathBuf,
    /// Continue the checkpoint in --out exactly where it stopped (--steps may extend it).
    #[arg(long)]
    pub resume: bool,
    /// Checkpoint and stop after this many steps; `--resume` later continues as if the run
    /// had not stopped (to train in chunks).
    #[arg(long)]
    pub stop_at: Option<usize>,
    /// Print a JSON summary instead of the progress bar and table.
    #[arg(long)]
    pub json: bool,
}

/// The options of `train` when no flag and no recipe is given: the library's defaults
/// (`TrainOptions::default`), defined nowhere else.
pub fn default_options() -> TrainOptions {
    TrainOptions::default()
}

impl OptimFlags {
    /// The options these flags ask for, defaults filled in.
    pub fn options(&self) -> TrainOptions {
        self.over(default_options())
    }

    /// `base` with every option these flags give replaced.
    pub fn over(&self, base: TrainOptions) -> TrainOptions {
        let adamw = AdamWConfig {
            weight_decay: self.weight_decay.unwrap_or(base.adamw.weight_decay),
            beta2: self.beta2.unwrap_or(base.adamw.beta2),
            ..base.adamw
        };
        TrainOptions {
            steps: self.steps.unwrap_or(base.steps),
            lr_decay_steps: base.lr_decay_steps,
            batch: self.batch.unwrap_or(base.batch),
            lr: self.lr.unwrap_or(base.lr),
            min_lr: self.min_lr.unwrap_or(base.min_lr),
            warmup: self.warmup.unwrap_or(base.warmup),
            grad_clip: self.grad_clip.unwrap_or(base.grad_clip),
            eval_every: self.eval_every.unwrap_or(base.eval_every),
            eval_iters: self.eval_iters.unwrap_or(base.eval_iters),
            seed: self.seed.unwrap_or(base.seed),
            adamw,
            freeze_qk_after: self.freeze_qk_after.or(base.freeze_qk_after),
        }
    }

    /// Whether any option other than `--steps` was given (not allowed with `--resume`).
    pub fn any_but_steps(&self) -> bool {
        let o = self;
        o.batch.is_some()
            || o.lr.is_some()
            || o.warmup.is_some()
            || o.min_lr.is_some()
            || o.weight_decay.is_some()
            || o.beta2.is_some()
            || o.grad_clip.is_some()
            || o.eval_every.is_some()
            || o.eval_iters.is_some()
            || o.seed.is_some()
            || o.freeze_qk_after.is_some()
    }
}

/// Parses an attention name (see [`AttentionKind::names`]).
pub fn parse_attention(name: &str) -> anyhow::Result<AttentionKind> {
    AttentionKind::parse(name.trim()).map_err(|_| {
        anyhow::anyhow!(
            "unknown attention {name:?}: use one of {}",
            AttentionKind::names()
        )
    })
}

impl ModelFlags {
    /// Whether any model flag was given.
    pub fn any(&self) -> bool {
        self.preset.is_some()
            || self.config.is_some()
            || self.context.is_some()
            || self.width.is_some()
            || self.model_seed.is_some()
            || self.position.is_some()
            || self.temperature.is_some()
            || self.n_head.is_some()
            || self.frozen_method.is_some()
            || self.frozen_layers.is_some()
    }

    /// The library's model choice these flags give, with `attention`.
    pub fn choice(&self, attention: Option<AttentionKind>) -> ModelChoice {
        ModelChoice {
            preset: self.preset.clone(),
            config: self.config.clone(),
            context: self.context,
            width: self.width,
            attention,
            position: self.position,
            temperature: self.temperature,
            n_head: self.n_head,
            frozen_method: self.frozen_method,
            frozen_layers: self.frozen_layers.clone(),
        }
    }

    /// The configuration these flags ask for (vocabulary set later from the tokenizer).
    pub fn config(&self, attention: Option<AttentionKind>) -> anyhow::Result<GptConfig> {
        Ok(self.choice(attention).resolve(None)?)
    }

    /// `base` (a recipe's model) replaced by `--config` or `--preset` when given, then
    /// `--context`, `--width` and `attention` applied.
    pub fn config_over(
        &self,
        base: GptConfig,
        attention: Option<AttentionKind>,
    ) -> anyhow::Result<GptConfig> {
        Ok(self.choice(attention).resolve(Some(base))?)
    }
}

/// Runs `orthoformer train`.
pub fn run(args: &TrainArgs) -> anyhow::Result<Outcome> {
    let attention = args.attention.as_deref().map(parse_attention).transpose()?;
    // Checked before a fresh run's folder is written.
    orthoformer::train::trainer::Limits {
        stop: None,
        stop_at: args.stop_at,
    }
    .validate()?;
    // Claimed before any work (reading the data, training a BPE): `--out` may not be, hold or
    // sit inside `--data`, and a second process training into it is refused at once; held
    // until the last checkpoint is written.
    let data: Vec<Input<'_>> = args
        .data
        .data
        .iter()
        .map(|d| Input::new("data", d))
        .collect();
    let _claim = claim_outputs(&data, &[Output::folder("out", &args.out)])?;
    let mut session = if args.resume {
        if args.optim.any_but_steps()
            || args.data.tokenizer.is_some()
            || args.data.vocab_size.is_some()
            || args.recipe.is_some()
        {
            anyhow::bail!(
                "--resume continues with the options stored in the checkpoint: drop the \
                 optimisation, recipe and tokenizer flags (only --steps may change)"
            );
        }
        // A full configuration is compared field by field; a lone --attention or --context
        // is compared on its own after loading.
        let full = args.model.preset.is_some() || args.model.config.is_some();
        let requested = if full {
            Some(args.model.config(attention)?)
        } else {
            None
        };
        let data = match args.data.token_folder()? {
            Some(dir) => ResumeData::TokenFolder(dir.to_path_buf()),
            None => match args.data.data.as_deref() {
                Some(path) => ResumeData::Text(Corpus::load(path)?),
                None => ResumeData::Recorded,
            },
        };
        let session = Session::resume_with(&args.out, data, args.optim.steps, requested.as_ref())
            .with_context(|| format!("resuming {}", args.out.display()))?;
        // The checkpoint's horizon may be named again, never changed.
        session.check_decay_request(args.lr_decay_steps)?;
        session.check_request(
            &args.out,
            &ModelRequest {
                attention,
                context: args.model.context,
                d_model: args.model.width,
                position: args.model.position,
                temperature: args.model.temperature,
                n_head: args.model.n_head,
                frozen_method: args.model.frozen_method,
                frozen_layers: args.model.frozen_layers.clone(),
            },
        )?;
        session
    } else {
        let (model, mut options) = match &args.recipe {
            Some(name) => {
                let (model, options) = recipe(name)?;
                (
                    args.model.config_over(model, attention)?,
                    args.optim.over(options),
                )
            }
            None => (args.model.config(attention)?, args.optim.options()),
        };
        // One run: an option its variant would ignore is refused, not recorded.
        args.model.choice(attention).check_applies(&model)?;
        options.lr_decay_steps = args.lr_decay_steps.or(options.lr_decay_steps);
        options.check_applies(&model)?;
        let spec = FreshSpec {
            model,
            model_seed: args.model.model_seed.unwrap_or(options.seed),
            options,
        };
        spec.options.validate()?;
        let prepared = args.data.prepared(spec.model.context)?;
        Session::fresh_prepared(spec, prepared, &args.out)?
    };
    if !args.json
        && let Some(line) = folder_line(&session.prepared)
    {
        outln!("{line}")?;
    }
    let tokens_per_step = session.options.batch * session.model.config().context;
    let bar = super::common::progress_bar(session.options.steps as u64, "train", args.json);
    let mut progress = BarProgress::new(bar, tokens_per_step, session.state.step);
    let stop = interrupt_flag();
    let result = session.run(Some(&stop), args.stop_at, &mut progress);
    progress.bar.finish_and_clear();
    result.with_context(|| format!("training into {}", args.out.display()))?;
    let last = session.state.metrics.last().cloned();
    // Read after the final checkpoint: the whole run's peak, as the kernel counts it.
    let peak_rss = orthoformer::io::rss::peak_rss_bytes();
    if args.json {
        super::common::print_json(&serde_json::json!({
            "out": args.out,
            "step": session.state.step,
            "attention": attention_name(session.model.config().attention),
            "final": last,
            "metrics": session.state.metrics,
            "peak_rss_bytes": peak_rss,
        }))?;
    } else if session.state.step < session.options.steps {
        outln!(
            "stopped after step {} of {}; checkpoint in {}: continue with --resume",
            session.state.step,
            session.options.steps,
            args.out.display()
        )?;
    } else if let Some(r) = last {
        outln!(
            "trained {} steps: train loss {:.4}, val loss {:.4}; checkpoint in {}",
            r.step,
            r.train_loss,
            r.val_loss,
            args.out.display()
        )?;
    }
    if !args.json {
        match peak_rss {
            Some(b) => outln!(
                "peak resident memory: {:.1} MiB",
                orthoformer::io::rss::mib(b)
            )?,
            None => outln!("peak resident memory: unavailable on this system")?,
        }
    }
    Ok(Outcome::Success)
}
