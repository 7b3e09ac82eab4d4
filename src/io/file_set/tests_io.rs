//! The input/output check and the output lock: every way an output can reach an input (the
//! same path, `./`, `..`, a link to a parent, a hard link, inside, around) is refused, and a
//! second lock on one output is refused at once, naming the holder.

use super::*;
use std::fs;

fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("of-io-check-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn refused(inputs: &[Input<'_>], outputs: &[Output<'_>], want: &str) {
    let e = check_outputs(inputs, outputs)
        .err()
        .unwrap_or_else(|| panic!("accepted {outputs:?} against {inputs:?}"))
        .to_string();
    assert!(e.contains(want) && !e.contains('\n'), "{want:?}: {e}");
}

#[test]
fn outputs_never_reach_their_inputs() {
    let d = fresh_dir("reach");
    let model = d.join("m.gguf");
    fs::write(&model, b"model").unwrap();
    let hf = d.join("hf");
    fs::create_dir(&hf).unwrap();
    fs::write(hf.join("model.safetensors"), b"w").unwrap();
    let file_in = [Input::new("model", &model)];
    let dir_in = [Input::new("model", &hf)];
    // The model itself, spelt four ways.
    let dotted = d.join("hf/../m.gguf");
    let cur = d.join("./m.gguf");
    for p in [&model, &dotted, &cur] {
        refused(&file_in, &[Output::file("out", p)], "`out` is the `model`");
    }
    refused(&dir_in, &[Output::folder("out", &hf)], "itself");
    // Inside the model folder, the model inside the output, and the output's parent a link.
    let inner = hf.join("r.gguf");
    refused(
        &dir_in,
        &[Output::file("out", &inner)],
        "is inside the `model`",
    );
    let nested = hf.join("new/deeper");
    refused(&dir_in, &[Output::folder("out", &nested)], "is inside");
    refused(&file_in, &[Output::folder("out", &d)], "holds the `model`");
    #[cfg(unix)]
    {
        let link = d.join("alias");
        std::os::unix::fs::symlink(&hf, &link).unwrap();
        refused(
            &dir_in,
            &[Output::file("out", &link.join("x.gguf"))],
            "inside",
        );
        refused(&dir_in, &[Output::folder("out", &link)], "is a link");
        // A hard link is the same file under another name.
        let hard = d.join("hard.gguf");
        fs::hard_link(&model, &hard).unwrap();
        refused(&file_in, &[Output::file("out", &hard)], "itself");
    }
    // Outputs against each other: twice, and one inside the other.
    let a = d.join("a.gguf");
    let sub = d.join("out");
    let in_sub = sub.join("ref.npy");
    refused(
        &[],
        &[
            Output::file("out", &a),
            Output::file("out", &d.join("./a.gguf")),
        ],
        "also given",
    );
    refused(
        &[],
        &[
            Output::folder("out", &sub),
            Output::file("logits_out", &in_sub),
        ],
        "one inside the other",
    );
    // Kinds, a folder under a file, `..` through a missing folder.
    refused(&[], &[Output::file("out", &hf)], "is a folder");
    refused(&[], &[Output::folder("out", &model)], "is a file");
    refused(
        &[],
        &[Output::file("out", &model.join("x.gguf"))],
        "is not a folder",
    );
    let through = d.join("missing/../x.gguf");
    refused(&[], &[Output::file("out", &through)], "does not exist");
    // Siblings and new folders are fine; a missing input is left to its reader.
    let missing = d.join("no-such-model");
    check_outputs(
        &[Input::new("model", &model), Input::new("data", &missing)],
        &[
            Output::file("out", &d.join("r.gguf")),
            Output::folder("out", &d.join("new/hf")),
        ],
    )
    .unwrap();
    fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_second_claim_is_refused_at_once_and_released_claims_leave_nothing() {
    let d = fresh_dir("lock");
    let out = d.join("ck");
    let first = claim_outputs(&[], &[Output::folder("out", &out)]).unwrap();
    let lock = lock_path(&d.canonicalize().unwrap().join("ck")).unwrap();
    assert_eq!(
        fs::read_to_string(&lock).unwrap().trim(),
        std::process::id().to_string()
    );
    // Another spelling of the same output is the same lock.
    let again = d.join("./ck");
    let e = claim_outputs(&[], &[Output::folder("out", &again)])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("in use by process {}", std::process::id())),
        "{e}"
    );
    // Another output in the same folder is its own lock.
    let other = claim_outputs(&[], &[Output::file("out", &d.join("ck.gguf"))]).unwrap();
    drop(first);
    drop(other);
    let names: Vec<_> = fs::read_dir(&d).unwrap().flatten().collect();
    assert!(names.is_empty(), "{names:?}");
    // Released, it is free again.
    drop(claim_outputs(&[], &[Output::folder("out", &out)]).unwrap());
    fs::remove_dir_all(&d).unwrap();
}
