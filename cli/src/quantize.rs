//! `orthoformer quantize`: simulated round-to-nearest quantisation of a pretrained model's
//! weights and activations, with and without an orthogonal rotation, measured as perplexity on
//! real text, plus the statistics (kurtosis, max/mean) of the activations entering the linear
//! layers that explain why rotation helps. `--table` runs QuaRot's grid; `--out` writes the
//! quantised model as a GGUF file instead. The flags become the library's one
//! [`QuantizeJob`], run by [`quantize_job::run`].

use std::path::PathBuf;

use super::Outcome;
use super::common::{LazyBar, emit, library_values};
use orthoformer::quant::Format;
use orthoformer::rotate::quant_options::{METHOD_NAMES, QuantizeOptions, weight_rounding};
use orthoformer::rotate::quant_study::{RotateChoice, StudySettings};
use orthoformer::rotate::quantize_job::{self, QuantizeJob, QuantizeOutcome};
use orthoformer::rotate::quantize_out::{GGUF_FORMAT_NAMES, format_named};

/// Flags of `orthoformer quantize`.
#[derive(Debug, clap::Args)]
pub struct QuantizeArgs {
    /// The model: a `.gguf` file or a Hugging Face folder.
    #[arg(long)]
    pub model: PathBuf,
    /// Weight bits: 16 (unquantised), 8 or 4.
    #[arg(long, default_value_t = QuantizeOptions::default().wbits)]
    pub wbits: u32,
    /// Activation bits at the inputs of the decoder's linear layers: 16 (unquantised), 8 or 4.
    #[arg(long, default_value_t = QuantizeOptions::default().abits)]
    pub abits: u32,
    /// Rotate the residual stream first: none, random (Haar) or hadamard (randomised).
    #[arg(long, default_value_t = QuantizeOptions::default().rotate, value_parser = library_values(&RotateChoice::NAMES, str::parse::<RotateChoice>))]
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
    #[arg(long, requires = "out", value_parser = library_values(&GGUF_FORMAT_NAMES, format_named))]
    pub gguf_type: Option<Format>,
    /// How the weights are rounded: rtn (round to nearest) or gptq (on calibration Hessians).
    #[arg(long, default_value = METHOD_NAMES[0], value_parser = METHOD_NAMES)]
    pub method: String,
    /// RTN: search each block's clip ratio (1 to 0.5) for the least error, weighted by the
    /// calibration inputs' energy.
    #[arg(long)]
    pub clip: bool,
    /// GPTQ's damping, a fraction of the mean diagonal of the Hessian.
    #[arg(long, default_value_t = QuantizeOptions::default().gptq.damp)]
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
    /// The library's options these flags ask for.
    pub fn options(&self) -> anyhow::Result<QuantizeOptions> {
        Ok(QuantizeOptions {
            wbits: self.wbits,
            abits: self.abits,
            rotate: self.rotate,
            online_hadamard: self.online_hadamard,
            table: self.table,
            max_tokens: self.max_tokens,
            study: StudySettings {
                context: self.context,
                group: self.group,
                seed: self.seed,
                weights: weight_rounding(&self.method, self.clip)?,
            },
            calib_tokens: self.calib_tokens,
            gptq: orthoformer::quant::GptqOptions {
                damp: self.damp,
                act_order: !self.no_act_order,
            },
        })
    }

    /// The library's job these flags ask for.
    pub fn job(&self) -> anyhow::Result<QuantizeJob> {
        Ok(QuantizeJob {
            model: self.model.clone(),
            data: self.data.clone(),
            options: self.options()?,
            out: self.out.clone(),
            gguf_type: self.gguf_type,
        })
    }
}

/// Runs `orthoformer quantize`.
pub fn run(args: &QuantizeArgs) -> anyhow::Result<Outcome> {
    let job = args.job()?;
    let mut bar = LazyBar::new("quantize", args.json);
    let outcome = quantize_job::run(&job, &mut |done, total| bar.set(done, total));
    bar.finish();
    let outcome = outcome?;
    match outcome {
        QuantizeOutcome::Study(r) => emit(r.as_ref(), args.json)?,
        QuantizeOutcome::Written(r) => emit(r.as_ref(), args.json)?,
    }
    Ok(Outcome::Success)
}
