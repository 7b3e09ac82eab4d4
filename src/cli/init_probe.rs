//! `orthoformer init-probe`: signal propagation through a deep MLP under each initialisation,
//! as a table, JSON, and a plot (PNG and SVG: a column per activation, forward std on top,
//! backward std below, log scale by depth, a line per init).

use std::path::PathBuf;

use anyhow::bail;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::Outcome;
use super::common::{print_json, progress_bar};
use crate::analysis::signal_probe::{Activation, ProbeCurve, default_inits, probe};
use crate::io::figure::{Figure, write_figure};

/// Flags of `orthoformer init-probe`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Inits: normal(0.01), xavier-normal, kaiming-normal (relu gain), \
orthogonal, zer-o. Writes init_probe.png and init_probe.svg into --out-dir."
)]
pub struct InitProbeArgs {
    /// Number of layers.
    #[arg(long, default_value_t = 50)]
    pub depth: usize,
    /// Width of every layer.
    #[arg(long, default_value_t = 256)]
    pub width: usize,
    /// Rows of Gaussian input.
    #[arg(long, default_value_t = 512)]
    pub batch: usize,
    /// Random seed (layer l of every init uses seed + l).
    #[arg(long, default_value_t = 0)]
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

/// Runs `orthoformer init-probe`.
pub fn run(args: &InitProbeArgs) -> anyhow::Result<Outcome> {
    for (name, v) in [
        ("--depth", args.depth),
        ("--width", args.width),
        ("--batch", args.batch),
    ] {
        if v == 0 {
            bail!("{name} 0: it must be at least 1");
        }
    }
    std::fs::create_dir_all(&args.out_dir)
        .map_err(|e| anyhow::anyhow!("cannot create --out-dir {}: {e}", args.out_dir.display()))?;
    let inits = default_inits();
    let bar = progress_bar((inits.len() * 3) as u64, "init-probe", args.json);
    let mut curves = Vec::new();
    for act in Activation::ALL {
        for init in &inits {
            bar.set_prefix(format!("{} {}", init.label, act.name()));
            curves.push(probe(
                init, act, args.depth, args.width, args.batch, args.seed,
            )?);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    let png = args.out_dir.join("init_probe.png");
    let svg = args.out_dir.join("init_probe.svg");
    let figure = ProbeFigure {
        curves: &curves,
        args,
    };
    write_figure(&figure, &png, &svg)
        .map_err(|e| anyhow::anyhow!("cannot write the plot {}: {}", e.path.display(), e.why))?;
    if args.json {
        print_json(&Report {
            depth: args.depth,
            width: args.width,
            batch: args.batch,
            seed: args.seed,
            curves: &curves,
            png: png.display().to_string(),
            svg: svg.display().to_string(),
        })?;
    } else {
        print_table(&curves, args.depth);
        println!("\nplot: {} and {}", png.display(), svg.display());
    }
    Ok(Outcome::Success)
}

fn print_table(curves: &[ProbeCurve], depth: usize) {
    let mid = depth / 2;
    println!(
        "{:<8} {:<16} {:>11} {:>11} {:>11} {:>11} {:>11}",
        "act",
        "init",
        "fwd l=1",
        format!("fwd l={}", mid + 1),
        format!("fwd l={depth}"),
        "bwd l=1",
        format!("bwd l={depth}")
    );
    for c in curves {
        println!(
            "{:<8} {:<16} {:>11.3e} {:>11.3e} {:>11.3e} {:>11.3e} {:>11.3e}",
            c.activation.name(),
            c.init,
            c.forward_std[0],
            c.forward_std[mid],
            c.forward_std[depth - 1],
            c.backward_std[0],
            c.backward_std[depth - 1]
        );
    }
}

/// The six panels of the probe: forward and backward std per layer, one per activation.
struct ProbeFigure<'a> {
    curves: &'a [ProbeCurve],
    args: &'a InitProbeArgs,
}

impl Figure for ProbeFigure<'_> {
    fn size(&self) -> (u32, u32) {
        (1500, 900)
    }

    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        draw(root, self.curves, self.args)
    }
}

/// Values for a log axis: non-finite or non-positive stds are clamped to the axis ends.
fn clamp_log(v: f64) -> f64 {
    if v.is_nan() {
        1e-20
    } else {
        v.clamp(1e-20, 1e20)
    }
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    curves: &[ProbeCurve],
    args: &InitProbeArgs,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let title = format!(
        "Signal propagation: {}-layer MLP, width {}, batch {} (std per layer, log scale)",
        args.depth, args.width, args.batch
    );
    let root = root.titled(&title, ("sans-serif", 24))?;
    let panels = root.split_evenly((2, 3));
    let labels: Vec<String> = {
        let mut l: Vec<String> = curves.iter().map(|c| c.init.clone()).collect();
        l.dedup();
        l.truncate(curves.len() / 3);
        l
    };
    for (pi, panel) in panels.iter().enumerate() {
        let (row, col) = (pi / 3, pi % 3);
        let act = Activation::ALL[col];
        let series: Vec<(&ProbeCurve, Vec<f64>)> = curves
            .iter()
            .filter(|c| c.activation == act)
            .map(|c| {
                let v = if row == 0 {
                    &c.forward_std
                } else {
                    &c.backward_std
                };
                (c, v.iter().map(|&x| clamp_log(x)).collect())
            })
            .collect();
        let lo = series
            .iter()
            .flat_map(|s| s.1.iter().copied())
            .fold(f64::INFINITY, f64::min);
        let hi = series
            .iter()
            .flat_map(|s| s.1.iter().copied())
            .fold(0.0f64, f64::max);
        let (lo, hi) = (
            (lo.min(0.5) / 3.0).max(1e-20),
            (hi.max(2.0) * 3.0).min(1e20),
        );
        let caption = format!(
            "{} — {}",
            act.name(),
            if row == 0 {
                "forward: std of activations"
            } else {
                "backward: std of gradients"
            }
        );
        let mut chart = ChartBuilder::on(panel)
            .caption(caption, ("sans-serif", 18))
            .margin(8)
            .x_label_area_size(32)
            .y_label_area_size(60)
            .build_cartesian_2d(1usize..args.depth, (lo..hi).log_scale())?;
        chart
            .configure_mesh()
            .x_desc("layer")
            .y_label_formatter(&|y| format!("{y:.0e}"))
            .label_style(("sans-serif", 13))
            .draw()?;
        for (k, (_, v)) in series.iter().enumerate() {
            let color = Palette99::pick(k).to_rgba();
            let s = chart.draw_series(LineSeries::new(
                v.iter().enumerate().map(|(i, &y)| (i + 1, y)),
                color.stroke_width(2),
            ))?;
            if pi == 0 {
                s.label(labels.get(k).cloned().unwrap_or_default())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                    });
            }
        }
        if pi == 0 {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .label_font(("sans-serif", 13))
                .position(SeriesLabelPosition::LowerLeft)
                .draw()?;
        }
    }
    Ok(())
}
