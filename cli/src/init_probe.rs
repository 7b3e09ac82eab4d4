//! `orthoformer init-probe`: signal propagation through a deep MLP under each initialisation,
//! as a table, JSON, and a plot (PNG and SVG: a column per activation, forward std on top,
//! backward std below, log scale by depth, a line per init).

use orthoformer::io::file_set::{Output, claim_outputs};
use std::path::PathBuf;

use super::Outcome;
use super::common::{print_json, progress_bar};
use crate::output::outln;
use orthoformer::analysis::signal_probe::{
    self, Activation, ProbeCurve, ProbeOptions, default_inits,
};

/// Flags of `orthoformer init-probe`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Inits: normal(0.01), xavier-normal, kaiming-normal (relu gain), \
orthogonal, zer-o. Writes init_probe.png and init_probe.svg into --out-dir."
)]
pub struct InitProbeArgs {
    /// Number of layers.
    #[arg(long, default_value_t = ProbeOptions::default().depth)]
    pub depth: usize,
    /// Width of every layer.
    #[arg(long, default_value_t = ProbeOptions::default().width)]
    pub width: usize,
    /// Rows of Gaussian input.
    #[arg(long, default_value_t = ProbeOptions::default().batch)]
    pub batch: usize,
    /// Random seed (layer l of every init uses seed + l).
    #[arg(long, default_value_t = ProbeOptions::default().seed)]
    pub seed: u64,
    /// Folder for init_probe.png and init_probe.svg (created if missing).
    #[arg(long, default_value = "init-probe")]
    pub out_dir: PathBuf,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

impl InitProbeArgs {
    /// The library's options these flags ask for.
    pub fn options(&self) -> ProbeOptions {
        ProbeOptions {
            depth: self.depth,
            width: self.width,
            batch: self.batch,
            seed: self.seed,
        }
    }
}

/// Runs `orthoformer init-probe`.
pub fn run(args: &InitProbeArgs) -> anyhow::Result<Outcome> {
    let o = args.options();
    // Claimed (checked, locked) before the probe runs.
    let _claim = claim_outputs(&[], &[Output::folder("out_dir", &args.out_dir)])?;
    let total = (default_inits().len() * Activation::ALL.len()) as u64;
    let bar = progress_bar(total, "init-probe", args.json);
    let report = signal_probe::run::run(&o, &args.out_dir, &mut |label, done| {
        bar.set_prefix(label.to_string());
        bar.set_position(done as u64);
    });
    bar.finish_and_clear();
    let report = report?;
    if args.json {
        print_json(&report)?;
    } else {
        print_table(&report.curves, o.depth)?;
        outln!("\nplot: {} and {}", report.png, report.svg)?;
    }
    Ok(Outcome::Success)
}

fn print_table(curves: &[ProbeCurve], depth: usize) -> anyhow::Result<()> {
    let mid = depth / 2;
    outln!(
        "{:<8} {:<16} {:>11} {:>11} {:>11} {:>11} {:>11}",
        "act",
        "init",
        "fwd l=1",
        format!("fwd l={}", mid + 1),
        format!("fwd l={depth}"),
        "bwd l=1",
        format!("bwd l={depth}")
    )?;
    for c in curves {
        outln!(
            "{:<8} {:<16} {:>11.3e} {:>11.3e} {:>11.3e} {:>11.3e} {:>11.3e}",
            c.activation.name(),
            c.init,
            c.forward_std[0],
            c.forward_std[mid],
            c.forward_std[depth - 1],
            c.backward_std[0],
            c.backward_std[depth - 1]
        )?;
    }
    Ok(())
}
