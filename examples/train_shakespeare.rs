//! Train a small GPT with orthogonal attention on the embedded TinyShakespeare, then sample
//! from it: the library's training loop, checkpointing and generation in one program.
//!
//! Run: `cargo run --release --example train_shakespeare` (nanoGPT's character-level Shakespeare
//! shape, 4 layers of width 128, for 300 steps), or `-- --short` for 5 steps of the `tiny`
//! preset (2 layers of width 8; what CI runs).

use orthoformer::prelude::*;

fn main() -> orthoformer::Result<()> {
    let short = std::env::args().any(|a| a == "--short");
    let steps = if short { 5 } else { 300 };

    // A preset shape with frozen random orthogonal W_Q and W_K in every head. The
    // vocabulary size is set from the tokenizer when the session starts.
    let mut model = GptConfig::preset(if short { "tiny" } else { "shakespeare-char" })?;
    model.attention = AttentionKind::Orthogonal;
    let options = TrainOptions {
        steps,
        batch: 12,
        eval_every: steps.div_ceil(5),
        eval_iters: 2,
        ..TrainOptions::default()
    };
    let spec = FreshSpec {
        model,
        model_seed: 0,
        options,
    };

    // A run checkpoints into a folder; this one is temporary.
    let out = std::env::temp_dir().join(format!("orthoformer-train-tiny-{}", std::process::id()));
    let corpus = Corpus::tiny_shakespeare();
    let mut session = Session::fresh(&corpus, TokenizerKind::Char, 0, spec, &out)?;
    println!(
        "training {} parameters (W_Q and W_K frozen) for {steps} steps ({} characters of text, one token each)",
        session.model.params().data.len(),
        corpus.text.len(),
    );
    session.run(None, None, &mut Silent)?;
    for record in &session.state.metrics {
        println!(
            "step {:>4}  train loss {:.3}  validation loss {:.3}",
            record.step, record.train_loss, record.val_loss
        );
    }

    // Sample a continuation from the trained model (seeded: the same text every run).
    let tokenizer = &session.prepared.tokenizer;
    let prompt = tokenizer.encode("ROMEO:\n")?;
    let sampling = SampleOptions {
        max_new_tokens: if short { 20 } else { 200 },
        temperature: 0.8,
        seed: 1,
        ..SampleOptions::default()
    };
    let new = generate_ids(&mut session.model, &prompt, sampling, &[], &mut |_| Ok(()))?;
    println!("ROMEO:\n{}", tokenizer.decode(&new)?);

    std::fs::remove_dir_all(&out).map_err(|e| orthoformer::Error::io(&out, e))?;
    Ok(())
}
