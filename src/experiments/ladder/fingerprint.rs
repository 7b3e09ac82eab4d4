//! A run's fingerprint: the SHA-256 of every setting that changes how it trains or is scored,
//! stored in its `result.json` and compared whenever the result is read again (resume,
//! report). A plan edited after some runs finished (another batch, schedule, optimizer
//! setting, data, scoring range) then names the runs it no longer describes instead of mixing
//! them into one report.
//!
//! It covers the [`RunSpec`] (model configuration, seeds, steps, schedule, optimizer, data
//! ranges, curve and final scoring ranges, parameter and FLOP counts) without its paths (a
//! ladder folder may be copied or moved), plus the SHA-256 of the token folder's data, its
//! tokenizer and the transfer text the plan recorded. Canonical JSON (object keys sorted,
//! numbers in serde_json's shortest round-trip form) is what is hashed.

use sha2::{Digest, Sha256};

use super::plan::Recorded;
use super::runs::RunSpec;

/// The fields of a spec that say where, not what: left out.
const PATHS: [&str; 4] = ["dir", "transfer_file", "data", "fingerprint"];

/// The fingerprint of `spec` on the data `rec` recorded.
pub fn fingerprint(spec: &RunSpec, rec: &Recorded) -> String {
    let mut v = serde_json::to_value(spec).unwrap_or(serde_json::Value::Null);
    if let Some(o) = v.as_object_mut() {
        for k in PATHS {
            o.remove(k);
        }
        for (k, s) in [
            ("data_sha256", &rec.data_sha256),
            ("tokenizer_sha256", &rec.tokenizer_sha256),
            ("transfer_sha256", &rec.transfer_sha256),
        ] {
            o.insert(k.to_string(), serde_json::Value::String(s.clone()));
        }
    }
    let mut text = String::new();
    canonical(&v, &mut text);
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `v` as JSON with every object's keys sorted, whatever order the map keeps them in.
fn canonical(v: &serde_json::Value, out: &mut String) {
    match v {
        serde_json::Value::Object(o) => {
            let mut keys: Vec<&String> = o.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::Value::String(k.clone()).to_string());
                out.push(':');
                canonical(&o[k], out);
            }
            out.push('}');
        }
        serde_json::Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(x, out);
            }
            out.push(']');
        }
        x => out.push_str(&x.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_json_sorts_keys_at_every_depth() {
        let v: serde_json::Value =
            serde_json::from_str(r#"{"b": [1, {"z": 1, "a": 2}], "a": 0.5}"#).unwrap();
        let mut s = String::new();
        canonical(&v, &mut s);
        assert_eq!(s, r#"{"a":0.5,"b":[1,{"a":2,"z":1}]}"#);
    }
}
