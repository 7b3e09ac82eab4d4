//! What a training run writes at each evaluation besides the model and the loop state
//! ([`RunRecord`]), and the writing itself: the loop's checkpoints ([`write_checkpoint`]) and
//! a model trained elsewhere saved as a checkpoint folder ([`save_trained`]).

use std::path::Path;

use super::checkpoint::{self, CheckpointParts, DataRecord};
use super::options::TrainOptions;
use super::run_state::RunState;
use super::session::create_out;
use crate::Result;
use crate::data::Tokenizer;
use crate::io::folder_kind::FolderKind;
use crate::model::Gpt;
use crate::model::gpt::file::write_model;

/// What a checkpoint records about a run besides the model and the loop state.
#[derive(Clone, Copy)]
pub struct RunRecord<'a> {
    /// The training options.
    pub options: &'a TrainOptions,
    /// The tokenizer.
    pub tokenizer: &'a Tokenizer,
    /// Where the training data came from.
    pub data: &'a DataRecord,
    /// Seed of the model's initialisation.
    pub model_seed: u64,
    /// Sequence length trained on.
    pub seq_len: usize,
}

/// Writes the checkpoint of `model` at `state` into `out` (which must exist), as the training
/// loop does at every evaluation. Public so other trainers (the Python package's
/// data-parallel one) write exactly this format.
pub fn write_checkpoint(
    out: &Path,
    run: &RunRecord<'_>,
    model: &Gpt,
    state: &RunState,
) -> Result<()> {
    let model_json = serde_json::to_value(model.config())
        .map_err(|e| super::invalid(format!("serialising the model config: {e}")))?;
    let parts = CheckpointParts {
        run: state,
        options: run.options,
        model: model_json,
        model_seed: run.model_seed,
        seq_len: run.seq_len,
        tokenizer: run.tokenizer,
        data: run.data,
    };
    checkpoint::save(out, &parts, &mut |w| write_model(w, model))
}

/// Writes a model trained elsewhere (the Python package's trainers) as the checkpoint folder
/// `out` (created when missing): the options checked, the model's vocabulary the tokenizer's,
/// then [`write_checkpoint`].
pub fn save_trained(out: &Path, run: &RunRecord<'_>, model: &Gpt, state: &RunState) -> Result<()> {
    run.options.validate()?;
    let (v, tv) = (model.config().vocab_size, run.tokenizer.vocab_size());
    if v != tv {
        return Err(super::invalid(format!(
            "the model's vocabulary ({v}) is not the tokenizer's ({tv}): a checkpoint holds the \
             tokenizer its model reads"
        )));
    }
    create_out(out, FolderKind::Checkpoint)?;
    write_checkpoint(out, run, model, state)
}
