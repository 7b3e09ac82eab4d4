//! Invariants of the MQAR generator (key/value ranges, answers present earlier, one query per
//! key, the gap distribution, seed reproducibility), the scorer, and the heatmap files.

use orthoformer::analysis::mqar::heatmap::Heatmap;
use orthoformer::analysis::mqar::score::count_correct;
use orthoformer::analysis::mqar::{IGNORE, MqarTask};

const SETTINGS: [(usize, usize); 4] = [(64, 4), (128, 8), (256, 16), (512, 64)];

#[test]
fn keys_values_and_queries_obey_the_task() {
    for (t, p) in SETTINGS {
        let task = MqarTask::new(t, p);
        let half = (task.vocab_size / 2) as u32;
        let batch = task.generate(32, 7).unwrap();
        assert_eq!(batch.inputs.len(), 32 * t);
        assert_eq!(batch.scored(), 32 * p);
        for (inp, tgt) in batch.inputs.chunks(t).zip(batch.targets.chunks(t)) {
            let keys: Vec<u32> = inp[..2 * p].iter().step_by(2).copied().collect();
            let values: Vec<u32> = inp[1..2 * p].iter().step_by(2).copied().collect();
            assert!(
                keys.iter().all(|&k| (1..half).contains(&k)),
                "key out of range"
            );
            assert!(
                values
                    .iter()
                    .all(|&v| v >= half && (v as usize) < task.vocab_size)
            );
            let mut sorted = keys.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), p, "keys must be distinct");
            assert!(
                tgt[..2 * p].iter().all(|&x| x == IGNORE),
                "pairs are never scored"
            );
            let mut queried = Vec::new();
            for (pos, &target) in tgt.iter().enumerate() {
                if target == IGNORE {
                    continue;
                }
                assert!(pos >= 2 * p && (pos - 2 * p) % 2 == 0, "query at {pos}");
                let key = inp[pos];
                let i = keys
                    .iter()
                    .position(|&k| k == key)
                    .expect("queried key is a pair key");
                assert_eq!(target, values[i], "target is the queried key's value");
                queried.push(key);
            }
            queried.sort_unstable();
            assert_eq!(queried, sorted, "every key is queried exactly once");
            assert!(inp.iter().all(|&x| (x as usize) < task.vocab_size));
        }
    }
}

#[test]
fn same_seed_same_batch_other_seed_other_batch() {
    let task = MqarTask::new(128, 8);
    let a = task.generate(16, 42).unwrap();
    assert_eq!(a, task.generate(16, 42).unwrap());
    let b = task.generate(16, 43).unwrap();
    assert_ne!(a.inputs, b.inputs);
}

/// With one pair the gap is a single weighted draw: its histogram must match the power law
/// (chi-square, 30 degrees of freedom, 0.1% critical value 59.70).
#[test]
fn single_query_gap_follows_the_power_law() {
    let task = MqarTask::new(64, 1);
    let probs = task.gap_probabilities();
    assert_eq!(probs.len(), 31);
    let n = 20_000;
    let batch = task.generate(n, 11).unwrap();
    let mut counts = vec![0usize; probs.len()];
    for tgt in batch.targets.chunks(64) {
        let pos = tgt.iter().position(|&x| x != IGNORE).unwrap();
        counts[(pos - 2) / 2] += 1;
    }
    let chi2: f64 = counts
        .iter()
        .zip(&probs)
        .map(|(&c, &p)| {
            let e = p * n as f64;
            (c as f64 - e).powi(2) / e
        })
        .sum();
    assert!(chi2 < 59.70, "chi-square {chi2} for counts {counts:?}");
}

#[test]
fn gap_probabilities_are_the_normalised_power_law() {
    let task = MqarTask::new(256, 16);
    let p = task.gap_probabilities();
    assert_eq!(p.len(), (256 - 32) / 2);
    assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    let ratio = p[0] / p[9];
    assert!((ratio - 10f64.powf(0.99)).abs() < 1e-9, "p0/p9 = {ratio}");
}

#[test]
fn impossible_tasks_are_rejected() {
    for (t, p, v) in [
        (63, 4, 8192),
        (64, 17, 8192),
        (64, 0, 8192),
        (64, 4, 64),
        (0, 1, 8192),
    ] {
        let task = MqarTask {
            vocab_size: v,
            ..MqarTask::new(t, p)
        };
        assert!(task.generate(1, 0).is_err(), "({t}, {p}, {v}) accepted");
    }
}

#[test]
fn scorer_counts_only_queried_positions() {
    // Three positions over a vocabulary of 4: ignored, right (argmax 2), wrong (argmax 0).
    let logits = [9.0, 0.0, 0.0, 0.0, 0.0, 1.0, 3.0, 0.0, 5.0, 0.0, 0.0, 4.0];
    let targets = [IGNORE, 2, 3];
    assert_eq!(count_correct(&logits, &targets, 4).unwrap(), (1, 2));
    assert!(count_correct(&logits, &targets[..2], 4).is_err());
}

#[test]
fn heatmap_writes_png_and_svg() {
    let dir = std::env::temp_dir().join(format!("mqar-heatmap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let map = Heatmap {
        title: "MQAR accuracy".into(),
        rows: vec!["softmax d=64".into(), "orthogonal d=64".into()],
        cols: vec!["T=64 P=4".into(), "T=128 P=8".into()],
        values: vec![Some(1.0), Some(0.5), Some(0.02), None],
    };
    let (png, svg) = (dir.join("h.png"), dir.join("h.svg"));
    map.write(&png, &svg).unwrap();
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[1..4], b"PNG");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("orthogonal d=64") && text.contains("50.0%"));
    let bad = Heatmap {
        values: vec![Some(1.0)],
        ..map
    };
    assert!(bad.write(&png, &svg).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}
