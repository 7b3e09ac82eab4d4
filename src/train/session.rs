//! A training run from start to checkpoint folder: check the inputs (data, tokenizer,
//! context, configuration, options) before anything is written, build or restore the model
//! and optimizer, run the loop, and write a checkpoint at every evaluation, on Ctrl-C and at
//! the end.
//!
//! A resumed run reads everything that decides the next step from the folder (model,
//! optimizer moments, sampler position, options, tokenizer) and verifies the training data
//! (a text, or a token folder's token files) by its SHA-256, so it continues exactly where
//! the first run stopped.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use super::checkpoint::{self, DataRecord};
use super::observer::Observer;
use super::options::TrainOptions;
pub use super::prepared::{Prepared, data_record, prepare, prepare_with};
use super::prepared::{reopen_folder, reopen_text};
pub use super::request::{ModelRequest, check_same_config};
pub use super::run_record::{RunRecord, save_trained, write_checkpoint};
use super::run_state::RunState;
use super::token_batches::{NumpyBatches, NumpyEval, Windows};
use super::trainer;
use crate::Result;
use crate::data::{Corpus, TokenizerKind, token_files};
use crate::io::folder_kind::FolderKind;
use crate::io::memory;
use crate::model::{Gpt, GptConfig};

/// What a fresh run is made of besides its data.
#[derive(Debug, Clone)]
pub struct FreshSpec {
    /// Model configuration; its `vocab_size` is replaced by the tokenizer's.
    pub model: GptConfig,
    /// Seed of the model's initialisation.
    pub model_seed: u64,
    /// Training options.
    pub options: TrainOptions,
}

/// The data a resumed run is given.
#[derive(Debug, Clone)]
pub enum ResumeData {
    /// Nothing: the checkpoint's recorded source (a text file, the embedded corpus, or a
    /// token folder) is reopened.
    Recorded,
    /// The training text, named again.
    Text(Corpus),
    /// The token folder, named again (it may have moved).
    TokenFolder(PathBuf),
    /// The data already read and checked by the caller (a comparison's runs share it): its
    /// record's SHA-256 must be the checkpoint's, and it is trained on as given.
    Prepared(Box<Prepared>),
}

/// A run ready to train: model, data, options, state and its folder.
pub struct Session {
    /// The model.
    pub model: Gpt,
    /// Tokenized data.
    pub prepared: Prepared,
    /// Options.
    pub options: TrainOptions,
    /// Seed of the model's initialisation.
    pub model_seed: u64,
    /// Loop state.
    pub state: RunState,
    /// The checkpoint folder.
    pub out: PathBuf,
}

impl Session {
    /// Checks everything about a fresh run on `corpus`, then creates `out` (which must not
    /// hold a checkpoint). Nothing is written when a check fails.
    pub fn fresh(
        corpus: &Corpus,
        tokenizer: TokenizerKind,
        bpe_vocab: usize,
        spec: FreshSpec,
        out: &Path,
    ) -> Result<Self> {
        spec.options.validate()?;
        let prepared = prepare(corpus, tokenizer, bpe_vocab, spec.model.context)?;
        Self::fresh_prepared(spec, prepared, out)
    }

    /// [`Session::fresh`] with the data already prepared (the comparison reuses it).
    pub fn fresh_prepared(spec: FreshSpec, prepared: Prepared, out: &Path) -> Result<Self> {
        spec.options.validate()?;
        let mut cfg = spec.model.clone();
        cfg.vocab_size = prepared.tokenizer.vocab_size();
        cfg.validate()?;
        // Before anything reads or recovers it: never train into another command's folder.
        crate::io::folder_kind::check(out, FolderKind::Checkpoint)?;
        if checkpoint::exists(out)? {
            return Err(super::invalid(format!(
                "{} already holds a checkpoint: pass `resume` to continue it, or choose another \
                 `out`",
                out.display()
            )));
        }
        check_training_fits(&cfg, spec.options.batch, 0)?;
        let model = Gpt::new(cfg, spec.model_seed)?;
        create_out(out, FolderKind::Checkpoint)?;
        // The lock file exists before anything is staged, so readers always find it.
        drop(crate::io::file_set::SetLock::acquire(
            out,
            checkpoint::SET_TAG,
        )?);
        let n = model.params().data.len();
        Ok(Session {
            model,
            state: RunState::fresh(&spec.options, n),
            prepared,
            options: spec.options,
            model_seed: spec.model_seed,
            out: out.to_path_buf(),
        })
    }

