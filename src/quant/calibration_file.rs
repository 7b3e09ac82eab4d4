//! Calibration once, many files: the sums `XᵀX` of every decoder layer's inputs (what GPTQ
//! and the importance-weighted search need) kept in a file, so that a second type from the
//! same model, rotation and calibration text skips the calibration pass (llama.cpp's
//! `llama-imatrix` file plays the same part for llama-quantize).
//!
//! The file is safetensors (Python's `safetensors.numpy.load_file` reads it): one F64 tensor
//! per layer and input site, `blk.{l}.{site}` (`attn_in`, `o_in`, `mlp_in`, `down_in`, each
//! `width x width`), and string metadata: the format and version, the rows summed per
//! tensor, and the [`CalibrationKey`] of what the sums were taken on. Opening checks every key
//! field against the run's and refuses a file made from another model, rotation, text or
//! window, naming the field; a file whose shapes do not match the model is refused too.
//!
//! Memory: writing streams the sums of the calibration pass, which holds every layer's
//! (`8·L·(3C² + F²)` bytes); reading maps the file and copies one layer's sums at a time
//! (`8·(3C² + F²)` bytes: 27 MB for SmolLM2-135M), so quantising from the file is bounded by
//! one layer's sums.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::QuantError;
use super::hessian::{Hessians, SITES};
use crate::io::safetensors_writer::write_safetensors_f64;
use crate::model::llama::LlamaConfig;
use crate::model::llama::tap::LinearSite;

/// The `format` metadata value of a calibration file.
pub const FORMAT: &str = "orthoformer-calibration";
/// The version of the layout this module writes and reads.
pub const VERSION: &str = "1";

/// What the sums were taken on: a file is used only for a run whose key is equal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CalibrationKey {
    /// SHA-256 of the weights the calibration ran (after rotation and folding).
    pub model_sha256: String,
    /// The rotations folded in (`none`, `R1+R2`, ...) and their seed.
    pub rotation: String,
    /// SHA-256 of the whole calibration text.
    pub text_sha256: String,
    /// SHA-256 of the calibration token ids (little-endian u32).
    pub tokens_sha256: String,
    /// Calibration tokens.
    pub tokens: usize,
    /// Tokens per calibration window.
    pub window: usize,
}

impl CalibrationKey {
    /// The fields as metadata (name, value), in the order they are checked.
    fn fields(&self) -> [(&'static str, String); 6] {
        [
            ("model_sha256", self.model_sha256.clone()),
            ("rotation", self.rotation.clone()),
            ("text_sha256", self.text_sha256.clone()),
            ("tokens", self.tokens.to_string()),
            ("tokens_sha256", self.tokens_sha256.clone()),
            ("window", self.window.to_string()),
        ]
    }
}

fn site_name(site: LinearSite) -> &'static str {
    match site {
        LinearSite::AttnIn => "attn_in",
        LinearSite::OIn => "o_in",
        LinearSite::MlpIn => "mlp_in",
        LinearSite::DownIn => "down_in",
        LinearSite::HeadIn => "head_in",
    }
}

fn tensor_name(layer: usize, site: LinearSite) -> String {
    format!("blk.{layer}.{}", site_name(site))
}

fn invalid(path: &Path, why: String) -> crate::Error {
    QuantError::Invalid(format!("calibration file {}: {why}", path.display())).into()
}

/// Writes every layer's sums of `hs` (a model of `n_layer` layers) and `key` to `path`,
/// atomically.
pub fn write(
    path: &Path,
    hs: &Hessians,
    n_layer: usize,
    key: &CalibrationKey,
) -> crate::Result<()> {
    let mut meta: BTreeMap<String, String> = key
        .fields()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    meta.insert("format".into(), FORMAT.into());
    meta.insert("version".into(), VERSION.into());
    let mut names = Vec::new();
    let mut sums = Vec::new();
    for l in 0..n_layer {
        for site in SITES {
            let (sum, rows) = hs
                .sum(l, site)
                .ok_or_else(|| invalid(path, format!("layer {l} {site:?} was not calibrated")))?;
            let n = (sum.len() as f64).sqrt() as usize;
            names.push((tensor_name(l, site), [n, n]));
            sums.push(sum);
            meta.insert(format!("{}.rows", tensor_name(l, site)), rows.to_string());
        }
    }
    let tensors: Vec<(&str, &[usize], &[f64])> = names
        .iter()
        .zip(&sums)
        .map(|((name, shape), sum)| (name.as_str(), &shape[..], *sum))
        .collect();
    crate::io::atomic::write_atomic(path, |w| {
        write_safetensors_f64(w, &tensors, &meta).map_err(|e| crate::Error::io(path, e))
    })
}

/// An opened calibration file whose key matched the run's.
pub struct CalibrationFile {
    path: PathBuf,
    image: memmap2::Mmap,
    rows: BTreeMap<String, String>,
    cfg: LlamaConfig,
}

