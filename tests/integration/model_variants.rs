//! The three frozen variants added for the MQAR/theory and speed work give exactly the model
//! they claim to be, checked against variants already matched to PyTorch
//! (`tests/model_torch_reference.rs`):
//! `orthogonal-tied` is `orthogonal` with `W_K := W_Q`; `orthogonal-hadamard` is `orthogonal`
//! with `W_Q, W_K` := the dense form of its fast transforms; `identity-q` is `softmax` with
//! `W_Q := I` (all other gradients equal). Each also survives a checkpoint round trip.

use orthoformer::model::{AttentionKind, Gpt, GptConfig, load_model, save_model};

fn cfg(kind: AttentionKind, d_model: usize) -> GptConfig {
    GptConfig {
        attention: kind,
        attn_bias: false,
        d_model,
        d_ff: 2 * d_model,
        ..GptConfig::preset("tiny").unwrap()
    }
}

const B: usize = 3;

fn batch(c: &GptConfig) -> Vec<u32> {
    (0..B * c.context)
        .map(|i| (i * 7 % c.vocab_size) as u32)
        .collect()
}

/// Copies every trainable tensor `from` has into `to` (by name).
fn copy_params(to: &mut Gpt, from: &Gpt) {
    for t in from.params().tensors.clone() {
        let src = from.params().data[t.range()].to_vec();
        let info = to.params().info(&t.name).expect("same tensor").clone();
        to.params_mut().data[info.range()].copy_from_slice(&src);
    }
}

fn step(m: &mut Gpt, c: &GptConfig) -> f32 {
    let x = batch(c);
    m.zero_grad();
    m.forward_backward(&x, &x, B, c.context, 0).unwrap()
}

/// Loss and every gradient of `a` equal those of `b` (by name) to `tol` relative.
fn assert_same(a: &Gpt, la: f32, b: &Gpt, lb: f32, what: &str) {
    assert!((la - lb).abs() < 1e-5, "{what}: loss {la} vs {lb}");
    let scale = b.params().grad.iter().fold(0f32, |m, g| m.max(g.abs()));
    for t in &a.params().tensors {
        let other = b.params().info(&t.name).expect("tensor in both");
        for (x, y) in a.params().grad[t.range()]
            .iter()
            .zip(&b.params().grad[other.range()])
        {
            assert!(
                (x - y).abs() <= 1e-5 * scale,
                "{what} {}: {x} vs {y}",
                t.name
            );
        }
    }
}

fn frozen_of(m: &Gpt, name: &str) -> Vec<f32> {
    let t = m.frozen().tensors.iter().find(|t| t.name == name);
    t.expect("frozen tensor").data.clone()
}

#[test]
fn tied_is_orthogonal_with_k_equal_to_q() {
    let c = cfg(AttentionKind::OrthogonalTied, 8);
    let mut tied = Gpt::new(c.clone(), 2).unwrap();
    assert_eq!(
        tied.frozen().tensors.len(),
        c.n_layer,
        "one tensor per layer"
    );
    let mut orth = Gpt::new(cfg(AttentionKind::Orthogonal, 8), 2).unwrap();
    copy_params(&mut orth, &tied);
    for l in 0..c.n_layer {
        let q = frozen_of(&tied, &format!("h.{l}.attn.q.weight"));
        orth.import_frozen(&format!("h.{l}.attn.q.weight"), &q)
            .unwrap();
        orth.import_frozen(&format!("h.{l}.attn.k.weight"), &q)
            .unwrap();
    }
    let (lt, lo) = (step(&mut tied, &c), step(&mut orth, &c));
    assert_same(&tied, lt, &orth, lo, "tied");
}

#[test]
fn hadamard_is_orthogonal_with_its_dense_matrices() {
    for width in [8, 12, 24] {
        let c = cfg(AttentionKind::OrthogonalHadamard, width);
        let mut had = Gpt::new(c.clone(), 4).unwrap();
        assert!(had.frozen().tensors.iter().all(|t| t.fast.is_some()));
        let mut orth = Gpt::new(cfg(AttentionKind::Orthogonal, width), 4).unwrap();
        copy_params(&mut orth, &had);
        for t in had.frozen().tensors.clone() {
            orth.import_frozen(&t.name, &t.data).unwrap();
        }
        let (lh, lo) = (step(&mut had, &c), step(&mut orth, &c));
        assert_same(&had, lh, &orth, lo, &format!("hadamard C={width}"));
        // Q and K of a layer are different projections.
        assert_ne!(had.frozen().tensors[0].data, had.frozen().tensors[1].data);
    }
}

