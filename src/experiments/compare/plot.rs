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
    for (i, (v, pts)) in s.variants.iter().zip(&all).enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        // Points above the range (the first evaluation) are not drawn as data: the band
        // starts at the first evaluation inside it, the line is cut where it crosses the top
        // edge, and the cut is marked with the value it leaves the chart at.
        if s.seeds.len() > 1 {
            let inside: Vec<_> = pts.iter().filter(|p| p.3 <= y1 && p.2 >= y0).collect();
            let band: Vec<(f32, f32)> = inside
                .iter()
                .map(|p| (p.0, p.3))
                .chain(inside.iter().rev().map(|p| (p.0, p.2)))
                .collect();
            chart.draw_series(std::iter::once(Polygon::new(
                band,
                color.mix(0.18).filled(),
            )))?;
        }
        let line: Vec<(f32, f32)> = pts.iter().map(|p| (p.0, p.1)).collect();
        let (segments, cuts) = clip(&line, y0, y1);
        let mut labelled = false;
        for seg in segments {
            let drawn = chart.draw_series(LineSeries::new(seg, color.stroke_width(2)))?;
            if !labelled {
                drawn.label(v.attention.clone()).legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3))
                });
                labelled = true;
            }
        }
        for (x, y, value) in cuts {
            let below = y <= y0;
            chart.draw_series(std::iter::once(TriangleMarker::new(
                (x, y),
                6,
                color.filled(),
            )))?;
            let dy = if below { -18 } else { 4 };
            chart.draw_series(std::iter::once(
                EmptyElement::at((x, y))
                    + Text::new(
                        format!("{} {value:.2}", if below { "below:" } else { "from" }),
                        (8, dy),
                        ("sans-serif", 13).into_font().color(&color),
                    ),
            ))?;
        }
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

/// Points of a line drawn in one piece.
type Polyline = Vec<(f32, f32)>;
/// Where a line leaves the chart: `(x, edge, the value outside)`.
type Cut = (f32, f32, f32);

/// Splits a polyline into the pieces inside `y0..=y1`, cutting each segment that crosses an
/// edge at the crossing (linear interpolation), and returns the cuts as `(x, edge, the value
/// of the outside point)`, so a chart never draws an out-of-range point at its edge as data.
fn clip(line: &[(f32, f32)], y0: f32, y1: f32) -> (Vec<Polyline>, Vec<Cut>) {
    let inside = |y: f32| (y0..=y1).contains(&y);
    let edge = |y: f32| if y > y1 { y1 } else { y0 };
    let cross = |a: (f32, f32), b: (f32, f32), e: f32| {
        let t = (e - a.1) / (b.1 - a.1);
        (a.0 + t * (b.0 - a.0), e)
    };
    let (mut segments, mut cuts, mut current) = (Vec::new(), Vec::new(), Vec::new());
    for (i, &p) in line.iter().enumerate() {
        let prev = i.checked_sub(1).map(|j| line[j]);
        match (prev, inside(p.1)) {
            (Some(a), true) if !inside(a.1) && a.1.is_finite() => {
                let c = cross(a, p, edge(a.1));
                cuts.push((c.0, c.1, a.1));
                current.push(c);
                current.push(p);
            }
            (_, true) => current.push(p),
            (Some(a), false) if inside(a.1) && p.1.is_finite() => {
                let c = cross(a, p, edge(p.1));
                cuts.push((c.0, c.1, p.1));
                current.push(c);
                segments.push(std::mem::take(&mut current));
            }
            _ => {
                if !current.is_empty() {
                    segments.push(std::mem::take(&mut current));
                }
            }
        }
    }
    if !current.is_empty() {
        segments.push(current);
    }
    (segments, cuts)
}

#[cfg(test)]
mod tests {
    use super::clip;

    #[test]
    fn a_point_above_the_range_is_cut_at_the_edge_not_drawn_there() {
        let line = [(0.0, 4.2), (100.0, 2.2), (200.0, 2.0)];
        let (segments, cuts) = clip(&line, 1.9, 2.4);
        assert_eq!(segments.len(), 1);
        let first = segments[0][0];
        assert!(
            (first.1 - 2.4).abs() < 1e-6 && first.0 > 80.0 && first.0 < 100.0,
            "{first:?}"
        );
        assert!(segments[0].iter().all(|p| p.1 <= 2.4 + 1e-6));
        assert_eq!(cuts.len(), 1);
        assert!((cuts[0].2 - 4.2).abs() < 1e-6);
        let (segments, cuts) = clip(&[(0.0, 2.0), (1.0, 2.1)], 1.9, 2.4);
        assert_eq!((segments.len(), cuts.len()), (1, 0));
    }
}
