//! Inputs shared by the commands that run a pretrained Llama-style model (`eval`, `generate`,
//! `rotate`, `quantize`, `align`, `bench --model`): the text to score, its name in reports,
//! and the KV-cache memory check.

use std::path::Path;

use anyhow::Context;

use orthoformer::model::llama::tokenizer::encode;

/// Default number of tokens scored.
pub const DEFAULT_MAX_TOKENS: usize = 2048;
/// Default window.
pub const DEFAULT_CONTEXT: usize = 256;

/// The name of a text source in reports: the file, or the embedded TinyShakespeare.
pub fn data_name(data: Option<&Path>) -> String {
    data.map_or_else(
        || orthoformer::data::corpus::TINY_SHAKESPEARE_NAME.to_string(),
        |p| p.display().to_string(),
    )
}

/// Checks that a KV cache of `cap` positions for `cfg` fits this machine (K and V, f32, every
/// layer), before the model allocates it.
pub fn check_cache_fits(
    cfg: &orthoformer::model::llama::LlamaConfig,
    cap: usize,
) -> anyhow::Result<()> {
    use orthoformer::io::memory::{bytes, check_fits};
    check_fits(
        bytes(&[cap, cfg.n_kv_head, cfg.head_dim(), cfg.n_layer, 2, 4]),
        format_args!("a KV cache of {cap} positions"),
    )?;
    Ok(())
}

/// Tokenizes the first `max_tokens + 1` tokens of a UTF-8 text: the file `data`, or the
/// embedded TinyShakespeare when `None` (wherever a command's help says so).
pub fn read_tokens(
    tok: &orthoformer::model::llama::Tokenizer,
    data: Option<&Path>,
    max_tokens: usize,
) -> anyhow::Result<Vec<u32>> {
    let file;
    let bytes: &[u8] = match data {
        Some(path) => {
            file = orthoformer::io::safe_file::read_regular(path)
                .with_context(|| format!("reading --data {}", path.display()))?;
            &file
        }
        None => orthoformer::data::corpus::TINY_SHAKESPEARE.as_bytes(),
    };
    // Tokenize a prefix only: about 4 bytes per token is plenty, with a margin.
    let cut = bytes
        .len()
        .min(max_tokens.saturating_mul(8).saturating_add(64));
    let text = String::from_utf8_lossy(&bytes[..cut]);
    let mut ids = encode(tok, &text)?;
    ids.truncate(max_tokens.saturating_add(1));
    if ids.len() < 2 {
        anyhow::bail!("{} has fewer than 2 tokens of text", data_name(data));
    }
    Ok(ids)
}
