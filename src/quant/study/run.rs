//! Running the quantisation study: every configuration's perplexity on every text, for each
//! rotation seed, through the engine. Work is shared where the configurations share it: per
//! rotation set and seed, the model is rotated and calibrated once (GPTQ's and the clipping
//! search's Hessians of every linear input, with `R4` online); per weight width and method,
//! the weights are rounded once and every activation/KV setting then runs on them.

use super::config::{QuantConfig, RotationSet, StudySettings, WeightRounding, configure};
use super::report::{QuantRow, QuantStatsRow};
use crate::infer::eval::{EvalOptions, evaluate};
use crate::model::llama::{Llama, LlamaWeights};
use crate::nn::hadamard_rows::OnlineHadamard;
use crate::quant::act_stats::ActStats;
use crate::quant::hessian::Hessians;
use crate::quant::model::{Method, Plan, quantize_model};
use crate::quant::{Clip, Format};
use crate::rotate::set::apply_offline;

/// One text the study is measured on.
pub struct StudyText<'a> {
    /// Name in the report (a file name, or the embedded corpus's).
    pub name: String,
    /// Its token ids.
    pub tokens: &'a [u32],
}

/// The seeds configuration `c` runs with: every one of `seeds` when it is rotated, else the
/// first.
pub fn seeds_of<'s>(c: &QuantConfig, seeds: &'s [u64]) -> &'s [u64] {
    if c.is_seeded() {
        seeds
    } else {
        &seeds[..seeds.len().min(1)]
    }
}

