//! `orthoformer init-probe` as one library operation: every default initialisation under
//! every activation ([`super::probe`]), and the figure (`init_probe.png`, `.svg`) written into
//! a report folder. The command line only parses its flags, calls [`run`] and prints.

use std::path::Path;

use serde::Serialize;

use super::plot::ProbeFigure;
use super::{Activation, ProbeCurve, ProbeOptions, default_inits, probe};
use crate::io::figure::write_figure;
use crate::io::folder_kind::{self, FolderKind};

/// What [`run`] measured and wrote (`init-probe --json`).
#[derive(Clone, Debug, Serialize)]
pub struct ProbeReport {
    /// Layers.
    pub depth: usize,
    /// Width of every layer.
    pub width: usize,
    /// Rows of Gaussian input.
    pub batch: usize,
    /// Seed.
    pub seed: u64,
    /// One curve per (activation, init).
    pub curves: Vec<ProbeCurve>,
    /// The PNG written.
    pub png: String,
    /// The SVG written.
    pub svg: String,
}

/// Probes every default init under every activation as `o` says (sizes at least 1), then
/// writes the figure into `out_dir`. `progress(label, done)` is called before each curve.
pub fn run(
    o: &ProbeOptions,
    out_dir: &Path,
    progress: &mut dyn FnMut(&str, usize),
) -> crate::Result<ProbeReport> {
    for (name, v) in [("depth", o.depth), ("width", o.width), ("batch", o.batch)] {
        if v == 0 {
            return Err(crate::train::invalid(format!(
                "`{name}` 0: it must be at least 1"
            )));
        }
    }
    let inits = default_inits();
    let mut curves = Vec::new();
    for act in Activation::ALL {
        for init in &inits {
            progress(&format!("{} {}", init.label, act.name()), curves.len());
            curves.push(probe(init, act, o.depth, o.width, o.batch, o.seed)?);
        }
    }
    progress("", curves.len());
    // Created only now, so a refused or failed probe leaves no folder behind.
    folder_kind::claim(out_dir, FolderKind::Report)?;
    let png = out_dir.join("init_probe.png");
    let svg = out_dir.join("init_probe.svg");
    let figure = ProbeFigure {
        curves: &curves,
        depth: o.depth,
        width: o.width,
        batch: o.batch,
    };
    write_figure(&figure, &png, &svg).map_err(|e| {
        crate::train::invalid(format!(
            "cannot write the plot {}: {}",
            e.path.display(),
            e.why
        ))
    })?;
    Ok(ProbeReport {
        depth: o.depth,
        width: o.width,
        batch: o.batch,
        seed: o.seed,
        curves,
        png: png.display().to_string(),
        svg: svg.display().to_string(),
    })
}
