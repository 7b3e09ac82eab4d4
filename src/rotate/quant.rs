//! Weight round-to-nearest quantisation of a whole model (simulated: weights stay f32 but take
//! only `2^b − 1` values per group), as in QuaRot's RTN baseline. Every linear layer of every
//! decoder block is quantised; the embedding and `lm_head` stay in full precision.

use crate::model::llama::LlamaWeights;
use crate::model::llama::quant::quantize_weight;

/// Quantises the q/k/v/o/gate/up/down weights to `bits` with one scale per output channel
/// (`group = 0`) or per `group` consecutive inputs. `bits >= 16` leaves the weights alone.
pub fn quantize_model_weights(w: &mut LlamaWeights, bits: u32, group: usize) {
    if bits >= 16 {
        return;
    }
    let (d, qd, f) = (w.cfg.d_model, w.cfg.n_head * w.cfg.head_dim(), w.cfg.d_ff);
    for l in &mut w.layers {
        for m in [&mut l.wq, &mut l.wk, &mut l.wv, &mut l.w_gate, &mut l.w_up] {
            quantize_weight(m, d, bits, group);
        }
        quantize_weight(&mut l.wo, qd, bits, group);
        quantize_weight(&mut l.w_down, f, bits, group);
    }
}
