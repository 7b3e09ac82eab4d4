//! What a comparison is, written as `plan.json` before its first step so a stopped comparison
//! can be continued from its folder alone: the variants, the seeds, the shared model shape,
//! the training options, the tokenizer and the text (by SHA-256).

use std::path::Path;

use crate::Result;
use crate::data::TokenizerKind;
use crate::model::{AttentionKind, GptConfig};
use crate::train::checkpoint::DataRecord;
use crate::train::invalid;
use crate::train::options::TrainOptions;
use crate::train::session::Prepared;

use super::options::{MAX_LRS, MAX_RUNS, MAX_SEEDS, check_count, first_repeat};

/// The plan's file in the comparison's folder.
pub const PLAN_FILE: &str = "plan.json";

/// Version of the plan's format.
const VERSION: u32 = 1;

/// A comparison: every variant in `attentions` trained at every seed in `seeds`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComparePlan {
    /// Format version (1).
    pub version: u32,
    /// The variants, in table order; differences are taken from `softmax` when it is listed,
    /// else from the first.
    pub attentions: Vec<AttentionKind>,
    /// The seeds; seed `s` sets batches, initialisation and frozen draws of every variant.
    pub seeds: Vec<u64>,
    /// The model shared by the variants (its `attention`, `frozen_seed` and `vocab_size` are
    /// set per run).
    pub model: GptConfig,
    /// Training options shared by the runs (their `seed` is set per run).
    pub options: TrainOptions,
    /// Tokenizer kind (a text's; unused with a token folder, which brings its own).
    pub tokenizer: TokenizerKind,
    /// BPE vocabulary asked for (unused by the character tokenizer).
    pub bpe_vocab: usize,
    /// The text.
    pub data: DataRecord,
    /// The named recipe the model and options came from, if any (before the user's flags).
    pub recipe: Option<String>,
    /// Peak learning rates swept (`--lr-sweep`); empty: one run per variant and seed at
    /// `options.lr`. With a sweep every variant trains at every rate on the same seeds, on the
    /// training split less its held-out tail (`compare::sweep`), and is reported at its own
    /// best rate, chosen on that tail.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lrs: Vec<f64>,
    /// Whether `data` is a token folder (`python -m orthoformer.prepare`): its split, its
    /// tokenizer and the PyTorch trainer's batch windows (`train::prepared`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub token_folder: bool,
}

/// One run of a plan: a variant at a seed (and a swept learning rate).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunId {
    /// The seed.
    pub seed: u64,
    /// The swept peak learning rate (`None` without a sweep).
    pub lr: Option<f64>,
    /// The variant.
    pub attention: AttentionKind,
}

