//! `orthoformer mqar --until-plateau`: a tiny run stops early and says
//! why; training in evaluation chunks is the fixed-step run bit for bit; the grid writes a
//! file per run and its report; `--resume` reads finished runs back instead of training
//! them; bad flags exit 2 with one line.

use orthoformer::analysis::mqar::converge::{ConvergePlan, RunKey};
use orthoformer::analysis::mqar::plateau::{StopReason, StopRule};
use orthoformer::analysis::mqar::run::MqarPlan;
use orthoformer::model::AttentionKind;
use orthoformer::train::Silent;

use crate::common::{Scratch, bin};

/// A 2-layer width-16 model on T=16, P=2 over a vocabulary of 32: learnable in a few
/// hundred steps on one core.
fn tiny_grid(lr: f64) -> MqarPlan {
    MqarPlan {
        settings: vec![(16, 2)],
        widths: vec![16],
        variants: vec![AttentionKind::Softmax],
        lrs: vec![lr],
        batch: 16,
        eval_examples: 64,
        head_dim: 8,
        vocab: 32,
        ..MqarPlan::default()
    }
}

fn key(seed: u64, lr: f64) -> RunKey {
    RunKey {
        seq_len: 16,
        kv_pairs: 2,
        width: 16,
        variant: AttentionKind::Softmax,
        lr,
        seed,
    }
}

fn tiny_plan(setting: (usize, usize), lr: f64, rule: StopRule) -> ConvergePlan {
    ConvergePlan {
        grid: MqarPlan {
            settings: vec![setting],
            ..tiny_grid(lr)
        },
        seeds: vec![0],
        rule,
    }
}

/// One pair per example (T=8, P=1) is learnt to 100% within a few hundred steps: the run
/// stops there as solved, with 90% and 99% reached no later than its last evaluation.
#[test]
fn a_tiny_run_that_reaches_100_percent_stops_as_solved() {
    let rule = StopRule {
        max_steps: 3000,
        min_steps: 0,
        eval_every: 50,
        patience: 100,
        min_delta: 0.01,
    };
    let plan = tiny_plan((8, 1), 3e-3, rule);
    let k = RunKey {
        seq_len: 8,
        kv_pairs: 1,
        ..key(0, 3e-3)
    };
    let run = plan.train_run(k, &mut Silent, None).unwrap();
    assert_eq!(run.stopped, StopReason::Solved, "{run:?}");
    assert!(run.steps < 3000 && run.steps.is_multiple_of(50), "{run:?}");
    assert_eq!(run.final_accuracy, 1.0);
    assert_eq!(run.curve.len(), run.steps / 50);
    assert!(
        run.curve[..run.curve.len() - 1]
            .iter()
            .all(|p| p.accuracy < 1.0)
    );
    assert!(run.steps_to_90.unwrap() <= run.steps_to_99.unwrap());
    assert!(run.steps_to_99.unwrap() <= run.steps);
}

/// T=16, P=2 sits near 50% (one of the two values in context) for hundreds of steps: with
/// no `min_steps` a short patience stops it there as a plateau, and the curve shows the
/// rule held (the last `patience` evaluations rose by at most `min_delta` over the last
/// rise); with `min_steps` past the end of that plateau the same run trains on.
#[test]
fn a_tiny_run_stuck_at_one_over_p_stops_at_a_plateau_unless_min_steps_says_wait() {
    let rule = StopRule {
        max_steps: 4000,
        min_steps: 0,
        eval_every: 50,
        patience: 4,
        min_delta: 0.01,
    };
    let run = tiny_plan((16, 2), 1e-2, rule)
        .train_run(key(0, 1e-2), &mut Silent, None)
        .unwrap();
    assert_eq!(run.stopped, StopReason::Plateau, "{run:?}");
    // The warm-up (a tenth of max_steps) does not count: at least 400 + 4 * 50 steps.
    assert!(run.steps >= 600 && run.steps < 4000, "{run:?}");
    let n = run.curve.len();
    let last_rise = run.curve[n - 5].accuracy;
    let best_before = run.curve[..n - 4]
        .iter()
        .fold(0.0f64, |a, p| a.max(p.accuracy));
    assert_eq!(
        last_rise, best_before,
        "the reference is the best before the patience"
    );
    assert!(
        run.curve[n - 4..]
            .iter()
            .all(|p| p.accuracy <= last_rise + 0.01)
    );
    assert!(run.final_accuracy < 0.9);
    assert_eq!(run.steps_to_90, None);

    let waiting = StopRule {
        min_steps: run.steps + 500,
        ..rule
    };
    let later = tiny_plan((16, 2), 1e-2, waiting)
        .train_run(key(0, 1e-2), &mut Silent, None)
        .unwrap();
    assert!(later.steps > run.steps, "{later:?}");
    assert!(
        later.stopped == StopReason::Solved || later.steps > run.steps + 500,
        "{later:?}"
    );
    // The same seed trains the same model: the curves agree where both ran.
    assert_eq!(later.curve[..n], run.curve[..]);
}

