//! The size ladder (`docs/LADDER.md`): every variant trained at several model sizes for a
//! fixed number of tokens per parameter, at several learning rates, on paired seeds; each
//! rung's and variant's rate chosen on a held-out split; loss fitted against parameters and
//! training FLOPs; equal-step, equal-FLOPs and equal-time readings against softmax.
//!
//! Everything but training is here and shared by both engines: the plan ([`plan`]), the data
//! record ([`data`]), the run list and each run's spec ([`runs`]), the rate selection and
//! the grid's extension ([`select`]), the results ([`result`]) and the report ([`report`]).
//! The Rust engine ([`engine`]) trains the library's GPT; the PyTorch engine
//! (`python -m orthoformer.ladder`) reaches the rest through `orthoformer._native.ladder_*`.
//!
//! The folder: `OUT/ladder.json` (the normalised plan, with the rates added so far),
//! `OUT/transfer.bin`, `OUT/<rung>/seed-<s>/lr-<lr>/<variant>/` (one run: its engine's
//! checkpoint and, once finished, `result.json`), and the report's files.

pub mod data;
pub mod engine;
pub mod fingerprint;
pub mod plan;
pub(crate) mod plot;
mod plot_rates;
pub mod pool;
pub mod publish;
pub mod readings;
pub mod report;
pub mod result;
pub mod runs;
pub mod select;
pub mod shape;
pub mod spread;
pub(crate) mod table;
pub mod uncertainty;
mod uncertainty_table;
mod validate;

use std::path::Path;

use crate::Result;
use crate::io::folder_kind::FolderKind;
use crate::train::invalid;
pub use plan::LadderPlan;
pub use runs::RunSpec;

/// The normalised plan in a ladder's folder.
pub const PLAN_FILE: &str = "ladder.json";

/// Starts the ladder `plan_json` in `out`, or checks that `out` holds this very ladder: the
/// plan is read and checked, its paths made absolute, its data hashed and its transfer text
/// tokenized; a new `out` gets `ladder.json` and `transfer.bin`. Returns the normalised plan
/// (with the rates added so far when `out` held the ladder already).
pub fn start(plan_json: &str, out: &Path) -> Result<LadderPlan> {
    let given = data::absolute_paths(LadderPlan::from_json(plan_json)?)?;
    // The ladder's folder may not be, hold or sit inside its data or its transfer text (both
    // engines start here; the CLI also claims --out against --plan).
    let mut inputs = vec![crate::io::file_set::Input::new(
        "plan data",
        Path::new(&given.data),
    )];
    if given.transfer != plan::TINY_SHAKESPEARE {
        inputs.push(crate::io::file_set::Input::new(
            "plan transfer",
            Path::new(&given.transfer),
        ));
    }
    crate::io::file_set::check_outputs(
        &inputs,
        &[crate::io::file_set::Output::folder("out", out)],
    )?;
    let (recorded, transfer) = data::record(&given)?;
    // Every rung must train on this machine, in a number of steps a run can take, before
    // anything is written (the engines would otherwise find a rung of 10^9 layers only when
    // they reach it, the PyTorch one by allocating it, and a budget of 10^300 steps only when
    // they list the runs of a folder already made). The GPT's account stands for the
    // Llama's: the same shapes within a third of a feed-forward matrix.
    for rung in &given.rungs {
        runs::steps(&given, rung, recorded.vocab_size)?;
        let cfg = shape::gpt_config(
            &given,
            rung,
            crate::model::AttentionKind::Softmax,
            0,
            recorded.vocab_size,
        );
        crate::train::session::check_training_fits(&cfg, given.batch, 0).map_err(|e| {
            invalid(format!(
                "rung {}: {}",
                rung.name,
                // The plan's field, not the command line's flag.
                crate::error::one_line(&e).replace("`batch`", "\"batch\"")
            ))
        })?;
    }
    if let Some(r) = &given.recorded
        && r != &recorded
    {
        return Err(changed_data(&given, out));
    }
    let plan = LadderPlan {
        recorded: Some(recorded),
        ..given
    };
    if std::fs::symlink_metadata(out.join(PLAN_FILE)).is_ok() {
        let existing = read_unchecked(out)?;
        if existing.recorded != plan.recorded {
            return Err(changed_data(&existing, out));
        }
        if let Some(field) = first_difference(&existing.as_given(), &plan.as_given()) {
            return Err(invalid(format!(
                "{} holds a ladder with another \"{field}\": continue it with its own plan \
                 (--resume), or choose another --out",
                out.display()
            )));
        }
        ensure_transfer(out, &existing, &transfer)?;
        return Ok(existing);
    }
    crate::train::session::create_out(out, FolderKind::Ladder)?;
    ensure_transfer(out, &plan, &transfer)?;
    write(out, &plan)?;
    Ok(plan)
}

