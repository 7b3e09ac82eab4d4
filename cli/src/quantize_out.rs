//! `orthoformer quantize --out model.gguf`: rotate (optionally), calibrate, quantise by RTN or
//! GPTQ onto a GGUF block format, and write the file llama.cpp and this tool's engine run.
//! The file is then loaded back through the engine (memory-mapped, in its stored types) and
//! its logits compared with the in-memory quantised model's.

use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use serde::Serialize;

use super::Outcome;
use super::common::print_json;
use super::quantize::{GgufOut, QuantizeArgs};
use crate::output::outln;
use orthoformer::model::llama::{Llama, load_model};
use orthoformer::quant::calibrate::calibrate;
use orthoformer::quant::model::{self as qm, Plan, quantize_model};
use orthoformer::quant::write::save_quantized_gguf;
use orthoformer::quant::{Clip, Format, GptqOptions};
use orthoformer::rotate::quant_study::WeightRounding;
use orthoformer::rotate::set::{RotationSet, apply_offline};

#[derive(Serialize)]
struct Report {
    model: String,
    out: String,
    method: String,
    gguf_type: String,
    rotate: String,
    bytes: u64,
    calibration_tokens: usize,
    gptq_loss: Option<f64>,
    seconds_calibrate: f64,
    seconds_quantize: f64,
    /// max |Δlogit| between the in-memory quantised model and the written file run by the
    /// engine, on the first tokens of the evaluation text.
    max_abs_logit_diff_file: f64,
    greedy_same: bool,
}

/// The block format and its grid for `t`.
fn format_of(t: GgufOut) -> Format {
    match t {
        GgufOut::Q8_0 => Format::Q8_0,
        GgufOut::Q4_0 => Format::Q4_0,
        GgufOut::Q4_1 => Format::Q4_1,
        GgufOut::Q4K => Format::Q4K,
    }
}

/// Checks the flags an `--out` run cannot take, before anything is loaded.
pub fn check_flags(a: &QuantizeArgs, t: GgufOut) -> anyhow::Result<()> {
    let f = format_of(t);
    if a.table {
        anyhow::bail!("--table runs the study and writes nothing; drop --out or --table");
    }
    if a.runtime.any() || a.kv_bits != 16 || a.kv_group != 0 {
        anyhow::bail!(
            "--abits, --act-clip, --act-asym, --qk-hadamard and --kv-bits act at run time, not in \
             the file: drop them with --out and pass them (--kv-cache q8|q4 for the cache) to \
             eval or generate"
        );
    }
    if a.seed.len() != 1 || a.methods().len() != 1 {
        anyhow::bail!("--out writes one file: give one --seed and one --method");
    }
    if a.wbits != 16 && a.wbits != f.bits() {
        anyhow::bail!(
            "--wbits {} does not match --gguf-type {t:?} ({}-bit); pass --wbits {} or leave it out",
            a.wbits,
            f.bits(),
            f.bits()
        );
    }
    if a.group != 0 && a.group != 32 {
        anyhow::bail!(
            "--group {}: GGUF {t:?} stores one scale per 32 weights (Q4_K: per 32 in super-blocks of 256); pass --group 32 or leave it out",
            a.group
        );
    }
    if !(a.damp.is_finite() && (0.0..=1.0).contains(&a.damp)) {
        anyhow::bail!(
            "--damp {} must be a number from 0 to 1 (a fraction of the mean Hessian diagonal)",
            a.damp
        );
    }
    if a.calib_tokens < 16 {
        anyhow::bail!("--calib-tokens {} must be at least 16", a.calib_tokens);
    }
    if let Some(p) = a.out.as_deref()
        && p.extension().is_none_or(|e| e != "gguf")
    {
        anyhow::bail!(
            "--out {}: a quantised model is written as a .gguf file; name it *.gguf",
            p.display()
        );
    }
    Ok(())
}

/// The last `n` tokens (about) of the calibration text: disjoint from the first tokens that
/// perplexity is measured on when the same text serves both.
pub fn calibration_tokens(
    tok: &orthoformer::data::Tokenizer,
    data: Option<&Path>,
    n: usize,
) -> anyhow::Result<Vec<u32>> {
    let file;
    let bytes: &[u8] = match data {
        Some(p) => {
            file = orthoformer::io::safe_file::read_regular(p)
                .with_context(|| format!("reading --data {}", p.display()))?;
            &file
        }
        None => orthoformer::data::corpus::TINY_SHAKESPEARE.as_bytes(),
    };
    let cut = bytes.len().saturating_sub(n.saturating_mul(8));
    let text = String::from_utf8_lossy(&bytes[cut..]);
    let ids = tok.encode(&text)?;
    let ids = ids[ids.len().saturating_sub(n)..].to_vec();
    if ids.len() < 16 {
        anyhow::bail!("the calibration text has fewer than 16 tokens; pass a longer --data");
    }
    Ok(ids)
}

