//! Quantising a whole Llama model: every decoder linear layer by RTN (with or without a grid
//! search) or GPTQ onto its grid (one for all, or a file's per-tensor [`TensorTypes`]), the
//! embedding and `lm_head` optionally by RTN onto theirs; the model's f32 weights are replaced by the grid values, so the in-memory model
//! computes exactly what the written file does.

use super::QuantError;
use super::fits::{check_finite_model, check_fits, check_quantized, matrix_name};
use super::gptq::{GptqOptions, gptq};
use super::grid::Format;
use super::matrix::QuantMatrix;
use super::mix::TensorTypes;
use super::rtn::{Clip, rtn};
use crate::model::llama::LlamaWeights;
use crate::model::llama::tap::LinearSite;
use crate::quant::hessian::Hessians;

/// How each decoder linear layer is rounded.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Method {
    /// Round to nearest (each span's grid chosen by [`Clip`]).
    Rtn(Clip),
    /// GPTQ on the calibration Hessians.
    Gptq(GptqOptions),
}

/// What to quantise onto which grid.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The rounding method of the decoder's linear layers.
    pub method: Method,
    /// Each decoder matrix's grid, per layer: q, k, v, o, gate, up, down.
    pub layers: Vec<[Format; 7]>,
    /// The grid of the embedding (RTN); `None` leaves it (and a tied head) in full precision.
    pub embed: Option<Format>,
    /// The grid of an untied `lm_head` (RTN); `None` leaves it in full precision.
    pub head: Option<Format>,
}

/// The quantised matrices of a model, in Hugging Face row order.
#[derive(Clone, Debug)]
pub struct QuantizedModel {
    /// Per layer: q, k, v, o, gate, up, down.
    pub layers: Vec<[QuantMatrix; 7]>,
    /// The embedding, when quantised.
    pub embed: Option<QuantMatrix>,
    /// An untied `lm_head`, when quantised.
    pub lm_head: Option<QuantMatrix>,
    /// GPTQ's loss summed over every layer (0 for RTN).
    pub gptq_loss: f64,
}

/// The input site of each of a layer's seven matrices.
const SITE_OF: [LinearSite; 7] = [
    LinearSite::AttnIn,
    LinearSite::AttnIn,
    LinearSite::AttnIn,
    LinearSite::OIn,
    LinearSite::MlpIn,
    LinearSite::MlpIn,
    LinearSite::DownIn,
];

impl Plan {
    /// Every decoder matrix of `n_layer` layers on `format`, the embedding and head on
    /// `embed`.
    pub fn uniform(method: Method, format: Format, n_layer: usize, embed: Option<Format>) -> Self {
        Plan {
            method,
            layers: vec![[format; 7]; n_layer],
            embed,
            head: embed,
        }
    }

    /// The plan of a file's [`TensorTypes`].
    pub fn of_types(method: Method, t: &TensorTypes) -> Self {
        Plan {
            method,
            layers: t.layers.clone(),
            embed: Some(t.embed),
            head: t.head.or(Some(t.embed)),
        }
    }

    /// Refuses a plan that does not fit `w`'s shapes, naming the tensor.
    fn check_shapes(&self, w: &LlamaWeights) -> Result<(), QuantError> {
        let c = &w.cfg;
        let cols = layer_cols(c);
        if self.layers.len() != w.layers.len() {
            return Err(QuantError::Invalid(format!(
                "the plan has {} layers, the model {}",
                self.layers.len(),
                w.layers.len()
            )));
        }
        for (l, row) in self.layers.iter().enumerate() {
            for (k, f) in row.iter().enumerate() {
                f.check(cols[k])
                    .map_err(|e| QuantError::Invalid(format!("{}: {e}", matrix_name(l, k))))?;
            }
        }
        for (name, f) in [
            ("model.embed_tokens.weight", self.embed),
            ("lm_head.weight", self.head),
        ] {
            if let Some(f) = f {
                f.check(c.d_model)
                    .map_err(|e| QuantError::Invalid(format!("{name}: {e}")))?;
            }
        }
        Ok(())
    }
}

/// The inputs of a layer's seven matrices (q, k, v, o, gate, up, down).
pub fn layer_cols(c: &crate::model::llama::LlamaConfig) -> [usize; 7] {
    let (d, qd, f) = (c.d_model, c.n_head * c.head_dim(), c.d_ff);
    [d, d, d, qd, d, d, f]
}

/// Refuses `w` when a weight is not finite or a matrix holds weights its `plan` grid cannot
/// store (a block's f16 scale would overflow), naming the tensor; reads, changes nothing.
pub fn check_plan(w: &LlamaWeights, plan: &Plan) -> crate::Result<()> {
    check_finite_model(w)?;
    plan.check_shapes(w)?;
    let cols = layer_cols(&w.cfg);
    for (l, layer) in w.layers.iter().enumerate() {
        for (i, m) in layer_mats(layer).into_iter().enumerate() {
            check_fits(plan.layers[l][i], &matrix_name(l, i), m, cols[i])?;
        }
    }
    let d = w.cfg.d_model;
    if let Some(e) = plan.embed {
        check_fits(e, "model.embed_tokens.weight", &w.embed, d)?;
    }
    if let (Some(f), Some(h)) = (plan.head, &w.lm_head) {
        check_fits(f, "lm_head.weight", h, d)?;
    }
    Ok(())
}

/// A layer's seven matrices, q, k, v, o, gate, up, down.
fn layer_mats(l: &crate::model::llama::weights::LayerWeights) -> [&Vec<f32>; 7] {
    [&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down]
}