impl ComparePlan {
    /// A plan, checked: at least one variant, from 1 to [`MAX_SEEDS`] seeds, no repeats (found
    /// by sorting), valid options and a valid model for every variant.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        attentions: Vec<AttentionKind>,
        seeds: Vec<u64>,
        model: GptConfig,
        options: TrainOptions,
        tokenizer: TokenizerKind,
        bpe_vocab: usize,
        data: DataRecord,
        recipe: Option<String>,
    ) -> Result<Self> {
        if attentions.is_empty() {
            return Err(invalid("`attention` needs at least one variant"));
        }
        for (i, a) in attentions.iter().enumerate() {
            if attentions[..i].contains(a) {
                return Err(invalid(format!("`attention` lists {} twice", a.name())));
            }
        }
        check_count("seeds", seeds.len(), MAX_SEEDS)?;
        if let Some(s) = first_repeat(&seeds, u64::cmp) {
            return Err(invalid(format!("seed {s} is listed twice")));
        }
        options.validate()?;
        let plan = ComparePlan {
            version: VERSION,
            attentions,
            seeds,
            model,
            options,
            tokenizer,
            bpe_vocab,
            data,
            recipe,
            lrs: Vec::new(),
            token_folder: false,
        };
        for &a in &plan.attentions {
            let cfg = plan.run_spec(plan.seeds[0], a, plan.model.vocab_size).0;
            cfg.validate()?;
            crate::train::session::check_training_fits(&cfg, plan.options.batch, 0)?;
        }
        Ok(plan)
    }

    /// The plan with the learning rates `lrs` swept: each finite, positive and listed once
    /// (an empty list is no sweep).
    pub fn with_lrs(mut self, lrs: Vec<f64>) -> Result<Self> {
        if lrs.len() > MAX_LRS {
            return Err(invalid(format!(
                "--lr-sweep lists {} rates, more than {MAX_LRS}: give at most {MAX_LRS}",
                lrs.len()
            )));
        }
        if let Some(lr) = lrs.iter().find(|lr| !(lr.is_finite() && **lr > 0.0)) {
            return Err(invalid(format!(
                "--lr-sweep: {lr} is not a positive learning rate"
            )));
        }
        if let Some(lr) = first_repeat(&lrs, f64::total_cmp) {
            return Err(invalid(format!("--lr-sweep lists {lr} twice")));
        }
        let runs = self.runs_count().saturating_mul(lrs.len().max(1));
        if runs > MAX_RUNS {
            return Err(invalid(format!(
                "--lr-sweep: {} rates × {} seeds × {} variants make {runs} runs, more than \
                 {MAX_RUNS}: sweep fewer rates or seeds",
                lrs.len(),
                self.seeds.len(),
                self.attentions.len()
            )));
        }
        self.lrs = lrs;
        Ok(self)
    }

    /// Runs without a sweep: variants × seeds.
    fn runs_count(&self) -> usize {
        self.attentions.len().saturating_mul(self.seeds.len())
    }

    /// Every run, seed-major (a comparison stopped half-way holds whole pairs), then by
    /// learning rate, then variant.
    pub fn runs(&self) -> Vec<RunId> {
        let lrs: Vec<Option<f64>> = if self.lrs.is_empty() {
            vec![None]
        } else {
            self.lrs.iter().map(|&l| Some(l)).collect()
        };
        let mut out = Vec::new();
        for &seed in &self.seeds {
            for &lr in &lrs {
                for &attention in &self.attentions {
                    out.push(RunId {
                        seed,
                        lr,
                        attention,
                    });
                }
            }
        }
        out
    }

    /// The model configuration and options of run `id` (`vocab` from the tokenizer): a swept
    /// learning rate replaces the peak and scales the floor by the same factor, so every rate
    /// keeps the recipe's schedule shape (nanoGPT's cosine to a tenth).
    pub fn run_spec_of(&self, id: RunId, vocab: usize) -> (GptConfig, TrainOptions) {
        let (model, mut options) = self.run_spec(id.seed, id.attention, vocab);
        if let Some(lr) = id.lr {
            options.min_lr = self.options.min_lr / self.options.lr * lr;
            options.lr = lr;
        }
        (model, options)
    }

    /// The model configuration and options of one run (`vocab` from the tokenizer).
    pub fn run_spec(
        &self,
        seed: u64,
        attention: AttentionKind,
        vocab: usize,
    ) -> (GptConfig, TrainOptions) {
        let model = GptConfig {
            attention,
            frozen_seed: seed,
            vocab_size: vocab,
            ..self.model.clone()
        };
        let options = TrainOptions {
            seed,
            ..self.options.clone()
        };
        (model, options)
    }

    /// The variant differences are measured against: softmax when listed, else the first.
    pub fn baseline(&self) -> AttentionKind {
        if self.attentions.contains(&AttentionKind::Softmax) {
            AttentionKind::Softmax
        } else {
            self.attentions[0]
        }
    }

    /// The plan of a comparison on a token folder (`data` is its record).
    pub fn on_token_folder(mut self) -> Self {
        self.token_folder = true;
        self
    }

    /// Checks that `prepared` holds the plan's text and tokenizer kind (or its token folder).
    pub fn check_data(&self, prepared: &Prepared) -> Result<()> {
        if self.token_folder {
            if prepared.data.sha256 != self.data.sha256
                || prepared.windows != crate::train::token_batches::Windows::Numpy
            {
                return Err(invalid(format!(
                    "the data given is not the comparison's token folder {} (SHA-256 of its \
                     token files differs): pass the original folder as `data`",
                    self.data.source
                )));
            }
            return Ok(());
        }
        if prepared.data.sha256 != self.data.sha256
            || prepared.tokenizer.kind() != Some(self.tokenizer)
        {
            return Err(invalid(format!(
                "the text or tokenizer given is not the comparison's ({}, {} tokenizer): pass \
                 the original file as `data`",
                self.data.source,
                self.tokenizer.name()
            )));
        }
        Ok(())
    }

    /// Writes the plan into `out` (atomically). `out` must not hold a comparison already.
    pub fn write_new(&self, out: &Path) -> Result<()> {
        let path = out.join(PLAN_FILE);
        if path.exists() {
            return Err(invalid(format!(
                "{} already holds a comparison: continue it with `resume`, or choose another \
                 `out`",
                out.display()
            )));
        }
        crate::train::session::create_out(out, crate::io::folder_kind::FolderKind::Compare)?;
        let json = serde_json::to_vec_pretty(self)
            .map_err(|e| invalid(format!("serialising the plan: {e}")))?;
        crate::io::write_atomic_bytes(&path, &json)
    }

    /// The text a resumed comparison trains on: `data` when given, else the one the plan
    /// records (the embedded TinyShakespeare, or its file read again).
    pub fn corpus(&self, data: Option<&Path>) -> Result<crate::data::Corpus> {
        use crate::data::Corpus;
        match data {
            Some(path) => Corpus::load(path),
            None if self.data.source == crate::data::corpus::TINY_SHAKESPEARE_NAME => {
                Ok(Corpus::tiny_shakespeare())
            }
            None => Corpus::load(Path::new(&self.data.source)).map_err(|e| {
                invalid(format!(
                    "reloading the comparison's text {}: pass it with `data`: {}",
                    self.data.source,
                    crate::error::one_line(&e)
                ))
            }),
        }
    }

    /// Reads the plan of the comparison in `out`.
    pub fn read(out: &Path) -> Result<Self> {
        let path = out.join(PLAN_FILE);
        if std::fs::symlink_metadata(&path).is_err() {
            return Err(invalid(format!(
                "{} holds no comparison ({PLAN_FILE} is missing): pass the `out` folder \
                 of an earlier comparison",
                out.display()
            )));
        }
        let bytes = crate::io::safe_file::read_in(out, PLAN_FILE)?;
        let plan: ComparePlan = serde_json::from_slice(&bytes)
            .map_err(|e| invalid(format!("{} is unreadable: {e}", path.display())))?;
        if plan.version != VERSION {
            return Err(invalid(format!(
                "{} has format version {}; this build reads version {VERSION}",
                path.display(),
                plan.version
            )));
        }
        // Validated as the flags were when it was written: a plan edited to list no seeds,
        // a seed twice or an invalid option is refused here, never indexed or trusted.
        let checked = ComparePlan::new(
            plan.attentions.clone(),
            plan.seeds.clone(),
            plan.model.clone(),
            plan.options.clone(),
            plan.tokenizer,
            plan.bpe_vocab,
            plan.data.clone(),
            plan.recipe.clone(),
        )
        .and_then(|p| p.with_lrs(plan.lrs.clone()))
        .map(|p| ComparePlan {
            token_folder: plan.token_folder,
            ..p
        })
        .map_err(|e| invalid(format!("{} is invalid: {e}", path.display())))?;
        if !crate::io::file_set::is_sha256_hex(&checked.data.sha256) {
            return Err(invalid(format!(
                "{} is invalid: the text's SHA-256 is not 64 hex digits",
                path.display()
            )));
        }
        Ok(checked)
    }
}

