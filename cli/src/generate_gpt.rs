//! `orthoformer generate --checkpoint DIR`: sample text from a trained checkpoint, streamed
//! to stdout as it is produced; the same seed gives the same text.

use std::io::Write;

use anyhow::Context;

use super::Outcome;
use super::generate::GenerateArgs;
use orthoformer::model::checkpoint::load_model;
use orthoformer::train::checkpoint::{self, MODEL_FILE};
use orthoformer::train::generate::generate;

/// Runs this mode of `orthoformer generate`.
pub fn run(args: &GenerateArgs) -> anyhow::Result<Outcome> {
    let Some(dir) = args.checkpoint.as_deref() else {
        anyhow::bail!("pass --checkpoint DIR (a folder written by `orthoformer train`)");
    };
    let loaded = checkpoint::load(dir)?;
    let mut model = load_model(&dir.join(MODEL_FILE))
        .with_context(|| format!("loading {}", dir.join(MODEL_FILE).display()))?;
    let opts = args.sample_options();
    let mut out = std::io::stdout().lock();
    out.write_all(args.prompt.as_bytes())?;
    generate(
        &mut model,
        &loaded.tokenizer,
        &args.prompt,
        opts,
        &mut |piece| {
            out.write_all(piece.as_bytes())
                .and_then(|_| out.flush())
                .map_err(|e| orthoformer::Error::io("stdout", e))
        },
    )
    .context("generating")?;
    writeln!(out)?;
    Ok(Outcome::Success)
}