/// Reads the ladder in `out` and checks its data against the record by SHA-256 (every byte of
/// the token folder, its tokenizer and the transfer text): a ladder never goes on with
/// changed data.
pub fn resume(out: &Path) -> Result<LadderPlan> {
    let plan = read_unchecked(out)?;
    let (recorded, transfer) = data::record(&plan)?;
    if Some(&recorded) != plan.recorded.as_ref() {
        return Err(changed_data(&plan, out));
    }
    ensure_transfer(out, &plan, &transfer)?;
    Ok(plan)
}

/// Reads the ladder in `out`, checking only that the token folder's `meta.json` still
/// records the hash the ladder started with (cheap, for every call of `pending`).
pub fn read(out: &Path) -> Result<LadderPlan> {
    let plan = read_unchecked(out)?;
    check_meta(&plan, out)?;
    Ok(plan)
}

/// Refuses the ladder in `out` when its token folder's `meta.json` records another hash.
fn check_meta(plan: &LadderPlan, out: &Path) -> Result<()> {
    let rec = plan.recorded()?;
    if data::meta_sha256(Path::new(&plan.data))?.is_some_and(|m| m != rec.data_sha256) {
        return Err(changed_data(plan, out));
    }
    Ok(())
}

/// Reads the ladder in `out` for a report, which reads only the plan and the runs' result
/// files: the token folder may be absent (a ladder handed on as `scripts/ladder_results.sh`
/// copies it, without its data), but where it is present its hash is checked as [`read`] does.
pub fn read_for_report(out: &Path) -> Result<LadderPlan> {
    let plan = read_unchecked(out)?;
    let meta = Path::new(&plan.data).join(crate::data::token_files::META_FILE);
    if std::fs::symlink_metadata(&meta).is_ok() {
        check_meta(&plan, out)?;
    }
    Ok(plan)
}

fn read_unchecked(out: &Path) -> Result<LadderPlan> {
    let path = out.join(PLAN_FILE);
    if std::fs::symlink_metadata(&path).is_err() {
        return Err(invalid(format!(
            "{} holds no ladder ({PLAN_FILE} is missing): start one with --plan",
            out.display()
        )));
    }
    crate::io::atomic::remove_stale_temporaries(out, PLAN_FILE);
    let text = crate::io::safe_file::into_text(
        &path,
        crate::io::safe_file::read_in_at_most(out, PLAN_FILE, plan::MAX_JSON_BYTES)?,
    )?;
    let plan = LadderPlan::from_json(&text).map_err(|e| {
        invalid(format!(
            "{}: {}",
            path.display(),
            crate::error::one_line(&e)
        ))
    })?;
    plan.recorded()?;
    Ok(plan)
}

fn changed_data(plan: &LadderPlan, out: &Path) -> crate::Error {
    invalid(format!(
        "the data of the ladder in {} changed since it started (the SHA-256 of {} or of the \
         transfer text {} differs): restore them, or start a new ladder in another folder",
        out.display(),
        plan.data,
        plan.transfer
    ))
}