#[test]
fn identity_q_is_softmax_with_the_identity_query() {
    let c = cfg(AttentionKind::IdentityQ, 8);
    let mut idq = Gpt::new(c.clone(), 5).unwrap();
    assert!(idq.frozen().tensors.is_empty(), "nothing stored for W_Q");
    let mut soft = Gpt::new(cfg(AttentionKind::Softmax, 8), 5).unwrap();
    copy_params(&mut soft, &idq);
    for l in 0..c.n_layer {
        let info = soft
            .params()
            .info(&format!("h.{l}.attn.q.weight"))
            .unwrap()
            .clone();
        let w = &mut soft.params_mut().data[info.range()];
        w.fill(0.0);
        for i in 0..8 {
            w[i * 8 + i] = 1.0;
        }
    }
    let (li, ls) = (step(&mut idq, &c), step(&mut soft, &c));
    assert_same(&idq, li, &soft, ls, "identity-q");
}

#[test]
fn new_variants_round_trip_through_checkpoints() {
    let dir = std::env::temp_dir().join(format!("orthoformer-variants-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for kind in [
        AttentionKind::OrthogonalTied,
        AttentionKind::IdentityQ,
        AttentionKind::OrthogonalHadamard,
    ] {
        let c = cfg(kind, 8);
        let mut m = Gpt::new(c.clone(), 6).unwrap();
        let path = dir.join(format!("{}.safetensors", kind.name()));
        save_model(&path, &m).unwrap();
        let mut back = load_model(&path).unwrap();
        let x = batch(&c);
        let want = m.logits(&x, B, c.context).unwrap().to_vec();
        assert_eq!(
            back.logits(&x, B, c.context).unwrap(),
            &want[..],
            "{kind:?}"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// A LayerNorm without bias (nanoGPT's `bias=False`) is the one with `β = 0`: the
/// same loss and the same gradient of every other tensor, `(2L + 1)·C` fewer parameters, in
/// pre- and post-LN models; it round-trips through a checkpoint, and a configuration written
/// before the field existed still reads (with biases).
#[test]
fn layer_norm_without_bias_is_the_zero_bias() {
    use orthoformer::model::NormPlacement;
    for norm in [NormPlacement::Pre, NormPlacement::Post] {
        let with = GptConfig {
            norm,
            ..cfg(AttentionKind::Orthogonal, 8)
        };
        let without = GptConfig {
            norm_bias: false,
            ..with.clone()
        };
        let mut a = Gpt::new(without.clone(), 3).unwrap();
        let mut b = Gpt::new(with.clone(), 3).unwrap();
        assert_eq!(
            b.params().data.len() - a.params().data.len(),
            (2 * with.n_layer + 1) * with.d_model
        );
        assert!(
            a.params()
                .tensors
                .iter()
                .all(|t| !t.name.contains("ln") || t.name.ends_with(".weight"))
        );
        let (la, lb) = (step(&mut a, &without), step(&mut b, &with));
        assert_same(&a, la, &b, lb, &format!("{norm:?}"));
        let dir = std::env::temp_dir().join(format!("of-nobias-{}-{norm:?}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("m.safetensors");
        save_model(&path, &a).unwrap();
        let mut back = load_model(&path).unwrap();
        assert!(!back.config().norm_bias);
        let x = batch(&without);
        let want = a.logits(&x, B, without.context).unwrap().to_vec();
        assert_eq!(back.logits(&x, B, without.context).unwrap(), &want[..]);
        std::fs::remove_dir_all(&dir).ok();
    }
    let old = GptConfig::preset("tiny")
        .unwrap()
        .to_toml()
        .replace("norm_bias = true\n", "");
    assert!(!old.contains("norm_bias"));
    assert!(GptConfig::from_toml_str(&old).unwrap().norm_bias);
}
