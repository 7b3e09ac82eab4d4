//! `orthoformer align --weights` as one library operation: the exact symmetries (residual
//! rotation; optionally per-head value rotations and FFN unit permutations) that bring model
//! B's weights closest to model A's ([`super::weight_fit`]), applied to B through the
//! invariance, so the aligned B computes what B computes: checked on a text, as
//! `rotate --check` does, before anything is written. Both models have their RMSNorm weights
//! folded first (a rotation only commutes with a norm of constant weight).
//!
//! The fits alternate (residual, then heads, then FFN units, each given the others) until a
//! round gains less than one part in 10⁹, at most `iterations` rounds; the residual rotation
//! alone is one closed-form fit.

use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;

use super::check::{Comparison, compare_models};
use super::heads::{HeadShape, rotate_value_head};
use super::job::check_tokens;
use super::options::WeightAlignOptions;
use super::out_path::claim_outs_of;
use super::out_path::is_gguf;
use super::outputs::{Source, check_f16_range, check_staged, stage};
use super::weight_fit::{
    ffn_permutation, permute_ffn, relative_distance, residual_map, value_head_rotation,
};
use super::{RotateError, Rotation, fold_norms, rotate_weights};
use crate::io::gguf::GgmlType;
use crate::model::llama::gguf_vocab::source_metadata;
use crate::model::llama::{Llama, LlamaConfig, LlamaWeights, load_model};

/// The two models, where to write the aligned B, and the options.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WeightAlignJob {
    /// Model A, the reference (`.gguf` or Hugging Face folder).
    pub model: PathBuf,
    /// Model B, of the same architecture: the one moved.
    pub model_b: PathBuf,
    /// Where to write the aligned B: `.gguf` is a GGUF file, anything else a Hugging Face
    /// folder. Empty: only the distances are reported.
    pub out: Vec<PathBuf>,
    /// The text of the logit check (`None`: the embedded TinyShakespeare).
    pub data: Option<PathBuf>,
    /// What is fitted, and the check.
    pub options: WeightAlignOptions,
}

/// One fit of [`run`] and the distance after it.
#[derive(Clone, Debug, Serialize)]
pub struct AlignStep {
    /// Alternating round, from 1.
    pub round: usize,
    /// `residual`, `heads` or `ffn`.
    pub fit: &'static str,
    /// `‖A − B‖_F / ‖A‖_F` after it.
    pub distance: f64,
}

/// What [`run`] found and wrote.
#[derive(Clone, Debug, Serialize)]
pub struct WeightAlignReport {
    /// Model A, as given.
    pub model_a: String,
    /// Model B, as given.
    pub model_b: String,
    /// The width `C`.
    pub width: usize,
    /// The residual stream's map.
    pub residual: super::options::ResidualFit,
    /// Whether per-head value rotations were fitted.
    pub heads: bool,
    /// Whether FFN units were permuted.
    pub permute_ffn: bool,
    /// `‖A − B‖_F / ‖A‖_F` of the folded models as loaded (the identity map).
    pub distance_before: f64,
    /// The same after alignment.
    pub distance_after: f64,
    /// Every fit in order.
    pub steps: Vec<AlignStep>,
    /// `‖R − Qᵀ‖_F / √C` of the fitted residual rotation against the inverse of the true
    /// one, when given.
    pub distance_to_true_inverse: Option<f64>,
    /// `max |R − Qᵀ|`, when given.
    pub max_abs_diff_to_true_inverse: Option<f64>,
    /// B tied its head and folding its non-constant final norm untied it.
    pub lm_head_untied_by_fold: bool,
    /// The paths written (none when the check failed).
    pub outputs: Vec<String>,
    /// Seconds loading both models.
    pub seconds_load: f64,
    /// Seconds folding and fitting.
    pub seconds_fit: f64,
    /// The aligned B against B as loaded.
    pub check: Comparison,
    /// Whether max |Δlogit| stayed within the tolerance.
    pub check_passed: bool,
}

