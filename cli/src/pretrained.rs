//! Inputs shared by the commands that run a pretrained Llama-style model (`eval`, `generate`,
//! `rotate`, `quantize`, `align`, `bench --model`): the text to score, its name in reports,
//! and the KV-cache memory check (the library's [`orthoformer::infer::text`], with the flag
//! named where the command line reads a file).

use std::path::Path;

use anyhow::Context;

/// Default number of tokens scored.
pub const DEFAULT_MAX_TOKENS: usize = 2048;
/// Default window.
pub const DEFAULT_CONTEXT: usize = 256;

/// The name of a text source in reports: the file, or the embedded TinyShakespeare.
pub fn data_name(data: Option<&Path>) -> String {
    orthoformer::infer::text::text_name(data)
}

/// Checks that a KV cache of `cap` positions for `cfg` fits this machine (K and V, f32, every
/// layer), before the model allocates it.
pub fn check_cache_fits(
    cfg: &orthoformer::model::llama::LlamaConfig,
    cap: usize,
) -> anyhow::Result<()> {
    Ok(orthoformer::infer::text::check_cache_fits(cfg, cap)?)
}

/// Tokenizes the first `max_tokens + 1` tokens of a UTF-8 text: the file `data`, or the
/// embedded TinyShakespeare when `None` (wherever a command's help says so).
pub fn read_tokens(
    tok: &orthoformer::model::llama::Tokenizer,
    data: Option<&Path>,
    max_tokens: usize,
) -> anyhow::Result<Vec<u32>> {
    match orthoformer::infer::text::read_tokens(tok, data, max_tokens) {
        Err(e @ orthoformer::Error::Io { .. }) => Err(e).context(format!(
            "reading --data {}",
            data.unwrap_or(Path::new("")).display()
        )),
        r => Ok(r?),
    }
}
