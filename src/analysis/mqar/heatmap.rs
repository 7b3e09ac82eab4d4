//! The MQAR accuracy heatmap (PNG and SVG): one row per (attention variant, width), one column
//! per (sequence length, pairs) setting, each cell coloured by accuracy on a viridis scale and
//! labelled with the percentage. Text uses the bundled DejaVu Sans, so no system font library
//! is needed; both files are written atomically.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::MqarError;
use crate::io::figure::{Figure, stage_figure, write_figure};
use crate::io::file_set::FileSet;

/// A labelled grid of accuracies in `[0, 1]`; `None` is a cell that was not run.
#[derive(Clone, Debug)]
pub struct Heatmap {
    /// Title drawn above the grid.
    pub title: String,
    /// Row labels (top to bottom).
    pub rows: Vec<String>,
    /// Column labels (left to right).
    pub cols: Vec<String>,
    /// Row-major `(rows, cols)` values.
    pub values: Vec<Option<f64>>,
}

const CELL_W: u32 = 120;
const CELL_H: u32 = 30;
const LEFT: u32 = 230;
const TOP: u32 = 80;

/// Viridis anchors at 0, 0.25, 0.5, 0.75, 1.
const VIRIDIS: [(u8, u8, u8); 5] = [
    (68, 1, 84),
    (59, 82, 139),
    (33, 145, 140),
    (94, 201, 98),
    (253, 231, 37),
];

/// The viridis colour of `x` in `[0, 1]` (clamped), linearly between anchors.
pub fn viridis(x: f64) -> RGBColor {
    let x = if x.is_finite() {
        x.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let s = x * (VIRIDIS.len() - 1) as f64;
    let i = (s.floor() as usize).min(VIRIDIS.len() - 2);
    let f = s - i as f64;
    let lerp = |a: u8, b: u8| (a as f64 + f * (b as f64 - a as f64)).round() as u8;
    let (a, b) = (VIRIDIS[i], VIRIDIS[i + 1]);
    RGBColor(lerp(a.0, b.0), lerp(a.1, b.1), lerp(a.2, b.2))
}

fn plot_err(path: &Path, why: impl std::fmt::Display) -> MqarError {
    MqarError::Plot {
        path: path.display().to_string(),
        why: why.to_string(),
    }
}

impl Heatmap {
    fn check(&self) -> Result<(), MqarError> {
        if self.values.len() != self.rows.len() * self.cols.len() {
            return Err(MqarError::Shape(format!(
                "{} values for a {} x {} heatmap",
                self.values.len(),
                self.rows.len(),
                self.cols.len()
            )));
        }
        Ok(())
    }

    /// Writes the heatmap as SVG to `svg` and PNG to `png`, the pair as one file set.
    pub fn write(&self, png: &Path, svg: &Path) -> Result<(), MqarError> {
        self.check()?;
        write_figure(self, png, svg).map_err(|e| plot_err(&e.path, e.why))
    }

    /// Draws the heatmap into `set` as the files `png` and `svg` (to commit it with the JSON
    /// it illustrates).
    pub fn stage(&self, set: &mut FileSet, png: &str, svg: &str) -> Result<(), MqarError> {
        self.check()?;
        stage_figure(self, set, png, svg).map_err(|e| plot_err(&e.path, e.why))
    }
}

impl Figure for Heatmap {
    fn size(&self) -> (u32, u32) {
        (
            (LEFT + CELL_W * self.cols.len() as u32 + 20).max(760),
            TOP + CELL_H * self.rows.len() as u32 + 20,
        )
    }

    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        root.fill(&WHITE)?;
        let font = |size: u32| ("sans-serif", size).into_font();
        let centred = |size: u32, color: RGBColor| TextStyle {
            color: color.to_backend_color(),
            ..TextStyle::from(font(size)).pos(Pos::new(HPos::Center, VPos::Center))
        };
        root.draw(&Text::new(self.title.clone(), (10, 20), font(18)))?;
        for (j, c) in self.cols.iter().enumerate() {
            let x = (LEFT + CELL_W * j as u32 + CELL_W / 2) as i32;
            root.draw(&Text::new(
                c.clone(),
                (x, (TOP - 18) as i32),
                centred(14, BLACK),
            ))?;
        }
        for (i, r) in self.rows.iter().enumerate() {
            let y = (TOP + CELL_H * i as u32 + CELL_H / 2) as i32;
            let style = TextStyle::from(font(14)).pos(Pos::new(HPos::Right, VPos::Center));
            root.draw(&Text::new(r.clone(), ((LEFT - 10) as i32, y), style))?;
            for j in 0..self.cols.len() {
                let x0 = (LEFT + CELL_W * j as u32) as i32;
                let y0 = (TOP + CELL_H * i as u32) as i32;
                let corners = [(x0, y0), (x0 + CELL_W as i32 - 1, y0 + CELL_H as i32 - 1)];
                let centre = (x0 + CELL_W as i32 / 2, y0 + CELL_H as i32 / 2);
                match self.values[i * self.cols.len() + j] {
                    Some(v) => {
                        root.draw(&Rectangle::new(corners, viridis(v).filled()))?;
                        let ink = if v > 0.6 { BLACK } else { WHITE };
                        let label = format!("{:.1}%", 100.0 * v);
                        root.draw(&Text::new(label, centre, centred(13, ink)))?;
                    }
                    None => {
                        root.draw(&Rectangle::new(corners, RGBColor(230, 230, 230).filled()))?;
                        root.draw(&Text::new("-".to_string(), centre, centred(13, BLACK)))?;
                    }
                }
            }
        }
        Ok(())
    }
}
