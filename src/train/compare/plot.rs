//! The comparison's figure: validation loss against optimizer steps (left) and against
//! training-step seconds (right), one colour per variant, the mean over seeds as a line and
//! the range over seeds (min to max) as a shaded band, with the baseline's final loss (the
//! time-to-target target) as a dotted line. Written as PNG and SVG, atomically.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::summary::{CompareSummary, VariantSummary, mean_curve};
use crate::io::figure::{Figure, PALETTE, stage_figure};
use crate::io::file_set::FileSet;
use crate::{Error, Result};

struct LossFigure<'a> {
    s: &'a CompareSummary,
}

impl Figure for LossFigure<'_> {
    fn size(&self) -> (u32, u32) {
        (1400, 600)
    }

    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
    ) -> std::result::Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        root.fill(&WHITE)?;
        let title = format!(
            "{}: validation loss, mean and range over {} seed{} ({} steps)",
            short_source(&self.s.data),
            self.s.seeds.len(),
            if self.s.seeds.len() == 1 { "" } else { "s" },
            self.s.options.steps
        );
        let root = root.titled(&title, ("sans-serif", 24))?;
        let panels = root.split_evenly((1, 2));
        panel(&panels[0], self.s, Axis::Steps)?;
        panel(&panels[1], self.s, Axis::Seconds)?;
        Ok(())
    }
}

/// Stages the figure into `set` as `png` and `svg` (file names in the set's folder).
pub fn stage(s: &CompareSummary, set: &mut FileSet, png: &str, svg: &str) -> Result<()> {
    stage_figure(&LossFigure { s }, set, png, svg).map_err(|e| {
        Error::io(
            &e.path,
            std::io::Error::other(format!("drawing the plot: {}", e.why)),
        )
    })
}

#[derive(Clone, Copy, PartialEq)]
enum Axis {
    Steps,
    Seconds,
}

/// Per evaluation: x (mean over seeds), mean loss, min and max loss over seeds.
fn series(v: &VariantSummary, axis: Axis) -> Vec<(f32, f32, f32, f32)> {
    let (steps, secs, val) = mean_curve(v);
    let xs = if axis == Axis::Steps { steps } else { secs };
    (0..xs.len())
        .map(|i| {
            let losses = v.seeds.iter().map(|s| s.curve[i].val_loss);
            let lo = losses.clone().fold(f32::INFINITY, f32::min);
            let hi = losses.fold(f32::NEG_INFINITY, f32::max);
            (xs[i] as f32, val[i] as f32, lo, hi)
        })
        .collect()
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    s: &CompareSummary,
    axis: Axis,
) -> std::result::Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let all: Vec<Vec<(f32, f32, f32, f32)>> = s.variants.iter().map(|v| series(v, axis)).collect();
    let x_max = all
        .iter()
        .flat_map(|c| c.iter().map(|p| p.0))
        .fold(0f32, f32::max)
        .max(1e-3);
    // The first evaluation (step 0, ln V) would flatten the rest: the y range starts at the
    // second evaluation's highest loss.
    let lo = all
        .iter()
        .flat_map(|c| c.iter().map(|p| p.2))
        .filter(|l| l.is_finite())
        .fold(f32::INFINITY, f32::min);
    let hi = all
        .iter()
        .flat_map(|c| c.iter().skip(usize::from(c.len() > 2)).map(|p| p.3))
        .filter(|l| l.is_finite())
        .fold(f32::NEG_INFINITY, f32::max);
    let (lo, hi) = if lo < hi { (lo, hi) } else { (0.0, 1.0) };
    let pad = (hi - lo) * 0.04;
    let (y0, y1) = (lo - pad, hi + pad);
    let mut chart = ChartBuilder::on(area)
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(0f32..x_max, y0..y1)?;
    let x_desc = match axis {
        Axis::Steps => "optimizer step",
        Axis::Seconds => "training seconds (mean over seeds; evaluation excluded)",
    };
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .x_label_formatter(&|x| format!("{}", x.round() as i64))
        .y_desc("validation loss (nats/token, evaluation batches)")
        .light_line_style(WHITE)
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 16))
        .draw()?;
    let clamp = |y: f32| y.clamp(y0, y1);
    for (i, (v, pts)) in s.variants.iter().zip(&all).enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        if s.seeds.len() > 1 {
            let band: Vec<(f32, f32)> = pts
                .iter()
                .map(|p| (p.0, clamp(p.3)))
                .chain(pts.iter().rev().map(|p| (p.0, clamp(p.2))))
                .collect();
            chart.draw_series(std::iter::once(Polygon::new(
                band,
                color.mix(0.18).filled(),
            )))?;
        }
        let line: Vec<(f32, f32)> = pts.iter().map(|p| (p.0, clamp(p.1))).collect();
        chart
            .draw_series(LineSeries::new(line, color.stroke_width(2)))?
            .label(v.attention.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3))
            });
    }
    let target = s.target_val_loss as f32;
    if target.is_finite() && target > y0 && target < y1 {
        chart
            .draw_series(DashedLineSeries::new(
                vec![(0.0, target), (x_max, target)],
                4,
                4,
                BLACK.mix(0.6).stroke_width(1),
            ))?
            .label(format!("{}'s final loss", s.baseline))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.mix(0.6)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .position(SeriesLabelPosition::UpperRight)
        .draw()?;
    Ok(())
}

fn short_source(s: &str) -> String {
    Path::new(s)
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| s.to_string())
}
