//! `orthoformer init-probe`: signal propagation through a deep MLP under each initialisation,
//! as a table, JSON, and a plot (PNG and SVG: a column per activation, forward std on top,
//! backward std below, log scale by depth, a line per init).

use std::path::PathBuf;

use anyhow::bail;

use super::Outcome;
use super::common::{print_json, progress_bar};
use crate::output::outln;
use orthoformer::analysis::signal_probe::plot::ProbeFigure;
use orthoformer::analysis::signal_probe::{
    Activation, ProbeCurve, ProbeOptions, default_inits, probe,
};
use orthoformer::io::figure::write_figure;

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

#[derive(serde::Serialize)]
struct Report<'a> {
    depth: usize,
    width: usize,
    batch: usize,
    seed: u64,
    curves: &'a [ProbeCurve],
    png: String,
    svg: String,
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
    for (name, v) in [
        ("--depth", o.depth),
        ("--width", o.width),
        ("--batch", o.batch),
    ] {
        if v == 0 {
            bail!("{name} 0: it must be at least 1");
        }
    }
    let inits = default_inits();
    let bar = progress_bar((inits.len() * 3) as u64, "init-probe", args.json);
    let mut curves = Vec::new();
    for act in Activation::ALL {
        for init in &inits {
            bar.set_prefix(format!("{} {}", init.label, act.name()));
            curves.push(probe(init, act, o.depth, o.width, o.batch, o.seed)?);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    // Created only now, so a refused or failed probe leaves no folder behind.
    orthoformer::io::folder_kind::claim(
        &args.out_dir,
        orthoformer::io::folder_kind::FolderKind::Report,
    )?;
    let png = args.out_dir.join("init_probe.png");
    let svg = args.out_dir.join("init_probe.svg");
    let figure = ProbeFigure {
        curves: &curves,
        depth: o.depth,
        width: o.width,
        batch: o.batch,
    };
    write_figure(&figure, &png, &svg)
        .map_err(|e| anyhow::anyhow!("cannot write the plot {}: {}", e.path.display(), e.why))?;
    if args.json {
        print_json(&Report {
            depth: o.depth,
            width: o.width,
            batch: o.batch,
            seed: o.seed,
            curves: &curves,
            png: png.display().to_string(),
            svg: svg.display().to_string(),
        })?;
    } else {
        print_table(&curves, o.depth)?;
        outln!("\nplot: {} and {}", png.display(), svg.display())?;
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
