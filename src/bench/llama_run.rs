//! One pretrained model of `orthoformer bench --model`, our side: load it (weights mapped),
//! check the prompt and the generation fit its context, take the prompt and the eval tokens
//! from the embedded TinyShakespeare (the same real text every peer sees), and time it
//! ([`super::llama::bench_llama`]). The peers (llama.cpp, PyTorch) are other programs the
//! front end runs on the same file and the same prompt ids.

use std::path::Path;

use super::llama::{EvalPlan, LlamaBench, bench_llama};
use super::llama_report::LlamaBenchModel;
use super::options::BenchOptions;
use crate::infer::text::read_tokens;
use crate::io::rss::own_status_bytes;
use crate::model::llama::load_engine;

/// The eval windows of the benchmark (at most the model's context).
pub const EVAL_WINDOW: usize = 256;

/// What [`run`] measured, with the prompt the peers are to be timed on.
#[derive(Debug, Clone)]
pub struct LlamaRun {
    /// The model as loaded.
    pub model: LlamaBenchModel,
    /// Our figures.
    pub ours: LlamaBench,
    /// The prompt's token ids.
    pub prompt: Vec<u32>,
}

fn invalid(msg: String) -> crate::Error {
    crate::data::invalid(msg)
}

/// Benchmarks the model at `path` as `opts` says (checked by [`BenchOptions::validate_model`]
/// first).
pub fn run(path: &Path, opts: &BenchOptions) -> crate::Result<LlamaRun> {
    opts.validate_model()?;
    let rss_before = own_status_bytes("VmRSS");
    let file_bytes = std::fs::metadata(path).map_or(0, |m| if m.is_file() { m.len() } else { 0 });
    let loaded = load_engine(path)?;
    let mut model = loaded.model;
    model.kv_dtype = opts.kv_cache;
    model.dot = opts.dot;
    let need = opts.prompt_tokens.saturating_add(opts.gen_tokens);
    if need > model.context() {
        return Err(invalid(format!(
            "`prompt_tokens` + `gen_tokens` = {need} exceed the model's context {}",
            model.context()
        )));
    }
    let n_text = opts.prompt_tokens.max(opts.eval_tokens.saturating_add(1));
    let ids = read_tokens(&loaded.tokenizer, None, n_text)?;
    if ids.len() <= n_text {
        return Err(invalid(format!(
            "the embedded text has {} tokens, fewer than the {} asked for: use smaller \
             `prompt_tokens` or `eval_tokens`",
            ids.len(),
            n_text + 1
        )));
    }
    let prompt = ids[..opts.prompt_tokens].to_vec();
    let eval = (opts.eval_tokens > 0).then(|| EvalPlan {
        tokens: ids[..=opts.eval_tokens].to_vec(),
        context: EVAL_WINDOW.min(model.context()),
    });
    let mapped = model.weights().embed.is_mapped();
    let ours = bench_llama(
        &mut model,
        &prompt,
        opts.gen_tokens,
        opts.rounds,
        eval.as_ref(),
    )?;
    Ok(LlamaRun {
        model: LlamaBenchModel {
            model: path.display().to_string(),
            file_bytes,
            weights_mapped: mapped,
            rss_before_load_bytes: rss_before,
        },
        ours,
        prompt,
    })
}
