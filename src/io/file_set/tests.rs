//! Every on-disk state of the protocol, made by stopping a real commit after each of its steps
//! (as a crash would: nothing is cleaned up) or by writing the partial files by hand, then
//! recovered: the folder must hold the whole old set or the whole new one, and nothing else.

use super::*;
use std::collections::BTreeMap;

fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("of-file-set-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// Every entry of `dir` with its contents.
fn listing(dir: &Path) -> BTreeMap<String, String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            (name, fs::read_to_string(e.path()).unwrap_or_default())
        })
        .collect()
}

fn set_of(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

const OLD: [(&str, &str); 2] = [("a.bin", "old a"), ("b.json", "old b")];
const NEW: [(&str, &str); 3] = [("a.bin", "new a!"), ("b.json", "new b"), ("c.txt", "new c")];

/// A folder holding the old set, written through the protocol itself.
fn with_old_set(name: &str) -> PathBuf {
    let dir = fresh_dir(name);
    let mut set = FileSet::begin(&dir, "t").unwrap();
    for (n, v) in OLD {
        set.write_bytes(n, v.as_bytes()).unwrap();
    }
    set.commit().unwrap();
    assert_eq!(listing(&dir), set_of(&OLD));
    dir
}

fn stage_new(dir: &Path) -> FileSet {
    let mut set = FileSet::begin(dir, "t").unwrap();
    for (n, v) in NEW {
        set.write_bytes(n, v.as_bytes()).unwrap();
    }
    set
}

#[test]
fn a_crash_after_any_step_of_a_commit_recovers_to_one_whole_set() {
    // Steps: record, sync, publish (the commit point), sync, 3 moves, sync, remove, sync.
    let mut seen = Vec::new();
    for limit in 0.. {
        let dir = with_old_set(&format!("step{limit}"));
        let mut set = stage_new(&dir);
        if set.commit_steps(limit).unwrap() {
            drop(set);
            assert_eq!(listing(&dir), set_of(&NEW), "a finished commit");
            fs::remove_dir_all(&dir).unwrap();
            break;
        }
        std::mem::forget(set); // a crash runs no destructor
        let recovery = recover(&dir, "t").unwrap();
        let committed = limit > 2;
        let want = if committed {
            set_of(&NEW)
        } else {
            set_of(&OLD)
        };
        assert_eq!(
            listing(&dir),
            want,
            "crash after {limit} steps ({recovery:?})"
        );
        assert_eq!(recover(&dir, "t").unwrap(), Recovery::Clean, "idempotent");
        seen.push(recovery);
        fs::remove_dir_all(&dir).unwrap();
    }
    use Recovery::*;
    // Before the commit point the three staged files (and the record being written) are
    // removed; after it, the files not yet moved are moved; after the record's removal,
    // nothing is left to do.
    assert_eq!(
        seen,
        [
            RolledBack(3),
            RolledBack(4),
            RolledBack(4),
            RolledForward(3),
            RolledForward(3),
            RolledForward(2),
            RolledForward(1),
            RolledForward(0),
            RolledForward(0),
            Clean,
        ]
    );
}

#[test]
fn partial_staged_files_and_a_partial_record_are_rolled_back() {
    let dir = with_old_set("partial");
    let mut set = FileSet::begin(&dir, "t").unwrap();
    set.write_bytes("a.bin", b"complete").unwrap();
    std::mem::forget(set);
    // A staged file cut short, and a record cut short, as a kill mid-write leaves them.
    fs::write(dir.join(".t.new.b.json"), b"{\"trunc").unwrap();
    fs::write(dir.join(".t.commit.tmp"), b"orthoformer-file-se").unwrap();
    assert_eq!(recover(&dir, "t").unwrap(), Recovery::RolledBack(3));
    assert_eq!(listing(&dir), set_of(&OLD));
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_failed_write_keeps_the_old_set_and_leaves_no_temporary_file() {
    let dir = with_old_set("fail");
    let mut set = FileSet::begin(&dir, "t").unwrap();
    set.write_bytes("a.bin", b"new").unwrap();
    let err = set
        .write("b.json", |w| {
            w.write_all(b"half")?;
            Err(std::io::Error::other("No space left on device"))
        })
        .unwrap_err();
    assert!(
        matches!(&err, Error::Io { path, .. } if path.ends_with("b.json")),
        "{err}"
    );
    drop(set);
    assert_eq!(listing(&dir), set_of(&OLD));
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_damaged_record_is_an_error_that_touches_nothing() {
    let dir = with_old_set("damaged");
    fs::write(dir.join(".t.commit"), b"garbage\n").unwrap();
    let before = listing(&dir);
    let err = recover(&dir, "t").unwrap_err().to_string();
    assert!(err.contains("commit record"), "{err}");
    assert_eq!(listing(&dir), before);
    // A record naming a file that is neither staged nor present, or present with other bytes
    // (a roll forward never takes a file it did not commit).
    for name in ["gone.bin", "a.bin"] {
        let files = [(name.to_string(), sha256_hex(b"committed bytes"))];
        fs::write(dir.join(".t.commit"), record_text(&files)).unwrap();
        let err = recover(&dir, "t").unwrap_err().to_string();
        assert!(err.contains("neither staged nor in place"), "{err}");
    }
    assert_eq!(fs::read(dir.join("a.bin")).unwrap(), b"old a");
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn names_and_tags_must_be_plain() {
    let dir = fresh_dir("names");
    let mut set = FileSet::begin(&dir, "t").unwrap();
    for bad in ["", ".hidden", "a/b", "two\nlines"] {
        assert!(set.write_bytes(bad, b"x").is_err(), "{bad:?}");
    }
    set.write_bytes("x", b"1").unwrap();
    assert!(set.write_bytes("x", b"2").is_err(), "staged twice");
    drop(set);
    for bad in ["", "a.b", "a/b"] {
        assert!(FileSet::begin(&dir, bad).is_err(), "{bad:?}");
    }
    assert!(listing(&dir).is_empty());
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn recovering_for_a_file_finishes_the_sets_that_involve_it() {
    let dir = with_old_set("for");
    let mut one = stage_new(&dir);
    assert!(!one.commit_steps(5).unwrap());
    std::mem::forget(one);
    let mut other = FileSet::begin(&dir, "u-2").unwrap();
    other.write_bytes("z.txt", b"z").unwrap();
    std::mem::forget(other);
    assert_eq!(pending_tags(&dir).unwrap(), ["t", "u-2"]);
    // Set t's record names c.txt; set u-2 does not involve it and is left alone.
    recover_for(&dir.join("c.txt")).unwrap();
    assert_eq!(pending_tags(&dir).unwrap(), ["u-2"]);
    recover_for(&dir.join("z.txt")).unwrap();
    assert!(pending_tags(&dir).unwrap().is_empty());
    assert_eq!(listing(&dir), set_of(&NEW));
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_new_folder_appears_whole_and_an_existing_one_is_replaced_as_a_set() {
    let root = fresh_dir("folder");
    let out = root.join("export");
    // A crashed earlier attempt left its staging folder.
    fs::create_dir_all(root.join(".export.new")).unwrap();
    fs::write(root.join(".export.new/partial"), b"x").unwrap();
    let fill = |v: &'static str| {
        move |s: &mut FileSet| {
            s.write_bytes("config.json", v.as_bytes())?;
            s.write_bytes("model.safetensors", v.as_bytes())
        }
    };
    write_folder(&out, "export", fill("one")).unwrap();
    assert_eq!(
        listing(&root).keys().collect::<Vec<_>>(),
        ["export"],
        "staging folder removed"
    );
    assert_eq!(
        listing(&out),
        set_of(&[("config.json", "one"), ("model.safetensors", "one")])
    );
    let failed = write_folder(&out, "export", |s| {
        s.write_bytes("config.json", b"two")?;
        Err(Error::io(
            "model.safetensors",
            std::io::Error::other("disk full"),
        ))
    });
    assert!(failed.is_err());
    write_folder(&out, "export", fill("three")).unwrap();
    assert_eq!(
        listing(&out),
        set_of(&[("config.json", "three"), ("model.safetensors", "three")])
    );
    // A new folder whose write fails is absent, staging included.
    let never = root.join("never");
    assert!(
        write_folder(&never, "export", |_| Err(Error::io(
            "x",
            std::io::Error::other("no")
        )))
        .is_err()
    );
    assert!(!never.exists() && !root.join(".never.new").exists());
    fs::remove_dir_all(&root).unwrap();
}

#[test]
fn the_lock_excludes_a_second_holder_until_it_is_released() {
    let dir = fresh_dir("lock");
    assert!(SetLock::acquire_existing(&dir, "t").unwrap().is_none());
    let held = SetLock::acquire(&dir, "t").unwrap();
    let other = fs::File::open(SetLock::path(&dir, "t")).unwrap();
    assert!(matches!(
        other.try_lock(),
        Err(std::fs::TryLockError::WouldBlock)
    ));
    drop(held);
    other.try_lock().unwrap();
    drop(other);
    assert!(SetLock::acquire_existing(&dir, "t").unwrap().is_some());
    fs::remove_dir_all(&dir).unwrap();
}
