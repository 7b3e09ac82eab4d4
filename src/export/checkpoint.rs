//! `export`: a training checkpoint as a standard Hugging Face GPT-2 folder that
//! `transformers` loads with `GPT2LMHeadModel.from_pretrained` / `AutoModelForCausalLM`:
//!
//! | file | holds |
//! |---|---|
//! | `config.json` | `GPT2Config` ([`crate::export::gpt2::gpt2_config`]) |
//! | `model.safetensors` | the weights under GPT-2's names, frozen ones as plain weights |
//! | `tokenizer.json` | BPE as trained; the character tokenizer as a `WordLevel` vocabulary |
//! | `tokenizer_config.json` | tokenizer class and `model_max_length` |
//!
//! The four files are one `io::file_set` (tag `hf-export`): a new folder appears whole or not
//! at all, an existing one has them replaced together. The output may not be a training
//! checkpoint folder (its `model.safetensors` would be replaced by a different format).

use std::path::Path;

use crate::data::hf_tokenizer;
use crate::export::gpt2::{gpt2_config, gpt2_safetensors};
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
            "--out {} is a training checkpoint folder; exporting there would replace its \
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
