//! `orthoformer theory` as one library operation: read a checkpoint, feed the last positions
//! of a text through it, measure every head ([`super::report::measure`]), and write
//! `theory.json` with its scatter plot (`theory_qk.png`, `.svg`) as one file set. The command
//! line only parses its flags into a [`TheoryJob`], calls [`run`] and prints the report.

use std::path::PathBuf;

use serde::Serialize;

use super::plot::{Series, stage_scatter};
use super::report::{HeadTheory, TheoryOptions, measure};
use crate::data::corpus::Corpus;
use crate::io::file_set::FileSet;
use crate::io::folder_kind::{self, FolderKind};

/// The checkpoint, the text, where to write, and the options.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TheoryJob {
    /// A checkpoint folder written by `orthoformer train`.
    pub checkpoint: PathBuf,
    /// The text whose last tokens are fed to the model (`None`: the embedded TinyShakespeare).
    pub data: Option<PathBuf>,
    /// Folder for `theory.json` and the plot (`None`: the checkpoint folder).
    pub out: Option<PathBuf>,
    /// Positions and seed.
    pub options: TheoryOptions,
}

/// The report of `orthoformer theory` (`theory.json`).
#[derive(Clone, Debug, Serialize)]
pub struct TheoryReport {
    /// The checkpoint, as given.
    pub checkpoint: String,
    /// The text's name.
    pub data: String,
    /// The model's attention variant.
    pub attention: String,
    /// Model width.
    pub d_model: usize,
    /// Head width.
    pub d_k: usize,
    /// Positions measured.
    pub positions: usize,
    /// Per layer and head.
    pub heads: Vec<HeadTheory>,
}

/// What [`run`] measured and the files it wrote.
#[derive(Clone, Debug)]
pub struct TheoryRun {
    /// The report.
    pub report: TheoryReport,
    /// `theory.json`, `theory_qk.png`, `theory_qk.svg`.
    pub files: [PathBuf; 3],
}

/// Measures the checkpoint as `job` says and writes the report and its plot.
pub fn run(job: &TheoryJob) -> crate::Result<TheoryRun> {
    let dir = &job.checkpoint;
    // One read of the model, verified against the manifest and the state's configuration.
    let (loaded, mut model) = crate::train::checkpoint::load_with_model(dir)?;
    let corpus = Corpus::load_or_default(job.data.as_deref())?;
    let ids = loaded.tokenizer.encode(&corpus.text)?;
    let t = job
        .options
        .tokens
        .min(model.config().context)
        .min(ids.len());
    if t < 2 {
        return Err(crate::data::invalid(format!(
            "{} gives {} tokens: the measurements need at least 2 (pass a longer `data` file)",
            corpus.source,
            ids.len()
        )));
    }
    let window = &ids[ids.len() - t..];
    let heads = measure(&mut model, window, job.options.seed)?;
    let cfg = model.config();
    let report = TheoryReport {
        checkpoint: dir.display().to_string(),
        data: corpus.source.clone(),
        attention: cfg.attention.name().to_string(),
        d_model: cfg.d_model,
        d_k: cfg.d_model / cfg.n_head,
        positions: t,
        heads,
    };
    let out = job.out.clone().unwrap_or_else(|| dir.clone());
    folder_kind::claim(&out, FolderKind::Report)?;
    // The report and its plot appear together or not at all (`io::file_set`).
    let mut set = FileSet::begin(&out, "theory")?;
    let json = serde_json::to_vec_pretty(&report)
        .map_err(|e| crate::data::invalid(format!("serialising theory.json: {e}")))?;
    set.write_bytes("theory.json", &json)?;
    if let Some(h) = report.heads.first() {
        let series = [
            ("model's W_Q, W_K", &h.model_qk),
            ("random independent", &h.random_independent),
            ("random tied", &h.random_tied),
        ]
        .map(|(label, c)| Series {
            label: format!("{label} (r = {:.2})", c.pearson),
            points: c.sample.clone(),
        });
        let title = format!("q·k vs x·y, layer 0 head 0 ({})", report.attention);
        stage_scatter(&series, &title, &mut set, "theory_qk.png", "theory_qk.svg")?;
    }
    set.commit()?;
    let files = ["theory.json", "theory_qk.png", "theory_qk.svg"].map(|f| out.join(f));
    Ok(TheoryRun { report, files })
}
