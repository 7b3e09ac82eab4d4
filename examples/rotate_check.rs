//! Rotate a pretrained Llama-family model by an orthogonal matrix and check that it still
//! computes the same function: the RMSNorm weights are folded into the next linear layers,
//! the residual stream is rotated (QuaRot's computational invariance), the rotated model is
//! written as a GGUF file, and the logits of the original and the rotated model are compared
//! on TinyShakespeare. A rotation changes no prediction; it spreads outliers across channels
//! before quantisation.
//!
//! Run: `cargo run --release --example rotate_check -- MODEL.gguf [hadamard|random]`, or
//! `-- --short` to run on a tiny random model this program writes itself (CI runs this).

use std::path::PathBuf;

use orthoformer::prelude::*;

fn main() -> orthoformer::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let short = args.iter().any(|a| a == "--short");
    let mut positional = args.iter().filter(|a| *a != "--short");
    let dir = std::env::temp_dir();
    let pid = std::process::id();
    let model = match (positional.next(), short) {
        (Some(p), _) => PathBuf::from(p),
        (None, true) => {
            let p = dir.join(format!("orthoformer-tiny-{pid}.gguf"));
            write_tiny_llama_gguf(&p, 0)?;
            p
        }
        (None, false) => {
            eprintln!(
                "usage: rotate_check MODEL.gguf [hadamard|random], or --short for a tiny random model"
            );
            std::process::exit(2);
        }
    };
    let rotation = match positional.next().map(String::as_str) {
        None | Some("hadamard") => RotationKind::Hadamard,
        Some("random") => RotationKind::Random,
        Some(other) => {
            eprintln!("unknown rotation {other:?}: pass hadamard or random");
            std::process::exit(2);
        }
    };

    let rotated = dir.join(format!("orthoformer-rotated-{pid}.gguf"));
    let options = RotateOptions {
        rotation,
        seed: 0,
        check_tokens: if short { 64 } else { 256 },
        context: Some(if short { 32 } else { 128 }),
        ..RotateOptions::default()
    };
    let job = RotateJob {
        model: model.clone(),
        out: vec![rotated.clone()],
        check: true,
        data: None, // the check's text: the embedded TinyShakespeare
        options,
    };
    let report = rotate(&job, &mut |_, _| {})?;
    println!(
        "rotated {} (width {}) by a {:?} rotation, seed {}, into {}",
        report.model,
        report.width,
        report.rotation,
        report.seed,
        rotated.display()
    );
    if let Some(c) = &report.check {
        println!(
            "on {} tokens: max |Δlogit| {:.2e}, mean KL {:.2e} nats, perplexity {:.3} -> {:.3}, \
             same top-1 token at {:.1}% of positions",
            c.tokens,
            c.max_abs_logit_diff,
            c.mean_kl,
            c.ppl_a,
            c.ppl_b,
            100.0 * c.top1_agreement
        );
    }
    let passed = report.check_passed == Some(true);
    println!(
        "check {} (tolerance {:.0e})",
        if passed { "passed" } else { "FAILED" },
        job.options.tolerance
    );

    // The rotated file is an ordinary GGUF: it loads and runs like the original.
    let mut engine = load_engine(&rotated)?;
    let ids = engine.tokenizer.encode("To be, or not to be")?;
    let eval = evaluate(
        &mut engine.model,
        &ids,
        &EvalOptions::default(),
        &mut |_| {},
    )?;
    println!(
        "rotated model's perplexity on a line of Hamlet: {:.2}",
        eval.perplexity
    );

    std::fs::remove_file(&rotated).map_err(|e| orthoformer::Error::io(&rotated, e))?;
    if short {
        std::fs::remove_file(&model).map_err(|e| orthoformer::Error::io(&model, e))?;
    }
    if !passed {
        std::process::exit(1);
    }
    Ok(())
}
