//! `orthoformer quantize --out model.gguf`: rotate (optionally), calibrate, quantise by RTN or
//! GPTQ onto a GGUF block format, and write the file llama.cpp and this crate's engine run.
//! The file is then loaded back through the engine (memory-mapped, in its stored types) and
//! its logits compared with the in-memory quantised model's.

use crate::error::one_line;
use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use super::quant_options::{MIN_CALIB_TOKENS, QuantizeOptions};
use super::quant_study::{RotateChoice, WeightRounding};
use super::{RotateError, Rotation, fold_norms, rotate_weights};
use crate::infer::text::{read_tail_tokens, read_tokens};
use crate::io::table::{Block, Report};
use crate::model::llama::{Llama, load_model};
use crate::quant::calibrate::calibrate;
use crate::quant::model::{self as qm, Plan, quantize_model};
use crate::quant::write::save_quantized_gguf;
use crate::quant::{Clip, Format};

/// The block formats a quantised model is written in, as [`format_named`] reads them.
pub const GGUF_FORMAT_NAMES: [&str; 4] = ["q8_0", "q4_0", "q4_1", "q4_k"];

/// The GGUF block format named `q8_0`, `q4_0`, `q4_1` or `q4_k`.
pub fn format_named(name: &str) -> crate::Result<Format> {
    match name {
        "q8_0" => Ok(Format::Q8_0),
        "q4_0" => Ok(Format::Q4_0),
        "q4_1" => Ok(Format::Q4_1),
        "q4_k" => Ok(Format::Q4K),
        other => Err(invalid(format!(
            "`gguf_type` {other:?}: use one of {}",
            GGUF_FORMAT_NAMES.join(", ")
        ))),
    }
}

fn invalid(msg: String) -> crate::Error {
    crate::Error::Rotate(RotateError::Invalid(msg))
}

/// What `quantize --out` did.
#[derive(Debug, Clone, Serialize)]
pub struct QuantizeOutReport {
    /// The source model, as given.
    pub model: String,
    /// The file written.
    pub out: String,
    /// `rtn`, `rtn+clip` or `gptq` with its settings.
    pub method: String,
    /// The block format of the decoder's matrices.
    pub gguf_type: String,
    /// The rotation folded in.
    pub rotate: String,
    /// The file's size.
    pub bytes: u64,
    /// Calibration tokens read (0 for plain RTN).
    pub calibration_tokens: usize,
    /// GPTQ's summed output error, for GPTQ.
    pub gptq_loss: Option<f64>,
    /// Seconds calibrating.
    pub seconds_calibrate: f64,
    /// Seconds quantising.
    pub seconds_quantize: f64,
    /// max |Δlogit| between the in-memory quantised model and the written file run by the
    /// engine, on the first tokens of the evaluation text.
    pub max_abs_logit_diff_file: f64,
    /// Whether every greedy token of those positions agrees.
    pub greedy_same: bool,
    /// Tokens compared.
    #[serde(skip)]
    pub compared_tokens: usize,
}

/// Checks the options an `out` run cannot take, before anything is loaded.
pub fn validate(o: &QuantizeOptions, out: &Path, f: Format) -> crate::Result<()> {
    if o.table {
        return Err(invalid(
            "`table` runs the study and writes nothing; drop `out` or `table`".into(),
        ));
    }
    if o.abits != 16 {
        return Err(invalid(format!(
            "`abits` {}: a GGUF file holds weights only; drop `abits` with `out`",
            o.abits
        )));
    }
    if o.online_hadamard {
        return Err(invalid(
            "`online_hadamard` needs a run-time transform no GGUF runner applies; drop it with \
             `out`"
                .into(),
        ));
    }
    if o.wbits != 16 && o.wbits != f.bits() {
        return Err(invalid(format!(
            "`wbits` {} does not match `gguf_type` {f:?} ({}-bit); pass `wbits` {} or leave it out",
            o.wbits,
            f.bits(),
            f.bits()
        )));
    }
    if o.study.group != 0 && o.study.group != 32 {
        return Err(invalid(format!(
            "`group` {}: GGUF {f:?} stores one scale per 32 weights (Q4_K: per 32 in \
             super-blocks of 256); pass `group` 32 or leave it out",
            o.study.group
        )));
    }
    let damp = o.gptq.damp;
    if !(damp.is_finite() && (0.0..=1.0).contains(&damp)) {
        return Err(invalid(format!(
            "`damp` {damp} must be a number from 0 to 1 (a fraction of the mean Hessian diagonal)"
        )));
    }
    if o.calib_tokens < MIN_CALIB_TOKENS {
        return Err(invalid(format!(
            "`calib_tokens` {} must be at least {MIN_CALIB_TOKENS}",
            o.calib_tokens
        )));
    }
    if out.extension().is_none_or(|e| e != "gguf") {
        return Err(invalid(format!(
            "`out` {}: a quantised model is written as a .gguf file; name it *.gguf",
            out.display()
        )));
    }
    Ok(())
}

