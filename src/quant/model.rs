//! Quantising a whole Llama model: every decoder linear layer by RTN (with or without the
//! clipping search) or GPTQ onto one grid, the embedding and `lm_head` optionally by RTN onto
//! another; the model's f32 weights are replaced by the grid values, so the in-memory model
//! computes exactly what the written file does.

use super::QuantError;
use super::fits::{check_finite_model, check_fits, check_quantized, matrix_name};
use super::gptq::{GptqOptions, gptq};
use super::grid::Format;
use super::matrix::QuantMatrix;
use super::rtn::{Clip, rtn};
use crate::model::llama::LlamaWeights;
use crate::model::llama::hessian::Hessians;
use crate::model::llama::quant::LinearSite;

/// How each decoder linear layer is rounded.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Method {
    /// Round to nearest (the clipping search picks each span's range).
    Rtn(Clip),
    /// GPTQ on the calibration Hessians.
    Gptq(GptqOptions),
}

/// What to quantise onto which grid.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Plan {
    /// The rounding method of the decoder's linear layers.
    pub method: Method,
    /// Their grid.
    pub format: Format,
    /// The grid of a matrix whose width `format` cannot divide (`Q4_K` needs rows of whole
    /// 256-weight super-blocks; llama.cpp's own quantiser falls back the same way).
    pub fallback: Option<Format>,
    /// The grid of the embedding and `lm_head` (RTN); `None` leaves them in full precision.
    pub embed_format: Option<Format>,
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
    /// The grid of a matrix with rows of `cols` inputs, or why there is none.
    pub fn format_for(&self, cols: usize) -> Result<Format, QuantError> {
        match (self.format.check(cols), self.fallback) {
            (Ok(()), _) => Ok(self.format),
            (Err(_), Some(f)) if f.check(cols).is_ok() => Ok(f),
            (Err(e), _) => Err(QuantError::Invalid(e)),
        }
    }
}

/// Refuses `w` when a weight is not finite or a matrix holds weights its `plan` grid cannot
/// store (a block's f16 scale would overflow), naming the tensor; reads, changes nothing.
pub fn check_plan(w: &LlamaWeights, plan: &Plan) -> crate::Result<()> {
    check_finite_model(w)?;
    let c = &w.cfg;
    let (d, f) = (c.d_model, c.d_ff);
    for (l, layer) in w.layers.iter().enumerate() {
        let mats = [
            &layer.wq,
            &layer.wk,
            &layer.wv,
            &layer.wo,
            &layer.w_gate,
            &layer.w_up,
            &layer.w_down,
        ];
        for (i, m) in mats.into_iter().enumerate() {
            let n = [d, d, d, c.n_head * c.head_dim(), d, d, f][i];
            check_fits(plan.format_for(n)?, &matrix_name(l, i), m, n)?;
        }
    }
    if let Some(e) = plan.embed_format {
        check_fits(e, "model.embed_tokens.weight", &w.embed, d)?;
        if let Some(h) = &w.lm_head {
            check_fits(e, "lm_head.weight", h, d)?;
        }
    }
    Ok(())
}

/// Quantises `w` by `plan` (GPTQ needs `hessians` from [`super::calibrate::calibrate`] on
/// the same weights; RTN's clipping search weights its error by their diagonals when given),
/// replacing its weights by the grid values. Every shape, every weight's finiteness and
/// every block's scale ([`super::fits`]) are checked before anything changes; a scale GPTQ
/// pushes beyond f16 is refused as it appears (`w` is then partly quantised: discard it).
pub fn quantize_model(
    w: &mut LlamaWeights,
    plan: &Plan,
    hessians: Option<&Hessians>,
    on_layer: &mut dyn FnMut(usize),
) -> crate::Result<QuantizedModel> {
    let c = &w.cfg;
    let (d, qd, f) = (c.d_model, c.n_head * c.head_dim(), c.d_ff);
    let cols = [d, d, d, qd, d, d, f];
    for &n in &cols {
        plan.format_for(n)?;
    }
    if let Some(e) = plan.embed_format {
        e.check(d).map_err(QuantError::Invalid)?;
    }
    if matches!(plan.method, Method::Gptq(_)) && hessians.is_none() {
        return Err(QuantError::Invalid("GPTQ needs calibration data".into()).into());
    }
    check_plan(w, plan)?;
    let mut layers = Vec::with_capacity(w.layers.len());
    let mut gptq_loss = 0.0;
    for (l, layer) in w.layers.iter_mut().enumerate() {
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
        for (i, m) in mats.into_iter().enumerate() {
            let n = cols[i];
            let rows = m.len() / n;
            let format = plan.format_for(n)?;
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
                    gptq_loss += r.loss;
                    r.matrix
                }
            };
            check_quantized(&q, &matrix_name(l, i), m)?;
            *m = q.values();
            out.push(q);
        }
        layers.push(out.try_into().expect("seven matrices"));
        on_layer(l + 1);
    }
    let (v, tied) = (w.cfg.vocab_size, w.lm_head.is_none());
    let mut embed_q = None;
    let mut head_q = None;
    if let Some(e) = plan.embed_format {
        let q = rtn(&w.embed, v, d, e, Clip::None, None);
        check_quantized(&q, "model.embed_tokens.weight", &w.embed)?;
        w.embed = q.values();
        embed_q = Some(q);
        if !tied && let Some(h) = w.lm_head.as_mut() {
            let q = rtn(h, v, d, e, Clip::None, None);
            check_quantized(&q, "lm_head.weight", h)?;
            *h = q.values();
            head_q = Some(q);
        }
    }
    Ok(QuantizedModel {
        layers,
        embed: embed_q,
        lm_head: head_q,
        gptq_loss,
    })
}
