//! What the SmolLM2 invariance tests compare: the logits of one fixed prompt, and their
//! largest difference.

use orthoformer::model::llama::{Llama, LlamaWeights};

/// A fixed SmolLM2 prompt of 13 token ids, shared by the tests that compare its logits.
pub const PROMPT: [u32; 13] = [
    2068, 325, 28, 355, 441, 288, 325, 28, 338, 314, 260, 1962, 42,
];

/// The logits of every position of [`PROMPT`] under `w`.
pub fn logits(w: LlamaWeights) -> Vec<f32> {
    let mut m = Llama::new(w);
    let mut cache = m.new_cache(PROMPT.len()).unwrap();
    m.forward(&PROMPT, &mut cache, 0).unwrap()
}

/// The largest absolute difference between two logit vectors.
pub fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}
