//! One source of defaults: every command parsed with no optional flag converts into exactly
//! its library options type's `Default` (so a default written in clap and forgotten in the
//! library, or the reverse, fails here), and the help still shows each default.

use clap::{CommandFactory, Parser};

use super::{Cli, Command};
use orthoformer::analysis::mqar::run::MqarPlan;
use orthoformer::analysis::params_report::ParamsOptions;
use orthoformer::analysis::signal_probe::ProbeOptions;
use orthoformer::analysis::theory::report::TheoryOptions;
use orthoformer::bench::init_report::InitBenchOptions;
use orthoformer::bench::memory_report::MemoryOptions;
use orthoformer::bench::options::BenchOptions;
use orthoformer::experiments::compare::CompareOptions;
use orthoformer::infer::GenerateJob;
use orthoformer::init::options::InitOptions;
use orthoformer::quant::options::QuantizeOptions;
use orthoformer::rotate::options::{AlignOptions, RotateOptions, WeightAlignOptions};

fn parse(args: &[&str]) -> Command {
    let argv = std::iter::once("orthoformer").chain(args.iter().copied());
    Cli::try_parse_from(argv).unwrap().command
}

#[test]
fn every_command_without_flags_is_its_library_default() {
    let Command::Bench(a) = parse(&["bench"]) else {
        panic!()
    };
    assert_eq!(a.options().unwrap(), BenchOptions::default());
    let Command::Compare(a) = parse(&["compare"]) else {
        panic!()
    };
    assert_eq!(a.compare_options().unwrap(), CompareOptions::default());
    let Command::Memory(a) = parse(&["memory"]) else {
        panic!()
    };
    assert_eq!(a.options().unwrap(), MemoryOptions::default());
    let Command::Mqar(a) = parse(&["mqar"]) else {
        panic!()
    };
    // MqarPlan has no PartialEq (it is compared as the JSON it is written as).
    assert_eq!(
        serde_json::to_value(super::mqar::plan(&a).unwrap()).unwrap(),
        serde_json::to_value(MqarPlan::default()).unwrap()
    );
    let Command::Init(a) = parse(&["init"]) else {
        panic!()
    };
    assert_eq!(a.options().unwrap(), InitOptions::default());
    let Command::InitBench(a) = parse(&["init-bench"]) else {
        panic!()
    };
    assert_eq!(a.options().unwrap(), InitBenchOptions::default());
    let Command::InitProbe(a) = parse(&["init-probe"]) else {
        panic!()
    };
    assert_eq!(a.options(), ProbeOptions::default());
    let Command::Theory(a) = parse(&["theory", "--checkpoint", "c"]) else {
        panic!()
    };
    assert_eq!(a.options(), TheoryOptions::default());
    let Command::Params(a) = parse(&["params"]) else {
        panic!()
    };
    assert_eq!(a.options(), ParamsOptions::default());
    let Command::Generate(a) = parse(&["generate", "--checkpoint", "c"]) else {
        panic!()
    };
    assert_eq!(a.job(), GenerateJob::default());
    let Command::Rotate(a) = parse(&["rotate", "--model", "m"]) else {
        panic!()
    };
    assert_eq!(a.options(), RotateOptions::default());
    let Command::Align(a) = parse(&["align", "--model", "a", "--model-b", "b", "--layer", "3"])
    else {
        panic!()
    };
    assert_eq!(a.options(), AlignOptions::at_layer(3));
    let Command::Align(a) = parse(&["align", "--model", "a", "--model-b", "b", "--weights"]) else {
        panic!()
    };
    assert_eq!(a.weight_options(), WeightAlignOptions::default());
    let Command::Quantize(a) = parse(&["quantize", "--model", "m"]) else {
        panic!()
    };
    assert_eq!(a.options(), QuantizeOptions::default());
}

#[test]
fn help_shows_the_library_defaults() {
    let mut cli = Cli::command();
    let help = |cli: &mut clap::Command, name: &str| {
        cli.find_subcommand_mut(name)
            .unwrap()
            .render_long_help()
            .to_string()
    };
    let bench = help(&mut cli, "bench");
    assert!(bench.contains("[default: a,b]"), "{bench}");
    assert!(
        bench.contains("[default: softmax,orthogonal,orthogonal-hadamard]"),
        "{bench}"
    );
    assert!(bench.contains("[default: 20]"), "{bench}");
    let mqar = help(&mut cli, "mqar");
    assert!(
        mqar.contains("[default: 64:4,128:8,256:16,512:64]"),
        "{mqar}"
    );
    let rotate = help(&mut cli, "rotate");
    assert!(rotate.contains("[default: hadamard]"), "{rotate}");
    assert!(rotate.contains("[default: f32]"), "{rotate}");
    let generate = help(&mut cli, "generate");
    assert!(generate.contains("[default: f16]"), "{generate}");
    let quantize = help(&mut cli, "quantize");
    assert!(quantize.contains("[default: none]"), "{quantize}");
    // compare's flags are optional (`--resume` refuses them), so its help states the
    // defaults in words: they must be the library's.
    let compare = help(&mut cli, "compare");
    let d = CompareOptions::default();
    for shown in [d.attention_names(), d.seeds.to_string(), d.recipe.clone()] {
        assert!(
            compare.contains(&format!("[default: {shown}]")),
            "{compare}"
        );
    }
    let init_bench = help(&mut cli, "init-bench");
    assert!(init_bench.contains("[default: 768x64]"), "{init_bench}");
}
