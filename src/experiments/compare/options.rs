//! The choices of a new comparison beyond its recipe: which recipe it starts from, which
//! variants it trains and on how many paired seeds. `Default` holds the only defaults (what
//! `orthoformer compare` runs with no flags).

use crate::model::AttentionKind;

/// What a new comparison compares.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareOptions {
    /// The recipe the model and training options start from (`train::recipe`).
    pub recipe: String,
    /// The variants, in table order.
    pub attentions: Vec<AttentionKind>,
    /// Paired seeds per variant.
    pub seeds: usize,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            recipe: "nanogpt-cpu".to_string(),
            attentions: vec![AttentionKind::Softmax, AttentionKind::Orthogonal],
            seeds: 3,
        }
    }
}

impl CompareOptions {
    /// The variants' names, comma-separated (for help texts).
    pub fn attention_names(&self) -> String {
        let names: Vec<&str> = self.attentions.iter().map(|a| a.name()).collect();
        names.join(",")
    }
}
