//! `orthoformer rotate`: fold RMSNorm weights, rotate the residual stream of a pretrained
//! Llama model by an orthogonal `Q` (Haar-random or randomised Hadamard), write the result
//! (Hugging Face folder and/or GGUF), and with `--check` show that the logits did not change.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use serde::Serialize;

use super::Outcome;
use super::common::{print_json, progress_bar};
use super::pretrained::{data_name, read_tokens};
use crate::output::outln;
use orthoformer::export::llama::{save_gguf, save_hf_folder};
use orthoformer::io::gguf::GgmlType;
use orthoformer::model::llama::{Llama, load_model};
use orthoformer::rotate::check::{Comparison, compare_models};
use orthoformer::rotate::options::RotateOptions;
use orthoformer::rotate::{self as lib, Rotation, fold_norms, rotate_weights};

/// Which orthogonal matrix (the flag's form of [`lib::RotationKind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RotationKind {
    /// Haar-random dense orthogonal matrix.
    Random,
    /// Random signs times a normalised Hadamard matrix, applied by a fast transform.
    Hadamard,
}

impl From<RotationKind> for lib::RotationKind {
    fn from(k: RotationKind) -> Self {
        match k {
            RotationKind::Random => lib::RotationKind::Random,
            RotationKind::Hadamard => lib::RotationKind::Hadamard,
        }
    }
}

impl From<lib::RotationKind> for RotationKind {
    fn from(k: lib::RotationKind) -> Self {
        match k {
            lib::RotationKind::Random => RotationKind::Random,
            lib::RotationKind::Hadamard => RotationKind::Hadamard,
        }
    }
}

/// Storage type of a GGUF output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GgufType {
    /// 32-bit floats (exact).
    F32,
    /// 16-bit floats (half the size, rounds the weights).
    F16,
}

impl GgufType {
    /// The flag's form of a GGUF output type (the library writes F32 or F16 only).
    fn of(t: GgmlType) -> Self {
        if t == GgmlType::F16 {
            GgufType::F16
        } else {
            GgufType::F32
        }
    }

    /// The tensor type written.
    fn ggml(self) -> GgmlType {
        match self {
            GgufType::F32 => GgmlType::F32,
            GgufType::F16 => GgmlType::F16,
        }
    }
}

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
    /// The orthogonal matrix.
    #[arg(long, value_enum, default_value_t = RotateOptions::default().rotation.into())]
    pub rotation: RotationKind,
    /// Seed of the rotation (Haar draw or Hadamard signs).
    #[arg(long, default_value_t = RotateOptions::default().seed)]
    pub seed: u64,
    /// Tensor type of a GGUF output.
    #[arg(long, value_enum, default_value_t = GgufType::of(RotateOptions::default().gguf_type))]
    pub gguf_type: GgufType,
    /// Run the original and the rotated model on real text and compare their logits (the
    /// rotated f32 weights as written to safetensors or an F32 GGUF; `--gguf-type f16` rounds
    /// the file's weights further).
    #[arg(long)]
    pub check: bool,
    /// Text for --check [default: the embedded TinyShakespeare].
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Tokens scored by --check.
    #[arg(long, default_value_t = RotateOptions::default().check_tokens)]
    pub check_tokens: usize,
    /// Window of --check.
    #[arg(long, default_value_t = RotateOptions::default().context)]
    pub context: usize,
    /// --check fails (exit 1) when max |Δlogit| exceeds this.
    #[arg(long, default_value_t = RotateOptions::default().tolerance)]
    pub tolerance: f64,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Report {
    model: String,
    rotation: lib::RotationKind,
    seed: u64,
    width: usize,
    lm_head_untied_by_fold: bool,
    outputs: Vec<String>,
    seconds_load: f64,
    seconds_fold_rotate: f64,
    seconds_write: f64,
    check: Option<Comparison>,
    check_passed: Option<bool>,
}

impl RotateArgs {
    /// The library's options these flags ask for.
    pub fn options(&self) -> RotateOptions {
        RotateOptions {
            rotation: self.rotation.into(),
            seed: self.seed,
            gguf_type: self.gguf_type.ggml(),
            check_tokens: self.check_tokens,
            context: self.context,
            tolerance: self.tolerance,
        }
    }
}

