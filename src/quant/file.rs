//! `quantize` with `out`: rotate (optionally), calibrate (once, or layer by layer), round by
//! RTN, llama.cpp's block-scale search (with or without an importance matrix) or GPTQ onto
//! each tensor's GGUF block format (one format, or a llama-quantize mix with overrides:
//! [`crate::quant::mix`]), and write the file llama.cpp and this crate's engine run. The file is then
//! opened as a user would (memory-mapped, in its stored types) and its logits compared with
//! the quantised model in memory: a file that does not give back what was quantised is
//! refused, never silently accepted. The file is written staged ([`Staged`]) and moved over
//! `out` only once that check passed, so a failure leaves the previous `out` as it was.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use super::QuantError;
use super::job::QuantizeJob;
use super::study::WeightRounding;
use crate::infer::text::{read_tokens, text_bytes, text_name};
use crate::io::gguf::GgufFile;
use crate::io::gguf::provenance::{ids_sha256, sha256_hex};
use crate::model::llama::gguf_vocab::source_metadata;
use crate::model::llama::{Llama, load_model};
use crate::quant::calibrate::calibrate;
use crate::quant::calibration_file::{self, CalibrationFile, CalibrationKey, weights_sha256};
use crate::quant::mix::{self, TypeCounts};
use crate::quant::model::{Method, Plan, layer_cols, quantize_model, quantize_model_by_layer};
use crate::quant::provenance::{CalibrationRecord, Provenance};
use crate::quant::sequential::quantize_sequential;
use crate::quant::write::save_quantized_gguf;
use crate::quant::{Clip, FileType, GptqOptions};
use crate::rotate::out_path::claim_outs;
use crate::rotate::set::{RotationSet, apply_offline};
use crate::rotate::staging::Staged;

/// Tokens of the first text the written file and the model in memory are compared on.
const CHECK_TOKENS: usize = 64;

/// The file's logits may differ from the model's in memory by this fraction of their largest
/// magnitude (at least 1): both hold the same rounded weights, so only the order of float
/// sums differs; a wrong tensor moves them by far more.
const FILE_TOLERANCE: f64 = 1e-3;

/// What [`write`] did.
#[derive(Clone, Debug, Serialize)]
pub struct QuantizeFileReport {
    /// The model quantised, as given.
    pub model: String,
    /// The file written.
    pub out: String,
    /// `rtn`, `rtn+clip`, `search`, `imatrix` or `gptq` with its settings.
    pub method: String,
    /// The block format or mix asked for (`q4_k_m`).
    pub gguf_type: String,
    /// `general.file_type` written (llama.cpp's `llama_ftype` name, `MOSTLY_Q4_K_M`): a mix
    /// as llama-quantize names it, a single format by what most decoder weights are stored as.
    pub file_type: String,
    /// How many tensors each block format holds.
    pub types: TypeCounts,
    /// Tensors whose format fell back because their rows are not whole blocks.
    pub fallbacks: Vec<String>,
    /// Tensors whose format an override chose.
    pub overridden: Vec<String>,
    /// The rotations folded into the file (`R3` acts at run time and is never written).
    pub rotate: String,
    /// `R4` is folded in: the file needs this crate's engine (llama.cpp refuses it).
    pub online_hadamard: bool,
    /// Folding the final norm untied a head the source shared with its embedding: the file
    /// holds `output.weight` besides `token_embd.weight`.
    pub head_untied: bool,
    /// Bytes of `output.weight` in the file (0 when the head is tied): what an untied head
    /// costs, in the type the mix's head rule chose.
    pub head_bytes: u64,
    /// Whether llama.cpp runs the file, and if not why.
    pub llama_cpp: String,
    /// `R3` was asked for: it acts at run time (`--qk-hadamard` on eval or generate).
    pub qk_hadamard_at_run_time: bool,
    /// The file's size.
    pub bytes: u64,
    /// Calibration tokens used (0 without calibration).
    pub calibration_tokens: usize,
    /// Where they came from (`the last 4096 tokens of tinyshakespeare.txt`, or `none`).
    pub calibration_text: String,
    /// Calibrated layer by layer on the quantised layers' outputs (else once).
    pub sequential: bool,
    /// The calibration file: `read` (its sums reused, no calibration pass), `written`, or
    /// `none`.
    pub calibration_file: String,
    /// GPTQ's summed reconstruction loss, for GPTQ.
    pub gptq_loss: Option<f64>,
    /// Seconds calibrating.
    pub seconds_calibrate: f64,
    /// Seconds rounding.
    pub seconds_quantize: f64,
    /// Tokens the file was checked on.
    pub check_tokens: usize,
    /// max |Δlogit| between the quantised model in memory and the written file run by the
    /// engine.
    pub max_abs_logit_diff_file: f64,
    /// Both give the same greedy token at every position.
    pub greedy_same: bool,
}

