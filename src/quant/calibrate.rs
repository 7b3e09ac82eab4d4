//! GPTQ's calibration pass: the model runs the calibration tokens in non-overlapping windows
//! (a fresh KV cache each) and every decoder linear layer's input is summed into `XᵀX`
//! (`Hessians`). One pass over the unquantised model (rotated, with the online transform
//! when asked) gives every layer's Hessian at once; GPTQ's reference instead quantises layer
//! by layer and feeds each layer the quantised layers' outputs, which this does not do.

use crate::model::llama::Llama;
use crate::model::llama::LlamaWeights;
use crate::nn::hadamard_rows::OnlineHadamard;
use crate::quant::hessian::Hessians;

use super::QuantError;

/// `XᵀX` of every decoder linear layer's input over `tokens`, in windows of `window`, with
/// `down_hadamard` applied to `down_proj`'s input (`w` must then hold its inverse folded in).
pub fn calibrate(
    w: &LlamaWeights,
    down_hadamard: Option<OnlineHadamard>,
    tokens: &[u32],
    window: usize,
) -> crate::Result<Hessians> {
    if window < 1 || tokens.is_empty() {
        return Err(QuantError::Invalid(
            "calibration needs at least one token and a window of at least 1".into(),
        )
        .into());
    }
    let window = window.min(w.cfg.max_context);
    crate::io::memory::check_fits(
        Some(Hessians::bytes(&w.cfg) as usize),
        format_args!("GPTQ's calibration sums (XᵀX of every linear layer's input, f64)"),
    )?;
    let mut m = Llama::new(w.clone());
    m.down_hadamard = down_hadamard;
    m.set_tap(Hessians::new(&w.cfg));
    let layers = w.cfg.n_layer;
    let mut cache = m.new_cache(window)?;
    for chunk in tokens.chunks(window) {
        cache.clear();
        m.hidden_states(chunk, &mut cache, layers)?;
    }
    Ok(m.take_tap::<Hessians>().expect("set above"))
}
