//! `orthoformer theory`: seed 003 §6 measured on a trained model's real activations (norm ratio
//! vs `sqrt(d_k/d_model)`, pairwise distortion vs the JL bound, `q·k` vs `x·y` correlation for
//! the model's, random independent and random tied Q/K); a table, `--json`, and a scatter plot.

use std::path::PathBuf;

use anyhow::Context;
use serde::Serialize;

use super::Outcome;
use crate::output::{out, outln};
use orthoformer::analysis::theory::plot::{Series, stage_scatter};
use orthoformer::analysis::theory::report::{HeadTheory, TheoryOptions, measure, table};
use orthoformer::data::corpus::Corpus;
use orthoformer::io::file_set::FileSet;

/// Flags of `orthoformer theory`.
#[derive(Debug, clap::Args)]
pub struct TheoryArgs {
    /// Checkpoint folder written by `orthoformer train` (holds model.safetensors, state.json).
    #[arg(long)]
    pub checkpoint: PathBuf,
    /// Text file whose last tokens are fed to the model [default: embedded TinyShakespeare].
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Positions measured (capped at the model's context).
    #[arg(long, default_value_t = TheoryOptions::default().tokens)]
    pub tokens: usize,
    /// Seed of the random baseline projections.
    #[arg(long, default_value_t = TheoryOptions::default().seed)]
    pub seed: u64,
    /// Folder for theory.json and the scatter plot [default: the checkpoint folder].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print the JSON report instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// The JSON report of `orthoformer theory`.
#[derive(Debug, Serialize)]
struct TheoryReport {
    checkpoint: String,
    data: String,
    attention: String,
    d_model: usize,
    d_k: usize,
    positions: usize,
    heads: Vec<HeadTheory>,
}

impl TheoryArgs {
    /// The library's options these flags ask for.
    pub fn options(&self) -> TheoryOptions {
        TheoryOptions {
            tokens: self.tokens,
            seed: self.seed,
        }
    }
}

/// Runs `orthoformer theory`.
pub fn run(args: &TheoryArgs) -> anyhow::Result<Outcome> {
    let opts = args.options();
    let dir = &args.checkpoint;
    // One read of the model, verified against the manifest and the state's configuration.
    let (loaded, mut model) = orthoformer::train::checkpoint::load_with_model(dir)
        .with_context(|| format!("reading checkpoint {}", dir.display()))?;
    let corpus = Corpus::load_or_default(args.data.as_deref())?;
    let ids = loaded.tokenizer.encode(&corpus.text)?;
    let t = opts.tokens.min(model.config().context).min(ids.len());
    if t < 2 {
        anyhow::bail!(
            "{} gives {} tokens: the measurements need at least 2 (pass a longer --data file)",
            corpus.source,
            ids.len()
        );
    }
    let window = &ids[ids.len() - t..];
    let heads = measure(&mut model, window, opts.seed)?;
    let cfg = model.config();
    let report = TheoryReport {
        checkpoint: dir.display().to_string(),
        data: corpus.source.clone(),
        attention: cfg.attention.name().to_string(),
        d_model: cfg.d_model,
        d_k: cfg.d_model / cfg.n_head,
        positions: t,
        heads,
    };
    let out = args.out.clone().unwrap_or_else(|| dir.clone());
    orthoformer::io::folder_kind::claim(&out, orthoformer::io::folder_kind::FolderKind::Report)?;
    // The report and its plot appear together or not at all (`io::file_set`).
    let mut set = FileSet::begin(&out, "theory")?;
    set.write_bytes("theory.json", &serde_json::to_vec_pretty(&report)?)?;
    let (png, svg) = (out.join("theory_qk.png"), out.join("theory_qk.svg"));
    if let Some(h) = report.heads.first() {
        let series = [
            ("model's W_Q, W_K", &h.model_qk),
            ("random independent", &h.random_independent),
            ("random tied", &h.random_tied),
        ]
        .map(|(label, c)| Series {
            label: format!("{label} (r = {:.2})", c.pearson),
            points: c.sample.clone(),
        });
        let title = format!("q·k vs x·y, layer 0 head 0 ({})", report.attention);
        stage_scatter(&series, &title, &mut set, "theory_qk.png", "theory_qk.svg")?;
    }
    set.commit()?;
    if args.json {
        super::common::print_json(&report)?;
    } else {
        outln!(
            "{} ({}, d_model {}, d_k {}), {} positions of {}; means over heads:",
            report.checkpoint,
            report.attention,
            report.d_model,
            report.d_k,
            t,
            report.data
        )?;
        out!("{}", table(&report.heads))?;
        outln!(
            "A projection to d_k < d_model is not an isometry: |xW|/|x| sits near sqrt(d_k/d_model), not 1."
        )?;
        outln!(
            "wrote {}, {} and {}",
            out.join("theory.json").display(),
            png.display(),
            svg.display()
        )?;
    }
    Ok(Outcome::Success)
}
