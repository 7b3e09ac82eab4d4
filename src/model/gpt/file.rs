//! Model checkpoints (weights only) as safetensors, self-contained: every trainable tensor and
//! every frozen `W_Q`, `W_K` under its PyTorch-style name (`h.{l}.attn.q.weight`, `C x C`,
//! `out x in`), so `safetensors` alone (PyTorch, NumPy) gets the whole model. The metadata
//! holds the config and, for frozen weights, their generator (method, seed) and SHA-256.
//!
//! On load the stored frozen tensors are checked twice: against the hash (a damaged file) and,
//! bit for bit, against what the generator makes (a file edited consistently, or made by
//! another generator). Checkpoints written before frozen tensors were stored (generator and
//! hash only) still load: their frozen weights are regenerated and checked against the hash.
//! The bytes are deterministic (`io::safetensors_writer`): the same model gives the same file.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use crate::io::safetensors_writer::{TensorOut, write_safetensors};
use crate::model::ModelError;
use crate::model::config::{GptConfig, Projection};
use crate::model::gpt::Gpt;
use crate::model::gpt::layout;
use crate::model::gpt::store::{FrozenGenerator, FrozenStore};
use safetensors::tensor::Dtype;

const FORMAT: &str = "orthoformer-gpt-1";

fn bad(path: &Path, what: impl std::fmt::Display) -> crate::Error {
    ModelError::Checkpoint(format!("{}: {what}", path.display())).into()
}

/// Writes `model` as safetensors to `w`: trainable tensors in store order, then the frozen
/// ones; metadata `format`, `config` and (frozen weights) `frozen_generator`, `frozen_sha256`,
/// `frozen_dtype`, sorted by key.
pub fn write_model(w: &mut dyn Write, model: &Gpt) -> std::io::Result<()> {
    let p = model.params();
    let frozen = model.frozen();
    let mut tensors: Vec<TensorOut<'_>> = p
        .tensors
        .iter()
        .map(|t| TensorOut {
            name: &t.name,
            shape: &t.shape,
            data: &p.data[t.range()],
        })
        .collect();
    tensors.extend(frozen.tensors.iter().map(|t| TensorOut {
        name: &t.name,
        shape: &t.shape,
        data: &t.data,
    }));
    let mut meta = BTreeMap::new();
    meta.insert("format".to_string(), FORMAT.to_string());
    meta.insert("config".to_string(), to_json(model.config())?);
    if !frozen.is_empty() {
        if let Some(g) = &frozen.generator {
            meta.insert("frozen_generator".to_string(), to_json(g)?);
        }
        meta.insert("frozen_sha256".to_string(), frozen.hash());
        meta.insert("frozen_dtype".to_string(), "f32".to_string());
    }
    write_safetensors(w, &tensors, &meta)
}

fn to_json<T: serde::Serialize>(v: &T) -> std::io::Result<String> {
    serde_json::to_string(v).map_err(std::io::Error::other)
}

/// Writes `model` to `path` atomically (see [`write_model`]).
pub fn save_model(path: &Path, model: &Gpt) -> crate::Result<()> {
    crate::io::write_atomic(path, |w| {
        write_model(w, model).map_err(|e| crate::Error::io(path, e))
    })
}

/// Reads a checkpoint written by [`save_model`] (or by a training checkpoint). A set of files
/// left half-replaced in its folder by a crash is recovered first (`io::file_set`).
pub fn load_model(path: &Path) -> crate::Result<Gpt> {
    crate::io::file_set::recover_for(path)?;
    let bytes = crate::io::safe_file::read_regular(path)?;
    model_from_bytes(&bytes, path)
}

/// Reads a model from the bytes of a checkpoint file; `path` names it in errors.
pub fn model_from_bytes(bytes: &[u8], path: &Path) -> crate::Result<Gpt> {
    let (_, header) = safetensors::SafeTensors::read_metadata(bytes)
        .map_err(|e| bad(path, format!("not a safetensors file ({e})")))?;
    let meta = header.metadata().clone().unwrap_or_default();
    if meta.get("format").map(String::as_str) != Some(FORMAT) {
        return Err(bad(
            path,
            format!("not an Orthoformer GPT checkpoint (metadata format is not {FORMAT})"),
        ));
    }
    let cfg_text = meta
        .get("config")
        .ok_or_else(|| bad(path, "metadata has no config"))?;
    let cfg: GptConfig =
        serde_json::from_str(cfg_text).map_err(|e| bad(path, format!("config: {e}")))?;
    let st = safetensors::SafeTensors::deserialize(bytes).map_err(|e| bad(path, e))?;
    // The file must hold every trainable value (4 bytes each) before a model of that size is
    // allocated: a corrupt config cannot ask for more memory than the file's own size.
    cfg.validate()?;
    let trainable = layout::param_counts(&cfg).map_or(usize::MAX, |c| c.trainable);
    if trainable.saturating_mul(4) > bytes.len() {
        return Err(bad(
            path,
            format!(
                "its config describes {trainable} trainable values, more than the file's {} bytes hold",
                bytes.len()
            ),
        ));
    }
    let mut model = Gpt::zeroed(cfg)?;
    let infos = model.params().tensors.clone();
    for t in &infos {
        let data = read_f32(&st, &t.name, &t.shape, path)?
            .ok_or_else(|| bad(path, format!("tensor {} is missing", t.name)))?;
        model.params_mut().data[t.range()].copy_from_slice(&data);
    }
    if !model.frozen().is_empty() {
        let frozen = load_frozen(&st, &meta, &model, path)?;
        model.set_frozen(frozen);
    }
    Ok(model)
}

