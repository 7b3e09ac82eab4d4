//! `orthoformer generate` in its pretrained-model (`--model`) mode: encode the prompt, run it
//! through the model once, then extend one token at a time with the KV cache, streaming text.

use std::io::Write;

use anyhow::Context;

use super::Outcome;
use super::generate::GenerateArgs;
use orthoformer::model::llama::load_engine;
use orthoformer::model::llama::tokenizer::{decode, encode, stop_ids};
use orthoformer::train::generate::generate_ids;

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
    let mut out: Vec<u32> = Vec::new();
    let mut printed = 0usize;
    let mut stdout = std::io::stdout().lock();
    write!(stdout, "{}", args.prompt)?;
    generate_ids(
        &mut model,
        &prompt,
        args.sample_options(),
        &stop_ids(&tok),
        &mut |next| {
            out.push(next);
            // Decode the whole continuation and print what is new, so multi-byte characters
            // that span tokens come out whole.
            let text = decode(&tok, &out)?;
            if text.len() > printed && text.is_char_boundary(printed) {
                write!(stdout, "{}", &text[printed..])
                    .and_then(|_| stdout.flush())
                    .map_err(|e| orthoformer::Error::io("stdout", e))?;
                printed = text.len();
            }
            Ok(())
        },
    )
    .context("generating")?;
    writeln!(stdout)?;
    Ok(Outcome::Success)
}
