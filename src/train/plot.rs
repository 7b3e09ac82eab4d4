//! Loss-curve plots (PNG and SVG) with `plotters`: one colour per run, validation loss solid,
//! training loss dashed, against optimizer steps. Text uses the DejaVu Sans font shipped in
//! `assets/fonts/`, so no system font library is needed. The pair is written as one file set.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::metrics::MetricRecord;
use crate::io::figure::{Figure, FigureError, PALETTE, stage_figure, write_figure};
use crate::io::file_set::FileSet;
use crate::{Error, Result};

/// One run's curve.
#[derive(Debug, Clone)]
pub struct Curve {
    /// Legend label (e.g. the attention variant).
    pub label: String,
    /// Its evaluation records.
    pub records: Vec<MetricRecord>,
}

/// The loss curves of several runs, titled.
struct LossFigure<'a> {
    curves: &'a [Curve],
    title: &'a str,
}

impl Figure for LossFigure<'_> {
    fn size(&self) -> (u32, u32) {
        (1000, 600)
    }

    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
    ) -> std::result::Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        draw(root, self.curves, self.title)
    }
}

/// Writes the loss curves to `png` and `svg` (1000 x 600 pixels).
pub fn write_loss_plots(curves: &[Curve], title: &str, png: &Path, svg: &Path) -> Result<()> {
    write_figure(&LossFigure { curves, title }, png, svg).map_err(plot_error)
}

/// Draws the loss curves into `set` as the files `png` and `svg`, to be committed with the
/// files they belong to.
pub fn stage_loss_plots(
    curves: &[Curve],
    title: &str,
    set: &mut FileSet,
    png: &str,
    svg: &str,
) -> Result<()> {
    stage_figure(&LossFigure { curves, title }, set, png, svg).map_err(plot_error)
}

fn plot_error(e: FigureError) -> Error {
    Error::io(
        &e.path,
        std::io::Error::other(format!("drawing the plot: {}", e.why)),
    )
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    curves: &[Curve],
    title: &str,
) -> std::result::Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let losses = curves
        .iter()
        .flat_map(|c| c.records.iter().flat_map(|r| [r.train_loss, r.val_loss]))
        .filter(|l| l.is_finite());
    let (lo, hi) = losses.fold((f32::MAX, f32::MIN), |(a, b), l| (a.min(l), b.max(l)));
    let (lo, hi) = if lo <= hi { (lo, hi) } else { (0.0, 1.0) };
    let pad = ((hi - lo) * 0.05).max(1e-3);
    let max_step = curves
        .iter()
        .flat_map(|c| c.records.iter().map(|r| r.step))
        .max()
        .unwrap_or(1)
        .max(1);
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 24))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(0f32..max_step as f32, (lo - pad)..(hi + pad))?;
    chart
        .configure_mesh()
        .x_desc("step")
        .x_label_formatter(&|x| format!("{}", x.round() as i64))
        .light_line_style(WHITE)
        .y_desc("cross-entropy loss (nats/token)")
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .draw()?;
    for (i, c) in curves.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let val: Vec<(f32, f32)> = c
            .records
            .iter()
            .map(|r| (r.step as f32, r.val_loss))
            .collect();
        let train: Vec<(f32, f32)> = c
            .records
            .iter()
            .map(|r| (r.step as f32, r.train_loss))
            .collect();
        chart
            .draw_series(LineSeries::new(val, color.stroke_width(3)))?
            .label(format!("{} val", c.label))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3))
            });
        chart
            .draw_series(DashedLineSeries::new(train, 6, 4, color.stroke_width(1)))?
            .label(format!("{} train", c.label))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(1))
            });
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
