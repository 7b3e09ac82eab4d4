//! What a quantised GGUF file says about how it was made, under the key prefix
//! [`PREFIX`] (llama-quantize writes `quantize.imatrix.*` for the same purpose): the tool and
//! its version, the type asked for, the rounding method, the rotation folded in and its seed,
//! and the calibration text (its name, the SHA-256 of the whole file, how many of its tokens
//! calibrated, and the SHA-256 of exactly those token ids). Anyone holding the text can check
//! it was the one used (`sha256sum`); the README's quantisation paragraph lists the keys.

use crate::io::gguf::Value;
use crate::io::gguf::provenance::{ids_sha256, set_record};

/// The prefix of every key this module writes.
pub const PREFIX: &str = "orthoformer.quantize.";

/// The calibration a file was rounded with.
#[derive(Clone, Debug, PartialEq)]
pub struct CalibrationRecord {
    /// The text's file name (no folders), or the embedded corpus's name.
    pub text: String,
    /// SHA-256 of the whole text file, lowercase hex.
    pub text_sha256: String,
    /// The token ids that calibrated (the text's tail).
    pub ids: Vec<u32>,
}

/// How a quantised file was made.
#[derive(Clone, Debug, PartialEq)]
pub struct Provenance {
    /// The block format or mix asked for (`q4_k_m`).
    pub gguf_type: String,
    /// The rounding method as the report names it.
    pub method: String,
    /// The rotations folded in (`none`, `R1`, `R1+R2+R4`, `fold`).
    pub rotation: String,
    /// The residual rotation's kind (`hadamard`, `random`, `identity`, `none`).
    pub rotation_kind: String,
    /// The seed the rotations were drawn from (`None` when nothing was drawn).
    pub rotation_seed: Option<u64>,
    /// Calibrated layer by layer on the quantised layers' outputs.
    pub sequential: bool,
    /// The calibration, if the method calibrates.
    pub calibration: Option<CalibrationRecord>,
}

impl Provenance {
    /// Writes this record into `meta` (the file's metadata), replacing any earlier one.
    pub fn record(&self, meta: &mut Vec<(String, Value)>) {
        let s = |v: &str| Value::Str(v.to_string());
        let mut pairs = vec![
            ("type", s(&self.gguf_type)),
            ("method", s(&self.method)),
            ("rotation", s(&self.rotation)),
            ("rotation.kind", s(&self.rotation_kind)),
            ("sequential", Value::Bool(self.sequential)),
        ];
        if let Some(seed) = self.rotation_seed {
            pairs.push(("rotation.seed", Value::U64(seed)));
        }
        match &self.calibration {
            Some(c) => pairs.extend([
                ("calibration.text", s(&c.text)),
                ("calibration.text_sha256", s(&c.text_sha256)),
                ("calibration.tokens", Value::U64(c.ids.len() as u64)),
                ("calibration.tokens_sha256", s(&ids_sha256(&c.ids))),
            ]),
            None => pairs.push(("calibration.tokens", Value::U64(0))),
        }
        set_record(meta, PREFIX, pairs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_prefixed_and_the_seed_and_tokens_are_numbers() {
        let p = Provenance {
            gguf_type: "q4_k_m".into(),
            method: "gptq".into(),
            rotation: "R1".into(),
            rotation_kind: "hadamard".into(),
            rotation_seed: Some(3),
            sequential: false,
            calibration: Some(CalibrationRecord {
                text: "t.txt".into(),
                text_sha256: "00".into(),
                ids: vec![5, 6, 7],
            }),
        };
        let mut keys = vec![("general.name".to_string(), Value::Str("m".into()))];
        p.record(&mut keys);
        assert!(keys[1..].iter().all(|(k, _)| k.starts_with("orthoformer.")));
        let get = |name: &str| keys.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        assert_eq!(
            get("orthoformer.quantize.rotation.seed"),
            Some(Value::U64(3))
        );
        assert_eq!(
            get("orthoformer.quantize.calibration.tokens"),
            Some(Value::U64(3))
        );
    }
}
