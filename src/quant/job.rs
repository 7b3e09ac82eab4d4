//! What `orthoformer quantize` is asked to do, as one value: the model, the texts, the
//! options and the file to write, checked before any file is read ([`QuantizeJob::validate`]).
//! [`super::run`] runs it.

use std::path::{Path, PathBuf};

use super::QuantError;
use super::options::{MIN_CALIB_TOKENS, QuantizeOptions};
use crate::infer::text::read_tail_tokens;
use crate::quant::{FileType, TensorOverride};

/// What to quantise, on which texts, and whether to write the result.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QuantizeJob {
    /// The model: a `.gguf` file or a Hugging Face folder.
    pub model: PathBuf,
    /// Texts to measure perplexity on (empty: the embedded TinyShakespeare); the first also
    /// gives the calibration tokens.
    pub data: Vec<PathBuf>,
    /// The configurations, methods, seeds and settings.
    pub options: QuantizeOptions,
    /// Write the quantised model as this `.gguf` file instead of running the study (then
    /// `gguf_type` is needed).
    pub out: Option<PathBuf>,
    /// The block format or mix of `out` (see [`FileType::names`]).
    pub gguf_type: Option<FileType>,
    /// Per-tensor formats of `out` that replace the mix's choice (`PATTERN=TYPE`).
    pub tensor_types: Vec<TensorOverride>,
    /// A calibration file (`out` only): read when it exists (refused if made from another
    /// model, rotation, text or window), else calibrated and written there
    /// ([`super::calibration_file`]).
    pub calibration: Option<PathBuf>,
}

fn invalid(msg: &str) -> crate::Error {
    QuantError::Invalid(msg.into()).into()
}

impl QuantizeJob {
    /// Checks the job's own values (before any file is read), naming the field.
    pub fn validate(&self) -> crate::Result<()> {
        self.options.validate()?;
        let o = &self.options;
        if let Some(c) = &self.calibration {
            if self.out.is_none() {
                return Err(invalid(
                    "`calibration` keeps a file's calibration: use it with `out`",
                ));
            }
            if o.sequential || !o.method.iter().all(|m| m.calibrates()) {
                return Err(invalid(
                    "`calibration` keeps the sums of one calibration pass: use it with `method`                      gptq or imatrix, without `sequential`",
                ));
            }
            if Some(c) == self.out.as_ref() || *c == self.model || self.data.contains(c) {
                return Err(invalid(
                    "`calibration` must be a file of its own, not the model, a text or `out`",
                ));
            }
        }
        match (&self.out, self.gguf_type) {
            (Some(out), Some(f)) => o.validate_file(out, f),
            (Some(_), None) => Err(invalid("`out` needs `gguf_type`, its block format")),
            (None, Some(_)) => Err(invalid("`gguf_type` applies to `out` only")),
            (None, None) if !self.tensor_types.is_empty() => {
                Err(invalid("`tensor_type` applies to `out` only"))
            }
            (None, None) if o.sequential => Err(invalid(
                "`sequential` calibrates a file's layers one by one: use it with `out`",
            )),
            (None, None) => match o.method.iter().find(|m| m.needs_block_format()) {
                Some(m) => Err(invalid(&format!(
                    "`method` {}: llama.cpp's block-scale search rounds onto a GGUF block \
                     format; use it with `out` and `gguf_type`",
                    m.label()
                ))),
                None => Ok(()),
            },
        }
    }

    /// The first text (the calibration text), `None` for the embedded corpus.
    pub fn first_text(&self) -> Option<&Path> {
        self.data.first().map(PathBuf::as_path)
    }

    /// The calibration tokens: about the last `calib_tokens` tokens of the first text,
    /// disjoint from the first tokens perplexity is measured on.
    pub fn calibration(&self, tok: &crate::data::Tokenizer) -> crate::Result<Vec<u32>> {
        read_tail_tokens(
            tok,
            self.first_text(),
            self.options.calib_tokens,
            MIN_CALIB_TOKENS,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every bad job is refused before a file is read, naming its field.
    #[test]
    fn bad_jobs_name_their_field() {
        let ok = QuantizeJob {
            model: "no-such-model.gguf".into(),
            ..QuantizeJob::default()
        };
        assert!(ok.validate().is_ok());
        let file = |f: &dyn Fn(&mut QuantizeJob)| {
            let mut j = QuantizeJob {
                out: Some("q.gguf".into()),
                gguf_type: Some(FileType::Single(crate::quant::Format::Q4_0)),
                ..ok.clone()
            };
            f(&mut j);
            j.validate()
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert_eq!(file(&|_| {}), "");
        type Change<'a> = &'a dyn Fn(&mut QuantizeJob);
        let cases: [(Change, &str); 10] = [
            (&|j| j.gguf_type = None, "`gguf_type`"),
            (&|j| j.options.table = true, "`table`"),
            (&|j| j.options.abits = 8, "`abits`"),
            (&|j| j.options.kv_bits = 4, "`kv_bits`"),
            (&|j| j.options.seed = vec![0, 1], "`seed`"),
            (&|j| j.options.wbits = 8, "`wbits`"),
            (&|j| j.options.study.group = 64, "`group`"),
            (&|j| j.out = Some("q.bin".into()), "`out`"),
            (&|j| j.options.study.gptq.damp = -1.0, "`damp`"),
            (&|j| j.options.study.weight_asym = true, "`weight_asym`"),
        ];
        for (change, field) in cases {
            let e = file(change);
            assert!(e.contains(field), "{field}: {e:?}");
        }
        let study = QuantizeJob {
            gguf_type: Some(FileType::Single(crate::quant::Format::Q8_0)),
            ..ok.clone()
        };
        assert!(study.validate().unwrap_err().to_string().contains("`out`"));
        let few = QuantizeJob {
            options: QuantizeOptions {
                calib_tokens: 3,
                ..QuantizeOptions::default()
            },
            ..ok
        };
        assert!(
            few.validate()
                .unwrap_err()
                .to_string()
                .contains("`calib_tokens`")
        );
    }
}
