//! `orthoformer quantize`: quantisation of a pretrained model's weights (RTN, RTN with a
//! clipping search, GPTQ), activations and KV cache, with and without QuaRot's rotations,
//! measured as perplexity on real text by the engine, plus the statistics (kurtosis, max/mean)
//! of the activations entering the linear layers that explain why rotation helps. `--table`
//! runs QuaRot's grid; `--out` writes a GGUF file instead. Both are the library's
//! `quant::run::run`; this file parses the flags and prints the report.

use std::path::PathBuf;

use super::Outcome;
use super::common::{LazyBar, emit, library_values, print_json};
use super::quantize_flags::{RuntimeQuantArgs, bits_parser};
use crate::output::outln;
use orthoformer::quant::file::QuantizeFileReport;
use orthoformer::quant::job::QuantizeJob;
use orthoformer::quant::options::QuantizeOptions;
use orthoformer::quant::run::{self as quantize_run, QuantizeOutcome};
use orthoformer::quant::study::{RotateChoice, RotationSet, StudySettings, WeightRounding};
use orthoformer::quant::{FileType, TensorOverride};

/// Flags of `orthoformer quantize`.
#[derive(Debug, clap::Args)]
pub struct QuantizeArgs {
    /// The model: a `.gguf` file or a Hugging Face folder.
    #[arg(long)]
    pub model: PathBuf,
    /// Weight bits (16 = unquantised).
    #[arg(long, default_value_t = QuantizeOptions::default().wbits, value_parser = bits_parser)]
    pub wbits: u32,
    /// Activation quantisation and R3, as eval and generate run them.
    #[command(flatten)]
    pub runtime: RuntimeQuantArgs,
    /// KV-cache bits (16 = f32; 8 or 4: asymmetric codes per token and head, as eval's
    /// --kv-cache q8/q4).
    #[arg(long, default_value_t = QuantizeOptions::default().kv_bits, value_parser = bits_parser)]
    pub kv_bits: u32,
    /// Values per KV-cache group inside a head (0: one group per head).
    #[arg(long, default_value_t = QuantizeOptions::default().study.kv_group)]
    pub kv_group: usize,
    /// Rotate the residual stream first (QuaRot's R1). `identity` folds the RMSNorm weights
    /// into the linears exactly as R1 does but rotates nothing (Q = I): against `none` it
    /// measures the folding, against `hadamard` the rotation; with --table it adds that column
    /// to the Hadamard grid.
    #[arg(long, default_value_t = QuantizeOptions::default().rotations.residual, value_parser = library_values(&RotateChoice::NAMES, str::parse::<RotateChoice>))]
    pub rotate: RotateChoice,
    /// Also rotate every value head, undone inside o_proj (QuaRot's R2, exact; the kind of
    /// --rotate, Hadamard when none or identity).
    #[arg(long)]
    pub rotate_heads: bool,
    /// Also apply QuaRot's online Hadamard transform to the input of every down_proj (R4:
    /// weights absorb `H`, activations are transformed at run time before quantisation).
    #[arg(long)]
    pub online_hadamard: bool,
    /// QuaRot's whole rotation set: --rotate-heads, --qk-hadamard and --online-hadamard, with
    /// --rotate hadamard unless --rotate random (--rotate identity: all but R1, norms folded).
    #[arg(long)]
    pub full_rotation: bool,
    /// Weight group size along the input dimension (0: one scale per output channel).
    #[arg(long, default_value_t = QuantizeOptions::default().study.group)]
    pub group: usize,
    /// Study: round weights on an asymmetric grid (a zero point per channel or group) instead
    /// of ±max, for every method (--out: the block format decides; q4_1 and q4_k have a
    /// minimum).
    #[arg(long)]
    pub weight_asym: bool,
    /// Text(s) to measure perplexity on; repeat for several [default: the embedded
    /// TinyShakespeare].
    #[arg(long)]
    pub data: Vec<PathBuf>,
    /// Tokens scored per text.
    #[arg(long, default_value_t = QuantizeOptions::default().max_tokens)]
    pub max_tokens: usize,
    /// Window of the sliding-window perplexity.
    #[arg(long, default_value_t = QuantizeOptions::default().study.context)]
    pub context: usize,
    /// Seed(s) of the rotations, comma-separated: the study runs every rotated configuration
    /// once per seed and reports the mean and range (--out takes one).
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pub seed: Vec<u64>,
    /// Run the whole grid (FP, W8A8, W4A16, W4A8, W4A4, W4A4KV4; unrotated, with R1 and with
    /// R1-R4; for every --method) instead of one configuration.
    #[arg(long)]
    pub table: bool,
    /// Write the quantised model as this GGUF file (weights only: --method onto
    /// `--gguf-type`'s block grids, R1, R2 and R4 folded in) instead of running the study.
    /// `--data`'s last `--calib-tokens` tokens calibrate GPTQ, imatrix and the clipping search.
    /// From a Hugging Face folder, its tokenizer.json becomes the GGUF tokenizer as llama.cpp's
    /// converter writes it (a tokenizer llama.cpp would run differently is refused by name).
    #[arg(long, requires = "gguf_type")]
    pub out: Option<PathBuf>,
    /// Block format or mix of --out: q8_0, q6_k, q5_k, q5_1, q5_0, q4_k, q4_1, q4_0, iq4_nl,
    /// iq4_xs (every matrix, with llama-quantize's per-tensor rules for that type), or
    /// llama-quantize's mixes q4_k_m, q4_k_s, q5_k_m, q5_k_s (the same per-tensor choices). As
    /// llama.cpp: the head (or a tied embedding) is Q6_K or Q8_0, and matrices whose rows are
    /// not whole 256-weight super-blocks fall back (q4_k to q5_0, q5_k to q5_1, q6_k to q8_0,
    /// iq4_xs to iq4_nl); the report lists every fallback. The file records how it was made
    /// under orthoformer.quantize.* (type, method, rotation and seed, calibration text SHA-256
    /// and token count).
    #[arg(long, requires = "out", value_parser = library_values(&FileType::names(), str::parse::<FileType>))]
    pub gguf_type: Option<FileType>,
    /// --out: store tensors whose GGUF name contains PATTERN in TYPE, instead of the mix's
    /// choice (e.g. attn_v=q8_0, blk.0.ffn_down=q6_k, token_embd=q6_k); repeat for several,
    /// the first match wins (llama-quantize's --tensor-type, with a substring, not a regex).
    #[arg(long, value_name = "PATTERN=TYPE", requires = "out", value_parser = parse_override)]
    pub tensor_type: Vec<TensorOverride>,
    /// --out: calibrate layer by layer, each on the outputs of the layers already quantised
    /// (GPTQ's reference order), instead of once on the unquantised model.
    #[arg(long, requires = "out")]
    pub sequential: bool,
    /// --out with --method gptq or imatrix: keep the calibration in FILE (safetensors: every
    /// layer's input sums, with the model's, rotation's and text's SHA-256). When FILE exists
    /// its sums are read instead of calibrating again (another model, rotation, text or
    /// window is refused by name), so a second type from the same calibration takes only the
    /// rounding; when it does not, the calibration is written there.
    #[arg(long, value_name = "FILE", requires = "out")]
    pub calibration: Option<PathBuf>,
    /// How weights are rounded: rtn (each block's range), rtn-clip (a clip-ratio search), gptq,
    /// and for --out search (llama-quantize's block-scale search) and imatrix (the same,
    /// weighted by calibration: llama-quantize --imatrix). The study runs each of a
    /// comma-separated list side by side (--out takes one).
    #[arg(long, value_delimiter = ',', default_value = "rtn", value_parser = library_values(&WeightRounding::NAMES, str::parse::<WeightRounding>))]
    pub method: Vec<WeightRounding>,
    /// RTN: search each block's clip ratio (1 to 0.5) for the least error, weighted by the
    /// calibration inputs' energy (the same as --method rtn-clip).
    #[arg(long)]
    pub clip: bool,
    /// GPTQ's damping, a fraction of the mean diagonal of the Hessian.
    #[arg(long, default_value_t = QuantizeOptions::default().study.gptq.damp)]
    pub damp: f64,
    /// GPTQ: process the inputs in their order instead of by decreasing Hessian diagonal.
    #[arg(long)]
    pub no_act_order: bool,
    /// Calibration tokens (taken from the end of the first --data, or of TinyShakespeare).
    #[arg(long, default_value_t = QuantizeOptions::default().calib_tokens)]
    pub calib_tokens: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

impl QuantizeArgs {
    /// The rotations these flags ask for.
    pub fn rotations(&self) -> RotationSet {
        let set = if self.full_rotation {
            RotationSet::full(match self.rotate {
                RotateChoice::None => RotateChoice::Hadamard,
                r => r,
            })
        } else {
            RotationSet::residual(self.rotate)
        };
        RotationSet {
            heads: set.heads || self.rotate_heads,
            qk: set.qk || self.runtime.qk_hadamard,
            down: set.down || self.online_hadamard,
            ..set
        }
    }

