//! The tokens of a text that a pretrained model is scored on: a file, or the embedded
//! TinyShakespeare (what `rotate --check`, `eval` and `align` read).

use std::path::Path;

use crate::data::Tokenizer;
use crate::data::corpus::{TINY_SHAKESPEARE, TINY_SHAKESPEARE_NAME};

/// The name a report gives the text: the file's path, or the embedded corpus's name.
pub fn text_name(data: Option<&Path>) -> String {
    data.map_or_else(
        || TINY_SHAKESPEARE_NAME.to_string(),
        |p| p.display().to_string(),
    )
}

/// The bytes of the file `data`, or of the embedded TinyShakespeare when `None`.
pub fn text_bytes(data: Option<&Path>) -> crate::Result<std::borrow::Cow<'static, [u8]>> {
    Ok(match data {
        Some(path) => crate::io::safe_file::read_regular(path)?.into(),
        None => TINY_SHAKESPEARE.as_bytes().into(),
    })
}

/// The first `max_tokens + 1` tokens of the UTF-8 text in `data` (the embedded TinyShakespeare
/// when `None`). Fewer than 2 tokens is an error: nothing could be scored.
pub fn read_tokens(
    tok: &Tokenizer,
    data: Option<&Path>,
    max_tokens: usize,
) -> crate::Result<Vec<u32>> {
    let bytes = text_bytes(data)?;
    // Tokenize a prefix only: about 4 bytes per token is plenty, with a margin.
    let cut = bytes
        .len()
        .min(max_tokens.saturating_mul(8).saturating_add(64));
    let text = String::from_utf8_lossy(&bytes[..cut]);
    let mut ids = tok.encode(&text)?;
    ids.truncate(max_tokens.saturating_add(1));
    if ids.len() < 2 {
        return Err(crate::data::invalid(format!(
            "{} has fewer than 2 tokens of text",
            text_name(data)
        )));
    }
    Ok(ids)
}

/// About the last `n` tokens of the UTF-8 text in `data` (the embedded TinyShakespeare when
/// `None`): calibration text disjoint from the first tokens that perplexity is measured on
/// when the same text serves both. Fewer than `min` tokens is an error.
pub fn read_tail_tokens(
    tok: &Tokenizer,
    data: Option<&Path>,
    n: usize,
    min: usize,
) -> crate::Result<Vec<u32>> {
    let bytes = text_bytes(data)?;
    let cut = bytes.len().saturating_sub(n.saturating_mul(8));
    let text = String::from_utf8_lossy(&bytes[cut..]);
    let ids = tok.encode(&text)?;
    let ids = ids[ids.len().saturating_sub(n)..].to_vec();
    if ids.len() < min {
        return Err(crate::data::invalid(format!(
            "the calibration text has fewer than {min} tokens; pass a longer `data`"
        )));
    }
    Ok(ids)
}

/// Checks that a KV cache of `cap` positions for `cfg` fits this machine (K and V, f32, every
/// layer), before the model allocates it.
pub fn check_cache_fits(cfg: &crate::model::llama::LlamaConfig, cap: usize) -> crate::Result<()> {
    use crate::io::memory::{bytes, check_fits};
    check_fits(
        bytes(&[cap, cfg.n_kv_head, cfg.head_dim(), cfg.n_layer, 2, 4]),
        format_args!("a KV cache of {cap} positions"),
    )?;
    Ok(())
}
