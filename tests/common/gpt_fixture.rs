//! The GPT fixtures of `scripts/torch_gpt_reference.py`: a safetensors file per variant with
//! the config and counts in its metadata, the parameters, frozen tensors, inputs and PyTorch's
//! outputs.

use std::collections::HashMap;

use orthoformer::model::{Gpt, GptConfig};
use safetensors::SafeTensors;

/// One fixture file, read whole.
pub struct GptFixture {
    /// The file's bytes.
    pub bytes: Vec<u8>,
    /// Its metadata (`config`, `trainable`, `frozen`, ...).
    pub meta: HashMap<String, String>,
    /// The model configuration it was made for.
    pub cfg: GptConfig,
}

impl GptFixture {
    /// Reads `tests/fixtures/gpt/{file}.safetensors`.
    pub fn load(file: &str) -> Self {
        let path = format!(
            "{}/tests/fixtures/gpt/{file}.safetensors",
            super::repo_root().display()
        );
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let (_, header) = SafeTensors::read_metadata(&bytes).unwrap();
        let meta = header.metadata().clone().expect("fixture metadata");
        let cfg = serde_json::from_str(&meta["config"]).unwrap();
        GptFixture { bytes, meta, cfg }
    }

    /// The tensors.
    pub fn tensors(&self) -> SafeTensors<'_> {
        SafeTensors::deserialize(&self.bytes).unwrap()
    }

    /// A model of the fixture's config holding its parameters (`param.*`) and frozen tensors
    /// (`frozen.*`).
    pub fn model(&self) -> Gpt {
        let st = self.tensors();
        let mut model = Gpt::new(self.cfg.clone(), 0).unwrap();
        for t in model.params().tensors.clone() {
            let vals = f32s(&st, &format!("param.{}", t.name));
            model.params_mut().data[t.range()].copy_from_slice(&vals);
        }
        let frozen: Vec<String> = model
            .frozen()
            .tensors
            .iter()
            .map(|t| t.name.clone())
            .collect();
        for name in frozen {
            model
                .import_frozen(&name, &f32s(&st, &format!("frozen.{name}")))
                .unwrap();
        }
        model
    }
}

/// A float32 tensor's values.
pub fn f32s(st: &SafeTensors, name: &str) -> Vec<f32> {
    let v = st
        .tensor(name)
        .unwrap_or_else(|_| panic!("fixture lacks {name}"));
    v.data()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// An int64 tensor of token ids.
pub fn ids(st: &SafeTensors, name: &str) -> Vec<u32> {
    let v = st
        .tensor(name)
        .unwrap_or_else(|_| panic!("fixture lacks {name}"));
    v.data()
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as u32)
        .collect()
}
