//! `optimizer.safetensors`: the AdamW moments `m` and `v` (F32, one value per trainable
//! parameter, in the model's flat buffer order), streamed to the file without a copy. The step
//! count and hyper-parameters are in `state.json`.

use std::collections::BTreeMap;
use std::io::Write;

use safetensors::tensor::Dtype;

use super::OPTIMIZER_FILE;
use crate::io::safetensors_writer::{TensorOut, write_safetensors};
use crate::train::adamw::AdamW;

/// Writes `adam`'s moments as safetensors (`m`, then `v`, shape `[n]`).
pub fn write(w: &mut dyn Write, adam: &AdamW) -> std::io::Result<()> {
    let shape = [adam.m.len()];
    let tensors = [
        TensorOut {
            name: "m",
            shape: &shape,
            data: &adam.m,
        },
        TensorOut {
            name: "v",
            shape: &shape,
            data: &adam.v,
        },
    ];
    write_safetensors(w, &tensors, &BTreeMap::new())
}

/// Reads `(m, v)` back; the error says what is wrong with the file.
pub fn read(bytes: &[u8]) -> Result<(Vec<f32>, Vec<f32>), String> {
    let st = safetensors::SafeTensors::deserialize(bytes)
        .map_err(|e| format!("{OPTIMIZER_FILE}: {e}"))?;
    let read = |name: &str| -> Result<Vec<f32>, String> {
        let t = st
            .tensor(name)
            .map_err(|e| format!("{OPTIMIZER_FILE}: {e}"))?;
        if t.dtype() != Dtype::F32 || t.shape().len() != 1 {
            return Err(format!("{OPTIMIZER_FILE}: {name} is not a 1-D F32 tensor"));
        }
        Ok(t.data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    };
    let (m, v) = (read("m")?, read("v")?);
    if m.len() != v.len() {
        return Err(format!("{OPTIMIZER_FILE}: m and v differ in length"));
    }
    Ok((m, v))
}
