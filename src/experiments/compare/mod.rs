//! The paired comparison of attention variants over seeds (the main job).
//!
//! Every variant trains once per seed on the same text, tokenizer, split, model shape,
//! steps and schedule; only the attention differs. Seed `s` sets the batch order
//! (`options.seed = s`), the initialisation (`model_seed = s`, and `Gpt::new` gives every
//! variant the same values in the tensors they share) and the frozen draws
//! (`frozen_seed = s`; each head's own seed is a SplitMix64 mix of it, see
//! `model::gpt::store::head_seed`): so seed `s` of two variants is a pair, and differences are
//! taken per seed (`summary`).
//!
//! Folder layout (`out`): `plan.json` (what the comparison is; written first, read by
//! `resume`), `seed-<s>/<attention>/` (one training checkpoint per run, continued exactly by
//! `Session::resume`), `finals.json` (each finished run's loss on the whole validation split),
//! and at the end `summary.json`, `loss.png`, `loss.svg`. A stopped comparison (Ctrl-C,
//! `stop_at`, a killed process) continues where it stopped: finished runs are kept, a run cut
//! short resumes from its last checkpoint, the rest start fresh.

pub mod options;
pub mod plan;
pub(crate) mod plot;
pub(crate) mod report;
pub(crate) mod runner;
pub(crate) mod summary;
pub(crate) mod sweep;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use crate::Result;
use crate::data::Corpus;
use crate::infer::eval::{EvalOptions, evaluate};
use crate::model::{AttentionKind, Gpt};
use crate::train::Observer;
use crate::train::session::{FreshSpec, Prepared, ResumeData, Session};
use crate::train::token_batches::Windows;
pub use crate::train::trainer::Limits;
pub use options::CompareOptions;
pub use plan::ComparePlan;
use runner::Workers;
pub use runner::{Jobs, ObserverFactory};
pub use summary::{CompareSummary, FinalEval, SeedRun, VariantSummary};

/// File of each finished run's whole-validation-split loss, keyed by `seed-<s>/<attention>`.
pub const FINALS_FILE: &str = "finals.json";
/// The summary written when every run is finished.
pub const SUMMARY_FILE: &str = "summary.json";

/// What a call to [`run`] ended with.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Every run finished; the summary, plots and `summary.json` are written.
    Finished(Box<CompareSummary>),
    /// Stopped at `stop_at`: `finished` of `total` runs are done, the others are at the
    /// chunk's step (or were not started, where Ctrl-C came first).
    Stopped {
        /// Runs trained to the end.
        finished: usize,
        /// Runs in the plan.
        total: usize,
    },
}

/// The checkpoint folder of `attention` at `seed`.
pub fn run_dir(out: &Path, seed: u64, attention: AttentionKind) -> std::path::PathBuf {
    out.join(format!("seed-{seed}")).join(attention.name())
}

/// The checkpoint folder of run `id`: `seed-<s>/<attention>`, or `seed-<s>/lr-<lr>/<attention>`
/// in a learning-rate sweep.
pub fn run_dir_of(out: &Path, id: plan::RunId) -> std::path::PathBuf {
    out.join(plan::run_key_of(id))
}

/// Runs (or continues) the comparison `plan` in `out` on `prepared` (the plan's text,
/// tokenized, or its token folder; `corpus` is that text, for runs that resume, and unused
/// with a token folder, whose runs resume on `prepared`), one run at a time on the caller's
/// thread pool, then summarises it.
pub fn run(
    plan: &ComparePlan,
    corpus: &Corpus,
    prepared: &Prepared,
    out: &Path,
    limits: Limits,
    progress: &mut dyn Observer<Gpt>,
) -> Result<Outcome> {
    run_with(plan, corpus, prepared, out, limits, Workers::Here(progress))
}

