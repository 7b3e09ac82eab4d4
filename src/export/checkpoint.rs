//! `export`: a training checkpoint as a standard Hugging Face GPT-2 folder that
//! `transformers` loads with `GPT2LMHeadModel.from_pretrained` / `AutoModelForCausalLM`:
//!
//! | file | holds |
//! |---|---|
//! | `config.json` | `GPT2Config` (`export::gpt2::gpt2_config`) |
//! | `model.safetensors` | the weights under GPT-2's names, frozen ones as plain weights |
//! | `tokenizer.json` | BPE as trained; the character tokenizer as a `WordLevel` vocabulary |
//! | `tokenizer_config.json` | tokenizer class and `model_max_length` |
//!
//! The four files are one `io::file_set` (tag `hf-export`): a new folder appears whole or not
//! at all, an existing one has them replaced together. The output may not be a training
//! checkpoint folder (its `model.safetensors` would be replaced by a different format).

use crate::error::one_line;
use std::path::Path;

use crate::data::hf_tokenizer;
use crate::export::gpt2::{gpt2_config, gpt2_safetensors};
use crate::io::file_set::{Input, Output, claim_outputs};
use crate::io::folder_kind::FolderKind;
use crate::train::checkpoint::{self, STATE_FILE};

/// What [`export_gpt2`] wrote.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Gpt2Export {
    /// The files written, in the folder.
    pub files: Vec<String>,
    /// The model's attention variant.
    pub attention: String,
    /// `char` or `bpe`.
    pub tokenizer: String,
    /// The training step of the checkpoint.
    pub step: usize,
}

/// The file names of an export, in writing order.
pub const FILES: [&str; 4] = [
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
];

/// Writes the checkpoint folder `checkpoint` as a GPT-2 folder `out`. Every check (the
/// checkpoint's hashes, a variant without a GPT-2 form, an output that is a checkpoint)
/// happens before anything is written.
pub fn export_gpt2(checkpoint: &Path, out: &Path) -> crate::Result<Gpt2Export> {
    let same = match (checkpoint.canonicalize(), out.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    crate::io::folder_kind::check(out, FolderKind::HfGpt2)?;
    if same || out.join(STATE_FILE).exists() {
        return Err(crate::train::invalid(format!(
            "`out` {} is a training checkpoint folder; exporting there would replace its \
             model.safetensors: pass a new folder",
            out.display()
        )));
    }
    let (loaded, model) = checkpoint::load_with_model(checkpoint)?;
    let cfg = model.config();
    let config = serde_json::to_string_pretty(&gpt2_config(cfg)?)
        .map_err(|e| crate::train::invalid(format!("config.json: {e}")))?;
    let weights = gpt2_safetensors(&model)?;
    let tok = &loaded.tokenizer;
    let tok_json = hf_tokenizer::tokenizer_json(tok)?;
    let tok_cfg = serde_json::to_string_pretty(&hf_tokenizer::tokenizer_config(cfg.context))
        .map_err(|e| crate::train::invalid(format!("tokenizer_config.json: {e}")))?;
    crate::io::file_set::write_folder(out, "hf-export", |set| {
        crate::io::folder_kind::mark(set.dir(), FolderKind::HfGpt2)?;
        set.write_bytes(FILES[0], config.as_bytes())?;
        set.write_bytes(FILES[1], &weights)?;
        set.write_bytes(FILES[2], tok_json.as_bytes())?;
        set.write_bytes(FILES[3], tok_cfg.as_bytes())
    })?;
    Ok(Gpt2Export {
        files: FILES.map(String::from).to_vec(),
        attention: cfg.attention.name().to_string(),
        tokenizer: tok.name(),
        step: loaded.state_file.step,
    })
}

/// The checkpoint's own logits on `text`, the reference an export is checked against:
/// the ids of `text` under the checkpoint's tokenizer (at most the model's context `T`) and
/// the model's logits `(T, V)` on them, row-major, without dropout.
pub fn reference_logits(checkpoint: &Path, text: &str) -> crate::Result<(Vec<u32>, Vec<f32>)> {
    let (loaded, mut model) = checkpoint::load_with_model(checkpoint)?;
    let mut ids = loaded.tokenizer.encode(text)?;
    ids.truncate(model.config().context);
    if ids.is_empty() {
        return Err(crate::train::invalid(
            "the text for reference logits gives no tokens: pass a non-empty text",
        ));
    }
    let logits = model.logits(&ids, 1, ids.len())?.to_vec();
    Ok((ids, logits))
}

/// What `orthoformer export` is asked to do.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExportJob {
    /// The training checkpoint folder.
    pub checkpoint: std::path::PathBuf,
    /// The Hugging Face folder to write.
    pub out: std::path::PathBuf,
    /// Also write the checkpoint's own logits on this text (see [`reference_logits`]) to the
    /// `.npy` file: `(text, file)`.
    pub logits: Option<(String, std::path::PathBuf)>,
}

/// The reference logits written beside an export.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ReferenceFile {
    /// The `.npy` file (f32, tokens x vocabulary).
    pub file: std::path::PathBuf,
    /// The token ids of the text.
    pub ids: Vec<u32>,
    /// `[tokens, vocabulary]`.
    pub shape: [usize; 2],
}

/// What [`run`] did (`export --json`).
#[derive(Clone, Debug, serde::Serialize)]
pub struct ExportReport {
    /// The checkpoint, as given.
    pub checkpoint: std::path::PathBuf,
    /// The folder written.
    pub out: std::path::PathBuf,
    /// The format written (`gpt2`).
    pub format: &'static str,
    /// The export.
    pub export: Gpt2Export,
    /// The reference logits, when asked for.
    pub reference_logits: Option<ReferenceFile>,
}

/// Exports as `job` says: the outputs are claimed first (see `io::file_set::claim_outputs`),
/// then the reference logits computed (a bad text writes nothing), then the folder and the
/// logits file written.
pub fn run(job: &ExportJob) -> crate::Result<ExportReport> {
    // Before anything is read: neither output may be, hold or sit inside the checkpoint or
    // the other (`logits_out` onto the checkpoint's model.safetensors destroyed it), and
    // both are held against a second writer until written.
    let mut outputs = vec![Output::folder("out", &job.out)];
    if let Some((_, file)) = &job.logits {
        outputs.push(Output::file("logits_out", file));
    }
    let _claim = claim_outputs(&[Input::new("checkpoint", &job.checkpoint)], &outputs)?;
    let ck = job.checkpoint.display();
    let reference = match &job.logits {
        Some((text, _)) => Some(reference_logits(&job.checkpoint, text).map_err(|e| {
            crate::train::invalid(format!("reference logits of {ck}: {}", one_line(&e)))
        })?),
        None => None,
    };
    let export = export_gpt2(&job.checkpoint, &job.out)
        .map_err(|e| crate::train::invalid(format!("exporting {ck}: {}", one_line(&e))))?;
    let reference_logits = match (reference, &job.logits) {
        (Some((ids, logits)), Some((_, file))) => {
            let shape = [ids.len(), logits.len() / ids.len()];
            crate::io::npy::write(file, &logits, &shape)?;
            Some(ReferenceFile {
                file: file.clone(),
                ids,
                shape,
            })
        }
        _ => None,
    };
    Ok(ExportReport {
        checkpoint: job.checkpoint.clone(),
        out: job.out.clone(),
        format: "gpt2",
        export,
        reference_logits,
    })
}