/// What [`run`] is doing when it reports progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlignPhase {
    /// Fitting (units: residual fits, layers of head and FFN fits).
    Fit,
    /// The logit check (units: tokens scored).
    Check,
}

fn invalid(msg: String) -> crate::Error {
    crate::Error::Rotate(RotateError::Invalid(msg))
}

/// Checks the job's own values, before any file is read.
pub fn validate(job: &WeightAlignJob) -> crate::Result<()> {
    let o = &job.options;
    if o.iterations == 0 {
        return Err(invalid("`iterations` must be at least 1".into()));
    }
    if !matches!(o.gguf_type, GgmlType::F32 | GgmlType::F16) {
        return Err(invalid(format!(
            "`gguf_type` {:?}: an aligned model is written as f32 or f16",
            o.gguf_type
        )));
    }
    super::job::validate_check(o.tolerance, o.check_tokens, o.context)
}

/// Refuses two models whose shapes differ, naming the first field that does.
fn same_architecture(a: &LlamaConfig, b: &LlamaConfig) -> crate::Result<()> {
    let fields = [
        ("width", a.d_model, b.d_model),
        ("layers", a.n_layer, b.n_layer),
        ("attention heads", a.n_head, b.n_head),
        ("key/value heads", a.n_kv_head, b.n_kv_head),
        ("head size", a.head_dim(), b.head_dim()),
        ("FFN width", a.d_ff, b.d_ff),
        ("vocabulary", a.vocab_size, b.vocab_size),
    ];
    for (what, x, y) in fields {
        if x != y {
            return Err(invalid(format!(
                "`model_b` has {what} {y} where `model` has {x}: weight alignment needs two \
                 models of the same architecture"
            )));
        }
    }
    if a.family != b.family {
        return Err(invalid(format!(
            "`model_b` is a {:?} model and `model` a {:?} one: weight alignment needs the same \
             architecture",
            b.family, a.family
        )));
    }
    Ok(())
}

