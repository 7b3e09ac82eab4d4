//! `orthoformer mqar` and `orthoformer theory` run as the real binary: a tiny MQAR sweep
//! writes its table, JSON and heatmap; bad inputs exit 2 with a one-line message; the masked
//! training step only learns from the scored positions; a diverging learning rate stops its
//! run (reported, accuracy 0) and the sweep goes on.

use orthoformer::analysis::mqar::feed::MqarBatches;
use orthoformer::analysis::mqar::run::MqarPlan;
use orthoformer::analysis::mqar::{IGNORE, MqarTask};
use orthoformer::model::{AttentionKind, Gpt};
use orthoformer::train::Silent;
use orthoformer::train::schedule::Schedule;
use orthoformer::train::{Batches, RunState};

use crate::common::bin;

fn temp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("mqar-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn tiny_sweep_writes_json_and_heatmap() {
    let dir = temp("sweep");
    let out = bin()
        .args([
            "mqar",
            "--settings",
            "16:2",
            "--widths",
            "16",
            "--attention",
            "softmax,orthogonal",
        ])
        .args([
            "--lrs",
            "1e-3,3e-3",
            "--steps",
            "3",
            "--batch",
            "4",
            "--eval-examples",
            "8",
        ])
        .args(["--vocab", "64", "--head-dim", "8", "--json", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    for c in cells {
        let acc = c["accuracy"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&acc));
        assert_eq!(c["runs"].as_array().unwrap().len(), 2);
        assert_eq!(c["heads"], 2);
    }
    assert!(dir.join("mqar.json").is_file());
    assert!(dir.join("mqar_heatmap.png").is_file() && dir.join("mqar_heatmap.svg").is_file());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_inputs_exit_2_with_a_message() {
    let dir = temp("bad");
    for args in [
        vec!["mqar", "--settings", "63:4"],
        vec!["mqar", "--settings", "64x4"],
        vec!["mqar", "--attention", "nonsense"],
        vec!["mqar", "--lrs=-1"],
        vec!["mqar", "--widths", "48", "--head-dim", "32"],
        vec!["theory", "--checkpoint", "/nonexistent/checkpoint"],
    ] {
        let out = bin().args(&args).arg("--out").arg(&dir).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.trim().lines().count() == 1 && !err.contains("panicked"),
            "{args:?}: {err}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Targets at ignored positions must not change the gradient: two batches that differ only
/// there give bit-identical gradients.
#[test]
fn masked_step_ignores_unscored_positions() {
    let plan = MqarPlan {
        settings: vec![(16, 2)],
        widths: vec![16],
        variants: vec![AttentionKind::Softmax],
        lrs: vec![1e-3],
        steps: 1,
        batch: 2,
        eval_examples: 2,
        head_dim: 8,
        layers: 2,
        vocab: 64,
        weight_decay: 0.1,
        seed: 3,
        ..MqarPlan::default()
    };
    let task = MqarTask {
        vocab_size: 64,
        ..MqarTask::new(16, 2)
    };
    let batch = task.generate(2, 1).unwrap();
    let cfg = plan.model_config(AttentionKind::Softmax, 16, 16);
    let mut a = Gpt::new(cfg.clone(), 3).unwrap();
    let la = a
        .forward_backward_masked(&batch.inputs, &batch.targets, 2, 16)
        .unwrap();
    let mut all = Gpt::new(cfg, 3).unwrap();
    let full: Vec<u32> = batch
        .targets
        .iter()
        .map(|&t| if t == IGNORE { 5 } else { t })
        .collect();
    let lf = all
        .forward_backward(&batch.inputs, &full, 2, 16, 0)
        .unwrap();
    assert!(la.is_finite() && lf.is_finite());
    assert_ne!(
        a.params().grad,
        all.params().grad,
        "masking must change the gradient"
    );
    let mut b = Gpt::new(plan.model_config(AttentionKind::Softmax, 16, 16), 3).unwrap();
    let lb = b
        .forward_backward_masked(&batch.inputs, &batch.targets, 2, 16)
        .unwrap();
    assert_eq!(la, lb);
    assert_eq!(a.params().grad, b.params().grad);
    let none = vec![IGNORE; 32];
    assert!(
        b.forward_backward_masked(&batch.inputs, &none, 2, 16)
            .is_err()
    );
    // With every position scored, the masked step is the model's own step.
    let mut m = Gpt::new(plan.model_config(AttentionKind::Orthogonal, 16, 16), 3).unwrap();
    let mut u = Gpt::new(plan.model_config(AttentionKind::Orthogonal, 16, 16), 3).unwrap();
    let lm = m
        .forward_backward_masked(&batch.inputs, &full, 2, 16)
        .unwrap();
    let lu = u.forward_backward(&batch.inputs, &full, 2, 16, 0).unwrap();
    assert!((lm - lu).abs() < 1e-5, "{lm} vs {lu}");
    let scale = u.params().grad.iter().fold(0f32, |a, g| a.max(g.abs()));
    for (x, y) in m.params().grad.iter().zip(&u.params().grad) {
        assert!((x - y).abs() <= 1e-5 * scale.max(1.0), "{x} vs {y}");
    }
    let cells = plan.run(&mut Silent).unwrap();
    assert_eq!(cells.len(), 1);
}

/// The masked step (head on the scored rows only) gives the loss of the full logits at the
/// scored positions, and gradients that match finite differences of that loss.
#[test]
fn masked_step_matches_full_logits_and_finite_differences() {
    let task = MqarTask {
        vocab_size: 64,
        ..MqarTask::new(16, 2)
    };
    let batch = task.generate(2, 4).unwrap();
    let mut cfg = orthoformer::model::GptConfig::preset("tiny").unwrap();
    (
        cfg.vocab_size,
        cfg.context,
        cfg.d_model,
        cfg.n_head,
        cfg.d_ff,
    ) = (64, 16, 16, 2, 32);
    let loss_of = |m: &mut Gpt| -> f64 {
        let logits = m.logits(&batch.inputs, 2, 16).unwrap().to_vec();
        let mut total = 0.0f64;
        let mut n = 0;
        for (row, &tg) in logits.chunks_exact(64).zip(&batch.targets) {
            if tg == IGNORE {
                continue;
            }
            let mx = row.iter().fold(f32::MIN, |a, &x| a.max(x)) as f64;
            let z: f64 = row.iter().map(|&x| (x as f64 - mx).exp()).sum();
            total += mx + z.ln() - row[tg as usize] as f64;
            n += 1;
        }
        total / n as f64
    };
    let mut m = Gpt::new(cfg, 9).unwrap();
    m.zero_grad();
    let loss = m
        .forward_backward_masked(&batch.inputs, &batch.targets, 2, 16)
        .unwrap() as f64;
    assert!((loss - loss_of(&mut m)).abs() < 1e-5, "{loss}");
    // The held-out loss (no backward) is the same loss.
    let held = m.masked_loss(&batch.inputs, &batch.targets, 2, 16).unwrap() as f64;
    assert!((held - loss).abs() < 1e-5, "{held} vs {loss}");
    let grad = m.params().grad.clone();
    // The largest gradient entries of the embedding (the head's weight) and of the trunk.
    let wte = m.params().info("wte").unwrap().range();
    let fc = m.params().info("h.1.mlp.fc.weight").unwrap().range();
    for r in [wte, fc] {
        let i = r
            .clone()
            .max_by(|&a, &b| grad[a].abs().total_cmp(&grad[b].abs()))
            .unwrap();
        let h = 1e-2f32;
        let x0 = m.params().data[i];
        m.params_mut().data[i] = x0 + h;
        let up = loss_of(&mut m);
        m.params_mut().data[i] = x0 - h;
        let down = loss_of(&mut m);
        m.params_mut().data[i] = x0;
        let fd = (up - down) / (2.0 * h as f64);
        let g = grad[i] as f64;
        assert!(
            (fd - g).abs() < 2e-2 * g.abs() + 1e-4,
            "param {i}: {g} vs {fd}"
        );
    }
}

fn small_plan(lrs: Vec<f64>, steps: usize) -> MqarPlan {
    MqarPlan {
        settings: vec![(16, 2)],
        widths: vec![16],
        variants: vec![AttentionKind::Softmax],
        lrs,
        steps,
        batch: 4,
        eval_examples: 8,
        head_dim: 8,
        layers: 2,
        vocab: 64,
        weight_decay: 0.1,
        seed: 5,
        ..MqarPlan::default()
    }
}

/// A learning rate of 1e6 makes the loss or the gradient NaN within a few steps: the
/// training loop stops that run, the sweep records why (accuracy 0, final loss NaN) and
/// keeps the learning rate that trained, and the JSON of a finished run is unchanged.
#[test]
fn diverging_learning_rate_stops_its_run_and_the_sweep_goes_on() {
    let plan = small_plan(vec![1e-3, 1e6], 20);
    let cells = plan.run(&mut Silent).unwrap();
    let runs = &cells[0].runs;
    let why = runs[1].stopped.as_deref().expect("lr 1e6 must stop");
    assert!(
        why.starts_with("stopped at step ") && why.contains("NaN"),
        "{why}"
    );
    assert_eq!(runs[1].accuracy, 0.0);
    assert!(runs[1].final_loss.is_nan());
    assert!(runs[0].stopped.is_none() && runs[0].final_loss.is_finite());
    assert_eq!(cells[0].best_lr, 1e-3);
    let json = serde_json::to_value(&runs[0]).unwrap();
    assert!(json.get("stopped").is_none(), "{json}");
}

/// One run's options give the schedule MQAR trained with before it went through the
/// training loop: warm-up over a tenth of the steps (at least one), cosine to lr / 10.
#[test]
fn run_options_keep_the_mqar_recipe() {
    for steps in [1, 9, 50, 1000] {
        let opts = small_plan(vec![3e-3], steps).options(3e-3);
        opts.validate().unwrap();
        let want = Schedule {
            lr_max: 3e-3,
            lr_min: 3e-3 * 0.1,
            warmup: (steps / 10).max(1),
            steps,
        };
        assert_eq!(opts.schedule(), want);
        assert_eq!((opts.grad_clip, opts.adamw.weight_decay), (1.0, 0.1));
    }
}

/// Training batch `s` depends only on the step: the stream's position is the step, and a
/// stream resumed there draws what the first one draws next.
#[test]
fn mqar_batches_resume_at_their_step() {
    let task = MqarTask {
        vocab_size: 64,
        ..MqarTask::new(16, 2)
    };
    let opts = small_plan(vec![1e-3], 4).options(1e-3);
    let mut state = RunState::fresh(&opts, 1);
    let mut a = MqarBatches::resume(&task, 5, &state);
    a.next_batch(2, 16).unwrap();
    assert_eq!(a.position(), 1);
    state.sampler_pos = a.position();
    let mut b = MqarBatches::resume(&task, 5, &state);
    assert_eq!(a.next_batch(2, 16).unwrap(), b.next_batch(2, 16).unwrap());
    assert_eq!(b.position(), 2);
}
