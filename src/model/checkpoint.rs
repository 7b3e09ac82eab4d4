//! Model checkpoints (weights only) as safetensors: every trainable tensor by name, the config
//! and the frozen weights' generator + SHA-256 in the metadata. Frozen weights are regenerated
//! on load and checked against the hash; with `full_frozen` they are also written in full
//! (for other tools), and then checked against the hash when read back.

use super::ModelError;
use super::config::{GptConfig, Projection};
use super::gpt::Gpt;
use super::layout;
use super::store::{FrozenGenerator, FrozenStore};
use safetensors::tensor::{Dtype, TensorView};
use std::collections::HashMap;
use std::path::Path;

const FORMAT: &str = "orthoformer-gpt-1";

fn bad(path: &Path, what: impl std::fmt::Display) -> crate::Error {
    ModelError::Checkpoint(format!("{}: {what}", path.display())).into()
}

/// Writes `model`'s weights to `path` atomically. Frozen weights are stored as their generator
/// and hash, and also in full when `full_frozen`.
pub fn save_model(path: &Path, model: &Gpt, full_frozen: bool) -> crate::Result<()> {
    let p = model.params();
    let mut views = Vec::new();
    for t in &p.tensors {
        let bytes: &[u8] = bytemuck::cast_slice(&p.data[t.range()]);
        let view = TensorView::new(Dtype::F32, t.shape.clone(), bytes).map_err(|e| bad(path, e))?;
        views.push((t.name.clone(), view));
    }
    // Without a generator (imported weights) the values themselves must be stored.
    if full_frozen || model.frozen().generator.is_none() {
        for t in &model.frozen().tensors {
            let view = TensorView::new(Dtype::F32, t.shape.clone(), bytemuck::cast_slice(&t.data))
                .map_err(|e| bad(path, e))?;
            views.push((t.name.clone(), view));
        }
    }
    let mut meta = HashMap::new();
    meta.insert("format".to_string(), FORMAT.to_string());
    let cfg = serde_json::to_string(model.config()).map_err(|e| bad(path, e))?;
    meta.insert("config".to_string(), cfg);
    if let Some(g) = &model.frozen().generator {
        meta.insert(
            "frozen_generator".to_string(),
            serde_json::to_string(g).map_err(|e| bad(path, e))?,
        );
    }
    // The hash also covers imported (stored, generator-less) frozen weights: the loader
    // checks every frozen set against it.
    if !model.frozen().is_empty() {
        meta.insert("frozen_sha256".to_string(), model.frozen().hash());
        meta.insert("frozen_dtype".to_string(), "f32".to_string());
    }
    let bytes = safetensors::serialize(views, Some(meta)).map_err(|e| bad(path, e))?;
    crate::io::write_atomic_bytes(path, &bytes)
}

/// Reads a checkpoint written by [`save_model`]: the config from the metadata, every trainable
/// tensor by name (shapes checked), the frozen weights regenerated and checked against the hash.
pub fn load_model(path: &Path) -> crate::Result<Gpt> {
    let bytes = std::fs::read(path).map_err(|e| crate::Error::io(path, e))?;
    let (_, header) = safetensors::SafeTensors::read_metadata(&bytes)
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
    let st = safetensors::SafeTensors::deserialize(&bytes).map_err(|e| bad(path, e))?;
    let mut model = Gpt::zeroed(cfg)?;
    let infos = model.params().tensors.clone();
    for t in &infos {
        let view = st
            .tensor(&t.name)
            .map_err(|_| bad(path, format!("tensor {} is missing", t.name)))?;
        if view.dtype() != Dtype::F32 || view.shape() != t.shape.as_slice() {
            return Err(bad(
                path,
                format!(
                    "tensor {} is {:?} {:?}, expected F32 {:?}",
                    t.name,
                    view.dtype(),
                    view.shape(),
                    t.shape
                ),
            ));
        }
        let dst = &mut model.params_mut().data[t.range()];
        for (d, ch) in dst.iter_mut().zip(view.data().chunks_exact(4)) {
            *d = f32::from_le_bytes([ch[0], ch[1], ch[2], ch[3]]);
        }
    }
    if !model.frozen().is_empty() {
        let mut frozen = match meta.get("frozen_generator") {
            Some(g) => {
                let generator: FrozenGenerator = serde_json::from_str(g)
                    .map_err(|e| bad(path, format!("frozen generator: {e}")))?;
                let cfg = model.config();
                let hadamard = cfg.attention.q_projection() == Projection::Hadamard;
                FrozenStore::generate(generator, &layout::frozen_slots(cfg), hadamard)?
            }
            None => {
                let mut f = model.frozen().clone();
                f.generator = None;
                f
            }
        };
        let want = meta
            .get("frozen_sha256")
            .ok_or_else(|| bad(path, "frozen weights have no hash"))?;
        let stored_full = frozen.tensors.iter().all(|t| st.tensor(&t.name).is_ok());
        if !stored_full && frozen.generator.is_none() {
            return Err(bad(
                path,
                "frozen weights have neither a generator nor stored values",
            ));
        }
        if stored_full {
            for t in frozen.tensors.iter_mut() {
                if let Ok(view) = st.tensor(&t.name) {
                    for (d, ch) in t.data.iter_mut().zip(view.data().chunks_exact(4)) {
                        *d = f32::from_le_bytes([ch[0], ch[1], ch[2], ch[3]]);
                    }
                }
            }
        }
        let got = frozen.hash();
        if &got != want {
            return Err(bad(
                path,
                format!(
                    "frozen weights do not match their hash (stored {want}, {} {got}); the checkpoint is corrupt or was made by a different orthogonal generator",
                    if stored_full {
                        "stored tensors give"
                    } else {
                        "regenerated"
                    }
                ),
            ));
        }
        model.set_frozen(frozen);
    }
    Ok(model)
}