/// [`run`] with `jobs` runs training at once, each on its own pool of `jobs.threads` workers
/// and shown by its own observer from `observers` (called once per worker). The runs are the
/// same bits as [`run`]'s; only their times differ.
pub fn run_at_once(
    plan: &ComparePlan,
    corpus: &Corpus,
    prepared: &Prepared,
    out: &Path,
    limits: Limits,
    jobs: Jobs,
    observers: &ObserverFactory,
) -> Result<Outcome> {
    run_with(
        plan,
        corpus,
        prepared,
        out,
        limits,
        Workers::AtOnce(jobs, observers),
    )
}

fn run_with(
    plan: &ComparePlan,
    corpus: &Corpus,
    prepared: &Prepared,
    out: &Path,
    limits: Limits,
    workers: Workers<'_>,
) -> Result<Outcome> {
    limits.validate()?;
    plan.check_data(prepared)?;
    let finals = read_finals(out, plan)?;
    // A sweep trains on the training split less its held-out tail, and scores that tail.
    let swept = if plan.lrs.is_empty() {
        None
    } else {
        Some(sweep::hold_out(prepared, plan.model.context)?)
    };
    let data = swept.as_ref().map_or(prepared, |(p, _)| p);
    let held = swept.as_ref().map(|(_, h)| h.as_slice());
    let total = plan.runs().len();
    let finals = runner::train_runs(plan, corpus, data, held, out, limits, finals, workers)?;
    let finished = finals.len();
    if finished < total {
        return Ok(Outcome::Stopped { finished, total });
    }
    let summary = summary::summarise(plan, prepared, out, &finals)?;
    let json = serde_json::to_vec_pretty(&summary)
        .map_err(|e| crate::train::invalid(format!("serialising the summary: {e}")))?;
    // The summary and its plots appear together or not at all (`io::file_set`).
    let mut set = crate::io::file_set::FileSet::begin(out, "compare")?;
    plot::stage(&summary, &mut set, "loss.png", "loss.svg")?;
    set.write_bytes(SUMMARY_FILE, &json)?;
    set.commit()?;
    Ok(Outcome::Finished(Box::new(summary)))
}

/// The session of one run: resumed from its checkpoint, or fresh. A checkpoint made for
/// another run (other options, model or seed) is an error, never silently continued.
fn open_run(
    plan: &ComparePlan,
    id: plan::RunId,
    corpus: &Corpus,
    prepared: &Prepared,
    dir: &Path,
) -> Result<Session> {
    let (seed, kind) = (id.seed, id.attention);
    let (model, options) = plan.run_spec_of(id, prepared.tokenizer.vocab_size());
    if !crate::train::checkpoint::exists(dir)? {
        let spec = FreshSpec {
            model,
            model_seed: seed,
            options,
        };
        return Session::fresh_prepared(spec, prepared.clone(), dir);
    }
    // A token folder's runs resume on the data already read (re-reading and hashing the
    // folder for every run would only repeat the check `plan.check_data` made).
    let data = match prepared.windows {
        Windows::Numpy => ResumeData::Prepared(Box::new(prepared.clone())),
        Windows::Library => ResumeData::Text(corpus.clone()),
    };
    let mut session = Session::resume_with(dir, data, None, None)?;
    // `resume` splits the whole text again; a sweep's run goes on with its own data (the
    // training split less the held-out tail), as it started.
    session.prepared = prepared.clone();
    if session.options != options || session.model.config() != &model || session.model_seed != seed
    {
        return Err(crate::train::invalid(format!(
            "{} holds a checkpoint of another run than the comparison's plan asks for \
             ({} at seed {seed}); move it away, or compare into another `out`",
            dir.display(),
            kind.name()
        )));
    }
    Ok(session)
}

/// Turns Ctrl-C into an error that says how to continue the whole comparison.
fn interrupted_hint(e: crate::Error, out: &Path) -> crate::Error {
    match e {
        crate::Error::Train(crate::train::TrainError::Interrupted { step }) => {
            crate::Error::Train(crate::train::TrainError::InterruptedAll {
                step,
                resume: format!("orthoformer compare --resume --out {}", out.display()),
            })
        }
        other => other,
    }
}

