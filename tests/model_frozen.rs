//! Frozen means frozen, checkpoints of frozen weights, and dropout reproducibility.

use orthoformer::model::{AttentionKind, Gpt, GptConfig, load_model, save_model};

fn cfg(kind: AttentionKind, dropout: f32) -> GptConfig {
    GptConfig {
        attention: kind,
        dropout,
        ..GptConfig::preset("tiny").unwrap()
    }
}

fn toks(n: usize, mul: u32) -> Vec<u32> {
    (0..n as u32).map(|i| (i * mul + 1) % 11).collect()
}

#[test]
fn frozen_weights_are_outside_the_store_and_unchanged_by_training() {
    let mut m = Gpt::new(cfg(AttentionKind::Orthogonal, 0.0), 1).unwrap();
    assert!(
        m.params()
            .tensors
            .iter()
            .all(|t| !t.name.ends_with("attn.q.weight") && !t.name.ends_with("attn.k.weight"))
    );
    let before: Vec<Vec<f32>> = m.frozen().tensors.iter().map(|t| t.data.clone()).collect();
    // Each head block has orthonormal columns: W_h W_hᵀ = I (rows of the out x in layout).
    let (c, d) = (8, 4);
    for t in &m.frozen().tensors {
        for h in 0..2 {
            for i in 0..d {
                for j in 0..d {
                    let dot: f32 = (0..c)
                        .map(|r| t.data[(h * d + i) * c + r] * t.data[(h * d + j) * c + r])
                        .sum();
                    assert!((dot - if i == j { 1.0 } else { 0.0 }).abs() < 1e-5);
                }
            }
        }
    }
    let (x, y) = (toks(16, 3), toks(16, 5));
    for step in 0..5 {
        m.zero_grad();
        m.forward_backward(&x, &y, 2, 8, step).unwrap();
        let p = m.params_mut();
        for (w, g) in p.data.iter_mut().zip(&p.grad) {
            *w -= 0.1 * g;
        }
    }
    for (t, b) in m.frozen().tensors.iter().zip(&before) {
        assert!(t.data == *b);
    }
}

#[test]
fn tampered_frozen_weights_fail_to_load() {
    let dir = std::env::temp_dir().join(format!("ortho-frozen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let m = Gpt::new(cfg(AttentionKind::OrthogonalLinear, 0.0), 2).unwrap();
    let p = dir.join("full.safetensors");
    save_model(&p, &m, true).unwrap();
    let mut bytes = std::fs::read(&p).unwrap();
    // Flip a bit inside a stored frozen tensor.
    let (n, header) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let info = header.info("h.1.attn.k.weight").unwrap();
    bytes[8 + n + info.data_offsets.0 + 5] ^= 0x10;
    std::fs::write(&p, &bytes).unwrap();
    let err = load_model(&p)
        .err()
        .expect("tampered checkpoint must not load")
        .to_string();
    assert!(err.contains("do not match their hash"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

/// Issue 20: frozen weights imported from elsewhere (PyTorch) have no generator; their model
/// file must still carry the hash the loader checks, and load back bit for bit.
#[test]
fn imported_frozen_weights_round_trip() {
    let dir = std::env::temp_dir().join(format!("ortho-imported-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut m = Gpt::new(cfg(AttentionKind::Orthogonal, 0.0), 3).unwrap();
    let negated: Vec<f32> = m.frozen().tensors[0].data.iter().map(|v| -v).collect();
    m.import_frozen("h.0.attn.q.weight", &negated).unwrap();
    assert!(m.frozen().generator.is_none());
    let p = dir.join("imported.safetensors");
    save_model(&p, &m, false).unwrap();
    let back = load_model(&p).unwrap();
    assert!(back.frozen().generator.is_none());
    assert_eq!(back.frozen().hash(), m.frozen().hash());
    assert!(back.frozen().tensors[0].data == negated);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn dropout_is_reproducible_and_seeded() {
    let (x, y) = (toks(16, 3), toks(16, 7));
    let run = |seed: u64| {
        let mut m = Gpt::new(cfg(AttentionKind::Softmax, 0.2), 3).unwrap();
        m.zero_grad();
        let l = m.forward_backward(&x, &y, 2, 8, seed).unwrap();
        (l, m.params().grad.clone(), m.loss(&x, &y, 2, 8).unwrap())
    };
    let (l1, g1, e1) = run(5);
    let (l2, g2, e2) = run(5);
    let (l3, _, e3) = run(6);
    assert_eq!((l1, &g1), (l2, &g2));
    assert_ne!(l1, l3);
    // Evaluation has no dropout: independent of the seed, and differs from the training loss.
    assert_eq!(e1, e2);
    assert_eq!(e1, e3);
    assert_ne!(l1, e1);
}

#[test]
fn frozen_weights_follow_their_seed_bit_for_bit() {
    let make = |seed: u64| {
        let c = GptConfig {
            frozen_seed: seed,
            ..cfg(AttentionKind::Orthogonal, 0.0)
        };
        Gpt::new(c, 0).unwrap().frozen().hash()
    };
    assert_eq!(make(9), make(9));
    assert_ne!(make(9), make(10));
    // The trainable initialisation does not touch the frozen weights.
    let c = cfg(AttentionKind::Orthogonal, 0.0);
    assert_eq!(
        Gpt::new(c.clone(), 1).unwrap().frozen().hash(),
        Gpt::new(c, 2).unwrap().frozen().hash()
    );
}

#[test]
fn broken_checkpoints_are_clear_errors() {
    let dir = std::env::temp_dir().join(format!("ortho-badckpt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let junk = dir.join("junk.safetensors");
    std::fs::write(&junk, b"not a checkpoint at all").unwrap();
    let err = load_model(&junk).err().unwrap().to_string();
    assert!(err.contains("not a safetensors file"), "{err}");
    let missing = dir.join("missing.safetensors");
    assert!(load_model(&missing).is_err());
    std::fs::remove_dir_all(&dir).ok();
}
