//! The tensors of a decoder layer, and their names in the two file formats: the one table
//! the loaders (`weights.rs`, `linear.rs`), the writers (`crate::export::llama`,
//! `crate::quant::write`), llama-quantize's mixes (`crate::quant::mix`) and the rule that
//! every tensor of a file is read (`tensor_names.rs`) spell them from.

use crate::io::gguf::keys;

/// One tensor of a decoder layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayerTensor {
    /// The RMSNorm before attention.
    AttnNorm,
    /// The query projection.
    Q,
    /// The key projection.
    K,
    /// The value projection.
    V,
    /// The attention output projection.
    O,
    /// The RMSNorm before the feed-forward block.
    FfnNorm,
    /// SwiGLU's gate projection.
    Gate,
    /// SwiGLU's up projection.
    Up,
    /// The down projection.
    Down,
}

impl LayerTensor {
    /// Every tensor of a layer (the Qwen2 q/k/v biases aside).
    pub const ALL: [LayerTensor; 9] = [
        LayerTensor::AttnNorm,
        LayerTensor::Q,
        LayerTensor::K,
        LayerTensor::V,
        LayerTensor::O,
        LayerTensor::FfnNorm,
        LayerTensor::Gate,
        LayerTensor::Up,
        LayerTensor::Down,
    ];

    /// The seven matrices, in the order quantisation plans and mixes list them.
    pub const MATRICES: [LayerTensor; 7] = [
        LayerTensor::Q,
        LayerTensor::K,
        LayerTensor::V,
        LayerTensor::O,
        LayerTensor::Gate,
        LayerTensor::Up,
        LayerTensor::Down,
    ];

    /// The projections that carry a bias in the Qwen2 family.
    pub const QKV: [LayerTensor; 3] = [LayerTensor::Q, LayerTensor::K, LayerTensor::V];

    /// llama.cpp's name (`attn_q`), as `blk.{i}.{name}.weight` uses it.
    pub const fn gguf(self) -> &'static str {
        match self {
            LayerTensor::AttnNorm => "attn_norm",
            LayerTensor::Q => "attn_q",
            LayerTensor::K => "attn_k",
            LayerTensor::V => "attn_v",
            LayerTensor::O => "attn_output",
            LayerTensor::FfnNorm => "ffn_norm",
            LayerTensor::Gate => "ffn_gate",
            LayerTensor::Up => "ffn_up",
            LayerTensor::Down => "ffn_down",
        }
    }

    /// Hugging Face's name (`self_attn.q_proj`), as `model.layers.{i}.{name}.weight` uses it.
    pub const fn hf(self) -> &'static str {
        match self {
            LayerTensor::AttnNorm => "input_layernorm",
            LayerTensor::Q => "self_attn.q_proj",
            LayerTensor::K => "self_attn.k_proj",
            LayerTensor::V => "self_attn.v_proj",
            LayerTensor::O => "self_attn.o_proj",
            LayerTensor::FfnNorm => "post_attention_layernorm",
            LayerTensor::Gate => "mlp.gate_proj",
            LayerTensor::Up => "mlp.up_proj",
            LayerTensor::Down => "mlp.down_proj",
        }
    }

    /// The GGUF weight of layer `layer` (`blk.3.attn_q.weight`).
    pub fn gguf_weight(self, layer: usize) -> String {
        keys::block(layer, self.gguf())
    }

    /// The GGUF bias of layer `layer` (`blk.3.attn_q.bias`).
    pub fn gguf_bias(self, layer: usize) -> String {
        keys::block_bias(layer, self.gguf())
    }

    /// The Hugging Face weight of layer `layer` (`model.layers.3.self_attn.q_proj.weight`).
    pub fn hf_weight(self, layer: usize) -> String {
        format!("model.layers.{layer}.{}.weight", self.hf())
    }

    /// The Hugging Face bias of layer `layer` (`model.layers.3.self_attn.q_proj.bias`).
    pub fn hf_bias(self, layer: usize) -> String {
        format!("model.layers.{layer}.{}.bias", self.hf())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names llama.cpp and transformers write (`blk.0.attn_output.weight`,
    /// `model.layers.0.mlp.down_proj.bias`), each distinct.
    #[test]
    fn names_are_the_formats_own_and_distinct() {
        assert_eq!(LayerTensor::O.gguf_weight(0), "blk.0.attn_output.weight");
        assert_eq!(
            LayerTensor::Down.hf_bias(2),
            "model.layers.2.mlp.down_proj.bias"
        );
        for names in [
            LayerTensor::ALL.map(LayerTensor::gguf),
            LayerTensor::ALL.map(LayerTensor::hf),
        ] {
            let mut n = names.to_vec();
            n.sort_unstable();
            n.dedup();
            assert_eq!(n.len(), LayerTensor::ALL.len());
        }
    }
}
