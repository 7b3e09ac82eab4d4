//! Plots written as PNG and SVG, the pair as one file set, in the font compiled into the binary.
//!
//! Every plot of the project (loss curves, the MQAR heatmap, the theory scatter, the
//! initialisation probe) implements [`Figure`] once and is drawn twice, on a bitmap and on an
//! SVG string, by [`write_figure`].

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::file_set::FileSet;

/// DejaVu Sans, so plots need no system font library.
static FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

/// The colours of the curves of every figure, in order (matplotlib's first seven).
pub const PALETTE: [RGBColor; 7] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
    RGBColor(140, 86, 75),
];

/// A plot that can draw itself on any plotters backend.
pub trait Figure {
    /// Width and height in pixels.
    fn size(&self) -> (u32, u32);

    /// Draws the whole figure on `root`.
    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>>;
}

/// A figure that could not be drawn or written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FigureError {
    /// The file it was meant for.
    pub path: PathBuf,
    /// What went wrong, in words.
    pub why: String,
}

impl FigureError {
    fn new(path: &Path, why: impl std::fmt::Display) -> Self {
        FigureError {
            path: path.to_path_buf(),
            why: why.to_string(),
        }
    }
}

/// Registers the bundled font as "sans-serif" (once per process).
fn ensure_font(path: &Path) -> Result<(), FigureError> {
    static DONE: OnceLock<bool> = OnceLock::new();
    if *DONE.get_or_init(|| register_font("sans-serif", FontStyle::Normal, FONT).is_ok()) {
        Ok(())
    } else {
        Err(FigureError::new(
            path,
            "the bundled plot font failed to load",
        ))
    }
}

/// Writes `fig` as PNG to `png` and as SVG to `svg`, both in one folder, as one file set
/// (`io::file_set`, tagged with the PNG's file stem): an interrupted or failed write leaves
/// the previous pair or none, never one plot without the other or a partial file.
pub fn write_figure(fig: &impl Figure, png: &Path, svg: &Path) -> Result<(), FigureError> {
    let dir = match png.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if svg.parent().unwrap_or(Path::new("")) != png.parent().unwrap_or(Path::new("")) {
        return Err(FigureError::new(
            svg,
            "the PNG and the SVG must be in one folder",
        ));
    }
    let stem: String = png
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let tag = if stem.is_empty() {
        "figure".to_string()
    } else {
        stem
    };
    let mut set = FileSet::begin(dir, &tag).map_err(|e| FigureError::new(png, cause(&e)))?;
    stage_figure(fig, &mut set, &file_name(png), &file_name(svg))?;
    set.commit().map_err(|e| FigureError::new(png, cause(&e)))
}

/// Draws `fig` into `set` as the PNG `png` and the SVG `svg` (file names in the set's folder),
/// for writers that commit a figure together with other files.
pub fn stage_figure(
    fig: &impl Figure,
    set: &mut FileSet,
    png: &str,
    svg: &str,
) -> Result<(), FigureError> {
    let (png_path, svg_path) = (set.dir().join(png), set.dir().join(svg));
    ensure_font(&png_path)?;
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, fig.size()).into_drawing_area();
        fig.draw(&root)
            .map_err(|e| FigureError::new(&svg_path, e))?;
        root.present().map_err(|e| FigureError::new(&svg_path, e))?;
    }
    set.write_bytes(svg, text.as_bytes())
        .map_err(|e| FigureError::new(&svg_path, cause(&e)))?;
    // The PNG encoder picks its format from the extension: the staged name ends in `.png`.
    let staged = set
        .staged_path(png)
        .map_err(|e| FigureError::new(&png_path, cause(&e)))?;
    {
        let root = BitMapBackend::new(&staged, fig.size()).into_drawing_area();
        fig.draw(&root)
            .map_err(|e| FigureError::new(&png_path, e))?;
        root.present().map_err(|e| FigureError::new(&png_path, e))?;
    }
    set.adopt(png)
        .map_err(|e| FigureError::new(&png_path, cause(&e)))
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// An error with its causes on one line (an I/O error's own text is in its source).
fn cause(e: &crate::Error) -> String {
    crate::error::one_line(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Square;

    impl Figure for Square {
        fn size(&self) -> (u32, u32) {
            (40, 30)
        }
        fn draw<DB: DrawingBackend>(
            &self,
            root: &DrawingArea<DB, Shift>,
        ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
            root.fill(&WHITE)?;
            root.draw(&Text::new("x", (5, 5), ("sans-serif", 12).into_font()))
        }
    }

    fn fresh_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("orthoformer-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn writes_png_and_svg_and_leaves_no_temp_files() {
        let dir = fresh_dir("figure-ok");
        let (png, svg) = (dir.join("a.png"), dir.join("a.svg"));
        write_figure(&Square, &png, &svg).unwrap();
        let bytes = std::fs::read(&png).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failed_write_keeps_its_cause() {
        let dir = fresh_dir("figure-svg-err").join("missing");
        let err = write_figure(&Square, &dir.join("a.png"), &dir.join("a.svg")).unwrap_err();
        assert!(err.why.contains("No such file or directory"), "{}", err.why);
        assert!(!err.why.contains('\n'));
    }

    #[test]
    fn an_unwritable_folder_is_an_error_naming_the_file() {
        let dir = fresh_dir("figure-err");
        let png = dir.join("missing").join("a.png");
        let err = write_figure(&Square, &png, &dir.join("missing").join("a.svg")).unwrap_err();
        assert_eq!(err.path, png);
        assert!(err.why.contains("No such file"), "{}", err.why);
        let err =
            write_figure(&Square, &dir.join("a.png"), &png.with_extension("svg")).unwrap_err();
        assert!(err.why.contains("one folder"), "{}", err.why);
    }
}