fn invalid(msg: String) -> crate::Error {
    QuantError::Invalid(msg).into()
}

/// Writes the quantised model of a valid `job` to `out` as `ft`, runs the file written
/// against the model in memory, and only then moves it into place. `out` is checked before
/// the model is loaded; `on_layer(done, total)` after each decoder layer is quantised.
pub fn write(
    job: &QuantizeJob,
    out: &Path,
    ft: FileType,
    on_layer: &mut dyn FnMut(usize, usize),
) -> crate::Result<QuantizeFileReport> {
    // Checked and locked before the model is loaded, held until the file is in place.
    let data: Vec<&Path> = job.data.iter().map(PathBuf::as_path).collect();
    let _claim = claim_outs(&job.model, &data, &[out.to_path_buf()])?;
    let o = &job.options;
    let loaded = load_model(&job.model)?;
    // A GGUF source's metadata, or a Hugging Face folder's tokenizer as llama.cpp's converter
    // writes it (refused by name where llama.cpp would tokenize differently).
    let meta = source_metadata(&job.model, &loaded)?;
    // At most CHECK_TOKENS + 1 ids, and never more than the model's context holds.
    let check = CHECK_TOKENS.min(loaded.weights.cfg.max_context.saturating_sub(1));
    let eval = read_tokens(&loaded.tokenizer, job.first_text(), check)?;
    let mut w = loaded.weights.clone();
    let rounding = o.method[0];
    let calibrated = rounding.calibrates();
    // R3 acts at run time only; R1, R2 and R4 are folded into the file.
    let set = RotationSet {
        qk: false,
        ..o.rotations
    };
    let was_tied = w.lm_head.is_none();
    let down = apply_offline(&mut w, &set, o.seed[0])?;
    let head_untied = was_tied && w.lm_head.is_some();
    // After the rotation: folding the final norm unties a tied head, which then gets
    // llama-quantize's output rule and the embedding its base type.
    let types = mix::choose(
        ft,
        &w.cfg,
        w.lm_head.is_none(),
        calibrated,
        &job.tensor_types,
    )?;
    let t0 = Instant::now();
    let method = match rounding {
        WeightRounding::Rtn => Method::Rtn(Clip::None),
        WeightRounding::RtnClip => Method::Rtn(Clip::Search),
        WeightRounding::Search | WeightRounding::Imatrix => Method::Rtn(Clip::Scales),
        // Inside the grids llama-quantize's search would choose.
        WeightRounding::Gptq => Method::Gptq(GptqOptions {
            block_search: true,
            ..o.study.gptq
        }),
    };
    let plan = Plan::of_types(method, &types);
    let ids = if calibrated {
        job.calibration(&loaded.tokenizer)?
    } else {
        Vec::new()
    };
    let n_layer = w.layers.len();
    let mut progress = |done: usize| on_layer(done, n_layer);
    let text_sha256 = if calibrated {
        sha256_hex(&text_bytes(job.first_text())?)
    } else {
        String::new()
    };
    let mut calibration_file = "none";
    let (q, t_cal, t_q) = if o.sequential {
        let q = quantize_sequential(
            &mut w,
            &plan,
            down.clone(),
            &ids,
            o.study.context,
            &mut progress,
        )?;
        (q, 0.0, t0.elapsed().as_secs_f64())
    } else if let Some(path) = &job.calibration {
        let key = CalibrationKey {
            model_sha256: weights_sha256(&w),
            rotation: format!("{} (seed {})", set.label(), o.seed[0]),
            text_sha256: text_sha256.clone(),
            tokens_sha256: ids_sha256(&ids),
            tokens: ids.len(),
            window: o.study.context,
        };
        if path.exists() {
            calibration_file = "read";
            let f = CalibrationFile::open(path, &w.cfg, &key)?;
            let t_cal = t0.elapsed().as_secs_f64();
            let t1 = Instant::now();
            let q = quantize_model_by_layer(
                &mut w,
                &plan,
                true,
                &mut |l| f.layer(l).map(Some),
                &mut progress,
            )?;
            (q, t_cal, t1.elapsed().as_secs_f64())
        } else {
            calibration_file = "written";
            let hs = calibrate(&w, down.clone(), &ids, o.study.context)?;
            calibration_file::write(path, &hs, w.layers.len(), &key)?;
            let t_cal = t0.elapsed().as_secs_f64();
            let t1 = Instant::now();
            let q = quantize_model(&mut w, &plan, Some(&hs), &mut progress)?;
            (q, t_cal, t1.elapsed().as_secs_f64())
        }
    } else {
        let hessians = if calibrated {
            Some(calibrate(&w, down.clone(), &ids, o.study.context)?)
        } else {
            None
        };
        let t_cal = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        let q = quantize_model(&mut w, &plan, hessians.as_ref(), &mut progress)?;
        (q, t_cal, t1.elapsed().as_secs_f64())
    };
    let c = &w.cfg;
    let (c_vocab, c_model) = (c.vocab_size, c.d_model);
    let per_matrix = layer_cols(c).map(|k| k * c.d_model);
    let ftype = mix::llama_ftype(ft, types.dominant(per_matrix));
    let signs = down.as_ref().and_then(|h| h.signs());
    let provenance = Provenance {
        gguf_type: ft.name().to_string(),
        method: method_name(&method, rounding),
        rotation: set.label(),
        rotation_kind: format!("{:?}", set.residual).to_lowercase(),
        rotation_seed: (set.residual.kind().is_some() || set.heads || set.down)
            .then_some(o.seed[0]),
        sequential: o.sequential,
        calibration: if ids.is_empty() {
            None
        } else {
            let text = job.first_text();
            Some(CalibrationRecord {
                text: text
                    .and_then(|p| p.file_name())
                    .map_or_else(|| text_name(None), |n| n.to_string_lossy().into_owned()),
                text_sha256: text_sha256.clone(),
                ids: ids.clone(),
            })
        },
    };
    let mut meta = meta;
    provenance.record(&mut meta);
    let staged = Staged::new(out)?;
    save_quantized_gguf(&w, &q, ftype, &meta, signs, staged.path())?;
    // The file, run by the engine as a user would (its R4 read back from the file), against
    // the model in memory.
    let mut mem = Llama::new(w);
    mem.down_hadamard = down;
    let (diff, same, diff_scale) = {
        let g = GgufFile::open(staged.path())?;
        // The tokenizer as a reader builds it from the file: the source's, token for token.
        let written = crate::model::llama::tokenizer::tokenizer_from_gguf(&g)?;
        if let Some(why) =
            crate::model::llama::gguf_vocab_check::difference(&loaded.tokenizer, &written, "")
        {
            return Err(invalid(format!(
                "the GGUF tokenizer written for {} differs from the model's ({why}): nothing \
                 written (a converter bug; please report it with the model's tokenizer.json)",
                out.display()
            )));
        }
        let mut file = Llama::from_gguf(&g)?;
        compare_logits(&mut mem, &mut file, &eval)?
    };
    let bytes = std::fs::metadata(staged.path()).map_or(0, |m| m.len());
    let head_bytes = types
        .head
        .and_then(|f| f.ggml_type())
        .and_then(|t| t.byte_size((c_vocab * c_model) as u64))
        .unwrap_or(0);
    // An error or a failed check drops `staged`, which removes the file.
    if diff.is_nan() || diff > FILE_TOLERANCE * diff_scale {
        return Err(invalid(format!(
            "the written file's logits differ from the quantised model's by {diff:.3e} (more \
             than {:.1e}): nothing written to {} (a writer or engine bug; please report it)",
            FILE_TOLERANCE * diff_scale,
            out.display()
        )));
    }
    staged.commit()?;
    let llama_cpp = if set.down {
        "no: the file holds R4's online Hadamard signs (blk.*.ffn_down_signs), which llama.cpp \
         does not apply; it refuses the extra tensors (\"wrong number of tensors\"). Run it \
         with orthoformer eval/generate, or quantise without --online-hadamard"
            .to_string()
    } else {
        "yes".to_string()
    };
    Ok(QuantizeFileReport {
        model: job.model.display().to_string(),
        out: out.display().to_string(),
        method: method_name(&method, rounding),
        gguf_type: ft.name().to_string(),
        file_type: ftype_name(ftype).to_string(),
        types: types.counts(),
        fallbacks: types.fallbacks.clone(),
        overridden: types.overridden.clone(),
        rotate: set.label(),
        online_hadamard: set.down,
        head_untied,
        head_bytes,
        llama_cpp,
        qk_hadamard_at_run_time: o.rotations.qk,
        bytes,
        calibration_tokens: ids.len(),
        calibration_text: if ids.is_empty() {
            "none".into()
        } else {
            format!(
                "the last {} tokens of {}",
                ids.len(),
                crate::infer::text::text_name(job.first_text())
            )
        },
        sequential: o.sequential,
        calibration_file: calibration_file.to_string(),
        gptq_loss: matches!(method, Method::Gptq(_)).then_some(q.gptq_loss),
        seconds_calibrate: t_cal,
        seconds_quantize: t_q,
        check_tokens: eval.len(),
        max_abs_logit_diff_file: diff,
        greedy_same: same,
    })
}

