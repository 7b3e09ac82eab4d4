//! Layer-by-layer calibration, as GPTQ's reference quantises: layer `l` is calibrated on the
//! activations the already-quantised layers `0..l` produce, quantised, and only then run to
//! give layer `l + 1` its inputs. One calibration pass over the unquantised model
//! ([`super::calibrate`]) instead lets every layer see inputs the quantised model never gives
//! it.
//!
//! The residual stream of every calibration window is kept between layers (`tokens x C` f32),
//! so each layer runs twice (once to record its Hessians, once quantised) and the whole costs
//! about two forward passes plus one layer's Hessians at a time.

use super::QuantError;
use super::model::{Plan, QuantizedModel, check_plan, finish, quantize_layer};
use crate::model::llama::{Llama, LlamaWeights};
use crate::nn::hadamard_rows::OnlineHadamard;
use crate::quant::hessian::Hessians;

/// Quantises `w` by `plan` layer by layer, each layer's Hessians (and its RTN importance)
/// taken from `tokens` (in windows of `window`) run through the quantised layers before it,
/// with `down_hadamard` applied to `down_proj`'s input (`w` must then hold its inverse folded
/// in). `on_layer(done)` after each layer.
pub fn quantize_sequential(
    w: &mut LlamaWeights,
    plan: &Plan,
    down_hadamard: Option<OnlineHadamard>,
    tokens: &[u32],
    window: usize,
    on_layer: &mut dyn FnMut(usize),
) -> crate::Result<QuantizedModel> {
    if window < 1 || tokens.is_empty() {
        return Err(QuantError::Invalid(
            "calibration needs at least one token and a window of at least 1".into(),
        )
        .into());
    }
    check_plan(w, plan)?;
    let window = window.min(w.cfg.max_context);
    let c = w.cfg.d_model;
    crate::io::memory::check_fits(
        tokens
            .len()
            .checked_mul(c)
            .and_then(|n| n.checked_mul(4))
            .and_then(|n| n.checked_add(Hessians::bytes(&w.cfg) as usize / w.cfg.n_layer.max(1))),
        format_args!("layer-by-layer calibration (the calibration tokens' residual stream)"),
    )?;
    let mut m = Llama::new(w.clone());
    m.down_hadamard = down_hadamard;
    let mut cache = m.new_cache(window)?;
    let windows: Vec<&[u32]> = tokens.chunks(window).collect();
    let mut xs = Vec::with_capacity(windows.len());
    for chunk in &windows {
        cache.clear();
        xs.push(m.hidden_states(chunk, &mut cache, 0)?);
    }
    let mut layers = Vec::with_capacity(w.layers.len());
    let mut gptq_loss = 0.0;
    for l in 0..w.layers.len() {
        m.set_tap(Hessians::for_layer(&w.cfg, l));
        for (chunk, x) in windows.iter().zip(&xs) {
            cache.clear();
            m.layer_step(chunk, &mut cache, l, x)?;
        }
        let hs = m.take_tap::<Hessians>().expect("set above");
        let (q, loss) = quantize_layer(w, plan, l, Some(&hs))?;
        drop(hs);
        layers.push(q);
        gptq_loss += loss;
        m.set_layer(l, w.layers[l].clone());
        for (chunk, x) in windows.iter().zip(xs.iter_mut()) {
            cache.clear();
            *x = m.layer_step(chunk, &mut cache, l, x)?;
        }
        on_layer(l + 1);
    }
    finish(w, plan, layers, gptq_loss)
}
