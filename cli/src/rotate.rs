//! `orthoformer rotate`: fold RMSNorm weights, rotate the residual stream of a pretrained
//! Llama model by an orthogonal `Q` (Haar-random or randomised Hadamard), write the result
//! (Hugging Face folder and/or GGUF), and with `--check` show that the logits did not change.

use std::path::PathBuf;

use super::Outcome;
use super::common::{LazyBar, library_values, print_json};
use crate::output::outln;
use orthoformer::infer::text::text_name;
use orthoformer::io::gguf::GgmlType;
use orthoformer::rotate::options::{
    GGUF_TYPE_NAMES, RotateOptions, gguf_type_name, gguf_type_named,
};
use orthoformer::rotate::{self as lib, RotateJob, RotateReport, RotationKind};

/// Flags of `orthoformer rotate`.
#[derive(Debug, clap::Args)]
pub struct RotateArgs {
    /// The model to rotate: a `.gguf` file or a Hugging Face folder.
    #[arg(long)]
    pub model: PathBuf,
    /// Where to write: a path ending in `.gguf` writes a GGUF file, anything else a Hugging
    /// Face folder (model.safetensors, config.json, tokenizer.json, tokenizer_config.json,
    /// generation_config.json). Repeat for both.
    #[arg(long)]
    pub out: Vec<PathBuf>,
    /// The orthogonal matrix: Haar-random dense (`random`), or random signs times a
    /// normalised Hadamard matrix applied by a fast transform (`hadamard`).
    #[arg(long, default_value_t = RotateOptions::default().rotation, value_parser = library_values(&RotationKind::NAMES, str::parse::<RotationKind>))]
    pub rotation: RotationKind,
    /// Seed of the rotation (Haar draw or Hadamard signs).
    #[arg(long, default_value_t = RotateOptions::default().seed)]
    pub seed: u64,
    /// Also rotate every value head by its own matrix of the same kind and undo it inside
    /// o_proj (QuaRot's R2, exact; drawn from --seed + 2).
    #[arg(long)]
    pub rotate_heads: bool,
    /// Tensor type of a GGUF output: f32 (exact) or f16 (half the size, rounds the weights).
    #[arg(long, default_value = gguf_type_name(RotateOptions::default().gguf_type), value_parser = library_values(&GGUF_TYPE_NAMES, gguf_type_named))]
    pub gguf_type: GgmlType,
    /// Run the original and the rotated model on real text and compare their logits: each
    /// output as written (read back, so f16 rounding counts), moved into place only when the
    /// check passes; a failed check writes nothing and leaves earlier outputs as they were.
    #[arg(long)]
    pub check: bool,
    /// Text for --check [default: the embedded TinyShakespeare].
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Tokens scored by --check.
    #[arg(long, default_value_t = RotateOptions::default().check_tokens)]
    pub check_tokens: usize,
    /// Window of --check [default: 128, or the model's context when that is shorter]; a
    /// window given must fit the model's context.
    #[arg(long)]
    pub context: Option<usize>,
    /// --check fails (exit 1) when max |Δlogit| exceeds this.
    #[arg(long, default_value_t = RotateOptions::default().tolerance)]
    pub tolerance: f64,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

impl RotateArgs {
    /// The library's options these flags ask for.
    pub fn options(&self) -> RotateOptions {
        RotateOptions {
            rotation: self.rotation,
            seed: self.seed,
            heads: self.rotate_heads,
            gguf_type: self.gguf_type,
            check_tokens: self.check_tokens,
            context: self.context,
            tolerance: self.tolerance,
        }
    }
}

/// Runs `orthoformer rotate`: the library's [`lib::run`] on these flags, printed.
pub fn run(args: &RotateArgs) -> anyhow::Result<Outcome> {
    let o = args.options();
    let job = RotateJob {
        model: args.model.clone(),
        out: args.out.clone(),
        check: args.check,
        data: args.data.clone(),
        options: o.clone(),
    };
    let mut bar = LazyBar::new("check", args.json);
    let report = lib::run(&job, &mut |done, total| bar.set(done, total));
    bar.finish();
    let report = report?;
    if args.json {
        print_json(&report)?;
    } else {
        print_text(&report, args, &o)?;
    }
    Ok(match report.check_passed {
        Some(false) => Outcome::CheckFailed,
        _ => Outcome::Success,
    })
}

/// The report as text.
fn print_text(report: &RotateReport, args: &RotateArgs, o: &RotateOptions) -> anyhow::Result<()> {
    outln!(
        "rotated {} by a {:?} orthogonal matrix of order {} (seed {})",
        report.model,
        o.rotation,
        report.width,
        o.seed
    )?;
    outln!("RMSNorm weights folded into q/k/v, gate/up and lm_head before rotating (f64)")?;
    if report.heads {
        outln!("value heads rotated too (R2), each undone inside o_proj")?;
    }
    if report.lm_head_untied_by_fold {
        outln!(
            "note: lm_head was tied to the embedding; the final norm's weight is not constant, so \
             folding it into the head unties it: {} more values ({:.1} MB more as F32)",
            report.lm_head_untie_values,
            report.lm_head_untie_values as f64 * 4e-6
        )?;
    }
    for o in &report.outputs {
        outln!("wrote {o}")?;
    }
    if report.check_passed == Some(false) && !args.out.is_empty() {
        outln!("check failed: nothing written (earlier outputs at --out are unchanged)")?;
    }
    outln!(
        "time: load {:.2} s, fold+rotate {:.2} s, write {:.2} s",
        report.seconds_load,
        report.seconds_fold_rotate,
        report.seconds_write
    )?;
    if let Some(c) = &report.check {
        outln!(
            "check on {} tokens of {}:",
            c.tokens,
            text_name(args.data.as_deref())
        )?;
        outln!(
            "  max |Δlogit|      {:.3e} (tolerance {:.1e})",
            c.max_abs_logit_diff,
            o.tolerance
        )?;
        outln!("  mean KL           {:.3e} nats", c.mean_kl)?;
        outln!("  top-1 agreement   {:.4}", c.top1_agreement)?;
        outln!(
            "  perplexity        original {:.4}, rotated {:.4}",
            c.ppl_a,
            c.ppl_b
        )?;
    }
    Ok(())
}