/// llama.cpp's name of a `llama_ftype`.
fn ftype_name(t: u32) -> &'static str {
    match t {
        2 => "MOSTLY_Q4_0",
        3 => "MOSTLY_Q4_1",
        7 => "MOSTLY_Q8_0",
        8 => "MOSTLY_Q5_0",
        9 => "MOSTLY_Q5_1",
        14 => "MOSTLY_Q4_K_S",
        15 => "MOSTLY_Q4_K_M",
        16 => "MOSTLY_Q5_K_S",
        17 => "MOSTLY_Q5_K_M",
        18 => "MOSTLY_Q6_K",
        25 => "MOSTLY_IQ4_NL",
        30 => "MOSTLY_IQ4_XS",
        _ => "unknown",
    }
}

/// max |Δlogit| over the logits of `ids` (NaN when either holds a value that is not finite:
/// such a file is never accepted), whether every argmax agrees, and the scale of the
/// tolerance (the largest |logit| of `a`, at least 1).
fn compare_logits(a: &mut Llama, b: &mut Llama, ids: &[u32]) -> crate::Result<(f64, bool, f64)> {
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
    // Not `f64::max`, which skips NaN: a NaN difference must stay NaN, and an infinite one
    // (whose tolerance could be infinite too) becomes NaN: either fails the check.
    let diff = Some(crate::io::finite::max_abs_diff(&la, &lb))
        .filter(|d| d.is_finite())
        .unwrap_or(f64::NAN);
    let scale = la.iter().fold(1.0, |m, x| {
        crate::io::finite::nan_max(m, f64::from(x.abs()))
    });
    Ok((diff, same, scale))
}

/// The method as the report names it: `rtn`, `rtn+clip`, `search`, `imatrix` or `gptq` with
/// its settings.
fn method_name(method: &Method, rounding: WeightRounding) -> String {
    match method {
        Method::Rtn(Clip::None) => "rtn".into(),
        Method::Rtn(Clip::Search) => "rtn+clip".into(),
        Method::Rtn(Clip::Scales) if rounding == WeightRounding::Imatrix => {
            "imatrix (llama.cpp's block-scale search weighted by calibration)".into()
        }
        Method::Rtn(Clip::Scales) => "search (llama.cpp's block-scale search)".into(),
        Method::Gptq(o) => format!(
            "gptq (damp {}, act-order {}, llama.cpp's searched block grids)",
            o.damp, o.act_order
        ),
    }
}