/// Quantises `w` by `plan` (GPTQ needs `hessians` from [`super::calibrate::calibrate`] on
/// the same weights; RTN's searches weight their error by their diagonals when given),
/// replacing its weights by the grid values. Every shape, every weight's finiteness and
/// every block's scale ([`super::fits`]) are checked before anything changes; a scale GPTQ
/// pushes beyond f16 is refused as it appears (`w` is then partly quantised: discard it).
/// `on_layer(done)` is called after each decoder layer.
pub fn quantize_model(
    w: &mut LlamaWeights,
    plan: &Plan,
    hessians: Option<&Hessians>,
    on_layer: &mut dyn FnMut(usize),
) -> crate::Result<QuantizedModel> {
    quantize_model_by_layer(w, plan, hessians.is_some(), &mut |_| Ok(hessians), on_layer)
}

/// [`quantize_model`] with each layer's sums fetched when that layer is quantised
/// (`hessian_of(l)`; `calibrated` says whether it gives any), so that only one layer's need be
/// in memory (a [`super::calibration_file::CalibrationFile`]).
pub fn quantize_model_by_layer<H: std::borrow::Borrow<Hessians>>(
    w: &mut LlamaWeights,
    plan: &Plan,
    calibrated: bool,
    hessian_of: &mut dyn FnMut(usize) -> crate::Result<Option<H>>,
    on_layer: &mut dyn FnMut(usize),
) -> crate::Result<QuantizedModel> {
    if matches!(plan.method, Method::Gptq(_)) && !calibrated {
        return Err(QuantError::Invalid("GPTQ needs calibration data".into()).into());
    }
    check_plan(w, plan)?;
    let mut layers = Vec::with_capacity(w.layers.len());
    let mut gptq_loss = 0.0;
    for l in 0..w.layers.len() {
        let h = hessian_of(l)?;
        let (q, loss) = quantize_layer(w, plan, l, h.as_ref().map(|h| h.borrow()))?;
        layers.push(q);
        gptq_loss += loss;
        on_layer(l + 1);
    }
    finish(w, plan, layers, gptq_loss)
}

/// Quantises the seven matrices of layer `l` of `w` by `plan` with the Hessians of that layer
/// in `hessians` (replacing them by their grid values); returns them and GPTQ's loss. The
/// plan must have been checked ([`check_plan`]).
pub(crate) fn quantize_layer(
    w: &mut LlamaWeights,
    plan: &Plan,
    l: usize,
    hessians: Option<&Hessians>,
) -> crate::Result<([QuantMatrix; 7], f64)> {
    let cols = layer_cols(&w.cfg);
    let layer = &mut w.layers[l];
    let mats = [
        &mut layer.wq,
        &mut layer.wk,
        &mut layer.wv,
        &mut layer.wo,
        &mut layer.w_gate,
        &mut layer.w_up,
        &mut layer.w_down,
    ];
    let mut out = Vec::with_capacity(7);
    let mut loss = 0.0;
    for (i, m) in mats.into_iter().enumerate() {
        let n = cols[i];
        let rows = m.len() / n;
        let format = plan.layers[l][i];
        let h = hessians.and_then(|hs| hs.hessian(l, SITE_OF[i]));
        let q = match plan.method {
            Method::Rtn(clip) => {
                let diag = h
                    .as_ref()
                    .map(|h| (0..n).map(|j| h[j * n + j]).collect::<Vec<_>>());
                rtn(m, rows, n, format, clip, diag.as_deref())
            }
            Method::Gptq(o) => {
                let h = h.ok_or_else(|| {
                    QuantError::Invalid(format!("no calibration data reached layer {l}"))
                })?;
                let r = gptq(m, rows, n, &h, format, o)?;
                loss += r.loss;
                r.matrix
            }
        };
        check_quantized(&q, &matrix_name(l, i), m)?;
        *m = q.values();
        out.push(q);
    }
    Ok((out.try_into().expect("seven matrices"), loss))
}

/// The quantised model of the decoder `layers` (GPTQ's summed `gptq_loss`), once the
/// embedding and an untied `lm_head` are quantised by RTN onto their plan grids (with the
/// method's grid search, without calibration weights: llama.cpp has no importance for them).
pub(crate) fn finish(
    w: &mut LlamaWeights,
    plan: &Plan,
    layers: Vec<[QuantMatrix; 7]>,
    gptq_loss: f64,
) -> crate::Result<QuantizedModel> {
    let (v, d) = (w.cfg.vocab_size, w.cfg.d_model);
    let clip = match plan.method {
        Method::Rtn(c) => c,
        Method::Gptq(o) if o.block_search => Clip::Scales,
        Method::Gptq(_) => Clip::None,
    };
    let mut embed_q = None;
    if let Some(e) = plan.embed {
        let q = rtn(&w.embed, v, d, e, clip, None);
        check_quantized(&q, "model.embed_tokens.weight", &w.embed)?;
        w.embed = q.values();
        embed_q = Some(q);
    }
    let mut head_q = None;
    if let (Some(f), Some(h)) = (plan.head, w.lm_head.as_mut()) {
        let q = rtn(h, v, d, f, clip, None);
        check_quantized(&q, "lm_head.weight", h)?;
        *h = q.values();
        head_q = Some(q);
    }
    Ok(QuantizedModel {
        layers,
        embed: embed_q,
        lm_head: head_q,
        gptq_loss,
    })
}
