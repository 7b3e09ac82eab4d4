//! The rule that every tensor of a model file is one the loader reads: a tensor outside the
//! names a model of the configured shape consists of is refused by name, never dropped. The
//! two cases it catches: a tensor of a kind the engine does not implement (an `o_proj` bias, a
//! `rope_freqs` table), and a file holding more layers than its configuration declares
//! (`num_hidden_layers` or `{arch}.block_count` too small), whose extra layers would silently
//! vanish. llama.cpp refuses the second too (it counts the tensors it expects).
//!
//! The names are the table's (`layer_tensor.rs`), which the loaders read by; the
//! unit test below checks that every tensor the Hugging Face writer emits passes.

use super::config::LlamaConfig;
use super::layer_tensor::LayerTensor;
use crate::model::ModelError;

/// A file format's tensor names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scheme {
    /// Hugging Face (`model.layers.{i}.self_attn.q_proj.weight`).
    Hf,
    /// GGUF, llama.cpp's names (`blk.{i}.attn_q.weight`).
    Gguf,
}

impl Scheme {
    /// Tensors outside any layer.
    fn top(self) -> &'static [&'static str] {
        match self {
            Scheme::Hf => &[
                "model.embed_tokens.weight",
                "model.norm.weight",
                "lm_head.weight",
            ],
            Scheme::Gguf => &[
                "token_embd.weight",
                "output_norm.weight",
                "output.weight",
                super::online::DOWN_SIGNS,
            ],
        }
    }

    fn layer_prefix(self) -> &'static str {
        match self {
            Scheme::Hf => "model.layers.",
            Scheme::Gguf => "blk.",
        }
    }

    /// Whether `rest`, a name after `{prefix}{i}.`, is a layer tensor the loaders read
    /// (`biased`: the family's q/k/v biases too).
    fn reads(self, rest: &str, biased: bool) -> bool {
        // Older Hugging Face checkpoints store RoPE's inverse frequencies; the engine computes
        // them from rope_theta, which was checked.
        if self == Scheme::Hf && rest == "self_attn.rotary_emb.inv_freq" {
            return true;
        }
        let name = |t: &LayerTensor| match self {
            Scheme::Hf => t.hf(),
            Scheme::Gguf => t.gguf(),
        };
        match rest.rsplit_once('.') {
            Some((stem, "weight")) => LayerTensor::ALL.iter().any(|t| name(t) == stem),
            Some((stem, "bias")) => biased && LayerTensor::QKV.iter().any(|t| name(t) == stem),
            _ => false,
        }
    }
}

/// Why a tensor is not read: `None` when it is.
enum Unread {
    /// Of a kind the engine does not implement.
    Unknown,
    /// Of layer `i`, at or beyond the declared count.
    Layer(usize),
}

fn classify(name: &str, cfg: &LlamaConfig, scheme: Scheme) -> Option<Unread> {
    if scheme.top().contains(&name) {
        return None;
    }
    let Some((i, rest)) = name
        .strip_prefix(scheme.layer_prefix())
        .and_then(|r| r.split_once('.'))
    else {
        return Some(Unread::Unknown);
    };
    let known = scheme.reads(rest, cfg.family.qkv_bias());
    // Only the canonical spelling is read: "01" or "+1" would name a tensor no loader asks for.
    let index = i.parse::<usize>().ok().filter(|n| n.to_string() == i);
    match (known, index) {
        (true, Some(n)) if n < cfg.n_layer => None,
        (true, Some(n)) => Some(Unread::Layer(n)),
        _ => Some(Unread::Unknown),
    }
}

