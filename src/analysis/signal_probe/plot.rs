//! The signal-probe figure: six panels (a column per activation; forward std of the
//! activations on top, backward std of the gradients below), log scale by depth, a line per
//! initialisation. Drawn on any `plotters` backend through [`Figure`].

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{Activation, ProbeCurve};
use crate::io::figure::Figure;

/// The six panels of the probe: forward and backward std per layer, one per activation.
pub struct ProbeFigure<'a> {
    /// The curves, as [`super::probe`] returns them for each activation and init.
    pub curves: &'a [ProbeCurve],
    /// Layers of the probed MLP.
    pub depth: usize,
    /// Width of every layer.
    pub width: usize,
    /// Rows of Gaussian input.
    pub batch: usize,
}

impl Figure for ProbeFigure<'_> {
    fn size(&self) -> (u32, u32) {
        (1500, 900)
    }

    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        draw(root, self)
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
    fig: &ProbeFigure,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let (curves, args) = (fig.curves, fig);
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
