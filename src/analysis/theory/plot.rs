//! Scatter plot (PNG and SVG) of attention scores `q·k` against input similarity `x·y`, one
//! colour per kind of Q/K (independent frozen, tied, trained). Each series is standardised
//! (zero mean, unit variance on both axes) so that series of different scales share the axes
//! and the slope of a cloud is its correlation. Written atomically with the bundled font.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::TheoryError;
use crate::io::figure::{Figure, PALETTE, stage_figure, write_figure};
use crate::io::file_set::FileSet;

/// One labelled cloud of `(x·y, q·k)` points.
#[derive(Clone, Debug)]
pub struct Series {
    /// Legend label.
    pub label: String,
    /// The points.
    pub points: Vec<(f64, f64)>,
}

fn plot_err(path: &Path, why: impl std::fmt::Display) -> TheoryError {
    TheoryError::Plot {
        path: path.display().to_string(),
        why: why.to_string(),
    }
}

fn standardise(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let xs: Vec<f64> = points.iter().map(|p| p.0).collect();
    let ys: Vec<f64> = points.iter().map(|p| p.1).collect();
    let (mx, sx) = super::mean_std(&xs);
    let (my, sy) = super::mean_std(&ys);
    let z = |v: f64, m: f64, s: f64| if s > 0.0 { (v - m) / s } else { 0.0 };
    points
        .iter()
        .map(|&(x, y)| (z(x, mx, sx), z(y, my, sy)))
        .collect()
}

/// Standardised clouds of points, titled.
struct Scatter<'a> {
    clouds: Vec<(String, Vec<(f64, f64)>)>,
    title: &'a str,
}

impl Figure for Scatter<'_> {
    fn size(&self) -> (u32, u32) {
        (900, 700)
    }

    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        draw(root, &self.clouds, self.title)
    }
}

/// Writes the standardised scatter of every series to `png` and `svg` (900 x 700 pixels).
pub fn write_scatter(
    series: &[Series],
    title: &str,
    png: &Path,
    svg: &Path,
) -> Result<(), TheoryError> {
    let clouds = series
        .iter()
        .map(|s| (s.label.clone(), standardise(&s.points)))
        .collect();
    write_figure(&Scatter { clouds, title }, png, svg).map_err(|e| plot_err(&e.path, e.why))
}

/// [`write_scatter`] into a file set, as the files `png` and `svg` of its folder (to commit
/// the plot with the JSON it illustrates).
pub fn stage_scatter(
    series: &[Series],
    title: &str,
    set: &mut FileSet,
    png: &str,
    svg: &str,
) -> Result<(), TheoryError> {
    let clouds = series
        .iter()
        .map(|s| (s.label.clone(), standardise(&s.points)))
        .collect();
    stage_figure(&Scatter { clouds, title }, set, png, svg).map_err(|e| plot_err(&e.path, e.why))
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    clouds: &[(String, Vec<(f64, f64)>)],
    title: &str,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let lim = 4.0;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(55)
        .build_cartesian_2d(-lim..lim, -lim..lim)?;
    chart
        .configure_mesh()
        .x_desc("x·y (standardised)")
        .y_desc("q·k (standardised)")
        .label_style(("sans-serif", 14))
        .draw()?;
    for (n, (label, pts)) in clouds.iter().enumerate() {
        let color = PALETTE[n % PALETTE.len()];
        let inside = pts.iter().filter(|p| p.0.abs() < lim && p.1.abs() < lim);
        chart
            .draw_series(inside.map(|&p| Circle::new(p, 2, color.mix(0.35).filled())))?
            .label(label.clone())
            .legend(move |(x, y)| Circle::new((x + 8, y), 4, color.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    Ok(())
}