/// Aligns model B's weights to model A's as `job` says. Every input, `out` included, is
/// checked before either model is loaded; outputs are written staged, read back and run
/// against B as loaded, and moved into place only when the check passes.
pub fn run(
    job: &WeightAlignJob,
    progress: &mut dyn FnMut(AlignPhase, usize, usize),
) -> crate::Result<WeightAlignReport> {
    validate(job)?;
    let o = &job.options;
    let mut inputs = vec![("model", job.model.as_path()), ("model_b", &job.model_b)];
    inputs.extend(job.data.as_deref().map(|d| ("data", d)));
    let _claim = claim_outs_of(&inputs, &job.out)?;
    super::memory_need::check_align_weights(&job.model, &job.model_b, &job.out)?;
    let t0 = Instant::now();
    let loaded_a = load_model(&job.model)?;
    let loaded_b = load_model(&job.model_b)?;
    same_architecture(&loaded_a.weights.cfg, &loaded_b.weights.cfg)?;
    if let Some(why) = loaded_a.tokenizer.difference(&loaded_b.tokenizer) {
        return Err(invalid(format!(
            "`model_b`'s tokenizer differs from `model`'s ({why}): weight alignment needs two \
             models of the same tokenizer"
        )));
    }
    let seconds_load = t0.elapsed().as_secs_f64();
    let gguf_metadata = if job.out.iter().any(|p| is_gguf(p)) {
        source_metadata(&job.model_b, &loaded_b)?
    } else {
        Vec::new()
    };
    let (ids, window) = check_tokens(&loaded_b, job.data.as_deref(), o.context, o.check_tokens)?;
    let c = loaded_a.weights.cfg.d_model;
    let true_q = match o.true_rotation {
        Some(kind) => Some(Rotation::of_kind(kind, c, o.seed)?.dense()),
        None => None,
    };
    let t1 = Instant::now();
    let mut a = loaded_a.weights;
    fold_norms(&mut a);
    let mut b = loaded_b.weights.clone();
    let was_tied = b.lm_head.is_none();
    fold_norms(&mut b);
    let untied = was_tied && b.lm_head.is_some();
    let distance_before = relative_distance(&a, &b);
    let (steps, r) = fit(&a, &mut b, o, progress)?;
    drop(a);
    let seconds_fit = t1.elapsed().as_secs_f64();
    let (dist_q, max_q) = match &true_q {
        // The fit undoes B = A·Q, so it should be Qᵀ: compare R[i][j] with Q[j][i].
        Some(q) => {
            let (mut sq, mut most) = (0.0f64, 0.0f64);
            for i in 0..c {
                for j in 0..c {
                    let d = (r[i * c + j] - q[j * c + i]).abs();
                    sq += d * d;
                    most = crate::io::finite::nan_max(most, d);
                }
            }
            (Some((sq / c as f64).sqrt()), Some(most))
        }
        None => (None, None),
    };
    if o.gguf_type == GgmlType::F16 && job.out.iter().any(|p| is_gguf(p)) {
        check_f16_range(&b)?;
    }
    let source = Source {
        weights: &b,
        tokenizer: &loaded_b.tokenizer,
        special: &loaded_b.special,
        gguf_metadata: &gguf_metadata,
    };
    let staged = stage(&job.out, &source, o.gguf_type)?;
    let mut original = Llama::new(loaded_b.weights);
    let mut on_check = |n: usize, total: usize| progress(AlignPhase::Check, n, total);
    let check = if staged.is_empty() {
        let total = 2 * (ids.len() - 1);
        let mut aligned = Llama::new(b);
        compare_models(&mut original, &mut aligned, &ids, window, &mut |n| {
            on_check(n, total)
        })?
    } else {
        drop(b);
        check_staged(&mut original, &staged, &ids, window, &mut on_check)?
    };
    let check_passed = check.max_abs_logit_diff <= o.tolerance;
    let mut outputs = Vec::new();
    if check_passed {
        for (st, out) in staged.into_iter().zip(&job.out) {
            st.commit()?;
            outputs.push(out.display().to_string());
        }
    }
    Ok(WeightAlignReport {
        model_a: job.model.display().to_string(),
        model_b: job.model_b.display().to_string(),
        width: c,
        residual: o.residual,
        heads: o.heads,
        permute_ffn: o.permute_ffn,
        distance_before,
        distance_after: steps.last().map_or(distance_before, |s| s.distance),
        steps,
        distance_to_true_inverse: dist_q,
        max_abs_diff_to_true_inverse: max_q,
        lm_head_untied_by_fold: untied,
        outputs,
        seconds_load,
        seconds_fit,
        check,
        check_passed,
    })
}

