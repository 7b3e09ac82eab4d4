//! `orthoformer eval --checkpoint DIR`: loss, perplexity and bits per character (character
//! tokenizer) or per byte (BPE) of a trained checkpoint, on the validation split of its
//! training text by default or on any UTF-8 file with `--data`.

use anyhow::Context;

use super::Outcome;
use super::eval::EvalArgs;
use orthoformer::data::split::check_window;
use orthoformer::data::{Corpus, Split};
use orthoformer::model::checkpoint::load_model;
use orthoformer::train::checkpoint::{self, MODEL_FILE};
use orthoformer::train::evaluate::{evaluate_tokens, units_per_token};

/// Runs this mode of `orthoformer eval`.
pub fn run(args: &EvalArgs) -> anyhow::Result<Outcome> {
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
    if args.json {
        super::common::print_json(&serde_json::json!({
            "checkpoint": dir,
            "data": text_desc,
            "step": st.step,
            "tokenizer": tok.kind().name(),
            "report": report,
        }))?;
    } else {
        println!("checkpoint   {} (step {})", dir.display(), st.step);
        println!("data         {text_desc}");
        println!("tokens       {}", report.tokens);
        println!("loss         {:.4} nats/token", report.loss);
        println!("perplexity   {:.3}", report.perplexity);
        // At least one space after the label: "bits/character" is longer than the column.
        let label = format!("bits/{}", report.unit);
        println!("{label:<12} {:.4}", report.bits_per_unit);
    }
    Ok(Outcome::Success)
}