impl CalibrationFile {
    /// Opens `path` for a model of `cfg` and checks it holds sums taken on `key`.
    pub fn open(path: &Path, cfg: &LlamaConfig, key: &CalibrationKey) -> crate::Result<Self> {
        let file = crate::io::safe_file::open_regular(path)?;
        // SAFETY: read-only map, read only through `&[u8]`; the file is not changed while
        // this value lives (the same contract as the GGUF reader's).
        let image = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| crate::Error::io(path, e))?;
        let (_, header) = safetensors::SafeTensors::read_metadata(&image[..])
            .map_err(|e| invalid(path, format!("not a safetensors file ({e})")))?;
        let meta = header.metadata().clone().unwrap_or_default();
        let get = |k: &str| meta.get(k).map(String::as_str).unwrap_or("(missing)");
        if get("format") != FORMAT || get("version") != VERSION {
            return Err(invalid(
                path,
                format!(
                    "not an Orthoformer calibration file of version {VERSION} (format {:?}, \
                     version {:?})",
                    get("format"),
                    get("version")
                ),
            ));
        }
        for (field, ours) in key.fields() {
            if get(field) != ours {
                return Err(invalid(
                    path,
                    format!(
                        "it was made with another {field} ({} there, {ours} here): pass a new \
                         --calibration file name, or delete this one to calibrate again",
                        get(field)
                    ),
                ));
            }
        }
        let out = CalibrationFile {
            path: path.to_path_buf(),
            image,
            rows: meta.into_iter().collect(),
            cfg: cfg.clone(),
        };
        // Every tensor present with its shape before any work.
        let st = safetensors::SafeTensors::deserialize(&out.image[..])
            .map_err(|e| invalid(path, e.to_string()))?;
        for l in 0..cfg.n_layer {
            for site in SITES {
                let name = tensor_name(l, site);
                let t = st
                    .tensor(&name)
                    .map_err(|_| invalid(path, format!("no tensor {name}")))?;
                let n = site_width(cfg, site);
                if t.dtype() != safetensors::Dtype::F64 || t.shape() != [n, n] {
                    return Err(invalid(
                        path,
                        format!(
                            "{name} is {:?} {:?}, not F64 [{n}, {n}] as this model needs",
                            t.dtype(),
                            t.shape()
                        ),
                    ));
                }
                out.rows_of(&name)?;
            }
        }
        Ok(out)
    }

    fn rows_of(&self, name: &str) -> crate::Result<u64> {
        self.rows
            .get(&format!("{name}.rows"))
            .and_then(|r| r.parse().ok())
            .filter(|&r: &u64| r > 0)
            .ok_or_else(|| invalid(&self.path, format!("{name}.rows is missing or not a count")))
    }

    /// Layer `layer`'s sums (every other layer records nothing).
    pub fn layer(&self, layer: usize) -> crate::Result<Hessians> {
        let st = safetensors::SafeTensors::deserialize(&self.image[..])
            .map_err(|e| invalid(&self.path, e.to_string()))?;
        let mut sums: Vec<(Vec<f64>, u64)> = Vec::with_capacity(4);
        for site in SITES {
            let name = tensor_name(layer, site);
            let t = st
                .tensor(&name)
                .map_err(|_| invalid(&self.path, format!("no tensor {name}")))?;
            let v: Vec<f64> = t
                .data()
                .chunks_exact(8)
                .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")))
                .collect();
            if v.iter().any(|x| !x.is_finite()) {
                return Err(invalid(
                    &self.path,
                    format!("{name} holds a value that is not finite"),
                ));
            }
            sums.push((v, self.rows_of(&name)?));
        }
        let sums: [(Vec<f64>, u64); 4] = sums.try_into().expect("four sites");
        Hessians::from_layer(&self.cfg, layer, sums).map_err(|e| invalid(&self.path, e))
    }
}

/// The width of `site`'s input in a model of `cfg`.
fn site_width(cfg: &LlamaConfig, site: LinearSite) -> usize {
    match site {
        LinearSite::AttnIn | LinearSite::MlpIn | LinearSite::HeadIn => cfg.d_model,
        LinearSite::OIn => cfg.n_head * cfg.head_dim(),
        LinearSite::DownIn => cfg.d_ff,
    }
}

/// SHA-256 of a model's weights (every tensor's name, shape and f32 bytes, in a fixed order).
pub fn weights_sha256(w: &crate::model::llama::LlamaWeights) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for (name, shape, data) in w.hf_tensors() {
        h.update(name.as_bytes());
        for d in shape {
            h.update((d as u64).to_le_bytes());
        }
        h.update(bytemuck::cast_slice::<f32, u8>(data));
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::tiny_llama::{tiny_llama_config, tiny_llama_weights};

    fn key(w: &crate::model::llama::LlamaWeights) -> CalibrationKey {
        CalibrationKey {
            model_sha256: weights_sha256(w),
            rotation: "none".into(),
            text_sha256: "ab".into(),
            tokens_sha256: "cd".into(),
            tokens: 40,
            window: 16,
        }
    }

    #[test]
    fn sums_come_back_exactly_and_another_key_is_refused_by_name() {
        let w = tiny_llama_weights(0);
        let cfg = tiny_llama_config();
        let ids: Vec<u32> = (0..40).map(|i| (i * 37) % 250).collect();
        let hs = crate::quant::calibrate::calibrate(&w, None, &ids, 16).unwrap();
        let dir = std::env::temp_dir().join(format!("calib-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.safetensors");
        write(&path, &hs, cfg.n_layer, &key(&w)).unwrap();
        let f = CalibrationFile::open(&path, &cfg, &key(&w)).unwrap();
        for l in 0..cfg.n_layer {
            let back = f.layer(l).unwrap();
            for site in SITES {
                assert_eq!(back.hessian(l, site), hs.hessian(l, site), "{l} {site:?}");
            }
        }
        let other = CalibrationKey {
            window: 32,
            ..key(&w)
        };
        let e = CalibrationFile::open(&path, &cfg, &other)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("another window (16 there, 32 here)"), "{e}");
        let w2 = tiny_llama_weights(1);
        let e = CalibrationFile::open(&path, &cfg, &key(&w2))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("another model_sha256"), "{e}");
        let mut wide = cfg.clone();
        wide.d_ff = 256;
        let e = CalibrationFile::open(&path, &wide, &key(&w))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("down_in is F64 [128, 128], not F64 [256, 256]"),
            "{e}"
        );
        std::fs::write(&path, b"not a file").unwrap();
        let e = CalibrationFile::open(&path, &cfg, &key(&w))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("not a safetensors file"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
