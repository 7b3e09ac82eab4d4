//! `orthoformer params`: exact parameter, memory and FLOP accounting of a model configuration,
//! optionally beside seed 003's §4 claims.

use super::Outcome;
use anyhow::Context;
use orthoformer::model::accounting::{Account, account, unfrozen_twin};
use orthoformer::model::seed_claims::{Claim, seed_claims};
use orthoformer::model::{AttentionKind, GptConfig};
use std::path::PathBuf;

/// Flags of `orthoformer params`.
#[derive(Debug, clap::Args)]
pub struct ParamsArgs {
    /// Preset: tiny, seed-003, gpt2-small, config-a, config-b, shakespeare-char.
    #[arg(long, default_value = "seed-003")]
    pub preset: String,
    /// A TOML model config (every GptConfig field); replaces --preset.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Attention: softmax, orthogonal, linear, orthogonal-linear, orthogonal-tied, identity-q,
    /// orthogonal-hadamard (default: the config's).
    #[arg(long)]
    pub attention: Option<String>,
    /// Batch size for the activation memory.
    #[arg(long, default_value_t = 8)]
    pub batch: usize,
    /// Sequence length for activations and FLOPs (default: the context).
    #[arg(long)]
    pub seq: Option<usize>,
    /// Print seed 003's §4 claims beside the true figures.
    #[arg(long)]
    pub seed_claims: bool,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

#[derive(serde::Serialize)]
struct Report<'a> {
    config: &'a GptConfig,
    account: &'a Account,
    /// What freezing saves against the same model with trainable Q/K.
    frozen_savings: Option<Savings>,
    seed_claims: Option<Vec<Claim>>,
    /// This command's own peak resident memory: the baseline of any Orthoformer process
    /// (binary, libraries, allocator), `None` where the system does not report it.
    process_peak_rss_bytes: Option<u64>,
}

#[derive(serde::Serialize)]
struct Savings {
    trainable_params: usize,
    gradient_bytes: usize,
    adamw_bytes: usize,
    checkpoint_bytes: usize,
    backward_flops_per_token: u64,
    not_saved: Vec<&'static str>,
}

/// Runs `orthoformer params`.
pub fn run(args: &ParamsArgs) -> anyhow::Result<Outcome> {
    let mut cfg = match &args.config {
        Some(p) => GptConfig::from_toml_file(p)?,
        None => GptConfig::preset(&args.preset)?,
    };
    if let Some(a) = &args.attention {
        cfg.attention = AttentionKind::parse(a)?;
    }
    cfg.validate()?;
    let seq = args.seq.unwrap_or(cfg.context);
    if seq == 0 || seq > cfg.context {
        anyhow::bail!(
            "--seq {seq} must be between 1 and the context {}",
            cfg.context
        );
    }
    if args.batch == 0 {
        anyhow::bail!("--batch must be at least 1");
    }
    let acc = account(&cfg, args.batch, seq)?;
    let twin = if cfg.attention.frozen_qk() {
        Some(account(&unfrozen_twin(&cfg), args.batch, seq)?)
    } else {
        None
    };
    let savings = twin.map(|twin| Savings {
        trainable_params: twin.trainable - acc.trainable,
        gradient_bytes: twin.memory.gradients - acc.memory.gradients,
        adamw_bytes: twin.memory.adamw - acc.memory.adamw,
        // Frozen weights are stored in the model file; their AdamW moments are not.
        checkpoint_bytes: 8 * acc.frozen,
        backward_flops_per_token: twin.flops_per_token.backward - acc.flops_per_token.backward,
        not_saved: vec![
            "forward FLOPs (Q and K are still projected)",
            "activations (Q and K are still needed for the backward)",
            "weight memory while training (frozen W_Q, W_K are held in memory)",
        ],
    });
    let claims = if args.seed_claims {
        Some(seed_claims(&cfg, args.batch, seq)?)
    } else {
        None
    };
    let report = Report {
        config: &cfg,
        account: &acc,
        frozen_savings: savings,
        seed_claims: claims,
        process_peak_rss_bytes: orthoformer::train::rss::peak_rss_bytes(),
    };
    if args.json {
        super::common::print_json(&report).context("writing JSON")?;
    } else {
        print_tables(&report);
    }
    Ok(Outcome::Success)
}

fn n(x: usize) -> String {
    orthoformer::model::accounting::thousands(x)
}

fn print_tables(r: &Report) {
    let (c, a) = (r.config, r.account);
    println!(
        "model: {} layers, d_model {}, {} heads, d_ff {}, vocab {}, context {}, attention {}, {:?}-LN",
        c.n_layer,
        c.d_model,
        c.n_head,
        c.d_ff,
        c.vocab_size,
        c.context,
        c.attention.name(),
        c.norm
    );
    println!("{:<22} {:>14} {:>14}", "component", "trainable", "frozen");
    for x in &a.components {
        let name = if x.per_layer {
            format!("{} (x{})", x.name, c.n_layer)
        } else {
            x.name.clone()
        };
        println!("{:<22} {:>14} {:>14}", name, n(x.trainable), n(x.frozen));
    }
    println!("{:<22} {:>14}", "total", n(a.total));
    println!("{:<22} {:>14}", "trainable", n(a.trainable));
    println!("{:<22} {:>14}", "frozen", n(a.frozen));
    let m = &a.memory;
    println!(
        "training memory (bytes, f32, activations at batch {} x seq {}):",
        m.batch, m.seq
    );
    for (k, v) in [
        ("weights", m.weights),
        ("gradients", m.gradients),
        ("AdamW m+v", m.adamw),
        ("activations", m.activations),
        ("checkpoint write", m.checkpoint_write),
        ("total", m.total),
    ] {
        println!("  {k:<20} {:>16}", n(v));
    }
    match r.process_peak_rss_bytes {
        Some(b) => println!(
            "  a training process also holds its data and a baseline; this command's peak \
             resident memory (the baseline): {} ({:.1} MiB)",
            n(b as usize),
            orthoformer::train::rss::mib(b)
        ),
        None => println!("  process baseline: peak resident memory unavailable on this system"),
    }
    let f = &a.flops_per_token;
    println!(
        "FLOPs per token (matrix products): forward {}, backward {}",
        n(f.forward as usize),
        n(f.backward as usize)
    );
    if let Some(s) = &r.frozen_savings {
        println!(
            "frozen Q/K save: {} trainable parameters, {} gradient bytes, {} AdamW bytes, {} checkpoint bytes, {} backward FLOPs per token",
            n(s.trainable_params),
            n(s.gradient_bytes),
            n(s.adamw_bytes),
            n(s.checkpoint_bytes),
            n(s.backward_flops_per_token as usize)
        );
        println!("not saved: {}", s.not_saved.join("; "));
    }
    if let Some(claims) = &r.seed_claims {
        println!("seed 003 §4 claims vs the truth for this model:");
        for cl in claims {
            println!(
                "  {}: seed {} | true {}\n    ({})",
                cl.what, cl.seed, cl.truth, cl.reason
            );
        }
    }
}
