//! `orthoformer eval`: loss and perplexity of a trained checkpoint (`--checkpoint DIR`, on
//! the validation split of its training text or `--data`) or of a pretrained Llama-style model
//! (`--model FILE`, on `--data` or the embedded TinyShakespeare), both through the library's
//! one evaluation (`infer::eval`); the flags become its `EvalOptions`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;

use super::Outcome;
use super::common::{emit, progress_bar};
use super::pretrained::{
    DEFAULT_CONTEXT, DEFAULT_MAX_TOKENS, check_cache_fits, data_name, read_tokens,
};
use orthoformer::data::{Corpus, Split, token_files};
use orthoformer::infer::CausalLm;
use orthoformer::infer::eval::{EvalOptions, EvalReport, evaluate};
use orthoformer::infer::eval_report::{CheckpointEval, ModelEval};
use orthoformer::model::llama::load_engine;
use orthoformer::train::checkpoint;

/// Flags of `orthoformer eval`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["checkpoint", "model"])))]
pub struct EvalArgs {
    /// A checkpoint folder written by `orthoformer train`.
    #[arg(long)]
    pub checkpoint: Option<PathBuf>,
    /// A pretrained model: a `.gguf` file, or a folder with `model.safetensors` + `config.json`.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Text to evaluate on (UTF-8). Checkpoint mode: defaults to the validation split of the
    /// training data. Model mode: defaults to the embedded TinyShakespeare.
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Model mode: evaluate at most this many tokens of the text.
    #[arg(long)]
    pub max_tokens: Option<usize>,
    /// Model mode: window of the sliding-window perplexity, in tokens (Hugging Face's
    /// `max_length`: each window scores its tokens after the first) [default: 256].
    #[arg(long)]
    pub context: Option<usize>,
    /// Tokens from one window to the next; each window scores only tokens no earlier window
    /// scored [default: checkpoint mode, the model's context (windows do not overlap); model
    /// mode, half of --context].
    #[arg(long)]
    pub stride: Option<usize>,
    /// Score only this many batches (checkpoint mode: of the training batch size in windows;
    /// model mode: windows) [default: the whole text].
    #[arg(long)]
    pub eval_iters: Option<usize>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Model mode: how the KV cache stores keys and values: f32 (exact), f16, or 8/4-bit codes
    /// per token and head (q8, q4; q8-gN, q4-gN for groups of N values).
    #[arg(long, default_value = "f32", value_parser = super::generate::parse_kv_cache)]
    pub kv_cache: orthoformer::model::llama::KvDtype,
    /// Model mode: activation quantisation and R3.
    #[command(flatten)]
    pub quant: super::quantize_flags::RuntimeQuantArgs,
}

impl EvalArgs {
    /// `base` (the mode's defaults, from the library) with every option these flags give.
    fn options(&self, base: EvalOptions) -> anyhow::Result<EvalOptions> {
        if self.eval_iters == Some(0) {
            anyhow::bail!(
                "--eval-iters 0 scores nothing: use at least 1 (or leave it out to score the whole text)"
            );
        }
        Ok(EvalOptions {
            stride: self.stride.or(base.stride),
            max_batches: self.eval_iters.or(base.max_batches),
            ..base
        })
    }
}

/// Runs `orthoformer eval`.
pub fn run(args: &EvalArgs) -> anyhow::Result<Outcome> {
    if args.model.is_some() {
        run_model(args)
    } else {
        run_checkpoint(args)
    }
}