/// The mean loss of the finished model on the whole validation split: non-overlapping
/// windows of the context, the shorter last one included (`infer::eval`, as `orthoformer
/// eval`), `batch` windows per forward.
/// `held`: a sweep's held-out part of the training split, scored the same way.
fn final_eval(session: &mut Session, held: Option<&[u32]>) -> Result<FinalEval> {
    let started = Instant::now();
    let options = EvalOptions {
        batch: session.options.batch,
        ..EvalOptions::default()
    };
    let val = &session.prepared.split.val;
    let report = evaluate(&mut session.model, val, &options, &mut |_| {})?;
    if !report.loss.is_finite() {
        // Never recorded: a non-finite final would make the comparison's summary unreadable.
        return Err(crate::train::invalid(format!(
            "the final validation loss of the run in {} is {}: the model diverged, so the \
             comparison stopped; its checkpoint is kept; use a lower learning rate",
            session.out.display(),
            report.loss
        )));
    }
    let held_out_loss = match held {
        Some(tokens) => Some(evaluate(&mut session.model, tokens, &options, &mut |_| {})?.loss)
            .filter(|l| l.is_finite()),
        None => None,
    };
    if held.is_some() && held_out_loss.is_none() {
        return Err(crate::train::invalid(format!(
            "the held-out loss of the run in {} is not finite: the model diverged at this \
             learning rate; its checkpoint is kept; leave the rate out of --lr-sweep",
            session.out.display()
        )));
    }
    Ok(FinalEval {
        val_loss: report.loss,
        val_tokens: report.tokens,
        seconds: started.elapsed().as_secs_f64(),
        held_out_loss,
    })
}

/// The finished runs' final losses, each checked against the plan: a key the plan does not
/// name, or a loss, count or time that is not a finite positive number, is refused (delete
/// the file to have the finished runs evaluated again).
fn read_finals(out: &Path, plan: &ComparePlan) -> Result<BTreeMap<String, FinalEval>> {
    // Copies of the plan or the finals whose writer was killed midway.
    for file in [plan::PLAN_FILE, FINALS_FILE] {
        crate::io::atomic::remove_stale_temporaries(out, file);
    }
    let finals = read_finals_file(out)?;
    let keys: Vec<String> = plan.runs().into_iter().map(plan::run_key_of).collect();
    for (key, f) in &finals {
        let why = if !keys.contains(key) {
            Some(format!("{key} is not a run of the plan"))
        } else if !(f.val_loss.is_finite() && f.val_loss > 0.0) {
            Some(format!(
                "{key}'s loss {} is not a positive number",
                f.val_loss
            ))
        } else if f.val_tokens == 0 {
            Some(format!("{key} scored no tokens"))
        } else if !(f.seconds.is_finite() && f.seconds >= 0.0) {
            Some(format!("{key}'s time {} is not a duration", f.seconds))
        } else {
            None
        };
        if let Some(why) = why {
            return Err(crate::train::invalid(format!(
                "{} is invalid ({why}); delete it and resume: the finished runs are evaluated \
                 again",
                out.join(FINALS_FILE).display()
            )));
        }
    }
    Ok(finals)
}

fn read_finals_file(out: &Path) -> Result<BTreeMap<String, FinalEval>> {
    let path = out.join(FINALS_FILE);
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok(BTreeMap::new());
    }
    match crate::io::safe_file::read_in(out, FINALS_FILE) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
            crate::train::invalid(format!(
                "{} is unreadable ({e}); delete it and resume: the finished runs are \
                 evaluated again",
                path.display()
            ))
        }),
        Err(e) => Err(e),
    }
}

fn write_finals(out: &Path, finals: &BTreeMap<String, FinalEval>) -> Result<()> {
    let json = serde_json::to_vec_pretty(finals)
        .map_err(|e| crate::train::invalid(format!("serialising {FINALS_FILE}: {e}")))?;
    crate::io::write_atomic_bytes(&out.join(FINALS_FILE), &json)
}

