//! `orthoformer eval`: loss and perplexity of a trained checkpoint (`--checkpoint DIR`, on
//! the validation split of its training text or `--data`) or of a pretrained Llama-style model
//! (`--model FILE`, sliding-window perplexity on `--data` or the embedded TinyShakespeare).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;

use super::Outcome;
use super::common::{emit, progress_bar};
use super::pretrained::{
    DEFAULT_CONTEXT, DEFAULT_MAX_TOKENS, check_cache_fits, data_name, read_tokens,
};
use orthoformer::data::split::check_window;
use orthoformer::data::{Corpus, Split};
use orthoformer::model::checkpoint::load_model;
use orthoformer::model::llama::load_engine;
use orthoformer::model::llama::perplexity::perplexity;
use orthoformer::train::checkpoint::{self, MODEL_FILE};
use orthoformer::train::eval_report::{CheckpointEval, ModelEval};
use orthoformer::train::evaluate::{evaluate_tokens, units_per_token};

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
    /// Model mode: context window of the sliding-window perplexity.
    #[arg(long)]
    pub context: Option<usize>,
    /// Checkpoint mode: number of batches to average the loss over.
    #[arg(long)]
    pub eval_iters: Option<usize>,
    /// Seed for batch sampling.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
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
    if args.max_tokens.is_some() || args.context.is_some() {
        anyhow::bail!(
            "--max-tokens and --context apply to --model only; use --eval-iters to evaluate fewer batches"
        );
    }
    let loaded = checkpoint::load(dir)?;
    let mut model = load_model(&dir.join(MODEL_FILE))
        .with_context(|| format!("loading {}", dir.join(MODEL_FILE).display()))?;
    let st = &loaded.state_file;
    let t = model.config().context;
    let b = st.options.batch;
    let tok = &loaded.tokenizer;
    let (tokens, text_desc, units_per) = match &args.data {
        Some(path) => {
            let corpus = Corpus::load(path)?;
            let tokens = tok
                .encode(&corpus.text)
                .with_context(|| format!("tokenizing {}", path.display()))?;
            let upt = units_per_token(tok, &corpus.text, tokens.len());
            (tokens, path.display().to_string(), upt)
        }
        None => {
            let corpus = if st.data.source == orthoformer::data::corpus::TINY_SHAKESPEARE_NAME {
                Corpus::tiny_shakespeare()
            } else {
                Corpus::load(std::path::Path::new(&st.data.source)).with_context(|| {
                    "the checkpoint's training text is needed for its validation split; pass --data"
                })?
            };
            let tokens = tok.encode(&corpus.text)?;
            let split = Split::new(&tokens, t)?;
            // Units of the validation part itself (BPE bytes per token vary along a text).
            let upt = units_per_token(tok, &tok.decode(&split.val)?, split.val.len());
            (
                split.val,
                format!("validation split of {}", corpus.source),
                upt,
            )
        }
    };
    check_window(&tokens, t, &text_desc)?;
    let report = evaluate_tokens(
        &mut model,
        &tokens,
        b,
        t,
        args.eval_iters,
        units_per,
        tok.kind().unit(),
    )?;
    let out = CheckpointEval {
        checkpoint: dir.to_path_buf(),
        data: text_desc,
        step: st.step,
        tokenizer: tok.kind().name().to_string(),
        report,
    };
    super::common::emit(&out, args.json)?;
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
    let stride = (context / 2).max(1);
    let bar = progress_bar((ids.len() - 1) as u64, "eval", args.json);
    let start = Instant::now();
    let p = perplexity(
        &mut model,
        &ids,
        context,
        stride,
        &mut |n| bar.set_position(n as u64),
        &mut |_, _| {},
    )?;
    bar.finish_and_clear();
    let secs = start.elapsed().as_secs_f64();
    let r = ModelEval {
        model: path.display().to_string(),
        data: data_name(data),
        tokens: p.tokens,
        context,
        stride,
        nll: p.nll,
        ppl: p.ppl,
        seconds: secs,
        tokens_per_second: p.tokens as f64 / secs,
    };
    emit(&r, args.json)?;
    Ok(Outcome::Success)
}