    /// The weight roundings asked for, each once, in order (`--clip` makes RTN `rtn-clip`).
    pub fn methods(&self) -> Vec<WeightRounding> {
        let mut m: Vec<WeightRounding> = Vec::new();
        for &x in &self.method {
            let w = match x {
                WeightRounding::Rtn if self.clip => WeightRounding::RtnClip,
                w => w,
            };
            if !m.contains(&w) {
                m.push(w);
            }
        }
        m
    }

    /// The library's options these flags ask for.
    pub fn options(&self) -> QuantizeOptions {
        QuantizeOptions {
            wbits: self.wbits,
            abits: self.runtime.abits,
            kv_bits: self.kv_bits,
            rotations: self.rotations(),
            method: self.methods(),
            table: self.table,
            max_tokens: self.max_tokens,
            seed: self.seed.clone(),
            calib_tokens: self.calib_tokens,
            study: StudySettings {
                context: self.context,
                group: self.group,
                weight_asym: self.weight_asym,
                act_clip: self.runtime.act_clip,
                act_asym: self.runtime.act_asym,
                kv_group: self.kv_group,
                gptq: orthoformer::quant::GptqOptions {
                    damp: self.damp,
                    act_order: !self.no_act_order,
                    ..Default::default()
                },
            },
            sequential: self.sequential,
        }
    }

