//! Sharded Hugging Face weights (`io::safetensors_shards`): a valid index is read whole, and
//! every lie in it (a tensor missing from its shard, in two shards, in a shard the index does
//! not name, a shard outside the folder or a link out of it, a malformed index) is refused
//! with one line naming it.

use std::collections::BTreeMap;
use std::path::Path;

use orthoformer::io::safetensors_shards::{INDEX, read};

/// A fresh folder under the system's temporary folder, removed when dropped.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new() -> Self {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("ortho-shards-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn shard(dir: &Path, name: &str, tensors: &[&str]) {
    let data = [0u8; 16];
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = tensors
        .iter()
        .map(|n| {
            let v = safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![4], &data)
                .unwrap();
            (n.to_string(), v)
        })
        .collect();
    let bytes = safetensors::tensor::serialize(views, None).unwrap();
    std::fs::write(dir.join(name), bytes).unwrap();
}

fn index(dir: &Path, map: &[(&str, &str)]) {
    let m: BTreeMap<&str, &str> = map.iter().copied().collect();
    let v = serde_json::json!({"metadata": {"total_size": 0}, "weight_map": m});
    std::fs::write(dir.join(INDEX), v.to_string()).unwrap();
}

/// A folder with shards `a` (x, y) and `b` (z), and the index `map`.
fn folder(map: &[(&str, &str)]) -> Scratch {
    let d = Scratch::new();
    shard(d.path(), "a.safetensors", &["x", "y"]);
    shard(d.path(), "b.safetensors", &["z"]);
    index(d.path(), map);
    d
}

fn refused(d: &Scratch, words: &[&str]) {
    let e = read(d.path()).unwrap_err().to_string();
    assert!(!e.contains('\n'), "one line: {e}");
    for w in words {
        assert!(e.contains(w), "{w:?} not in: {e}");
    }
}

const GOOD: [(&str, &str); 3] = [
    ("x", "a.safetensors"),
    ("y", "a.safetensors"),
    ("z", "b.safetensors"),
];

#[test]
fn a_consistent_index_reads_every_shard() {
    let d = folder(&GOOD);
    let s = read(d.path()).unwrap();
    assert_eq!(s.files.len(), 2);
    assert!(s.files[0].0.ends_with("a.safetensors") && s.files[1].0.ends_with("b.safetensors"));
}

#[test]
fn index_lies_are_refused_naming_the_tensor() {
    let d = folder(&[
        ("x", "a.safetensors"),
        ("y", "a.safetensors"),
        ("z", "b.safetensors"),
        ("w", "b.safetensors"),
    ]);
    refused(&d, &["tensor w", "missing", "b.safetensors"]);
    let d = folder(&[("x", "a.safetensors"), ("z", "b.safetensors")]);
    refused(&d, &["tensor y", "not in the index"]);
    let d = folder(&[
        ("x", "a.safetensors"),
        ("y", "b.safetensors"),
        ("z", "b.safetensors"),
    ]);
    refused(&d, &["tensor y", "index puts it in"]);
    let d = folder(&GOOD);
    shard(d.path(), "b.safetensors", &["z", "x"]);
    refused(&d, &["tensor x", "two shards"]);
    let d = folder(&[
        ("x", "a.safetensors"),
        ("y", "a.safetensors"),
        ("z", "c.safetensors"),
    ]);
    refused(&d, &["c.safetensors"]);
}

#[test]
fn shards_outside_the_folder_are_refused() {
    for name in [
        "../a.safetensors",
        "/etc/passwd",
        "sub/a.safetensors",
        "..",
        "",
    ] {
        let d = folder(&[("x", "a.safetensors"), ("y", "a.safetensors"), ("z", name)]);
        refused(&d, &["tensor z", "not a file of this folder"]);
    }
    let outside = Scratch::new();
    shard(outside.path(), "b.safetensors", &["z"]);
    let d = folder(&GOOD);
    std::fs::remove_file(d.path().join("b.safetensors")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("b.safetensors"),
        d.path().join("b.safetensors"),
    )
    .unwrap();
    refused(&d, &["symbolic link", "outside its folder"]);
}

#[test]
fn malformed_indexes_are_refused() {
    for (text, word) in [
        ("{", "not valid JSON"),
        ("{\"weight_map\": 3}", "weight_map"),
        ("{\"weight_map\": {}}", "no tensors"),
        ("{\"weight_map\": {\"x\": 1}}", "not a string"),
    ] {
        let d = folder(&GOOD);
        std::fs::write(d.path().join(INDEX), text).unwrap();
        refused(&d, &[word]);
    }
    let d = folder(&GOOD);
    std::fs::write(d.path().join("a.safetensors"), b"not safetensors").unwrap();
    refused(&d, &["a.safetensors", "not a valid safetensors file"]);
}
