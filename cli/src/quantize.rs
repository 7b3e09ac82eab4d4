//! `orthoformer quantize`: quantisation of a pretrained model's weights (RTN, RTN with a
//! clipping search, GPTQ), activations and KV cache, with and without QuaRot's rotations,
//! measured as perplexity on real text by the engine, plus the statistics (kurtosis, max/mean)
//! of the activations entering the linear layers that explain why rotation helps. `--table`
//! runs QuaRot's grid; `--out` writes a GGUF file instead (`quantize_out`). The study itself
//! lives in the library (`rotate::quant_study`).

use std::path::PathBuf;

use anyhow::Context;

use super::Outcome;
use super::common::{emit, progress_bar};
use super::quantize_flags::{RuntimeQuantArgs, bits_parser};
use orthoformer::infer::text::{read_tokens, text_name as data_name};
use orthoformer::model::llama::load_model;
use orthoformer::rotate::quant_options::QuantizeOptions;
use orthoformer::rotate::quant_report::QuantReport;
use orthoformer::rotate::quant_study::{self, RotationSet, StudyText, WeightRounding, run_study};

/// Whether and how to rotate before quantising.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RotateChoice {
    /// Quantise the original model.
    None,
    /// Haar-random rotation first.
    Random,
    /// Randomised Hadamard rotation first.
    Hadamard,
}

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
    /// Rotate the residual stream first (QuaRot's R1).
    #[arg(long, value_enum, default_value_t = QuantizeOptions::default().rotations.residual.into())]
    pub rotate: RotateChoice,
    /// Also rotate every value head, undone inside o_proj (QuaRot's R2, exact; the kind of
    /// --rotate, Hadamard when none).
    #[arg(long)]
    pub rotate_heads: bool,
    /// Also apply QuaRot's online Hadamard transform to the input of every down_proj (R4:
    /// weights absorb `H`, activations are transformed at run time before quantisation).
    #[arg(long)]
    pub online_hadamard: bool,
    /// QuaRot's whole rotation set: --rotate-heads, --qk-hadamard and --online-hadamard, with
    /// --rotate hadamard unless --rotate random.
    #[arg(long)]
    pub full_rotation: bool,
    /// Weight group size along the input dimension (0: one scale per output channel).
    #[arg(long, default_value_t = QuantizeOptions::default().study.group)]
    pub group: usize,
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
    /// Write the quantised model as this GGUF file (weights only: RTN or GPTQ onto
    /// `--gguf-type`'s block grid, R1, R2 and R4 folded in) instead of running the study.
    /// `--data`'s last `--calib-tokens` tokens calibrate GPTQ and the clipping search.
    #[arg(long, requires = "gguf_type")]
    pub out: Option<PathBuf>,
    /// Block format of --out: q8_0, q4_0, q4_1 (32 weights per scale) or q4_k (super-blocks of
    /// 256 with 6-bit scales and mins per 32; matrices whose rows are not whole super-blocks
    /// fall back to q4_1). The embedding and lm_head are written Q8_0.
    #[arg(long, value_enum, requires = "out")]
    pub gguf_type: Option<GgufOut>,
    /// How weights are rounded; the study runs each of a comma-separated list side by side
    /// (--out takes one).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "rtn")]
    pub method: Vec<Method>,
    /// RTN: search each block's clip ratio (1 to 0.5) for the least error, weighted by the
    /// calibration inputs' energy (the same as --method rtn-clip).
    #[arg(long)]
    pub clip: bool,
    /// GPTQ's damping, a fraction of the mean diagonal of the Hessian.
    #[arg(long, default_value_t = 0.01)]
    pub damp: f64,
    /// GPTQ: process the inputs in their order instead of by decreasing Hessian diagonal.
    #[arg(long)]
    pub no_act_order: bool,
    /// Calibration tokens (taken from the end of the first --data, or of TinyShakespeare).
    #[arg(long, default_value_t = 4096)]
    pub calib_tokens: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Block format of `quantize --out`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GgufOut {
    /// 8-bit, one f16 scale per 32.
    #[value(name = "q8_0")]
    Q8_0,
    /// 4-bit symmetric, one f16 scale per 32.
    #[value(name = "q4_0")]
    Q4_0,
    /// 4-bit with an f16 scale and minimum per 32.
    #[value(name = "q4_1")]
    Q4_1,
    /// 4-bit K-quant: super-blocks of 256, 6-bit scale and minimum per 32.
    #[value(name = "q4_k")]
    Q4K,
}

