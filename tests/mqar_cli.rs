//! `orthoformer mqar` and `orthoformer theory` run as the real binary: a tiny MQAR sweep
//! writes its table, JSON and heatmap; bad inputs exit 2 with a one-line message; the masked
//! training step only learns from the scored positions.

use std::process::Command;

use orthoformer::analysis::mqar::run::{MqarPlan, NoProgress};
use orthoformer::analysis::mqar::{IGNORE, MqarTask};
use orthoformer::model::{AttentionKind, Gpt};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_orthoformer"))
}

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
    let cells = plan.run(&mut NoProgress).unwrap();
    assert_eq!(cells.len(), 1);
}