    /// Reopens the checkpoint in `out`. `corpus` is the training text when the user named
    /// one again (it must be the same text); otherwise the recorded source is reloaded (a
    /// text, or a token folder). `steps` may extend the run (the learning rate's decay
    /// horizon stays the first run's, see [`TrainOptions::with_steps`]); `requested` is a
    /// model configuration the user asked for, which must equal the checkpoint's.
    pub fn resume(
        out: &Path,
        corpus: Option<Corpus>,
        steps: Option<usize>,
        requested: Option<&GptConfig>,
    ) -> Result<Self> {
        let data = corpus.map_or(ResumeData::Recorded, ResumeData::Text);
        Self::resume_with(out, data, steps, requested)
    }

    /// [`Session::resume`] with the data given as [`ResumeData`]. A checkpoint trained on a
    /// token folder (by this trainer or by `python -m orthoformer.train --data-dir`)
    /// reopens the folder (the recorded one, or the one given), which must hold the same
    /// tokens (SHA-256 of its token files), and continues on the same batches.
    pub fn resume_with(
        out: &Path,
        data: ResumeData,
        steps: Option<usize>,
        requested: Option<&GptConfig>,
    ) -> Result<Self> {
        // Recovers an interrupted write, checks every hash and value, reads model and state
        // from one checkpoint.
        let (loaded, model) = checkpoint::load_with_model(out)?;
        let st = &loaded.state_file;
        if let Some(want) = requested {
            check_same_config(out, model.config(), want)?;
        }
        let saved = model.config().clone();
        saved.validate()?;
        st.options.validate()?;
        // The AdamW moments are already in memory (read with the checkpoint).
        let moments = loaded.run.adam.m.len().saturating_mul(8);
        check_training_fits(&saved, st.options.batch, moments)?;
        let recorded = Path::new(&st.data.source);
        let on_folder = token_files::is_token_folder(recorded);
        let prepared = match data {
            ResumeData::Prepared(p) if p.data.sha256 != st.data.sha256 => {
                return Err(super::invalid(format!(
                    "the data {} is not the one checkpoint {} was trained on (SHA-256 differs)",
                    p.data.source,
                    out.display()
                )));
            }
            ResumeData::Prepared(p) => *p,
            ResumeData::TokenFolder(dir) => reopen_folder(out, &dir, st, &loaded.tokenizer)?,
            ResumeData::Recorded if on_folder => {
                reopen_folder(out, recorded, st, &loaded.tokenizer)?
            }
            ResumeData::Text(_) if on_folder => {
                return Err(super::invalid(format!(
                    "checkpoint {} was trained on the token folder {}, not on a text: pass \
                     that folder as `data`, or leave `data` out",
                    out.display(),
                    st.data.source
                )));
            }
            ResumeData::Text(corpus) => reopen_text(out, corpus, st, &loaded.tokenizer)?,
            ResumeData::Recorded => {
                let corpus = if st.data.source == crate::data::corpus::TINY_SHAKESPEARE_NAME {
                    Corpus::tiny_shakespeare()
                } else {
                    load_recorded(out, &st.data)?
                };
                reopen_text(out, corpus, st, &loaded.tokenizer)?
            }
        };
        // More steps extend the run, not its cosine: the horizon stays the first run's.
        let options = match steps {
            Some(s) => st.options.clone().with_steps(s),
            None => st.options.clone(),
        };
        let model_seed = st.model_seed;
        Ok(Session {
            model,
            prepared,
            options,
            model_seed,
            state: loaded.run,
            out: out.to_path_buf(),
        })
    }