/// Runs `orthoformer rotate`.
pub fn run(args: &RotateArgs) -> anyhow::Result<Outcome> {
    let o = args.options();
    if args.out.is_empty() && !args.check {
        anyhow::bail!("nothing to do: pass --out PATH (folder or .gguf) and/or --check");
    }
    // Every input is checked before anything is written.
    if args.check {
        if !(o.tolerance.is_finite() && o.tolerance >= 0.0) {
            anyhow::bail!(
                "--tolerance {} must be a finite number >= 0 (max |Δlogit| allowed)",
                o.tolerance
            );
        }
        if o.check_tokens == 0 {
            anyhow::bail!("--check-tokens must be at least 1");
        }
        if o.context < 2 {
            anyhow::bail!("--context must be at least 2 (got {})", o.context);
        }
    }
    // A folder output must not be another command's folder (a training checkpoint, a
    // download): checked before the model is loaded and rotated.
    for out in &args.out {
        if out.extension().is_none_or(|e| e != "gguf") {
            orthoformer::io::folder_kind::check(
                out,
                orthoformer::io::folder_kind::FolderKind::HfLlama,
            )?;
        }
    }
    let t0 = Instant::now();
    let loaded = load_model(&args.model).context("loading the model")?;
    let t_load = t0.elapsed().as_secs_f64();
    let check_ids = if args.check {
        let max = loaded.weights.cfg.max_context;
        if o.context > max {
            anyhow::bail!("--context {} exceeds the model's {max}", o.context);
        }
        super::pretrained::check_cache_fits(&loaded.weights.cfg, o.context)?;
        let ids = read_tokens(&loaded.tokenizer, args.data.as_deref(), o.check_tokens)?;
        // The comparison keeps the original model's logits for every scored token.
        let v = loaded.weights.cfg.vocab_size;
        orthoformer::io::memory::check_fits(
            orthoformer::io::memory::bytes(&[ids.len(), v, 4]),
            format_args!(
                "--check on {} tokens (their logits over {v} tokens)",
                ids.len()
            ),
        )?;
        Some(ids)
    } else {
        None
    };
    let t1 = Instant::now();
    let mut w = loaded.weights.clone();
    let was_tied = w.lm_head.is_none();
    let c = w.cfg.d_model;
    let r = Rotation::of_kind(o.rotation, c, o.seed)?;
    fold_norms(&mut w);
    rotate_weights(&mut w, &r)?;
    let t_rot = t1.elapsed().as_secs_f64();
    // The check runs before anything is written, so a model whose logits are not finite is
    // refused (an error) and never written. With outputs to write, it runs on a copy.
    let (for_check, for_writes) = match (&check_ids, args.out.is_empty()) {
        (Some(_), false) => {
            let bytes: usize = w.hf_tensors().iter().map(|t| t.2.len() * 4).sum();
            orthoformer::io::memory::check_fits(
                Some(bytes),
                format_args!("--check beside --out (a copy of the rotated weights)"),
            )?;
            (Some(w.clone()), Some(w))
        }
        (Some(_), true) => (Some(w), None),
        (None, _) => (None, Some(w)),
    };
    let mut check = None;
    if let (Some(ids), Some(rotated)) = (check_ids, for_check) {
        let bar = progress_bar(2 * (ids.len() as u64 - 1), "check", args.json);
        let mut a = Llama::new(loaded.weights);
        let mut b = Llama::new(rotated);
        let cmp = compare_models(&mut a, &mut b, &ids, o.context, &mut |n| {
            bar.set_position(n as u64)
        })
        .context("checking the rotated model (nothing written)")?;
        bar.finish_and_clear();
        check = Some(cmp);
    }
    let t2 = Instant::now();
    // `for_writes` is `None` only when there is no --out.
    for (out, w) in args.out.iter().zip(for_writes.iter().cycle()) {
        if out.extension().is_some_and(|e| e == "gguf") {
            let meta = loaded.gguf_metadata.as_deref().unwrap_or(&[]);
            save_gguf(w, meta, out, o.gguf_type)
                .with_context(|| format!("writing {}", out.display()))?;
        } else {
            save_hf_folder(w, &loaded.tokenizer, &loaded.special, out)
                .with_context(|| format!("writing {}", out.display()))?;
        }
    }
    let t_write = t2.elapsed().as_secs_f64();
    let passed = check.as_ref().map(|c| c.max_abs_logit_diff <= o.tolerance);
    let report = Report {
        model: args.model.display().to_string(),
        rotation: o.rotation,
        seed: o.seed,
        width: c,
        lm_head_untied_by_fold: was_tied,
        outputs: args.out.iter().map(|p| p.display().to_string()).collect(),
        seconds_load: t_load,
        seconds_fold_rotate: t_rot,
        seconds_write: t_write,
        check,
        check_passed: passed,
    };
    if args.json {
        print_json(&report)?;
    } else {
        outln!(
            "rotated {} by a {:?} orthogonal matrix of order {c} (seed {})",
            report.model,
            o.rotation,
            o.seed
        )?;
        outln!("RMSNorm weights folded into q/k/v, gate/up and lm_head before rotating (f64)")?;
        if was_tied {
            outln!("note: lm_head was tied to the embedding; folding the final norm unties it")?;
        }
        for o in &report.outputs {
            outln!("wrote {o}")?;
        }
        outln!("time: load {t_load:.2} s, fold+rotate {t_rot:.2} s, write {t_write:.2} s")?;
        if let Some(c) = &report.check {
            outln!(
                "check on {} tokens of {}:",
                c.tokens,
                data_name(args.data.as_deref())
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
    }
    Ok(match passed {
        Some(false) => Outcome::CheckFailed,
        _ => Outcome::Success,
    })
}