/// Weight rounding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Method {
    /// Round to nearest.
    Rtn,
    /// Round to nearest, each block's clip ratio searched.
    RtnClip,
    /// GPTQ on calibration Hessians.
    Gptq,
}

impl From<RotateChoice> for quant_study::RotateChoice {
    fn from(r: RotateChoice) -> Self {
        match r {
            RotateChoice::None => quant_study::RotateChoice::None,
            RotateChoice::Random => quant_study::RotateChoice::Random,
            RotateChoice::Hadamard => quant_study::RotateChoice::Hadamard,
        }
    }
}

impl From<quant_study::RotateChoice> for RotateChoice {
    fn from(r: quant_study::RotateChoice) -> Self {
        match r {
            quant_study::RotateChoice::None => RotateChoice::None,
            quant_study::RotateChoice::Random => RotateChoice::Random,
            quant_study::RotateChoice::Hadamard => RotateChoice::Hadamard,
        }
    }
}

impl QuantizeArgs {
    /// The rotations these flags ask for.
    pub fn rotations(&self) -> RotationSet {
        let full = self.full_rotation;
        let residual = match (self.rotate, full) {
            (RotateChoice::None, true) => quant_study::RotateChoice::Hadamard,
            (r, _) => r.into(),
        };
        RotationSet {
            residual,
            heads: self.rotate_heads || full,
            qk: self.runtime.qk_hadamard || full,
            down: self.online_hadamard || full,
        }
    }

    /// The weight roundings asked for, each once, in order (`--clip` makes RTN `rtn-clip`).
    pub fn methods(&self) -> Vec<WeightRounding> {
        let mut m: Vec<WeightRounding> = Vec::new();
        for x in &self.method {
            let w = match (x, self.clip) {
                (Method::Rtn, false) => WeightRounding::Rtn,
                (Method::Rtn | Method::RtnClip, _) => WeightRounding::RtnClip,
                (Method::Gptq, _) => WeightRounding::Gptq,
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
            study: quant_study::StudySettings {
                context: self.context,
                group: self.group,
                act_clip: self.runtime.act_clip,
                act_asym: self.runtime.act_asym,
                kv_group: self.kv_group,
            },
        }
    }
}

/// Runs `orthoformer quantize`.
pub fn run(args: &QuantizeArgs) -> anyhow::Result<Outcome> {
    let o = args.options();
    o.validate().map_err(|e| anyhow::anyhow!(e))?;
    if let (Some(out), Some(t)) = (args.out.as_deref(), args.gguf_type) {
        return super::quantize_out::run(args, out, t);
    }
    let data: Vec<Option<&std::path::Path>> = if args.data.is_empty() {
        vec![None]
    } else {
        args.data.iter().map(|p| Some(p.as_path())).collect()
    };
    let loaded = load_model(&args.model).context("loading the model")?;
    let texts: Vec<Vec<u32>> = data
        .iter()
        .map(|p| read_tokens(&loaded.tokenizer, *p, o.max_tokens))
        .collect::<orthoformer::Result<_>>()?;
    let configs = o.configs();
    let study_texts: Vec<StudyText<'_>> = texts
        .iter()
        .zip(&data)
        .map(|(t, p)| StudyText {
            name: data_name(*p),
            tokens: t,
        })
        .collect();
    let total = quant_study::study_tokens(&configs, &study_texts, &o.seed);
    let bar = progress_bar(total as u64, "quantize", args.json);
    let calibrates = configs
        .iter()
        .any(|c| c.wbits < 16 && c.method.calibrates());
    let calib = if calibrates {
        super::quantize_out::calibration_tokens(&loaded.tokenizer, data[0], args.calib_tokens)?
    } else {
        Vec::new()
    };
    let (rows, activation_stats) = run_study(
        &loaded.weights,
        &configs,
        &study_texts,
        o.study,
        &o.seed,
        &calib,
        &mut |n| bar.set_position(n as u64),
    )?;
    bar.finish_and_clear();
    let report = QuantReport::new(
        args.model.display().to_string(),
        study_texts.iter().map(|t| t.name.clone()).collect(),
        o.max_tokens,
        o.study,
        o.seed.clone(),
        calib.len(),
        rows,
        activation_stats,
    );
    emit(&report, args.json)?;
    Ok(Outcome::Success)
}