/// The key of one run in `finals.json`: `seed-<s>/<attention>`.
pub fn run_key(seed: u64, attention: AttentionKind) -> String {
    format!("seed-{seed}/{}", attention.name())
}

/// The folder name of a swept learning rate: `lr-<value>` (`lr-0.001`, `lr-0.0003`).
pub fn lr_dir(lr: f64) -> String {
    format!("lr-{lr}")
}

/// The key of run `id` in `finals.json` and its folder under the comparison:
/// `seed-<s>/<attention>`, or `seed-<s>/lr-<lr>/<attention>` in a sweep.
pub fn run_key_of(id: RunId) -> String {
    match id.lr {
        None => run_key(id.seed, id.attention),
        Some(lr) => format!("seed-{}/{}/{}", id.seed, lr_dir(lr), id.attention.name()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Corpus;

    fn plan(seeds: Vec<u64>) -> Result<ComparePlan> {
        ComparePlan::new(
            vec![AttentionKind::Softmax, AttentionKind::Orthogonal],
            seeds,
            GptConfig::preset("tiny").unwrap(),
            TrainOptions::default(),
            TokenizerKind::Char,
            512,
            crate::train::session::data_record(&Corpus::tiny_shakespeare()),
            None,
        )
    }

    /// Too many seeds (an edited `plan.json`) are refused before the repeat check (a sort).
    #[test]
    fn seed_lists_are_capped_and_repeats_found_by_sorting() {
        let e = plan((0..=MAX_SEEDS as u64).collect())
            .unwrap_err()
            .to_string();
        assert!(e.contains("`seeds` 1001 is more than 1000"), "{e}");
        let all: Vec<u64> = (0..MAX_SEEDS as u64).rev().collect();
        assert_eq!(plan(all.clone()).unwrap().seeds, all);
        let mut twice = all;
        twice[999] = 500;
        let e = plan(twice).unwrap_err();
        assert!(e.to_string().contains("seed 500 is listed twice"), "{e}");
        assert!(plan(vec![]).is_err());
    }

    #[test]
    fn sweeps_are_capped_by_rates_and_by_runs() {
        let lrs = |n: usize| (1..=n).map(|i| i as f64 * 1e-4).collect::<Vec<f64>>();
        let two = plan(vec![0, 1]).unwrap();
        assert!(two.clone().with_lrs(lrs(MAX_LRS)).is_ok());
        let e = two.clone().with_lrs(lrs(MAX_LRS + 1)).unwrap_err();
        assert!(e.to_string().contains("more than 64"), "{e}");
        let e = two.with_lrs(vec![1e-3, 2e-3, 1e-3]).unwrap_err();
        assert!(e.to_string().contains("lists 0.001 twice"), "{e}");
        let many = plan((0..MAX_SEEDS as u64).collect()).unwrap();
        let e = many.with_lrs(lrs(6)).unwrap_err().to_string();
        assert!(e.contains("make 12000 runs, more than 10000"), "{e}");
    }
}