/// Quantises `model` as `o` says into the GGUF file `out` in block format `f` (checked by
/// [`validate`] first). `data` (`None`: the embedded TinyShakespeare) gives the calibration
/// tokens (its last `calib_tokens`) and the tokens the file is compared on (its first 64).
pub fn write(
    model: &Path,
    data: Option<&Path>,
    o: &QuantizeOptions,
    out: &Path,
    f: Format,
) -> crate::Result<QuantizeOutReport> {
    validate(o, out, f)?;
    let loaded = load_model(model)?;
    let meta = loaded.gguf_metadata.as_deref().ok_or_else(|| {
        invalid(format!(
            "`out` writes a GGUF and needs the tokenizer metadata of a GGUF `model`; {} is not one",
            model.display()
        ))
    })?;
    let eval = read_tokens(&loaded.tokenizer, data, 64)?;
    let mut w = loaded.weights.clone();
    let seed = o.study.seed;
    let rotation = match o.rotate {
        RotateChoice::None => None,
        RotateChoice::Random => Some(Rotation::random(w.cfg.d_model, seed)?),
        RotateChoice::Hadamard => Some(Rotation::hadamard(w.cfg.d_model, seed)?),
    };
    if let Some(r) = &rotation {
        fold_norms(&mut w);
        rotate_weights(&mut w, r)?;
    }
    let t0 = Instant::now();
    let method = match o.study.weights {
        WeightRounding::Rtn => qm::Method::Rtn(Clip::None),
        WeightRounding::RtnClip => qm::Method::Rtn(Clip::Search),
        WeightRounding::Gptq => qm::Method::Gptq(o.gptq),
    };
    let (hessians, ncal) = if o.needs_calibration() {
        let ids = read_tail_tokens(&loaded.tokenizer, data, o.calib_tokens, MIN_CALIB_TOKENS)?;
        (Some(calibrate(&w, None, &ids, o.study.context)?), ids.len())
    } else {
        (None, 0)
    };
    let t_cal = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let plan = Plan {
        method,
        format: f,
        fallback: (f == Format::Q4K).then_some(Format::Q4_1),
        embed_format: Some(Format::Q8_0),
    };
    let q = quantize_model(&mut w, &plan, hessians.as_ref(), &mut |_| {})?;
    drop(hessians);
    let t_q = t1.elapsed().as_secs_f64();
    save_quantized_gguf(&w, &q, f, meta, out)?;
    // The file, run by the engine as a user would, against the in-memory model.
    let mut mem = Llama::new(w);
    let g = crate::io::gguf::GgufFile::open(out);
    let mut file = g.and_then(|g| Llama::from_gguf(&g)).map_err(|e| {
        invalid(format!(
            "running the written file {}: {}",
            out.display(),
            one_line(&e)
        ))
    })?;
    let (diff, same) = compare(&mut mem, &mut file, &eval)?;
    Ok(QuantizeOutReport {
        model: model.display().to_string(),
        out: out.display().to_string(),
        method: method_name(&method),
        gguf_type: format!("{f:?}"),
        rotate: format!("{:?}", o.rotate),
        bytes: std::fs::metadata(out).map(|m| m.len()).unwrap_or(0),
        calibration_tokens: ncal,
        gptq_loss: matches!(method, qm::Method::Gptq(_)).then_some(q.gptq_loss),
        seconds_calibrate: t_cal,
        seconds_quantize: t_q,
        max_abs_logit_diff_file: diff,
        greedy_same: same,
        compared_tokens: eval.len(),
    })
}

/// max |Δlogit| over the logits of `ids`, and whether every argmax agrees.
fn compare(a: &mut Llama, b: &mut Llama, ids: &[u32]) -> crate::Result<(f64, bool)> {
    let mut ca = a.new_cache(ids.len())?;
    let mut cb = b.new_cache(ids.len())?;
    let la = a.forward(ids, &mut ca, 0)?;
    let lb = b.forward(ids, &mut cb, 0)?;
    let v = a.vocab_size();
    let arg = |r: &[f32]| {
        r.iter()
            .enumerate()
            .fold(0, |m, (i, x)| if *x > r[m] { i } else { m })
    };
    let same = la
        .chunks(v)
        .zip(lb.chunks(v))
        .all(|(x, y)| arg(x) == arg(y));
    let diff = la
        .iter()
        .zip(&lb)
        .map(|(x, y)| f64::from((x - y).abs()))
        .fold(0.0, f64::max);
    Ok((diff, same))
}

/// The method as the report names it: `rtn`, `rtn+clip` or `gptq` with its settings.
fn method_name(method: &qm::Method) -> String {
    match method {
        qm::Method::Rtn(Clip::None) => "rtn".into(),
        qm::Method::Rtn(Clip::Search) => "rtn+clip".into(),
        qm::Method::Gptq(o) => format!("gptq (damp {}, act-order {})", o.damp, o.act_order),
    }
}

impl Report for QuantizeOutReport {
    fn blocks(&self) -> Vec<Block> {
        vec![Block::Text(format!(
            "wrote {} ({} bytes, {}, {}, rotation {})\nembedding and lm_head: Q8_0; calibration \
             tokens: {}; time: calibrate {:.1} s, quantise {:.1} s\nthe file run by the engine \
             vs the in-memory model: max |Δlogit| {:.3e} on {} tokens, same greedy tokens: {}",
            self.out,
            self.bytes,
            self.gguf_type,
            self.method,
            self.rotate,
            self.calibration_tokens,
            self.seconds_calibrate,
            self.seconds_quantize,
            self.max_abs_logit_diff_file,
            self.compared_tokens,
            self.greedy_same
        ))]
    }
}
