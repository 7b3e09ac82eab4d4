//! `orthoformer export --checkpoint DIR --out HF_DIR`: a trained GPT as a standard Hugging
//! Face GPT-2 folder (config.json, model.safetensors, tokenizer.json, tokenizer_config.json)
//! that `transformers` loads as `GPT2LMHeadModel`.

use std::path::PathBuf;

use anyhow::Context;

use super::Outcome;
use super::common::print_json;
use crate::output::outln;
use orthoformer::export::checkpoint::{export_gpt2, reference_logits};

/// Flags of `orthoformer export`.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// The training checkpoint folder (written by `orthoformer train --out`).
    #[arg(long)]
    pub checkpoint: PathBuf,
    /// The Hugging Face folder to write (created, or its four files replaced together).
    #[arg(long)]
    pub out: PathBuf,
    /// Also write the checkpoint's own logits on --logits-text (its first `context` tokens) to
    /// this `.npy` file (f32, tokens x vocabulary): the reference to check the export against
    /// (`scripts/interop_check.py`). The token ids are printed.
    #[arg(long, requires = "logits_text")]
    pub logits_out: Option<PathBuf>,
    /// The text of --logits-out.
    #[arg(long, requires = "logits_out")]
    pub logits_text: Option<String>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `orthoformer export`.
pub fn run(args: &ExportArgs) -> anyhow::Result<Outcome> {
    // The reference is computed first: a bad text writes nothing.
    let reference = match (&args.logits_text, &args.logits_out) {
        (Some(text), Some(_)) => Some(
            reference_logits(&args.checkpoint, text)
                .with_context(|| format!("reference logits of {}", args.checkpoint.display()))?,
        ),
        _ => None,
    };
    let report = export_gpt2(&args.checkpoint, &args.out)
        .with_context(|| format!("exporting {}", args.checkpoint.display()))?;
    let mut ids_json = None;
    if let (Some((ids, logits)), Some(path)) = (&reference, &args.logits_out) {
        let v = logits.len() / ids.len();
        orthoformer::io::npy::write(path, logits, &[ids.len(), v])?;
        ids_json = Some(serde_json::json!({"file": path, "ids": ids, "shape": [ids.len(), v]}));
    }
    if args.json {
        print_json(&serde_json::json!({
            "checkpoint": args.checkpoint,
            "out": args.out,
            "format": "gpt2",
            "export": report,
            "reference_logits": ids_json,
        }))?;
    } else {
        outln!(
            "exported {} (step {}, attention {}, {} tokenizer) as a Hugging Face GPT-2 model",
            args.checkpoint.display(),
            report.step,
            report.attention,
            report.tokenizer
        )?;
        for f in &report.files {
            outln!("wrote {}", args.out.join(f).display())?;
        }
        if let Some(r) = &ids_json {
            outln!("wrote {} (token ids {})", r["file"], r["ids"])?;
        }
    }
    Ok(Outcome::Success)
}