/// The first top-level field in which `a` and `b` differ.
fn first_difference(a: &LadderPlan, b: &LadderPlan) -> Option<String> {
    let (x, y) = (serde_json::to_value(a).ok()?, serde_json::to_value(b).ok()?);
    let (Some(x), Some(y)) = (x.as_object(), y.as_object()) else {
        return None;
    };
    x.keys()
        .chain(y.keys())
        .find(|k| x.get(*k) != y.get(*k))
        .cloned()
}

/// Writes `transfer.bin` unless it holds `tokens` already.
fn ensure_transfer(out: &Path, plan: &LadderPlan, tokens: &[u32]) -> Result<()> {
    let rec = plan.recorded()?;
    match data::read_transfer(out, rec.transfer_tokens, rec.vocab_size) {
        Ok(have) if have == tokens => Ok(()),
        _ => data::write_tokens(&out.join(data::TRANSFER_FILE), tokens),
    }
}

/// Writes `plan` as `out/ladder.json`, atomically.
pub fn write(out: &Path, plan: &LadderPlan) -> Result<()> {
    let json = plan.to_json()?;
    crate::io::write_atomic_bytes(&out.join(PLAN_FILE), json.as_bytes())
}

/// Every run's spec and its result, if finished (each `result.json` checked against its
/// spec).
pub fn status(plan: &LadderPlan, out: &Path) -> Result<Vec<(RunSpec, Option<result::RunResult>)>> {
    runs::all(plan)
        .into_iter()
        .map(|id| {
            let spec = runs::spec(plan, out, id)?;
            let dir = Path::new(&spec.dir);
            let mut r = result::read(dir, &spec)?;
            if let Some(r) = r.as_mut() {
                r.val_spread_loss =
                    spread::read(dir, &spec, plan.recorded()?.val_tokens)?.map(|s| s.loss);
            }
            Ok((spec, r))
        })
        .collect()
}

/// The finished runs, keyed for [`select`].
pub fn results(status: &[(RunSpec, Option<result::RunResult>)]) -> select::Results {
    status
        .iter()
        .filter_map(|(s, r)| {
            r.as_ref()
                .map(|r| (select::key(&s.rung, s.variant, s.seed, s.lr), r.clone()))
        })
        .collect()
}

/// The unfinished runs of the ladder in `out`, after adding every rate that is due (recorded
/// in `ladder.json` first); empty when the ladder is done.
pub fn pending(out: &Path) -> Result<Vec<RunSpec>> {
    let mut plan = read(out)?;
    Ok(extend_due(&mut plan, out, true)?
        .into_iter()
        .filter(|(_, r)| r.is_none())
        .map(|(s, _)| s)
        .collect())
}

/// Adds to `plan` every rate that is due, until none is (writing `ladder.json` after each
/// addition when `record`), and returns the status of every run of the widened plan.
pub(crate) fn extend_due(
    plan: &mut LadderPlan,
    out: &Path,
    record: bool,
) -> Result<Vec<(RunSpec, Option<result::RunResult>)>> {
    loop {
        let status = status(plan, out)?;
        if select::extend(plan, &results(&status)).is_empty() {
            return Ok(status);
        }
        plan.check()?;
        if record {
            write(out, plan)?;
        }
    }
}

/// The folder of one run (`OUT/<rung>/seed-<s>/lr-<lr>/<variant>`), the rung and variant
/// checked against the ladder in `out`.
pub fn run_dir(
    out: &Path,
    rung: &str,
    seed: u64,
    lr: f64,
    variant: &str,
) -> Result<std::path::PathBuf> {
    let plan = read_unchecked(out)?;
    let kind = crate::model::AttentionKind::parse(variant)?;
    if !plan.rungs.iter().any(|r| r.name == rung) || !plan.variants.contains(&kind) {
        return Err(invalid(format!(
            "{rung} {variant} is not a rung and variant of the ladder in {}",
            out.display()
        )));
    }
    Ok(runs::run_dir(out, rung, seed, lr, kind))
}
