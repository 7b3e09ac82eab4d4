//! `orthoformer quantize`: simulated round-to-nearest quantisation of a pretrained model's
//! weights and activations, with and without an orthogonal rotation, measured as perplexity on
//! real text, plus the statistics (kurtosis, max/mean) of the activations entering the linear
//! layers that explain why rotation helps. `--table` runs QuaRot's grid. The study itself lives
//! in the library (`rotate::quant_study`).

use std::path::PathBuf;

use anyhow::Context;

use super::Outcome;
use super::common::{emit, progress_bar};
use super::pretrained::{data_name, read_tokens};
use orthoformer::model::llama::load_model;
use orthoformer::rotate::quant_options::QuantizeOptions;
use orthoformer::rotate::quant_study::{self, QuantReport, StudyText, run_study};

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
    /// Activation bits at the inputs of the decoder's linear layers (16 = unquantised).
    #[arg(long, default_value_t = QuantizeOptions::default().abits, value_parser = bits_parser)]
    pub abits: u32,
    /// Rotate the residual stream first.
    #[arg(long, value_enum, default_value_t = QuantizeOptions::default().rotate.into())]
    pub rotate: RotateChoice,
    /// Also apply QuaRot's online Hadamard transform to the input of every down_proj (weights
    /// absorb `H`, activations are transformed at run time before quantisation).
    #[arg(long)]
    pub online_hadamard: bool,
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
    /// Seed of the rotation.
    #[arg(long, default_value_t = QuantizeOptions::default().study.seed)]
    pub seed: u64,
    /// Run the whole grid (FP, W8A8, W4A16, W4A8, W4A4; RTN with and without Hadamard
    /// rotation) instead of one configuration.
    #[arg(long)]
    pub table: bool,
    /// Write the quantised model as this GGUF file (weights only: RTN or GPTQ onto
    /// `--gguf-type`'s block grid, the rotation folded in) instead of running the study.
    /// `--data`'s last `--calib-tokens` tokens calibrate GPTQ and the clipping search.
    #[arg(long, requires = "gguf_type")]
    pub out: Option<PathBuf>,
    /// Block format of --out: q8_0, q4_0, q4_1 (32 weights per scale) or q4_k (super-blocks of
    /// 256 with 6-bit scales and mins per 32; matrices whose rows are not whole super-blocks
    /// fall back to q4_1). The embedding and lm_head are written Q8_0.
    #[arg(long, value_enum, requires = "out")]
    pub gguf_type: Option<GgufOut>,
    /// How --out rounds the weights.
    #[arg(long, value_enum, default_value_t = Method::Rtn)]
    pub method: Method,
    /// RTN: search each block's clip ratio (1 to 0.5) for the least error, weighted by the
    /// calibration inputs' energy.
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

/// Weight rounding of `quantize --out`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Method {
    /// Round to nearest.
    Rtn,
    /// GPTQ on calibration Hessians.
    Gptq,
}

fn bits_parser(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(b @ (4 | 8 | 16)) => Ok(b),
        _ => Err(format!("{s:?} is not one of 16, 8, 4")),
    }
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
    /// The library's options these flags ask for.
    pub fn options(&self) -> QuantizeOptions {
        QuantizeOptions {
            wbits: self.wbits,
            abits: self.abits,
            rotate: self.rotate.into(),
            online_hadamard: self.online_hadamard,
            table: self.table,
            max_tokens: self.max_tokens,
            study: quant_study::StudySettings {
                context: self.context,
                group: self.group,
                seed: self.seed,
                weights: match (self.method, self.clip) {
                    (Method::Gptq, _) => quant_study::WeightRounding::Gptq,
                    (Method::Rtn, true) => quant_study::WeightRounding::RtnClip,
                    (Method::Rtn, false) => quant_study::WeightRounding::Rtn,
                },
            },
        }
    }
}

/// Runs `orthoformer quantize`.
pub fn run(args: &QuantizeArgs) -> anyhow::Result<Outcome> {
    let o = args.options();
    if o.study.context < 2 {
        anyhow::bail!("--context must be at least 2");
    }
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
        .collect::<anyhow::Result<_>>()?;
    let configs = o.configs();
    let study_texts: Vec<StudyText<'_>> = texts
        .iter()
        .zip(&data)
        .map(|(t, p)| StudyText {
            name: data_name(*p),
            tokens: t,
        })
        .collect();
    let per_config: usize = texts.iter().map(|t| t.len().saturating_sub(1)).sum();
    let total = per_config.saturating_mul(configs.len());
    let bar = progress_bar(total as u64, "quantize", args.json);
    let calib = if o.study.weights == quant_study::WeightRounding::Rtn {
        Vec::new()
    } else {
        super::quantize_out::calibration_tokens(&loaded.tokenizer, data[0], args.calib_tokens)?
    };
    let (rows, activation_stats) = run_study(
        &loaded.weights,
        &configs,
        &study_texts,
        o.study,
        &calib,
        &mut |n| bar.set_position(n as u64),
    )?;
    bar.finish_and_clear();
    let report = QuantReport {
        model: args.model.display().to_string(),
        note: quant_study::NOTE,
        data: study_texts.iter().map(|t| t.name.clone()).collect(),
        tokens_per_text: o.max_tokens,
        context: o.study.context,
        group: o.study.group,
        weights: o.study.weights,
        rows,
        activation_stats,
    };
    emit(&report, args.json)?;
    Ok(Outcome::Success)
}