/// A run that hits its budget is the fixed-step run of that many steps: chunked training
/// and scoring between chunks change nothing (same accuracy, bit for bit).
#[test]
fn chunked_training_is_the_fixed_step_run() {
    let steps = 40;
    let grid = MqarPlan {
        steps,
        seed: 3,
        ..tiny_grid(3e-3)
    };
    let plan = ConvergePlan {
        grid: grid.clone(),
        seeds: vec![3],
        rule: StopRule {
            max_steps: steps,
            min_steps: 0,
            // Not a divisor of the budget: the last chunk is shorter.
            eval_every: 7,
            patience: 1000,
            min_delta: 0.0,
        },
    };
    let run = plan.train_run(key(3, 3e-3), &mut Silent, None).unwrap();
    assert_eq!(run.stopped, StopReason::MaxSteps);
    assert_eq!(
        run.curve.iter().map(|p| p.step).collect::<Vec<_>>(),
        [7, 14, 21, 28, 35, 40]
    );
    let cells = grid.run(&mut Silent).unwrap();
    assert_eq!(run.final_accuracy, cells[0].runs[0].accuracy);
}

fn grid_args(out: &std::path::Path, extra: &[&str]) -> std::process::Output {
    bin()
        .args([
            "mqar",
            "--until-plateau",
            "--settings",
            "16:2",
            "--widths",
            "16",
        ])
        .args(["--attention", "softmax,orthogonal", "--lrs", "3e-3"])
        .args(["--batch", "4", "--eval-examples", "8", "--vocab", "32"])
        .args(["--head-dim", "8", "--max-steps", "6", "--eval-every", "3"])
        .args(["--min-steps", "0"])
        .args(["--seeds", "0,1", "--json", "--out"])
        .arg(out)
        .args(extra)
        .output()
        .unwrap()
}

fn json_of(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The grid writes one file per run and the report; `--resume` reads finished runs back
/// (a run file marked by hand shows up unchanged) and trains only the missing one; without
/// `--resume` the folder is refused, and so is a resume with another stopping rule.
#[test]
fn grid_writes_run_files_and_resume_skips_finished_runs() {
    let dir = Scratch::new("mqar-converge", "grid");
    let v = json_of(&grid_args(&dir, &[]));
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    for c in cells {
        assert_eq!(c["seeds"], serde_json::json!([0, 1]));
        assert_eq!(c["final_accuracy"].as_array().unwrap().len(), 2);
        assert_eq!(c["steps_to_99"].as_array().unwrap().len(), 2);
        assert_eq!(c["steps"], serde_json::json!([6, 6]));
    }
    assert_eq!(v["runs"].as_array().unwrap().len(), 4);
    assert!(dir.join("mqar-converge.json").is_file());
    let runs = dir.join("runs");
    let marked = runs.join("T16-P2-d16-softmax-lr3e-3-seed1.json");
    let dropped = runs.join("T16-P2-d16-orthogonal-lr3e-3-seed0.json");
    assert!(marked.is_file() && dropped.is_file());
    assert_eq!(std::fs::read_dir(&runs).unwrap().count(), 4);

    let mut run: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&marked).unwrap()).unwrap();
    run["seconds"] = serde_json::json!(12345.5);
    std::fs::write(&marked, serde_json::to_vec(&run).unwrap()).unwrap();
    std::fs::remove_file(&dropped).unwrap();

    let again = grid_args(&dir, &[]);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("--resume"));

    let v = json_of(&grid_args(&dir, &["--resume"]));
    let seconds = |variant: &str, seed: u64| {
        v["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["key"]["variant"] == variant && r["key"]["seed"] == seed)
            .map(|r| r["seconds"].as_f64().unwrap())
            .unwrap()
    };
    assert_eq!(
        seconds("softmax", 1),
        12345.5,
        "a finished run was trained again"
    );
    assert_ne!(seconds("orthogonal", 0), 12345.5);
    assert!(dropped.is_file(), "the missing run was not trained");

    let other = grid_args(&dir, &["--resume", "--patience", "3"]);
    assert_eq!(other.status.code(), Some(2));
    let err = String::from_utf8_lossy(&other.stderr);
    assert!(err.contains("other settings"), "{err}");
}

#[test]
fn bad_flags_exit_2_with_one_line() {
    let dir = Scratch::new("mqar-converge", "bad");
    for args in [
        vec!["--until-plateau", "--patience", "0"],
        vec!["--until-plateau", "--eval-every", "0"],
        vec!["--until-plateau", "--max-steps", "0"],
        vec!["--until-plateau", "--min-delta", "1.5"],
        vec!["--until-plateau", "--min-delta=-0.1"],
        vec!["--until-plateau", "--seeds", "a,b"],
        vec!["--until-plateau", "--steps", "10"],
        vec!["--until-plateau", "--seed", "1", "--seeds", "2"],
        vec!["--max-steps", "10"],
        vec!["--patience", "3"],
        vec!["--min-steps", "3"],
        vec!["--seeds", "0,1"],
        vec!["--resume"],
    ] {
        let out = bin()
            .arg("mqar")
            .args(&args)
            .arg("--out")
            .arg(&*dir)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.trim().lines().count() == 1 && !err.contains("panicked"),
            "{args:?}: {err}"
        );
    }
}