/// Runs `quantize --out`.
pub fn run(a: &QuantizeArgs, out: &Path, t: GgufOut) -> anyhow::Result<Outcome> {
    check_flags(a, t)?;
    let format = format_of(t);
    let loaded = load_model(&a.model).context("loading the model")?;
    let meta = loaded.gguf_metadata.as_deref().ok_or_else(|| {
        anyhow::anyhow!(
            "--out writes a GGUF and needs the tokenizer metadata of a GGUF --model; {} is not one",
            a.model.display()
        )
    })?;
    let data = a.data.first().map(|p| p.as_path());
    let eval = orthoformer::infer::text::read_tokens(&loaded.tokenizer, data, 64)?;
    let mut w = loaded.weights.clone();
    // R3 acts at run time only; R1, R2 and R4 are folded into the file.
    let set = RotationSet {
        qk: false,
        ..a.rotations()
    };
    let down = apply_offline(&mut w, &set, a.seed[0])?;
    let t0 = Instant::now();
    let method = match a.methods()[0] {
        WeightRounding::Rtn => qm::Method::Rtn(Clip::None),
        WeightRounding::RtnClip => qm::Method::Rtn(Clip::Search),
        WeightRounding::Gptq => qm::Method::Gptq(GptqOptions {
            damp: a.damp,
            act_order: !a.no_act_order,
        }),
    };
    let needs_calib = method != qm::Method::Rtn(Clip::None);
    let (hessians, ncal) = if needs_calib {
        let ids = calibration_tokens(&loaded.tokenizer, data, a.calib_tokens)?;
        (
            Some(calibrate(&w, down.clone(), &ids, a.context)?),
            ids.len(),
        )
    } else {
        (None, 0)
    };
    let t_cal = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let plan = Plan {
        method,
        format,
        fallback: (format == Format::Q4K).then_some(Format::Q4_1),
        embed_format: Some(Format::Q8_0),
    };
    let q = quantize_model(&mut w, &plan, hessians.as_ref(), &mut |_| {})?;
    drop(hessians);
    let t_q = t1.elapsed().as_secs_f64();
    let signs = down.as_ref().and_then(|h| h.signs());
    save_quantized_gguf(&w, &q, format, meta, signs, out)
        .with_context(|| format!("writing {}", out.display()))?;
    // The file, run by the engine as a user would (its R4 read back from the file), against
    // the in-memory model.
    let mut mem = Llama::new(w);
    mem.down_hadamard = down;
    let opened = orthoformer::io::gguf::GgufFile::open(out)
        .and_then(|g| Llama::from_gguf(&g).map(|m| (g, m)));
    let (diff, same) = match opened {
        Ok((_g, mut file)) => compare(&mut mem, &mut file, &eval)?,
        Err(e) => {
            return Err(anyhow::Error::from(e))
                .with_context(|| format!("running the written file {}", out.display()));
        }
    };
    let report = Report {
        model: a.model.display().to_string(),
        out: out.display().to_string(),
        method: method_name(&method),
        gguf_type: format!("{t:?}"),
        rotate: set.label(),
        bytes: std::fs::metadata(out).map(|m| m.len()).unwrap_or(0),
        calibration_tokens: ncal,
        gptq_loss: matches!(method, qm::Method::Gptq(_)).then_some(q.gptq_loss),
        seconds_calibrate: t_cal,
        seconds_quantize: t_q,
        max_abs_logit_diff_file: diff,
        greedy_same: same,
    };
    if a.json {
        print_json(&report)?;
    } else {
        outln!(
            "wrote {} ({} bytes, {t:?}, {}, rotations {})",
            report.out,
            report.bytes,
            report.method,
            report.rotate
        )?;
        if set.down {
            outln!(
                "down_proj expects the online Hadamard (R4) this engine applies: run the file \
                 with eval or generate (llama.cpp refuses it)"
            )?;
        }
        if a.rotations().qk {
            outln!(
                "R3 acts at run time: pass --qk-hadamard (with --kv-cache q8|q4) to eval or generate"
            )?;
        }
        outln!(
            "embedding and lm_head: Q8_0; calibration tokens: {ncal}; time: calibrate {t_cal:.1} s, quantise {t_q:.1} s"
        )?;
        outln!(
            "the file run by the engine vs the in-memory model: max |Δlogit| {diff:.3e} on {} tokens, same greedy tokens: {same}",
            eval.len()
        )?;
    }
    Ok(Outcome::Success)
}

/// max |Δlogit| over the logits of `ids`, and whether every argmax agrees.
fn compare(a: &mut Llama, b: &mut Llama, ids: &[u32]) -> anyhow::Result<(f64, bool)> {
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
