//! Generate text from a pretrained Llama-family model in a GGUF file (SmolLM2, Llama, Qwen2,
//! Mistral in F32, F16, Q8_0, Q4_0, Q4_1 or Q4_K), streaming it as it is sampled, then
//! report the model's perplexity on the prompt.
//!
//! Run: `cargo run --release --example generate_gguf -- MODEL.gguf ["PROMPT"]`, or
//! `-- --short` to run on a tiny random model this program writes itself (its text is
//! noise; CI runs this).

use std::io::Write;
use std::path::PathBuf;

use orthoformer::prelude::*;

fn main() -> orthoformer::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let short = args.iter().any(|a| a == "--short");
    let mut positional = args.iter().filter(|a| *a != "--short");
    let path = match (positional.next(), short) {
        (Some(p), _) => PathBuf::from(p),
        (None, true) => {
            let p =
                std::env::temp_dir().join(format!("orthoformer-tiny-{}.gguf", std::process::id()));
            write_tiny_llama_gguf(&p, 0)?;
            p
        }
        (None, false) => {
            eprintln!(
                "usage: generate_gguf MODEL.gguf [PROMPT], or --short for a tiny random model"
            );
            std::process::exit(2);
        }
    };
    let prompt = positional
        .next()
        .map_or("The capital of France is", String::as_str);

    // The weights stay in the file's memory mapping, in their stored types.
    let LoadedEngine {
        mut model,
        tokenizer,
        ..
    } = load_engine(&path)?;
    let config = model.config();
    println!(
        "{}: {} layers, width {}, {} heads, vocabulary {}",
        path.display(),
        config.n_layer,
        config.d_model,
        config.n_head,
        config.vocab_size
    );

    let ids = tokenizer.encode(prompt)?;
    let sampling = SampleOptions {
        max_new_tokens: if short { 16 } else { 64 },
        temperature: 0.0, // greedy
        ..SampleOptions::default()
    };
    let detokenize = |new: &[u32]| tokenizer.decode(new);
    print!("{prompt}");
    let mut stream = |piece: &str| -> orthoformer::Result<()> {
        print!("{piece}");
        std::io::stdout().flush().ok();
        Ok(())
    };
    let stop = tokenizer.end_ids();
    let report = generate_text(
        &mut model,
        prompt,
        &ids,
        sampling,
        &stop,
        &detokenize,
        Some(&mut stream),
    )?;
    println!();
    if let Some(rate) = report.decode_tokens_per_s {
        println!("{} new tokens, {rate:.1} tokens/s", report.new_tokens);
    }

    // Perplexity of the prompt: every token predicted from the ones before it.
    if ids.len() > 1 {
        let eval = evaluate(&mut model, &ids, &EvalOptions::default(), &mut |_| {})?;
        println!(
            "perplexity of the prompt: {:.2} over {} tokens",
            eval.perplexity, eval.tokens
        );
    }
    if short {
        std::fs::remove_file(&path).map_err(|e| orthoformer::Error::io(&path, e))?;
    }
    Ok(())
}