/// Checks that every tensor in `names` is one the loader of a `cfg` model reads; refuses the
/// first that is not (lowest layer, then the order of `names`), by name, with how many more
/// there are.
/// `layers_field` names where the file declares its layer count (`num_hidden_layers`).
pub(crate) fn check_all_read<'a>(
    names: impl IntoIterator<Item = &'a str>,
    cfg: &LlamaConfig,
    scheme: Scheme,
    path: &str,
    layers_field: &str,
) -> Result<(), ModelError> {
    let mut unread: Vec<(usize, usize, &str, Unread)> = names
        .into_iter()
        .enumerate()
        .filter_map(|(at, n)| {
            let why = classify(n, cfg, scheme)?;
            let layer = match why {
                Unread::Layer(i) => i,
                Unread::Unknown => 0,
            };
            Some((layer, at, n, why))
        })
        .collect();
    let count = unread.len();
    let Some(i) = (0..count).min_by_key(|&i| (unread[i].0, unread[i].1)) else {
        return Ok(());
    };
    let (_, _, name, why) = unread.swap_remove(i);
    let more = match count - 1 {
        0 => String::new(),
        m => format!(" (and {m} more)"),
    };
    Err(ModelError::Config(match why {
        Unread::Layer(l) => format!(
            "{path}: tensor {name}{more} belongs to layer {l}, but {layers_field} declares {} \
             layers; the engine would drop it, so the model is refused: fix {layers_field} or \
             remove the extra layers",
            cfg.n_layer
        ),
        Unread::Unknown => format!(
            "{path}: tensor {name}{more}, which the engine does not implement; running without \
             it would give wrong results, so this model is not supported"
        ),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::tiny_llama::tiny_llama_weights;
    use crate::model::llama::config::Family;

    fn check(names: &[&str], cfg: &LlamaConfig, scheme: Scheme) -> Result<(), String> {
        check_all_read(names.iter().copied(), cfg, scheme, "m", "num_hidden_layers")
            .map_err(|e| e.to_string())
    }

    #[test]
    fn every_tensor_the_writer_emits_is_read() {
        let w = tiny_llama_weights(1);
        let names: Vec<String> = w.hf_tensors().into_iter().map(|t| t.0).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        check(&refs, &w.cfg, Scheme::Hf).unwrap();
    }

    #[test]
    fn layers_beyond_the_declared_count_are_refused_by_name() {
        let mut cfg = tiny_llama_weights(1).cfg;
        cfg.n_layer = 1;
        let e = check(
            &[
                "model.layers.0.input_layernorm.weight",
                "model.layers.1.mlp.up_proj.weight",
                "model.layers.1.input_layernorm.weight",
            ],
            &cfg,
            Scheme::Hf,
        )
        .unwrap_err();
        assert!(
            e.contains("tensor model.layers.1.mlp.up_proj.weight (and 1 more) belongs to layer 1")
                && e.contains("num_hidden_layers declares 1 layers"),
            "{e}"
        );
        let e = check(&["blk.1.attn_q.weight"], &cfg, Scheme::Gguf).unwrap_err();
        assert!(
            e.contains("blk.1.attn_q.weight") && e.contains("layer 1"),
            "{e}"
        );
        for odd in [
            "blk.00.attn_q.weight",
            "blk.+0.attn_q.weight",
            "rope_freqs.weight",
        ] {
            let e = check(&[odd], &cfg, Scheme::Gguf).unwrap_err();
            assert!(e.contains(odd) && e.contains("not supported"), "{e}");
        }
    }

    #[test]
    fn biases_only_for_qwen2() {
        let mut cfg = tiny_llama_weights(1).cfg;
        let bias = ["model.layers.1.self_attn.q_proj.bias"];
        let e = check(&bias, &cfg, Scheme::Hf).unwrap_err();
        assert!(e.contains("q_proj.bias"), "{e}");
        cfg.family = Family::Qwen2;
        check(&bias, &cfg, Scheme::Hf).unwrap();
        let e = check(&["model.layers.1.self_attn.o_proj.bias"], &cfg, Scheme::Hf).unwrap_err();
        assert!(e.contains("o_proj.bias"), "{e}");
    }
}
