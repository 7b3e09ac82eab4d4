//! What `orthoformer bench` and `orthoformer memory` measure: the training shapes they share
//! ([`BenchShape`]) and the options of `bench` ([`BenchOptions`]), whose `Default` holds the
//! command's only defaults.

use crate::Result;
use crate::model::{AttentionKind, GptConfig};

/// A training shape measured by `bench` and `memory`: configuration A (`config-a`, batch 16,
/// context 128), B (`config-b`, batch 8, context 256) or, for `memory` only, the tiny preset
/// (batch 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum BenchShape {
    /// `config-a` at batch 16.
    A,
    /// `config-b` at batch 8.
    B,
    /// `tiny` at batch 4 (a quick check of `memory`).
    Tiny,
}

impl BenchShape {
    /// Parses `a`, `b` or (when `allow_tiny`) `tiny`, any case; the error lists the choices.
    pub fn parse(name: &str, allow_tiny: bool) -> Result<Self> {
        match name.trim().to_lowercase().as_str() {
            "a" => Ok(BenchShape::A),
            "b" => Ok(BenchShape::B),
            "tiny" if allow_tiny => Ok(BenchShape::Tiny),
            other => {
                let choices = if allow_tiny { "a, b or tiny" } else { "a or b" };
                Err(crate::train::invalid(format!(
                    "unknown config {other:?}: use {choices}"
                )))
            }
        }
    }

    /// The command-line name (`a`, `b`, `tiny`).
    pub fn name(self) -> &'static str {
        match self {
            BenchShape::A => "a",
            BenchShape::B => "b",
            BenchShape::Tiny => "tiny",
        }
    }

    /// The row label of reports (`A`, `B`, `tiny`).
    pub fn label(self) -> &'static str {
        match self {
            BenchShape::A => "A",
            BenchShape::B => "B",
            BenchShape::Tiny => "tiny",
        }
    }

    /// The model preset.
    pub fn preset(self) -> &'static str {
        match self {
            BenchShape::A => "config-a",
            BenchShape::B => "config-b",
            BenchShape::Tiny => "tiny",
        }
    }

    /// Sequences per batch.
    pub fn batch(self) -> usize {
        match self {
            BenchShape::A => 16,
            BenchShape::B => 8,
            BenchShape::Tiny => 4,
        }
    }

    /// The preset's configuration with `attention`.
    pub fn config(self, attention: AttentionKind) -> Result<GptConfig> {
        Ok(GptConfig {
            attention,
            ..GptConfig::preset(self.preset())?
        })
    }
}

/// The options of `orthoformer bench`: the training-step comparison and the `--model` mode.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchOptions {
    /// Training shapes timed.
    pub configs: Vec<BenchShape>,
    /// Attention variants timed on each shape.
    pub attention: Vec<AttentionKind>,
    /// Timed steps per measurement (after 3 warm-up steps); the median is reported.
    pub steps: usize,
    /// Rounds; each side's best round is reported.
    pub rounds: usize,
    /// Threads (`None`: every core).
    pub threads: Option<usize>,
    /// `--model`: prompt tokens prefilled as one chunk.
    pub prompt_tokens: usize,
    /// `--model`: greedy tokens generated after the prompt.
    pub gen_tokens: usize,
    /// `--model`: tokens scored by the eval windows (0 skips eval).
    pub eval_tokens: usize,
    /// `--model`: how the KV cache stores keys and values.
    pub kv_cache: crate::model::llama::KvDtype,
    /// `--model`: what decode's matrix-vector products multiply quantised weights with
    /// (`generate`'s default unless set).
    pub dot: crate::nn::qmatvec::MatvecInput,
}

impl Default for BenchOptions {
    /// Both shapes with softmax, dense frozen orthogonal and Hadamard attention, 20 steps,
    /// best of 3 rounds on every core; a 256-token prompt, 128 generated tokens, 1,024
    /// scored tokens and an f16 KV cache (llama.cpp's default) for `--model`.
    fn default() -> Self {
        BenchOptions {
            configs: vec![BenchShape::A, BenchShape::B],
            attention: vec![
                AttentionKind::Softmax,
                AttentionKind::Orthogonal,
                AttentionKind::OrthogonalHadamard,
            ],
            steps: 20,
            rounds: 3,
            threads: None,
            prompt_tokens: 256,
            gen_tokens: 128,
            eval_tokens: 1024,
            kv_cache: crate::model::llama::KvDtype::F16,
            dot: crate::infer::generate_job::GenerateJob::DEFAULT_DOT,
        }
    }
}

impl BenchOptions {
    /// Checks the training-step options; the error names the flag.
    pub fn validate_steps(&self) -> Result<()> {
        if self.steps == 0 {
            return Err(crate::train::invalid("`steps` must be at least 1"));
        }
        Ok(())
    }

    /// Checks the `--model` options.
    pub fn validate_model(&self) -> Result<()> {
        if self.prompt_tokens == 0 || self.gen_tokens == 0 {
            return Err(crate::train::invalid(
                "`prompt_tokens` and `gen_tokens` must be at least 1",
            ));
        }
        Ok(())
    }

    /// The threads to time on (`threads`, or every core), checked against this machine and
    /// set for the whole process.
    pub fn setup_threads(&self) -> Result<usize> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = self.threads.unwrap_or(cores);
        // More workers than cores only slow a timing down, and a huge count would spawn that
        // many threads (each with its own stack) before anything else happens.
        if threads == 0 || threads > cores {
            return Err(crate::train::invalid(format!(
                "`threads` {threads}: this machine runs 1 to {cores} threads at once"
            )));
        }
        crate::nn::threads::set_global_threads(threads);
        Ok(threads)
    }

    /// Rounds, at least one.
    pub fn rounds(&self) -> usize {
        self.rounds.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_parse_by_name_and_refuse_tiny_where_not_allowed() {
        for s in [BenchShape::A, BenchShape::B, BenchShape::Tiny] {
            assert_eq!(BenchShape::parse(s.name(), true).unwrap(), s);
        }
        assert_eq!(BenchShape::parse(" A ", false).unwrap(), BenchShape::A);
        let e = BenchShape::parse("tiny", false).unwrap_err().to_string();
        assert!(e.contains("unknown config \"tiny\": use a or b"), "{e}");
    }
}
