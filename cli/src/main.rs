//! The `orthoformer` command line: one file per subcommand. The library never sees clap; each
//! subcommand turns its flags into library options, calls the library and prints the result
//! (a table, or JSON with `--json`).
//!
//! Exit codes (ripgrep's convention): 0 success, 1 a check the user asked for failed
//! (for example `rotate --check` out of tolerance), 2 any error, the code clap uses for bad
//! arguments too. Every subcommand writes through [`output`]: a closed pipe (output piped
//! into `head`) exits 0, any other failure to write the standard output (a full device) is
//! one line and exit 2, never a panic.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod align;
mod bench;
mod bench_batch;
mod bench_llama;
mod common;
mod compare;
mod data_flags;
#[cfg(test)]
mod defaults_test;
mod eval;
mod export;
mod flags;
mod generate;
mod init;
mod init_bench;
mod init_probe;
mod ladder;
mod memory;
mod mqar;
mod mqar_converge;
mod output;
mod params;
mod parse_error;
mod quantize;
mod quantize_flags;
mod rotate;
mod theory;
mod train;
mod train_progress;

/// How a successful run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Everything worked (exit 0).
    Success,
    /// A check the user asked for did not pass (exit 1).
    CheckFailed,
}

/// Orthoformer: orthogonal random attention, initialisation, training and rotation of
/// transformers.
#[derive(Debug, Parser)]
#[command(name = "orthoformer", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Train softmax and frozen-orthogonal attention on paired seeds at equal budget and compare,
    /// with intervals and time to softmax's loss (the main job).
    Compare(compare::CompareArgs),
    /// Generate random orthogonal (or other) initial weights and report their quality.
    Init(init::InitArgs),
    /// Time and check every orthogonal method (seed 000's §6 table), optionally against PyTorch.
    InitBench(init_bench::InitBenchArgs),
    /// Signal propagation through a deep MLP under each initialisation.
    InitProbe(init_probe::InitProbeArgs),
    /// Train every attention variant at several model sizes and learning rates on paired
    /// seeds, choose the rates on a held-out split, fit loss against parameters and compute.
    Ladder(ladder::LadderArgs),
    /// Exact parameter, memory and FLOP accounting of a model configuration.
    Params(params::ParamsArgs),
    /// Train a GPT language model on a text file.
    Train(train::TrainArgs),
    /// Evaluate a trained checkpoint or a pretrained model (loss, perplexity).
    Eval(eval::EvalArgs),
    /// Write a trained checkpoint as a Hugging Face GPT-2 model (config, safetensors, tokenizer).
    Export(export::ExportArgs),
    /// Generate text from a trained checkpoint or a pretrained model.
    Generate(generate::GenerateArgs),
    /// Time a training step in Orthoformer and in PyTorch in one run.
    Bench(bench::BenchArgs),
    /// Peak resident memory of training runs, measured, beside the predicted account.
    Memory(memory::MemoryArgs),
    /// Multi-query associative recall (MQAR) across attention variants.
    ///
    /// Budget on 2 cores (AVX-512): steps measured at 25-125 ms for 64:4 and 128:8 at widths
    /// 64 and 128 (about 30 minutes for those four cells x 7 variants x 2 learning rates x 500
    /// steps); extrapolated, the default grid (4 settings x widths 64/128/256 x 8 variants x 2
    /// learning rates x 1,000 steps) is about 23 hours, most of it 512:64 at width 256.
    Mqar(mqar::MqarArgs),
    /// Measure seed 003's §6 claims (isometry, JL) on a trained model's activations.
    Theory(theory::TheoryArgs),
    /// Rotate a pretrained Llama-style model by an orthogonal matrix (computational invariance).
    Rotate(rotate::RotateArgs),
    /// Quantise a pretrained model, with and without rotation, and measure perplexity.
    Quantize(quantize::QuantizeArgs),
    /// Orthogonal Procrustes alignment of two models: their hidden states, or (--weights) their
    /// weights, writing B aligned to A.
    Align(align::AlignArgs),
}

/// Runs one parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<Outcome> {
    match cli.command {
        Command::Compare(a) => compare::run(&a),
        Command::Init(a) => init::run(&a),
        Command::InitBench(a) => init_bench::run(&a),
        Command::InitProbe(a) => init_probe::run(&a),
        Command::Ladder(a) => ladder::run(&a),
        Command::Params(a) => params::run(&a),
        Command::Train(a) => train::run(&a),
        Command::Eval(a) => eval::run(&a),
        Command::Export(a) => export::run(&a),
        Command::Generate(a) => generate::run(&a),
        Command::Bench(a) => bench::run(&a),
        Command::Memory(a) => memory::run(&a),
        Command::Mqar(a) => mqar::run(&a),
        Command::Theory(a) => theory::run(&a),
        Command::Rotate(a) => rotate::run(&a),
        Command::Quantize(a) => quantize::run(&a),
        Command::Align(a) => align::run(&a),
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return parse_error::report(&e),
    };
    let cores = orthoformer::nn::threads::cores();
    // RAYON_NUM_THREADS beyond the library's cap is refused before the pool starts.
    if let Err(e) = orthoformer::nn::threads::check_thread_env(cores) {
        output::warn_ln!("error: {e}");
        return ExitCode::from(2);
    }
    // `bench --threads N` sizes the pool the whole command runs on; a count this machine
    // cannot run is left to the command to refuse with its one line.
    let threads = match &cli.command {
        Command::Bench(a) => a.threads.filter(|n| (1..=cores).contains(n)),
        _ => None,
    };
    let result = orthoformer::nn::threads::run_in_pool(threads, || run(cli)).and_then(|outcome| {
        // The last, unterminated line's failure is seen only here.
        output::flush()?;
        Ok(outcome)
    });
    match result {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::CheckFailed) => ExitCode::from(1),
        Err(err) => report(&err),
    }
}

/// The exit status of a failed run, after its one line on stderr.
fn report(err: &anyhow::Error) -> ExitCode {
    if let Some(e) = err
        .chain()
        .find_map(|c| c.downcast_ref::<output::StdoutError>())
    {
        if e.is_closed_pipe() {
            // The reader has what it wanted (`| head`): not a failure.
            return ExitCode::SUCCESS;
        }
        output::warn_ln!(
            "error: cannot write the standard output ({}): send it to a file or device with room",
            e.0
        );
        return ExitCode::from(2);
    }
    // An interrupted run wrote its checkpoint: EX_TEMPFAIL, so a scheduler can tell a
    // pre-empted run (resume it) from bad arguments (2), as `python -m orthoformer.train` does.
    let interrupted = err.chain().any(|c| {
        let train = match c.downcast_ref::<orthoformer::Error>() {
            Some(orthoformer::Error::Train(t)) => Some(t),
            _ => c.downcast_ref::<orthoformer::train::TrainError>(),
        };
        train.is_some_and(|t| t.is_interruption())
    });
    // The whole cause chain on one line: "error: reading x.gguf: truncated header",
    // a multi-line cause (a parser's excerpt) folded onto it.
    let err: &(dyn std::error::Error + 'static) = err.as_ref();
    // The library names option fields; the command line says their flags.
    output::warn_ln!(
        "error: {}",
        flags::with_flags(&orthoformer::error::one_line(err))
    );
    ExitCode::from(if interrupted { 75 } else { 2 })
}
