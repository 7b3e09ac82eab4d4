//! Frozen means frozen, checkpoints of frozen weights, dropout reproducibility, and paired
//! initialisation across variants.

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
    save_model(&p, &m).unwrap();
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

/// Frozen weights imported from elsewhere (PyTorch) have no generator; their model
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
    save_model(&p, &m).unwrap();
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

/// Every variant built from one seed starts with the softmax model's values in every tensor
/// they share, and the softmax model's draws are those of a plain
/// store-order initialisation (its first tensor is `wte`, drawn first).
#[test]
fn variants_from_one_seed_share_their_common_tensors() {
    let base = GptConfig {
        attn_bias: true,
        ..GptConfig::preset("tiny").unwrap()
    };
    let softmax = Gpt::new(base.clone(), 7).unwrap();
    let orthogonal = Gpt::new(
        GptConfig {
            attention: AttentionKind::Orthogonal,
            ..base.clone()
        },
        7,
    )
    .unwrap();
    for kind in AttentionKind::ALL {
        let cfg = GptConfig {
            attention: kind,
            ..base.clone()
        };
        let m = Gpt::new(cfg, 7).unwrap();
        for t in &m.params().tensors {
            // W_Q, W_K started at the frozen draw are the orthogonal model's frozen tensors.
            if let Some(f) = (kind == AttentionKind::OrthogonalTrained)
                .then(|| {
                    orthogonal
                        .frozen()
                        .tensors
                        .iter()
                        .find(|f| f.name == t.name)
                })
                .flatten()
            {
                assert_eq!(m.params().data[t.range()], f.data[..], "{}", t.name);
                continue;
            }
            let s = softmax
                .params()
                .info(&t.name)
                .expect("softmax has every tensor");
            assert_eq!(
                m.params().data[t.range()],
                softmax.params().data[s.range()],
                "{kind:?}: {} differs from softmax's",
                t.name
            );
        }
    }
    let other = Gpt::new(base, 8).unwrap();
    assert_ne!(other.params().data, softmax.params().data);
    // Softmax's own layout is the draw order: wte holds the first draws of the stream.
    use rand::Rng as _;
    let mut rng = orthoformer::init::rng::seeded(7);
    let z: f64 = rng.sample(rand_distr::StandardNormal);
    assert_eq!(softmax.params().data[0], (z * 0.02) as f32);
}

/// Rewrites the safetensors file `p` with `edit` applied to its tensors `(name, shape, f32s)`
/// and its metadata (the `safetensors` crate's own writer, as another tool would).
fn rewrite(
    p: &std::path::Path,
    edit: impl FnOnce(
        &mut Vec<(String, Vec<usize>, Vec<f32>)>,
        &mut std::collections::HashMap<String, String>,
    ),
) {
    let bytes = std::fs::read(p).unwrap();
    let (_, header) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let mut meta = header.metadata().clone().unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut tensors: Vec<(String, Vec<usize>, Vec<f32>)> = st
        .tensors()
        .into_iter()
        .map(|(n, v)| {
            let data = v
                .data()
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            (n, v.shape().to_vec(), data)
        })
        .collect();
    edit(&mut tensors, &mut meta);
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = tensors
        .iter()
        .map(|(n, s, d)| {
            let v = safetensors::tensor::TensorView::new(
                safetensors::Dtype::F32,
                s.clone(),
                bytemuck::cast_slice(d),
            )
            .unwrap();
            (n.clone(), v)
        })
        .collect();
    std::fs::write(p, safetensors::serialize(views, Some(meta)).unwrap()).unwrap();
}

/// Every frozen variant's checkpoint holds its frozen `W_Q`, `W_K` in full
/// (any safetensors reader gets the whole model), and loading checks them against the
/// generator bit for bit, beyond the hash.
#[test]
fn frozen_weights_are_stored_in_full_and_must_be_the_generators() {
    let dir = std::env::temp_dir().join(format!("ortho-frozen-gen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for kind in [
        AttentionKind::Orthogonal,
        AttentionKind::OrthogonalTied,
        AttentionKind::OrthogonalLinear,
        AttentionKind::OrthogonalHadamard,
    ] {
        let m = Gpt::new(cfg(kind, 0.0), 3).unwrap();
        let p = dir.join(format!("{}.safetensors", kind.name()));
        save_model(&p, &m).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        assert!(!m.frozen().tensors.is_empty(), "{kind:?}");
        for t in &m.frozen().tensors {
            let v = st.tensor(&t.name).unwrap();
            assert_eq!(v.shape(), &[8, 8]);
            assert_eq!(
                v.data(),
                bytemuck::cast_slice::<f32, u8>(&t.data),
                "{kind:?} {}",
                t.name
            );
        }
        // A different orthonormal matrix with a matching hash: only the generator check sees it.
        let mut other = m.frozen().clone();
        // Row 0 negated: still orthonormal rows, just not the generator's.
        for v in &mut other.tensors[0].data[..8] {
            *v = -*v;
        }
        let name = other.tensors[0].name.clone();
        let values = other.tensors[0].data.clone();
        let hash = other.hash();
        rewrite(&p, |tensors, meta| {
            for (n, _, d) in tensors.iter_mut() {
                if *n == name {
                    *d = values.clone();
                }
            }
            meta.insert("frozen_sha256".into(), hash);
        });
        let err = load_model(&p)
            .err()
            .expect("an edited frozen tensor must not load")
            .to_string();
        assert!(
            err.contains("is not the matrix its generator"),
            "{kind:?}: {err}"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Checkpoints written before frozen tensors were stored (generator and hash only) still load:
/// the frozen weights are regenerated and checked against the hash.
#[test]
fn checkpoints_without_frozen_tensors_still_load() {
    let dir = std::env::temp_dir().join(format!("ortho-frozen-old-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let m = Gpt::new(cfg(AttentionKind::Orthogonal, 0.0), 5).unwrap();
    let p = dir.join("old.safetensors");
    save_model(&p, &m).unwrap();
    let frozen: Vec<String> = m.frozen().tensors.iter().map(|t| t.name.clone()).collect();
    rewrite(&p, |tensors, _| {
        tensors.retain(|(n, _, _)| !frozen.contains(n))
    });
    let back = load_model(&p).unwrap();
    assert_eq!(back.frozen().hash(), m.frozen().hash());
    assert_eq!(back.params().data, m.params().data);
    // Some frozen tensors but not all: an error naming the missing one.
    save_model(&p, &m).unwrap();
    let first = frozen[0].clone();
    rewrite(&p, |tensors, _| tensors.retain(|(n, _, _)| *n != first));
    let err = load_model(&p).err().unwrap().to_string();
    assert!(
        err.contains(&format!("frozen tensor {first} is missing")),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
