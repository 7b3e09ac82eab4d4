//! The ladder's two plots: validation loss against trainable non-embedding parameters
//! (`loss-params`) and against training FLOPs (`loss-flops`), both on a logarithmic x axis;
//! one colour per variant, each seed's run at the chosen rate as a dot and the fitted law
//! (where there is one) as a line. Staged into the report's file set as PNG and SVG.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::report::{Point, Report};
use crate::analysis::scaling::PowerLaw;
use crate::io::figure::{Figure, PALETTE, stage_figure};
use crate::io::file_set::FileSet;
use crate::{Error, Result};

/// Which x a plot uses.
#[derive(Clone, Copy, PartialEq)]
enum Axis {
    Params,
    Flops,
}

struct LadderFigure<'a> {
    r: &'a Report,
    axis: Axis,
}

impl LadderFigure<'_> {
    fn x(&self, p: &Point) -> f64 {
        match self.axis {
            Axis::Params => p.params.trainable_non_embedding as f64,
            Axis::Flops => p.flops as f64,
        }
    }

    fn law(&self, variant: &str) -> Option<PowerLaw> {
        let f = self.r.fits.iter().find(|f| f.variant == variant)?;
        let o = if self.axis == Axis::Params {
            &f.params
        } else {
            &f.flops
        };
        o.fit.map(|f| f.fit.law)
    }
}

impl Figure for LadderFigure<'_> {
    fn size(&self) -> (u32, u32) {
        (1000, 650)
    }

    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
    ) -> std::result::Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        root.fill(&WHITE)?;
        let pts = &self.r.points;
        let xs: Vec<f64> = pts.iter().map(|p| self.x(p)).filter(|x| *x > 0.0).collect();
        let ys: Vec<f64> = pts
            .iter()
            .map(|p| p.val_loss)
            .filter(|y| y.is_finite())
            .collect();
        let (x0, x1) = bounds(&xs, 1.0, 10.0);
        let (x0, x1) = ((x0 / 1.5).max(1e-12), x1 * 1.5);
        let (y0, y1) = bounds(&ys, 0.0, 1.0);
        let pad = ((y1 - y0) * 0.08).max(1e-3);
        let (what, unit) = match self.axis {
            Axis::Params => ("parameters", "trainable non-embedding parameters N (log)"),
            Axis::Flops => ("compute", "training FLOPs C (log)"),
        };
        let title =
            format!("validation loss against {what}: each seed at its chosen rate, with the fits");
        let mut chart = ChartBuilder::on(root)
            .caption(title, ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .build_cartesian_2d((x0..x1).log_scale(), (y0 - pad)..(y1 + pad))?;
        chart
            .configure_mesh()
            .x_desc(unit)
            .y_desc("validation loss (nats/token)")
            .x_label_formatter(&|x| format!("{x:.1e}"))
            .light_line_style(WHITE)
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 15))
            .draw()?;
        for (i, v) in self.r.plan.variants.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let mine: Vec<(f64, f64)> = pts
                .iter()
                .filter(|p| p.variant == v.name())
                .map(|p| (self.x(p), p.val_loss))
                .filter(|(x, y)| *x > 0.0 && y.is_finite())
                .collect();
            chart
                .draw_series(mine.iter().map(|&p| Circle::new(p, 4, color.filled())))?
                .label(v.name())
                .legend(move |(x, y)| Circle::new((x + 10, y), 4, color.filled()));
            if let Some(law) = self.law(v.name()) {
                let n = 60;
                let line: Vec<(f64, f64)> = (0..=n)
                    .map(|k| x0 * (x1 / x0).powf(k as f64 / n as f64))
                    .map(|x| (x, law.at(x)))
                    .filter(|(_, y)| y.is_finite() && *y >= y0 - pad && *y <= y1 + pad)
                    .collect();
                chart.draw_series(LineSeries::new(line, color.stroke_width(2)))?;
            }
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .position(SeriesLabelPosition::UpperRight)
            .draw()?;
        Ok(())
    }
}

/// The range of `v`, or `(lo, hi)` when it is empty or flat.
fn bounds(v: &[f64], lo: f64, hi: f64) -> (f64, f64) {
    let a = v.iter().copied().fold(f64::INFINITY, f64::min);
    let b = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if a.is_finite() && b.is_finite() && a < b {
        (a, b)
    } else if a.is_finite() {
        let d = (a.abs() * 0.1).max(1e-3);
        (a - d, a + d)
    } else {
        (lo, hi)
    }
}

/// Stages both plots into `set`: `loss-params.png|svg` and `loss-flops.png|svg`.
pub fn stage(r: &Report, set: &mut FileSet) -> Result<()> {
    for (axis, stem) in [(Axis::Params, "loss-params"), (Axis::Flops, "loss-flops")] {
        let fig = LadderFigure { r, axis };
        stage_figure(&fig, set, &format!("{stem}.png"), &format!("{stem}.svg")).map_err(|e| {
            Error::io(
                &e.path,
                std::io::Error::other(format!("drawing the plot: {}", e.why)),
            )
        })?;
    }
    Ok(())
}
