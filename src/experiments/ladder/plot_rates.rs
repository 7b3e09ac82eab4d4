//! The ladder's rate plot (`loss-rate`): one panel per rung, held-out loss against the
//! learning rate (log scale), one colour per variant: each seed's loss as a small dot, the
//! mean over seeds as a line, the chosen rate as a ring. It shows what the rate selection saw:
//! whether each choice has a worse neighbour on both sides, and how far the variants' curves
//! sit apart at every rate they share.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::report::Report;
use super::select::Selection;
use crate::io::figure::{Figure, PALETTE, stage_figure};
use crate::io::file_set::FileSet;
use crate::{Error, Result};

struct RateFigure<'a> {
    r: &'a Report,
    rungs: Vec<&'a str>,
}

impl RateFigure<'_> {
    /// The selections of `rung`, in the plan's variant order, with each one's colour.
    fn of(&self, rung: &str) -> Vec<(RGBColor, &Selection)> {
        self.r
            .plan
            .variants
            .iter()
            .enumerate()
            .filter_map(|(i, v)| {
                let s = self
                    .r
                    .selection
                    .iter()
                    .find(|s| s.rung == rung && s.variant == v.name())?;
                Some((PALETTE[i % PALETTE.len()], s))
            })
            .collect()
    }
}

impl Figure for RateFigure<'_> {
    fn size(&self) -> (u32, u32) {
        let cols = self.rungs.len().clamp(1, 3) as u32;
        let rows = self.rungs.len().div_ceil(3).max(1) as u32;
        (420 * cols, 60 + 360 * rows)
    }

    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
    ) -> std::result::Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        root.fill(&WHITE)?;
        let root = root.titled(
            "held-out loss against learning rate: seeds (dots), mean (line), chosen (ring)",
            ("sans-serif", 20),
        )?;
        let cols = self.rungs.len().clamp(1, 3);
        let rows = self.rungs.len().div_ceil(3).max(1);
        let panels = root.split_evenly((rows, cols));
        for (panel, rung) in panels.iter().zip(&self.rungs) {
            let sels = self.of(rung);
            let pts: Vec<(f64, f64)> = sels
                .iter()
                .flat_map(|(_, s)| {
                    s.rates
                        .iter()
                        .flat_map(|r| r.heldout_loss.iter().map(move |&y| (r.lr, y)))
                })
                .filter(|(x, y)| *x > 0.0 && y.is_finite())
                .collect();
            if pts.is_empty() {
                continue;
            }
            let (x0, x1) = span(pts.iter().map(|p| p.0));
            let (y0, y1) = span(pts.iter().map(|p| p.1));
            let pad = ((y1 - y0) * 0.08).max(1e-3);
            let mut chart = ChartBuilder::on(panel)
                .caption(*rung, ("sans-serif", 16))
                .margin(10)
                .x_label_area_size(35)
                .y_label_area_size(50)
                .build_cartesian_2d(((x0 / 1.4)..(x1 * 1.4)).log_scale(), (y0 - pad)..(y1 + pad))?;
            chart
                .configure_mesh()
                .x_desc("learning rate (log)")
                .y_desc("held-out loss")
                .x_labels(4)
                .x_label_formatter(&|x| format!("{x:.3}"))
                .light_line_style(WHITE)
                .label_style(("sans-serif", 12))
                .draw()?;
            for (color, s) in &sels {
                let color = *color;
                let mean: Vec<(f64, f64)> = s
                    .rates
                    .iter()
                    .map(|r| (r.lr, r.heldout_loss_mean))
                    .filter(|(_, y)| y.is_finite())
                    .collect();
                chart
                    .draw_series(LineSeries::new(mean.clone(), color.stroke_width(2)))?
                    .label(s.variant.clone())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                    });
                chart.draw_series(
                    s.rates
                        .iter()
                        .flat_map(|r| r.heldout_loss.iter().map(move |&y| (r.lr, y)))
                        .filter(|(_, y)| y.is_finite())
                        .map(|p| Circle::new(p, 2, color.filled())),
                )?;
                chart.draw_series(
                    mean.iter()
                        .filter(|(x, _)| *x == s.chosen_lr)
                        .map(|&p| Circle::new(p, 7, color.stroke_width(2))),
                )?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .label_font(("sans-serif", 11))
                .position(SeriesLabelPosition::UpperRight)
                .draw()?;
        }
        Ok(())
    }
}

/// The range of `v` (widened when flat).
fn span(v: impl Iterator<Item = f64>) -> (f64, f64) {
    let (a, b) = v.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
        (a.min(x), b.max(x))
    });
    if a < b {
        (a, b)
    } else {
        let d = (a.abs() * 0.1).max(1e-3);
        (a - d, a + d)
    }
}

/// Stages `loss-rate.png|svg` into `set` (nothing when no rung has a selection).
pub fn stage(r: &Report, set: &mut FileSet) -> Result<()> {
    let mut rungs: Vec<&str> = Vec::new();
    for rung in r.plan.rungs.iter().map(|g| g.name.as_str()) {
        if r.selection.iter().any(|s| s.rung == rung) {
            rungs.push(rung);
        }
    }
    if rungs.is_empty() {
        return Ok(());
    }
    let fig = RateFigure { r, rungs };
    stage_figure(&fig, set, "loss-rate.png", "loss-rate.svg").map_err(|e| {
        Error::io(
            &e.path,
            std::io::Error::other(format!("drawing the plot: {}", e.why)),
        )
    })
}
