//! Frozen means frozen (SPEC §3): after training an `orthogonal` GPT, its frozen `W_Q, W_K`
//! are bit-identical to the ones it started with (and to a fresh regeneration from the
//! config's seed), the optimizer holds no state for them, and everything else did train.

use orthoformer::data::Split;
use orthoformer::model::{AttentionKind, Gpt, GptConfig};
use orthoformer::train::{RunState, Silent, TrainOptions, train};

#[test]
fn frozen_weights_are_bit_identical_after_training() {
    for attention in [AttentionKind::Orthogonal, AttentionKind::OrthogonalLinear] {
        let mut cfg = GptConfig::preset("tiny").unwrap();
        cfg.attention = attention;
        cfg.context = 16;
        let mut model = Gpt::new(cfg.clone(), 7).unwrap();
        let before: Vec<Vec<f32>> = model
            .frozen()
            .tensors
            .iter()
            .map(|t| t.data.clone())
            .collect();
        assert!(!before.is_empty());
        let params_before = model.params().data.clone();
        let names: Vec<&str> = model
            .params()
            .tensors
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        assert!(
            !names
                .iter()
                .any(|n| n.contains("attn.q.weight") || n.contains("attn.k.weight"))
        );

        let tokens: Vec<u32> = (0..3000u32).map(|i| (i * 7 + i / 5) % 11).collect();
        let split = Split::new(&tokens, 16).unwrap();
        let opts = TrainOptions {
            steps: 20,
            batch: 4,
            eval_every: 10,
            eval_iters: 1,
            lr: 1e-2,
            warmup: 2,
            ..TrainOptions::default()
        };
        let state = RunState::fresh(&opts, model.params().data.len());
        let state = train(
            &mut model,
            &split,
            &opts,
            16,
            state,
            &mut Silent,
            None,
            None,
        )
        .unwrap();

        let after: Vec<Vec<f32>> = model
            .frozen()
            .tensors
            .iter()
            .map(|t| t.data.clone())
            .collect();
        let bits = |v: &Vec<Vec<f32>>| v.iter().flatten().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&before),
            bits(&after),
            "{attention:?}: frozen weights changed"
        );
        let fresh = Gpt::new(cfg, 99).unwrap();
        assert_eq!(
            fresh.frozen().hash(),
            model.frozen().hash(),
            "frozen weights follow frozen_seed only"
        );
        assert_eq!(
            state.adam.m.len(),
            model.params().data.len(),
            "no optimizer state for frozen weights"
        );
        let moved = params_before
            .iter()
            .zip(&model.params().data)
            .filter(|(a, b)| a != b)
            .count();
        assert!(
            moved > params_before.len() / 2,
            "{attention:?}: only {moved} parameters trained"
        );
    }
}