/// Tokens [`run_study`] scores in all: every text once per configuration and seed.
pub fn study_tokens(configs: &[QuantConfig], texts: &[StudyText<'_>], seeds: &[u64]) -> usize {
    let per: usize = texts.iter().map(|t| t.tokens.len().saturating_sub(1)).sum();
    configs.iter().map(|c| seeds_of(c, seeds).len() * per).sum()
}

/// The weights a configuration runs on: its width and rounding (one for every unquantised
/// configuration).
fn weight_key(c: &QuantConfig) -> (u32, WeightRounding) {
    if c.wbits >= 16 {
        (16, WeightRounding::Rtn)
    } else {
        (c.wbits, c.method)
    }
}

/// `rotated` (with `R4` online as `down`) rounded to `wbits` by `method`, symmetric unless
/// `s.weight_asym`, one grid per output channel or per `s.group` inputs, GPTQ with `s.gptq`.
fn quantised(
    rotated: &LlamaWeights,
    down: Option<OnlineHadamard>,
    (wbits, method): (u32, WeightRounding),
    s: StudySettings,
    hessians: Option<&Hessians>,
) -> crate::Result<Llama> {
    let mut w = rotated.clone();
    if wbits < 16 {
        let method = match method {
            WeightRounding::Rtn => Method::Rtn(Clip::None),
            WeightRounding::RtnClip => Method::Rtn(Clip::Search),
            WeightRounding::Gptq => Method::Gptq(s.gptq),
            // Refused by the options' validation: the study's grids have no block search.
            WeightRounding::Search | WeightRounding::Imatrix => Method::Rtn(Clip::Scales),
        };
        let format = Format::Affine {
            bits: wbits,
            group: s.group,
            symmetric: !s.weight_asym,
        };
        let plan = Plan::uniform(method, format, w.layers.len(), None);
        quantize_model(&mut w, &plan, hessians, &mut |_| {})?;
    }
    let mut m = Llama::new(w);
    m.down_hadamard = down;
    Ok(m)
}

/// Perplexity of every configuration on every text, for each seed of a rotated configuration
/// (mean, least and greatest), with the activation statistics of the unquantised
/// configurations (first seed). `calib` calibrates GPTQ and the clipping search (unused by
/// plain RTN). `on_tokens` receives the number of tokens scored so far. Rows come back in
/// the order of `configs`.
pub fn run_study(
    base: &LlamaWeights,
    configs: &[QuantConfig],
    texts: &[StudyText<'_>],
    s: StudySettings,
    seeds: &[u64],
    calib: &[u32],
    on_tokens: &mut dyn FnMut(usize),
) -> crate::Result<(Vec<QuantRow>, Vec<QuantStatsRow>)> {
    if seeds.is_empty() {
        return Err(crate::quant::QuantError::Invalid("`seed`: give at least one".into()).into());
    }
    let options = EvalOptions::sliding(s.context);
    let mut by_seed: Vec<Vec<(u64, Vec<f64>)>> = vec![Vec::new(); configs.len()];
    let mut stats = Vec::new();
    let mut done = 0usize;
    let mut sets: Vec<RotationSet> = Vec::new();
    for c in configs {
        if !sets.contains(&c.rotations) {
            sets.push(c.rotations);
        }
    }
    for set in sets {
        let idx: Vec<usize> = (0..configs.len())
            .filter(|&i| configs[i].rotations == set)
            .collect();
        let mut keys: Vec<(u32, WeightRounding)> = Vec::new();
        for &i in &idx {
            if !keys.contains(&weight_key(&configs[i])) {
                keys.push(weight_key(&configs[i]));
            }
        }
        let calibrates = idx.iter().any(|&i| configs[i].calibrates());
        for (k, &seed) in seeds_of(&configs[idx[0]], seeds).iter().enumerate() {
            let mut rotated = base.clone();
            let down = apply_offline(&mut rotated, &set, seed)?;
            // Calibration on the model as it will run: rotated, with the online transform.
            let hs = if calibrates {
                Some(crate::quant::calibrate::calibrate(
                    &rotated,
                    down.clone(),
                    calib,
                    s.context,
                )?)
            } else {
                None
            };
            for &key in &keys {
                let mut model = quantised(&rotated, down.clone(), key, s, hs.as_ref())?;
                for &i in idx.iter().filter(|&&i| weight_key(&configs[i]) == key) {
                    configure(&mut model, &configs[i], s)?;
                    let want_stats = configs[i].is_full_precision() && k == 0;
                    let mut score = Scoring {
                        options: &options,
                        done: &mut done,
                        on_tokens: &mut *on_tokens,
                    };
                    let ppl =
                        score.texts(&mut model, &configs[i], texts, want_stats, &mut stats)?;
                    by_seed[i].push((seed, ppl));
                }
            }
        }
    }
    let rows = configs
        .iter()
        .zip(by_seed)
        .map(|(c, b)| QuantRow::new(c, b))
        .collect();
    Ok((rows, stats))
}

/// Scores texts, counting the tokens scored across calls.
struct Scoring<'a> {
    options: &'a EvalOptions,
    done: &'a mut usize,
    on_tokens: &'a mut dyn FnMut(usize),
}

impl Scoring<'_> {
    /// The perplexity of `model` (configured as `c`) on every text, with its activation
    /// statistics pushed to `stats` when `want_stats`.
    fn texts(
        &mut self,
        model: &mut Llama,
        c: &QuantConfig,
        texts: &[StudyText<'_>],
        want_stats: bool,
        stats: &mut Vec<QuantStatsRow>,
    ) -> crate::Result<Vec<f64>> {
        let mut ppl = Vec::new();
        for text in texts {
            if want_stats {
                model.set_tap(ActStats::default());
            }
            let before = *self.done;
            let on = &mut *self.on_tokens;
            let p = evaluate(model, text.tokens, self.options, &mut |n| on(before + n))?;
            *self.done += text.tokens.len().saturating_sub(1);
            // A finite but huge loss (a quantised model losing the text) is a result; NaN, or
            // a full-precision loss that is not finite, is a broken model.
            if p.loss.is_nan() || (c.is_full_precision() && !p.loss.is_finite()) {
                let msg = format!(
                    "{}: the loss on {} is {} (NaN or infinite weights, or logits that overflow)",
                    c.name, text.name, p.loss
                );
                return Err(crate::quant::QuantError::Invalid(msg).into());
            }
            ppl.push(p.perplexity);
            if let Some(st) = model.take_tap::<ActStats>() {
                stats.push(QuantStatsRow {
                    rotations: c.rotations,
                    data: text.name.clone(),
                    stats: st,
                });
            }
        }
        Ok(ppl)
    }
}