/// The values of the F32 tensor `name` of shape `shape`; `None` when the file lacks it.
fn read_f32(
    st: &safetensors::SafeTensors<'_>,
    name: &str,
    shape: &[usize],
    path: &Path,
) -> crate::Result<Option<Vec<f32>>> {
    let Ok(view) = st.tensor(name) else {
        return Ok(None);
    };
    if view.dtype() != Dtype::F32 || view.shape() != shape {
        return Err(bad(
            path,
            format!(
                "tensor {name} is {:?} {:?}, expected F32 {shape:?}",
                view.dtype(),
                view.shape()
            ),
        ));
    }
    Ok(Some(
        view.data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    ))
}

/// The frozen weights of `model`'s config from the file: the stored tensors (checked against
/// the hash and the generator) or, in files without them, the generator's.
fn load_frozen(
    st: &safetensors::SafeTensors<'_>,
    meta: &std::collections::HashMap<String, String>,
    model: &Gpt,
    path: &Path,
) -> crate::Result<FrozenStore> {
    let want = meta
        .get("frozen_sha256")
        .ok_or_else(|| bad(path, "frozen weights have no hash"))?;
    let generator: Option<FrozenGenerator> = match meta.get("frozen_generator") {
        Some(g) => {
            Some(serde_json::from_str(g).map_err(|e| bad(path, format!("frozen generator: {e}")))?)
        }
        None => None,
    };
    let cfg = model.config();
    let regenerate = |g: FrozenGenerator| {
        let hadamard = cfg.attention.q_projection() == Projection::Hadamard;
        FrozenStore::generate(g, &layout::frozen_slots(cfg), hadamard)
    };
    // The zeroed model's own store gives the names and shapes the config implies.
    let mut stored = model.frozen().clone();
    stored.generator = None;
    let mut present = 0;
    for t in stored.tensors.iter_mut() {
        if let Some(data) = read_f32(st, &t.name, &t.shape, path)? {
            t.data = data;
            t.fast = None;
            present += 1;
        }
    }
    if present == 0 {
        // Written before frozen tensors were stored: only the generator can make them.
        let g = generator.ok_or_else(|| {
            bad(
                path,
                "frozen weights have neither a generator nor stored values",
            )
        })?;
        let made = regenerate(g)?;
        if &made.hash() != want {
            return Err(bad(
                path,
                format!(
                    "frozen weights do not match their hash (stored {want}, regenerated {}); \
                     the checkpoint is corrupt or was made by a different orthogonal generator",
                    made.hash()
                ),
            ));
        }
        return Ok(made);
    }
    if let Some(missing) = stored.tensors.iter().find(|t| st.tensor(&t.name).is_err()) {
        return Err(bad(
            path,
            format!("frozen tensor {} is missing", missing.name),
        ));
    }
    if &stored.hash() != want {
        return Err(bad(
            path,
            format!(
                "frozen weights do not match their hash (stored {want}, the stored tensors give \
                 {}); the checkpoint is corrupt",
                stored.hash()
            ),
        ));
    }
    let Some(g) = generator else {
        return Ok(stored); // imported weights: the values are all there is
    };
    let made = regenerate(g.clone())?;
    for (s, m) in stored.tensors.iter().zip(&made.tensors) {
        let same = s.data.len() == m.data.len()
            && s.data
                .iter()
                .zip(&m.data)
                .all(|(a, b)| a.to_bits() == b.to_bits());
        if !same {
            return Err(bad(
                path,
                format!(
                    "frozen tensor {} is not the matrix its generator ({}, seed {}) makes; \
                     the checkpoint was edited or made by a different generator",
                    s.name, g.method, g.seed
                ),
            ));
        }
    }
    Ok(made)
}