/// `eval --checkpoint`: loss, perplexity and bits per character (char tokenizer) or per
/// byte (BPE) of a trained checkpoint, on the validation split of its training text by
/// default or on any UTF-8 file with `--data`.
fn run_checkpoint(args: &EvalArgs) -> anyhow::Result<Outcome> {
    let Some(dir) = args.checkpoint.as_deref() else {
        anyhow::bail!("pass --checkpoint DIR (a folder written by `orthoformer train`)");
    };
    if args.quant.any() || args.kv_cache != orthoformer::model::llama::KvDtype::F32 {
        anyhow::bail!(
            "--abits, --act-clip, --act-asym, --qk-hadamard and --kv-cache apply to --model only"
        );
    }
    if args.max_tokens.is_some() || args.context.is_some() {
        anyhow::bail!(
            "--max-tokens and --context apply to --model only; use --eval-iters to evaluate fewer batches"
        );
    }
    // One read of the model, verified against the manifest and the state's configuration.
    let (loaded, mut model) = checkpoint::load_with_model(dir)?;
    let st = &loaded.state_file;
    let options = args.options(EvalOptions {
        batch: st.options.batch,
        ..EvalOptions::default()
    })?;
    let tok = &loaded.tokenizer;
    let (tokens, text_desc, units_per) = match &args.data {
        Some(path) => {
            let corpus = Corpus::load(path)?;
            let tokens = tok
                .encode(&corpus.text)
                .with_context(|| format!("tokenizing {}", path.display()))?;
            let upt = tok.units_per_token(&corpus.text, tokens.len());
            (tokens, path.display().to_string(), upt)
        }
        None if token_files::is_token_folder(Path::new(&st.data.source)) => {
            // Trained on prepared token files: their validation file; its text (for bits per
            // unit) is what the checkpoint's tokenizer decodes it to.
            let dir = Path::new(&st.data.source);
            let val = token_files::read_split(dir, "val")
                .with_context(|| format!("reading the validation tokens of {}", dir.display()))?;
            let upt = tok.units_per_token(&tok.decode(&val)?, val.len());
            (val, format!("val.bin of {}", dir.display()), upt)
        }
        None => {
            let corpus = if st.data.source == orthoformer::data::corpus::TINY_SHAKESPEARE_NAME {
                Corpus::tiny_shakespeare()
            } else {
                Corpus::load(Path::new(&st.data.source)).with_context(|| {
                    "the checkpoint's training text is needed for its validation split; pass --data"
                })?
            };
            let tokens = tok.encode(&corpus.text)?;
            let split = Split::new(&tokens, model.config().context)?;
            // Units of the validation part itself (BPE bytes per token vary along a text).
            let upt = tok.units_per_token(&tok.decode(&split.val)?, split.val.len());
            (
                split.val,
                format!("validation split of {}", corpus.source),
                upt,
            )
        }
    };
    let (report, seconds) = timed_eval(&mut model, &tokens, &options, args.json)?;
    let out = CheckpointEval {
        checkpoint: dir.to_path_buf(),
        data: text_desc,
        step: st.step,
        tokenizer: tok.name(),
        tokens_per_second: per_second(&report, seconds),
        report: report.with_units(units_per, tok.unit()),
        seconds,
    };
    emit(&out, args.json)?;
    Ok(Outcome::Success)
}

/// `eval --model`: sliding-window perplexity of a GGUF or Hugging Face model on a text.
fn run_model(args: &EvalArgs) -> anyhow::Result<Outcome> {
    let path = args.model.as_deref().context("--model is required")?;
    let data = args.data.as_deref();
    let context = args.context.unwrap_or(DEFAULT_CONTEXT);
    let max_tokens = args.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    if context < 2 {
        anyhow::bail!("--context must be at least 2 (got {context})");
    }
    if max_tokens == 0 {
        anyhow::bail!("--max-tokens must be at least 1");
    }
    if let Some(s) = args.stride
        && (s == 0 || s >= context)
    {
        anyhow::bail!(
            "--stride must be 1 to --context − 1 = {} (got {s})",
            context - 1
        );
    }
    let options = args.options(EvalOptions::sliding(context))?;
    let loaded = load_engine(path).context("loading the model")?;
    if context > loaded.model.context() {
        anyhow::bail!(
            "--context {context} exceeds the model's {}",
            loaded.model.context()
        );
    }
    check_cache_fits(loaded.model.config(), context)?;
    let ids = read_tokens(&loaded.tokenizer, data, max_tokens)?;
    let mut model = loaded.model;
    args.quant.apply(&mut model)?;
    model.kv_dtype = args.kv_cache;
    let (report, seconds) = timed_eval(&mut model, &ids, &options, args.json)?;
    let r = ModelEval {
        model: path.display().to_string(),
        data: data_name(data),
        context,
        tokens_per_second: per_second(&report, seconds),
        report,
        seconds,
    };
    emit(&r, args.json)?;
    Ok(Outcome::Success)
}

/// The evaluation with a progress bar (hidden under `--json`) and its wall time.
fn timed_eval<M: CausalLm>(
    model: &mut M,
    tokens: &[u32],
    options: &EvalOptions,
    json: bool,
) -> anyhow::Result<(EvalReport, f64)> {
    let bar = progress_bar(tokens.len().saturating_sub(1) as u64, "eval", json);
    let start = Instant::now();
    let report = evaluate(model, tokens, options, &mut |n| bar.set_position(n as u64))?;
    bar.finish_and_clear();
    // A NaN or infinite loss is no measurement: weights holding NaN or infinity (or logits
    // that overflow) are refused, not reported.
    if !report.loss.is_finite() {
        anyhow::bail!(
            "the loss over {} tokens is {} (the model's weights hold NaN or infinity, or its \
             logits overflow): no evaluation to report",
            report.tokens,
            report.loss
        );
    }
    Ok((report, start.elapsed().as_secs_f64()))
}

/// Tokens scored per second.
fn per_second(report: &EvalReport, seconds: f64) -> f64 {
    report.tokens as f64 / seconds
}
