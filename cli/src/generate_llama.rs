//! `orthoformer generate` in its pretrained-model (`--model`) mode: encode the prompt, run it
//! through the model once, then extend one token at a time with the KV cache, streaming text.

use std::io::Write;

use anyhow::Context;

use super::Outcome;
use super::generate::GenerateArgs;
use orthoformer::model::llama::load_engine;
use orthoformer::model::llama::perplexity::sample;
use orthoformer::model::llama::tokenizer::{decode, encode};

/// Runs this mode of `orthoformer generate`.
pub fn run(args: &GenerateArgs) -> anyhow::Result<Outcome> {
    let path = args.model.as_deref().context("--model is required")?;
    let loaded = load_engine(path).context("loading the model")?;
    let tok = loaded.tokenizer;
    let mut model = loaded.model;
    let prompt = encode(&tok, &args.prompt)?;
    if prompt.is_empty() {
        anyhow::bail!("the prompt is empty: pass --prompt TEXT");
    }
    let max = model.context();
    if prompt.len().saturating_add(args.max_new_tokens) > max {
        anyhow::bail!(
            "prompt ({} tokens) + --max-new-tokens {} exceed the model's context of {max}",
            prompt.len(),
            args.max_new_tokens
        );
    }
    let cap = prompt.len() + args.max_new_tokens;
    super::eval_llama::check_cache_fits(model.config(), cap)?;
    let mut cache = model.new_cache(cap)?;
    let mut rng = orthoformer::init::rng::seeded(args.seed);
    let mut logits = model.prefill(&prompt, &mut cache, prompt.len() - 1)?.to_vec();
    let mut out: Vec<u32> = Vec::new();
    let mut printed = 0usize;
    let mut stdout = std::io::stdout().lock();
    write!(stdout, "{}", args.prompt)?;
    for _ in 0..args.max_new_tokens {
        let next = sample(&logits, args.temperature, args.top_k, &mut rng);
        out.push(next);
        // Decode the whole continuation and print what is new, so multi-byte characters that
        // span tokens come out whole.
        let text = decode(&tok, &out)?;
        if text.len() > printed && text.is_char_boundary(printed) {
            write!(stdout, "{}", &text[printed..])?;
            stdout.flush()?;
            printed = text.len();
        }
        if tok
            .id_to_token(next)
            .is_some_and(|t| t == "<|endoftext|>" || t == "<|im_end|>")
        {
            break;
        }
        logits.copy_from_slice(model.decode_one(next, &mut cache)?);
    }
    writeln!(stdout)?;
    Ok(Outcome::Success)
}
