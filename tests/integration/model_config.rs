//! `GptConfig`: presets, TOML round trip, validation errors and batch errors.

use orthoformer::model::{AttentionKind, Gpt, GptConfig};

#[test]
fn every_preset_validates_and_round_trips_through_toml() {
    for name in GptConfig::PRESETS {
        let cfg = GptConfig::preset(name).unwrap();
        cfg.validate().unwrap();
        assert_eq!(
            GptConfig::from_toml_str(&cfg.to_toml()).unwrap(),
            cfg,
            "{name}"
        );
    }
    let a = GptConfig::preset("config-a").unwrap();
    assert_eq!(
        (a.vocab_size, a.context, a.n_layer, a.d_model, a.n_head),
        (65, 128, 4, 128, 4)
    );
    let b = GptConfig::preset("config-b").unwrap();
    assert_eq!(
        (b.vocab_size, b.context, b.n_layer, b.d_model, b.n_head),
        (65, 256, 6, 384, 6)
    );
}

#[test]
fn bad_configs_say_what_is_wrong() {
    let base = GptConfig::preset("tiny").unwrap();
    let cases = [
        (
            GptConfig {
                d_model: 9,
                ..base.clone()
            },
            "not divisible",
        ),
        (
            GptConfig {
                n_layer: 0,
                ..base.clone()
            },
            "n_layer is 0",
        ),
        (
            GptConfig {
                n_head: 0,
                ..base.clone()
            },
            "n_head is 0",
        ),
        (
            GptConfig {
                context: 0,
                ..base.clone()
            },
            "context is 0",
        ),
        (
            GptConfig {
                dropout: 1.0,
                ..base.clone()
            },
            "dropout",
        ),
    ];
    for (cfg, msg) in cases {
        let err = cfg.validate().unwrap_err().to_string();
        assert!(err.contains(msg), "{err}");
        assert!(Gpt::new(cfg, 0).is_err());
    }
    assert!(
        GptConfig::preset("nano")
            .unwrap_err()
            .to_string()
            .contains("unknown preset")
    );
    assert!(
        AttentionKind::parse("cosine")
            .unwrap_err()
            .to_string()
            .contains("unknown attention")
    );
    for k in AttentionKind::ALL {
        assert_eq!(AttentionKind::parse(k.name()).unwrap(), k);
    }
}

#[test]
fn bad_batches_are_errors_not_panics() {
    let mut m = Gpt::new(GptConfig::preset("tiny").unwrap(), 0).unwrap();
    let ok = vec![1u32; 16];
    assert!(m.loss(&ok, &ok, 2, 8).is_ok());
    let msg = |r: orthoformer::Result<f32>| r.unwrap_err().to_string();
    assert!(msg(m.loss(&ok, &ok, 1, 16)).contains("exceeds the model's context"));
    assert!(msg(m.loss(&ok[..15], &ok, 2, 8)).contains("input tokens"));
    let mut bad = ok.clone();
    bad[3] = 11;
    assert!(msg(m.forward_backward(&ok, &bad, 2, 8, 0)).contains("outside the vocabulary"));
    assert!(msg(m.loss(&[], &[], 0, 8)).contains("empty"));
    // Shapes that change both ways (more rows, shorter sequences) give the same numbers as a
    // fresh model, for every attention (linear attention's scratch is per (b, h)).
    for kind in AttentionKind::ALL {
        let cfg = GptConfig {
            attention: kind,
            ..GptConfig::preset("tiny").unwrap()
        };
        let mut m = Gpt::new(cfg.clone(), 0).unwrap();
        m.loss(&ok[..8], &ok[..8], 1, 8).unwrap();
        let got = m.loss(&ok[..8], &ok[..8], 2, 4).unwrap();
        let want = Gpt::new(cfg, 0)
            .unwrap()
            .loss(&ok[..8], &ok[..8], 2, 4)
            .unwrap();
        assert_eq!(got, want, "{kind:?}");
    }
    // A smaller batch after a larger one reuses the buffers and gives the same numbers as fresh.
    let l_small = m.loss(&ok[..8], &ok[..8], 1, 8).unwrap();
    let mut fresh = Gpt::new(GptConfig::preset("tiny").unwrap(), 0).unwrap();
    assert_eq!(fresh.loss(&ok[..8], &ok[..8], 1, 8).unwrap(), l_small);
}

/// Rotary positions and the learned temperature: written only when not the
/// default (older configurations read unchanged), round-tripped, counted exactly (rope has no
/// position embedding; the temperature is one value per head and layer), refused where they
/// cannot apply, and a rope model's output depends on the order of its tokens.
#[test]
fn rope_and_temperature_options() {
    use orthoformer::model::gpt::layout;
    use orthoformer::model::{Position, Temperature};
    let base = GptConfig::preset("tiny").unwrap();
    assert!(!base.to_toml().contains("position") && !base.to_toml().contains("temperature"));
    let rope = GptConfig {
        position: Position::Rope,
        temperature: Temperature::Learned,
        attention: AttentionKind::Orthogonal,
        ..base.clone()
    };
    let text = rope.to_toml();
    assert!(text.contains("position = \"rope\"") && text.contains("temperature = \"learned\""));
    assert_eq!(GptConfig::from_toml_str(&text).unwrap(), rope);
    let plain = GptConfig {
        attention: AttentionKind::Orthogonal,
        ..base.clone()
    };
    let (c, t) = (base.d_model, base.context);
    let extra = base.n_layer * base.n_head;
    assert_eq!(
        layout::trainable_count(&rope) + t * c,
        layout::trainable_count(&plain) + extra
    );
    let odd = GptConfig {
        position: Position::Rope,
        d_model: 6,
        n_head: 2,
        ..base.clone()
    };
    assert!(
        odd.validate()
            .unwrap_err()
            .to_string()
            .contains("must be even")
    );
    let lin = GptConfig {
        temperature: Temperature::Learned,
        attention: AttentionKind::Linear,
        ..base.clone()
    };
    assert!(
        lin.validate()
            .unwrap_err()
            .to_string()
            .contains("linear attention")
    );
    // Without a position embedding, rope is what makes position visible: the last token's
    // logits change when the tokens before it are permuted.
    let mut m = Gpt::new(rope, 3).unwrap();
    let (a, b) = ([1u32, 2, 3, 4, 5, 6, 7, 8], [3u32, 1, 2, 5, 4, 7, 6, 8]);
    let la = m.logits(&a, 1, 8).unwrap().to_vec();
    let lb = m.logits(&b, 1, 8).unwrap().to_vec();
    let v = base.vocab_size;
    assert_ne!(la[7 * v..], lb[7 * v..]);
}
