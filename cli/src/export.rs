//! `orthoformer export --checkpoint DIR --out HF_DIR`: a trained GPT as a standard Hugging
//! Face GPT-2 folder (config.json, model.safetensors, tokenizer.json, tokenizer_config.json)
//! that `transformers` loads as `GPT2LMHeadModel`.

use std::path::PathBuf;

use super::Outcome;
use super::common::print_json;
use crate::output::outln;
use orthoformer::export::checkpoint::ExportJob;

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
    let job = ExportJob {
        checkpoint: args.checkpoint.clone(),
        out: args.out.clone(),
        logits: args.logits_text.clone().zip(args.logits_out.clone()),
    };
    let r = orthoformer::export::checkpoint::run(&job)?;
    if args.json {
        print_json(&r)?;
    } else {
        outln!(
            "exported {} (step {}, attention {}, {} tokenizer) as a Hugging Face GPT-2 model",
            args.checkpoint.display(),
            r.export.step,
            r.export.attention,
            r.export.tokenizer
        )?;
        for f in &r.export.files {
            outln!("wrote {}", args.out.join(f).display())?;
        }
        if let Some(l) = &r.reference_logits {
            // As JSON (the file quoted, the ids a list), as they were always printed.
            let (file, ids) = (
                serde_json::to_string(&l.file)?,
                serde_json::to_string(&l.ids)?,
            );
            outln!("wrote {file} (token ids {ids})")?;
        }
    }
    Ok(Outcome::Success)
}
