//! Plots written as PNG and SVG, each atomically, in the font compiled into the binary.
//!
//! Every plot of the project (loss curves, the MQAR heatmap, the theory scatter, the
//! initialisation probe) implements [`Figure`] once and is drawn twice, on a bitmap and on an
//! SVG string, by [`write_figure`].

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// DejaVu Sans, so plots need no system font library.
static FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

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

/// Writes `fig` as PNG to `png` and as SVG to `svg`. Each file is drawn into a
/// temporary file in its own folder and renamed into place when complete, so an interrupted
/// or failed write leaves no partial plot.
pub fn write_figure(fig: &impl Figure, png: &Path, svg: &Path) -> Result<(), FigureError> {
    ensure_font(png)?;
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, fig.size()).into_drawing_area();
        fig.draw(&root).map_err(|e| FigureError::new(svg, e))?;
        root.present().map_err(|e| FigureError::new(svg, e))?;
    }
    // The I/O error names the file; its reason (disk full, permission) is its cause.
    super::write_atomic_bytes(svg, text.as_bytes())
        .map_err(|e| FigureError::new(svg, crate::error::one_line(&e)))?;
    // The PNG encoder picks its format from the extension, so the temp name ends in .png.
    let name = png
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = png.with_file_name(format!(".{name}.{}.tmp.png", std::process::id()));
    let drawn = (|| {
        let root = BitMapBackend::new(&tmp, fig.size()).into_drawing_area();
        fig.draw(&root).map_err(|e| FigureError::new(png, e))?;
        root.present().map_err(|e| FigureError::new(png, e))?;
        drop(root);
        std::fs::rename(&tmp, png).map_err(|e| FigureError::new(png, e))
    })();
    if drawn.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    drawn
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
    fn a_failed_svg_write_keeps_its_cause() {
        let dir = fresh_dir("figure-svg-err");
        let svg = dir.join("missing").join("a.svg");
        let err = write_figure(&Square, &dir.join("a.png"), &svg).unwrap_err();
        assert_eq!(err.path, svg);
        assert!(err.why.contains("No such file or directory"), "{}", err.why);
        assert!(!err.why.contains('\n'));
    }

    #[test]
    fn an_unwritable_folder_is_an_error_naming_the_file() {
        let dir = fresh_dir("figure-err");
        let png = dir.join("missing").join("a.png");
        let err = write_figure(&Square, &png, &dir.join("a.svg")).unwrap_err();
        assert_eq!(err.path, png);
        assert!(!err.why.is_empty());
    }
}