/// The alternating fits of `b` (moved in place) to `a`, both folded; returns every step and
/// the composed residual rotation (`C x C`, row-major).
fn fit(
    a: &LlamaWeights,
    b: &mut LlamaWeights,
    o: &WeightAlignOptions,
    progress: &mut dyn FnMut(AlignPhase, usize, usize),
) -> crate::Result<(Vec<AlignStep>, Vec<f64>)> {
    let c = a.cfg.d_model;
    let layers = a.cfg.n_layer;
    let alternating = o.heads || o.permute_ffn;
    let rounds = if alternating { o.iterations } else { 1 };
    let per_round = 1 + layers * (usize::from(o.heads) + usize::from(o.permute_ffn));
    let total = rounds * per_round;
    let mut r_total: Vec<f64> = (0..c * c)
        .map(|i| if i / c == i % c { 1.0 } else { 0.0 })
        .collect();
    let mut steps = Vec::new();
    let mut last = relative_distance(a, b);
    for round in 1..=rounds {
        let done = (round - 1) * per_round;
        progress(AlignPhase::Fit, done, total);
        let r = residual_map(a, b, o.residual)?;
        rotate_weights(b, &Rotation::Dense { n: c, q: r.clone() })?;
        let prev = r_total.clone();
        crate::nn::matmul_f64::matmul_f64(&mut r_total, &prev, &r, c, c, c);
        let step = |fit: &'static str, b: &LlamaWeights| AlignStep {
            round,
            fit,
            distance: relative_distance(a, b),
        };
        steps.push(step("residual", b));
        progress(AlignPhase::Fit, done + 1, total);
        if o.heads {
            let shape = HeadShape::of(&a.cfg);
            for (l, (la, lb)) in a.layers.iter().zip(b.layers.iter_mut()).enumerate() {
                for g in 0..shape.nkv {
                    let s = value_head_rotation(la, lb, &shape, g)?;
                    rotate_value_head(lb, &shape, g, &s);
                }
                progress(AlignPhase::Fit, done + 1 + l + 1, total);
            }
            steps.push(step("heads", b));
        }
        if o.permute_ffn {
            let base = done + 1 + if o.heads { layers } else { 0 };
            for (l, (la, lb)) in a.layers.iter().zip(b.layers.iter_mut()).enumerate() {
                let perm = ffn_permutation(la, lb, c, a.cfg.d_ff);
                permute_ffn(lb, &perm, c);
                progress(AlignPhase::Fit, base + l + 1, total);
            }
            steps.push(step("ffn", b));
        }
        let now = steps.last().map_or(last, |s| s.distance);
        if !alternating || last - now <= 1e-9 * last {
            break;
        }
        last = now;
    }
    progress(AlignPhase::Fit, total, total);
    Ok((steps, r_total))
}

impl crate::io::table::Report for WeightAlignReport {
    fn blocks(&self) -> Vec<crate::io::table::Block> {
        let mut fits = vec![match self.residual {
            super::options::ResidualFit::Rotation => "the residual stream (rotation)",
            super::options::ResidualFit::Permutation => "the residual stream (permutation)",
        }];
        if self.heads {
            fits.push("each value head");
        }
        if self.permute_ffn {
            fits.push("each layer's FFN units (permutation)");
        }
        let mut lines = vec![
            format!(
                "aligned {} to {} (width {}): fitted {}, both models' RMSNorm weights folded",
                self.model_b,
                self.model_a,
                self.width,
                fits.join(", ")
            ),
            format!(
                "  ‖A − B‖/‖A‖  before {:.4e}  after {:.4e}",
                self.distance_before, self.distance_after
            ),
        ];
        for s in &self.steps {
            lines.push(format!(
                "    round {} {:<8} {:.4e}",
                s.round, s.fit, s.distance
            ));
        }
        if let (Some(d), Some(m)) = (
            self.distance_to_true_inverse,
            self.max_abs_diff_to_true_inverse,
        ) {
            lines.push(format!("  ‖R − Qᵀ‖_F/√C {d:.3e}  (max |R − Qᵀ| {m:.3e})"));
        }
        if self.lm_head_untied_by_fold {
            lines.push(
                "  note: B tied its head and its final norm's weight is not constant: folding \
                 it unties the head"
                    .into(),
            );
        }
        let c = &self.check;
        lines.push(format!(
            "  check on {} tokens: max |Δlogit| {:.3e}, top-1 agreement {:.4}, perplexity {:.4} \
             vs {:.4} ({})",
            c.tokens,
            c.max_abs_logit_diff,
            c.top1_agreement,
            c.ppl_a,
            c.ppl_b,
            if self.check_passed {
                "passed"
            } else {
                "FAILED"
            }
        ));
        for o in &self.outputs {
            lines.push(format!("wrote {o}"));
        }
        lines.push(format!(
            "time: load {:.2} s, fold+fit {:.2} s",
            self.seconds_load, self.seconds_fit
        ));
        vec![crate::io::table::Block::Text(lines.join("\n"))]
    }
}