    /// Trains to `options.steps` (or stops after `stop_at` steps), checkpointing at each
    /// evaluation and at the end; `observer` sees each step and each evaluation first.
    pub fn run(
        &mut self,
        stop: Option<&AtomicBool>,
        stop_at: Option<usize>,
        observer: &mut dyn Observer<Gpt>,
    ) -> Result<()> {
        let t = self.model.config().context;
        let state = std::mem::replace(&mut self.state, RunState::fresh(&self.options, 0));
        let mut writer = Writer {
            dir: &self.out,
            run: RunRecord {
                options: &self.options,
                tokenizer: &self.prepared.tokenizer,
                data: &self.prepared.data,
                model_seed: self.model_seed,
                seq_len: t,
            },
            observer,
        };
        let split = &self.prepared.split;
        let result = match self.prepared.windows {
            Windows::Library => trainer::train(
                &mut self.model,
                split,
                &self.options,
                t,
                state,
                &mut writer,
                stop,
                stop_at,
            ),
            Windows::Numpy => {
                let seed = self.options.seed;
                let mut batches = NumpyBatches::resume(&split.train, seed, state.sampler_pos);
                let mut eval = NumpyEval::new(split, seed, self.options.eval_iters);
                let limits = trainer::Limits { stop, stop_at };
                trainer::train_on(
                    &mut self.model,
                    &mut batches,
                    &mut eval,
                    &self.options,
                    t,
                    state,
                    &mut writer,
                    limits,
                )
            }
        };
        match result {
            Ok(state) => {
                self.state = state;
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

/// The observer of a training loop that writes checkpoints: passes everything on to the
/// caller's `observer`, then writes the checkpoint of `run` into `dir` at each evaluation (a
/// session's run, a ladder's run).
pub(crate) struct Writer<'a> {
    /// The checkpoint folder.
    pub(crate) dir: &'a Path,
    /// What the checkpoint records besides the model and the loop's state.
    pub(crate) run: RunRecord<'a>,
    /// The caller's observer.
    pub(crate) observer: &'a mut dyn Observer<Gpt>,
}

impl Observer<Gpt> for Writer<'_> {
    fn start(&mut self, label: &str, steps: usize, done: usize) {
        self.observer.start(label, steps, done);
    }

    fn step(&mut self, step: usize, loss: f32, lr: f64) {
        self.observer.step(step, loss, lr);
    }

    fn eval(&mut self, model: &Gpt, state: &RunState) -> Result<()> {
        self.observer.eval(model, state)?;
        write_checkpoint(self.dir, &self.run, model, state)
    }
}

/// Checks that training `cfg` on batches of `batch` sequences of its context fits this
/// machine, before anything large is allocated: the model's account (weights, gradients,
/// AdamW moments, activations, the checkpoint write buffer; see `model::accounting`) and the
/// batch's input and target ids, less `allocated` bytes of it already held.
pub fn check_training_fits(cfg: &GptConfig, batch: usize, allocated: usize) -> Result<()> {
    let t = cfg.context;
    let what = format_args!("training with `batch` {batch} at context {t}");
    let needed = crate::model::accounting::account(cfg, batch, t)
        .ok()
        .and_then(|a| {
            memory::sum(&[
                Some(a.memory.total.saturating_sub(allocated)),
                memory::bytes(&[batch, t, 2, 4]),
            ])
        });
    memory::check_fits(needed, what)?;
    Ok(())
}

/// Creates the output folder for `kind` (refusing a folder of another kind, or a non-empty one
/// Orthoformer did not make; see `io::folder_kind`), marks it, and fails with a clear message
/// when it cannot be written.
pub fn create_out(out: &Path, kind: FolderKind) -> Result<()> {
    crate::io::folder_kind::check(out, kind)?;
    let fail = |e: std::io::Error| {
        super::invalid(format!(
            "cannot write the output folder {}: {e}; choose another `out`",
            out.display()
        ))
    };
    std::fs::create_dir_all(out).map_err(fail)?;
    crate::io::folder_kind::claim(out, kind)?;
    let probe = out.join(super::checkpoint::WRITE_TEST);
    crate::io::safe_file::create_fresh(&probe).map_err(fail)?;
    // A reader recovering the folder may have removed it already.
    match std::fs::remove_file(&probe) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(fail(e)),
        _ => Ok(()),
    }
}

/// Loads the training text from the path a checkpoint records. That path comes from a file
/// (a downloaded checkpoint is hostile), so it is checked before it is opened: it must be a
/// regular file (no FIFO, device or folder) of exactly the recorded size; only then is it read
/// and its SHA-256 compared by the caller.
fn load_recorded(out: &Path, data: &DataRecord) -> Result<Corpus> {
    let path = Path::new(&data.source);
    let refuse = |why: String| {
        super::invalid(format!(
            "checkpoint {} was trained on {}, which {why}: pass the training text (or token \
             folder) as `data`",
            out.display(),
            data.source
        ))
    };
    let meta = std::fs::metadata(path).map_err(|e| refuse(format!("cannot be read ({e})")))?;
    if !meta.is_file() {
        return Err(refuse("is not a regular file".to_string()));
    }
    if meta.len() != data.bytes as u64 {
        return Err(refuse(format!(
            "now has {} bytes, not the recorded {}",
            meta.len(),
            data.bytes
        )));
    }
    Corpus::load(path)
}