/// The command-line name of an attention kind.
pub fn attention_name(kind: AttentionKind) -> String {
    kind.name().to_string()
}

/// The name a comparison's tables and summary give a variant: the attention kind, with what
/// sets the run apart from the kind's default appended, so no two different models share a
/// name: `+DRAW` for a frozen draw other than `qr` (`orthogonal+gaussian`), `[layers 0,1]`
/// when only some layers use the frozen Q/K, and `-freeze@N` when trained Q/K are frozen
/// after step `N` (`softmax-freeze@200`). Each part appears only where it changes the model.
pub fn variant_label(
    kind: AttentionKind,
    model: &crate::model::GptConfig,
    options: &crate::train::TrainOptions,
) -> String {
    use crate::model::{AttnWeight, FrozenDraw};
    let projections = AttnWeight::QK.map(|w| kind.projection(w));
    let mut label = kind.name().to_string();
    if model.frozen_method != FrozenDraw::Orthogonal(crate::init::orthogonal::OrthoMethod::Qr)
        && projections.iter().any(|p| p.uses_frozen_draw())
    {
        label = format!("{label}+{}", model.frozen_method.name());
    }
    if let Some(layers) = &model.frozen_layers
        && kind != kind.trained_counterpart()
    {
        let list: Vec<String> = layers.iter().map(|l| l.to_string()).collect();
        label = format!("{label}[layers {}]", list.join(","));
    }
    // Layers `frozen_layers` leaves out train their Q/K too, and freeze with the rest.
    let trains_qk = projections.iter().any(|p| p.trainable())
        || (model.frozen_layers.is_some() && kind.frozen_qk());
    if let Some(n) = options.freeze_qk_after
        && trains_qk
    {
        label = format!("{label}-freeze@{n}");
    }
    label
}

/// (trainable, frozen) parameter counts of `model`.
pub fn param_counts(model: &Gpt) -> (usize, usize) {
    (model.params().data.len(), model.frozen().len())
}

/// Training memory of `model` at batch `b` (weights, gradients, AdamW moments, activations),
/// from the model's accounting.
pub fn training_memory(model: &Gpt, b: usize) -> Result<usize> {
    let cfg = model.config();
    Ok(crate::model::accounting::account(cfg, b, cfg.context)?
        .memory
        .total)
}

#[cfg(test)]
mod label_tests {
    use super::*;
    use crate::model::{FrozenDraw, GptConfig};
    use crate::train::TrainOptions;

    #[test]
    fn labels_name_what_sets_a_variant_apart_and_nothing_else() {
        let model = GptConfig::preset("tiny").unwrap();
        let opts = TrainOptions::default();
        let label = |k, m: &GptConfig, o: &TrainOptions| variant_label(k, m, o);
        assert_eq!(label(AttentionKind::Softmax, &model, &opts), "softmax");
        let gauss = GptConfig {
            frozen_method: FrozenDraw::Gaussian,
            ..model.clone()
        };
        assert_eq!(
            label(AttentionKind::Orthogonal, &gauss, &opts),
            "orthogonal+gaussian"
        );
        // Softmax draws nothing: the draw does not change it.
        assert_eq!(label(AttentionKind::Softmax, &gauss, &opts), "softmax");
        let freeze = TrainOptions {
            freeze_qk_after: Some(200),
            ..opts.clone()
        };
        assert_eq!(
            label(AttentionKind::Softmax, &model, &freeze),
            "softmax-freeze@200"
        );
        assert_eq!(
            label(AttentionKind::Orthogonal, &model, &freeze),
            "orthogonal"
        );
        let first = GptConfig {
            frozen_layers: Some(vec![0]),
            ..model
        };
        assert_eq!(
            label(AttentionKind::Orthogonal, &first, &opts),
            "orthogonal[layers 0]"
        );
        assert_eq!(
            label(AttentionKind::Orthogonal, &first, &freeze),
            "orthogonal[layers 0]-freeze@200"
        );
        assert_eq!(label(AttentionKind::Softmax, &first, &opts), "softmax");
    }
}
