//! GPTQ's calibration pass: the model runs the calibration tokens in non-overlapping windows
//! (a fresh KV cache each) and every decoder linear layer's input is summed into `XᵀX`
//! ([`Hessians`]). One pass over the unquantised model (rotated, with the online transform
//! when asked) gives every layer's Hessian at once; GPTQ's reference instead quantises layer
//! by layer and feeds each layer the quantised layers' outputs, which this does not do.

use crate::model::llama::LlamaWeights;
use crate::model::llama::hessian::Hessians;
use crate::model::llama::{Llama, RowTransform};

use super::QuantError;

/// `XᵀX` of every decoder linear layer's input over `tokens`, in windows of `window`.
pub fn calibrate(
    w: &LlamaWeights,
    down_transform: Option<RowTransform>,
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
    m.down_transform = down_transform;
    m.hessians = Some(Hessians::new(&w.cfg));
    let layers = w.cfg.n_layer;
    let mut cache = m.new_cache(window)?;
    for chunk in tokens.chunks(window) {
        cache.clear();
        m.hidden_states(chunk, &mut cache, layers)?;
    }
    Ok(m.hessians.take().expect("set above"))
}
