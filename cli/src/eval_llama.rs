//! `orthoformer eval` in its pretrained-model (`--model`) mode: sliding-window perplexity of a
//! GGUF or Hugging Face model on a text file.

use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use serde::Serialize;

use super::Outcome;
use super::common::{print_json, progress_bar};
use super::eval::EvalArgs;
use orthoformer::model::llama::load_engine;
use orthoformer::model::llama::perplexity::perplexity;
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
            file = std::fs::read(path)
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

#[derive(Serialize)]
struct Report {
    model: String,
    data: String,
    tokens: usize,
    context: usize,
    stride: usize,
    nll: f64,
    ppl: f64,
    seconds: f64,
    tokens_per_second: f64,
}

/// Runs this mode of `orthoformer eval`.
pub fn run(args: &EvalArgs) -> anyhow::Result<Outcome> {
    let path = args.model.as_deref().context("--model is required")?;
    let data = args.data.as_deref();
    let context = args.context.unwrap_or(DEFAULT_CONTEXT);
    let max_tokens = args.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    if context < 2 {
        anyhow::bail!("--context must be at least 2 (got {context})");
    }
    if max_tokens == 0 {
        anyhow::bail!("--max-tokens must be at least 1");
    }
    let loaded = load_engine(path).context("loading the model")?;
    if context > loaded.model.context() {
        anyhow::bail!(
            "--context {context} exceeds the model's {}",
            loaded.model.context()
        );
    }
    check_cache_fits(loaded.model.config(), context)?;
    let ids = read_tokens(&loaded.tokenizer, data, max_tokens)?;
    let mut model = loaded.model;
    let stride = (context / 2).max(1);
    let bar = progress_bar((ids.len() - 1) as u64, "eval", args.json);
    let start = Instant::now();
    let p = perplexity(
        &mut model,
        &ids,
        context,
        stride,
        &mut |n| bar.set_position(n as u64),
        &mut |_, _| {},
    )?;
    bar.finish_and_clear();
    let secs = start.elapsed().as_secs_f64();
    let r = Report {
        model: path.display().to_string(),
        data: data_name(data),
        tokens: p.tokens,
        context,
        stride,
        nll: p.nll,
        ppl: p.ppl,
        seconds: secs,
        tokens_per_second: p.tokens as f64 / secs,
    };
    if args.json {
        print_json(&r)?;
    } else {
        println!("model       {}", r.model);
        println!(
            "data        {} ({} tokens, window {}, stride {})",
            r.data, r.tokens, context, stride
        );
        println!("nll         {:.4} nats/token", r.nll);
        println!("perplexity  {:.3}", r.ppl);
        println!(
            "speed       {:.1} tokens/s scored ({:.1} s)",
            r.tokens_per_second, secs
        );
    }
    Ok(Outcome::Success)
}
