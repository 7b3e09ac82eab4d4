//! `orthoformer theory`: seed 003 §6 measured on a trained model's real activations (norm ratio
//! vs `sqrt(d_k/d_model)`, pairwise distortion vs the JL bound, `q·k` vs `x·y` correlation for
//! the model's, random independent and random tied Q/K); a table, `--json`, and a scatter plot.
//! The flags become the library's [`TheoryJob`], run by [`theory::run::run`].

use std::path::PathBuf;

use super::Outcome;
use crate::output::{out, outln};
use orthoformer::analysis::theory;
use orthoformer::analysis::theory::report::{TheoryOptions, table};
use orthoformer::analysis::theory::run::TheoryJob;

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
    let job = TheoryJob {
        checkpoint: args.checkpoint.clone(),
        data: args.data.clone(),
        out: args.out.clone(),
        options: args.options(),
    };
    let done = theory::run::run(&job)?;
    let report = &done.report;
    if args.json {
        super::common::print_json(report)?;
    } else {
        outln!(
            "{} ({}, d_model {}, d_k {}), {} positions of {}; means over heads:",
            report.checkpoint,
            report.attention,
            report.d_model,
            report.d_k,
            report.positions,
            report.data
        )?;
        out!("{}", table(&report.heads))?;
        outln!(
            "A projection to d_k < d_model is not an isometry: |xW|/|x| sits near sqrt(d_k/d_model), not 1."
        )?;
        let [json, png, svg] = &done.files;
        outln!(
            "wrote {}, {} and {}",
            json.display(),
            png.display(),
            svg.display()
        )?;
    }
    Ok(Outcome::Success)
}