    /// The library's job these flags ask for.
    pub fn job(&self) -> QuantizeJob {
        QuantizeJob {
            model: self.model.clone(),
            data: self.data.clone(),
            options: self.options(),
            out: self.out.clone(),
            gguf_type: self.gguf_type,
            tensor_types: self.tensor_type.clone(),
            calibration: self.calibration.clone(),
        }
    }
}

/// `--tensor-type`'s parser: the library's `PATTERN=TYPE`.
fn parse_override(s: &str) -> Result<TensorOverride, String> {
    s.parse().map_err(|e: orthoformer::Error| e.to_string())
}

/// Runs `orthoformer quantize`.
pub fn run(args: &QuantizeArgs) -> anyhow::Result<Outcome> {
    let job = args.job();
    let mut bar = LazyBar::new(
        if args.out.is_some() {
            "quantize (layers)"
        } else {
            "quantize (tokens)"
        },
        args.json,
    );
    let outcome = quantize_run::run(&job, &mut |done, total| bar.set(done, total));
    bar.finish();
    match outcome? {
        QuantizeOutcome::Study(report) => emit(&*report, args.json)?,
        QuantizeOutcome::Written(report) if args.json => print_json(&*report)?,
        QuantizeOutcome::Written(report) => print_written(&report)?,
    }
    Ok(Outcome::Success)
}

/// The written file's report as text.
fn print_written(r: &QuantizeFileReport) -> anyhow::Result<()> {
    outln!(
        "wrote {} ({} bytes, {} as {}, {}, rotations {})",
        r.out,
        r.bytes,
        r.gguf_type,
        r.file_type,
        r.method,
        r.rotate
    )?;
    let types: Vec<String> = r.types.0.iter().map(|(t, n)| format!("{n} {t}")).collect();
    outln!("tensors: {}", types.join(", "))?;
    if !r.fallbacks.is_empty() {
        let n = r.fallbacks.len();
        outln!(
            "{n} tensor{} fell back, as llama-quantize does (first: {})",
            if n == 1 { "" } else { "s" },
            r.fallbacks[0]
        )?;
    }
    if !r.overridden.is_empty() {
        outln!("{} tensors by --tensor-type", r.overridden.len())?;
    }
    if r.head_untied {
        outln!(
            "folding the final norm untied the head: output.weight adds {:.1} MiB ({:.1}% of the file)",
            r.head_bytes as f64 / (1u64 << 20) as f64,
            100.0 * r.head_bytes as f64 / r.bytes.max(1) as f64
        )?;
    }
    if r.llama_cpp != "yes" {
        outln!("llama.cpp: {}", r.llama_cpp)?;
    }
    if r.qk_hadamard_at_run_time {
        outln!(
            "R3 acts at run time: pass --qk-hadamard (with --kv-cache q8|q4) to eval or generate"
        )?;
    }
    outln!(
        "calibration: {}{}{}; time: calibrate {:.1} s, quantise {:.1} s",
        r.calibration_text,
        if r.sequential { ", layer by layer" } else { "" },
        match r.calibration_file.as_str() {
            "read" => ", sums read from the calibration file",
            "written" => ", sums written to the calibration file",
            _ => "",
        },
        r.seconds_calibrate,
        r.seconds_quantize
    )?;
    outln!(
        "the file run by the engine vs the in-memory model: max |Δlogit| {:.3e} on {} tokens, same greedy tokens: {}",
        r.max_abs_logit_diff_file,
        r.check_tokens,
        r.greedy_same
    )?;
    Ok(())
}
