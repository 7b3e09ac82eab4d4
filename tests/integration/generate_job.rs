//! `orthoformer generate` as one library operation, on both model families through the one
//! tokenizer type: the empty-prompt policy (start from the declared beginning-of-sequence id,
//! id 0 for a model that declares none), the stop rules (declared end-of-sequence id and the
//! vocabulary's end-of-text markers), the checks before the model is opened, the streamed
//! text equal to the report's, and the same tokens as `generate_ids` on the same ids.

use crate::common;

use orthoformer::data::{Tokenizer, TokenizerKind};
use orthoformer::infer::generate::{SampleOptions, generate_ids};
use orthoformer::infer::generate_job::{self, GenerateJob};
use orthoformer::infer::{CausalLm, TextModel};
use orthoformer::model::llama::{KvDtype, Llama};
use orthoformer::model::{Gpt, GptConfig};

const TEXT: &str = "\nthe cat sat on the mat.\nthe dog ate the hat.\n";

/// A tiny GPT over the character vocabulary of [`TEXT`] (id 0 is the newline).
fn char_gpt() -> TextModel<Gpt> {
    let tokenizer = Tokenizer::train(TokenizerKind::Char, TEXT, 0).unwrap();
    let cfg = GptConfig {
        vocab_size: tokenizer.vocab_size(),
        ..GptConfig::preset("tiny").unwrap()
    };
    TextModel {
        model: Gpt::new(cfg, 5).unwrap(),
        tokenizer,
        special: Default::default(),
    }
}

fn greedy(n: usize, prompt: &str) -> GenerateJob {
    GenerateJob {
        prompt: prompt.into(),
        options: SampleOptions {
            max_new_tokens: n,
            temperature: 0.0,
            ..SampleOptions::default()
        },
        ..GenerateJob::default()
    }
}

#[test]
fn a_checkpoint_gpt_starts_an_empty_prompt_from_id_0_and_never_stops_early() {
    let lm = char_gpt();
    assert_eq!(lm.tokenizer.decode(&[0]).unwrap(), "\n");
    assert_eq!(lm.prompt_ids("").unwrap(), vec![0]);
    assert_eq!(
        lm.prompt_ids("the").unwrap(),
        lm.tokenizer.encode("the").unwrap()
    );
    assert!(
        lm.stop_ids().is_empty(),
        "a character vocabulary has no end marker"
    );
    let mut streamed = String::new();
    let report = generate_job::run(
        &greedy(12, ""),
        || Ok(char_gpt()),
        Some(&mut |piece: &str| {
            streamed.push_str(piece);
            Ok(())
        }),
    )
    .unwrap();
    assert_eq!((report.prompt_tokens, report.new_tokens), (1, 12));
    assert!(!report.stopped_on_eos);
    assert_eq!(
        streamed, report.text,
        "the empty prompt, then the continuation"
    );
    // The same tokens as generating from id 0 directly.
    let mut lm = char_gpt();
    let ids = generate_ids(
        &mut lm.model,
        &[0],
        greedy(12, "").options,
        &[],
        &mut |_| Ok(()),
    )
    .unwrap();
    assert_eq!(lm.tokenizer.decode(&ids).unwrap(), report.text);
}

#[test]
fn a_bad_job_is_refused_before_the_model_is_opened() {
    let mut job = greedy(4, "the");
    job.options.temperature = f32::NAN;
    let err = generate_job::run(
        &job,
        || -> orthoformer::Result<TextModel<Gpt>> { panic!("opened before the job was checked") },
        None,
    )
    .unwrap_err();
    assert!(err.to_string().contains("`temperature` NaN"), "{err}");
}

#[test]
#[cfg_attr(
    not(feature = "model-tests"),
    ignore = "needs SmolLM2 (98 MB from PyPI): run with --features model-tests"
)]
fn a_pretrained_model_starts_an_empty_prompt_from_its_bos_and_stops_on_its_eos() {
    let path = common::smollm2();
    let lm = TextModel::pretrained(&path, KvDtype::F32).unwrap();
    // SmolLM2 declares <|im_start|> (1) as BOS and <|im_end|> (2) as EOS.
    assert_eq!(lm.special.bos, Some(1));
    assert_eq!(lm.prompt_ids("").unwrap(), vec![1]);
    let stop = lm.stop_ids();
    assert!(stop.contains(&2) && stop.contains(&0), "{stop:?}");
    let open = || TextModel::pretrained(&path, KvDtype::F32);
    let report = generate_job::run(&greedy(6, ""), open, None).unwrap();
    assert_eq!(report.prompt_tokens, 1);
    assert!(report.new_tokens >= 1 && report.new_tokens <= 6);
    let mut lm = open().unwrap();
    let ids = generate_ids(
        &mut lm.model,
        &[1],
        greedy(6, "").options,
        &stop,
        &mut |_| Ok(()),
    )
    .unwrap();
    assert_eq!(lm.tokenizer.decode(&ids).unwrap(), report.text);
    // The same prompt rule and tokenizer as every other path: "Paris" after the question.
    let r = generate_job::run(&greedy(2, "The capital of France is"), open, None).unwrap();
    assert!(r.text.starts_with(" Paris"), "{r:?}");
    assert_eq!(r.prompt_tokens, 5);
    // Prompt and continuation must fit a cache that keeps every position.
    let ctx = Llama::context(&open().unwrap().model);
    let err = generate_job::run(&greedy(ctx, "The capital"), open, None).unwrap_err();
    assert!(
        err.to_string().contains("`max_new_tokens`") && err.to_string().contains("context"),
        "{err}"
    );
    assert_eq!(open().unwrap().model.cache_limit(), Some(ctx));
}
