//! Writing a quantised model as a GGUF file people run (llama.cpp, this crate's engine): each
//! matrix in its block format exactly as quantised, norms F32, Q/K rows permuted to
//! llama.cpp's RoPE order (whole rows of blocks move, so the grid values do not change),
//! tokenizer and other metadata copied from the source GGUF; written atomically.

use std::path::Path;

use super::QuantError;
use super::grid::Format;
use super::matrix::QuantMatrix;
use super::model::QuantizedModel;
use crate::export::llama::gguf_metadata;
use crate::io::gguf::{RawTensor, Value, keys, write_gguf_raw};
use crate::model::llama::online::DOWN_SIGNS;
use crate::model::llama::weights::permute_rope_rows;
use crate::model::llama::{LayerTensor, LlamaWeights};

/// The ggml type id of a block format (`None` for the study's affine grid).
pub fn type_id(f: Format) -> Option<u32> {
    f.ggml_type().map(|t| t.id())
}

/// `m`'s blocks with its rows in llama.cpp's RoPE order (Q and K) or as they are.
fn bytes(m: &QuantMatrix, rope_heads: Option<(usize, usize)>) -> Result<Vec<u8>, QuantError> {
    let b = m.gguf_bytes().ok_or_else(|| {
        QuantError::Invalid(format!("the grid {:?} has no GGUF block format", m.format))
    })?;
    let Some((heads, dh)) = rope_heads else {
        return Ok(b);
    };
    // The permutation of rows, read off a one-column matrix of row numbers.
    let idx: Vec<f32> = (0..m.rows).map(|r| r as f32).collect();
    let order = permute_rope_rows(&idx, heads, dh, 1, false);
    let rb = b.len() / m.rows;
    Ok(order
        .iter()
        .flat_map(|&r| b[r as usize * rb..(r as usize + 1) * rb].iter().copied())
        .collect())
}

/// Writes `q` (with `w` holding its grid values, norms and config) as a GGUF file at `path`,
/// metadata from `source_meta` (a GGUF input's) with `general.file_type` `file_type` (a
/// `llama_ftype`, [`super::mix::llama_ftype`]), each matrix in its own block format, and the
/// signs of an online `down_proj` Hadamard transform folded into `w` as the tensor
/// [`DOWN_SIGNS`] (the engine applies it; llama.cpp refuses such a file).
pub fn save_quantized_gguf(
    w: &LlamaWeights,
    q: &QuantizedModel,
    file_type: u32,
    source_meta: &[(String, Value)],
    down_signs: Option<&[f32]>,
    path: &Path,
) -> crate::Result<()> {
    let meta = gguf_metadata(w, source_meta, file_type)?;
    let c = &w.cfg;
    let (d, dh) = (c.d_model as u64, c.head_dim());
    let embed = q.embed.as_ref().ok_or_else(|| {
        QuantError::Invalid("a quantised GGUF needs a quantised embedding".into())
    })?;
    if w.lm_head.is_some() && q.lm_head.is_none() {
        return Err(
            QuantError::Invalid("a quantised GGUF needs a quantised lm_head".into()).into(),
        );
    }
    let norm = |v: &[f32]| bytemuck::cast_slice::<f32, u8>(v).to_vec();
    // (name, dims, type id, bytes)
    let mut ts: Vec<(String, Vec<u64>, u32, Vec<u8>)> = Vec::new();
    let mat = |name: String, m: &QuantMatrix, rope: Option<(usize, usize)>| {
        let t = type_id(m.format).ok_or_else(|| {
            QuantError::Invalid(format!("{name}: the grid {:?} has no GGUF type", m.format))
        })?;
        bytes(m, rope).map(|b| (name, vec![m.cols as u64, m.rows as u64], t, b))
    };
    ts.push(mat(keys::TOKEN_EMBD.into(), embed, None)?);
    for (i, (l, ql)) in w.layers.iter().zip(&q.layers).enumerate() {
        ts.push((
            LayerTensor::AttnNorm.gguf_weight(i),
            vec![d],
            0,
            norm(&l.attn_norm),
        ));
        for (k, m) in ql.iter().enumerate() {
            let rope = match k {
                0 => Some((c.n_head, dh)),
                1 => Some((c.n_kv_head, dh)),
                _ => None,
            };
            if k == 4 {
                ts.push((
                    LayerTensor::FfnNorm.gguf_weight(i),
                    vec![d],
                    0,
                    norm(&l.ffn_norm),
                ));
            }
            ts.push(mat(LayerTensor::MATRICES[k].gguf_weight(i), m, rope)?);
        }
    }
    ts.push((keys::OUTPUT_NORM.into(), vec![d], 0, norm(&w.final_norm)));
    if let Some(h) = &q.lm_head {
        ts.push(mat(keys::OUTPUT.into(), h, None)?);
    }
    if let Some(s) = down_signs {
        if s.len() != c.d_ff {
            return Err(QuantError::Invalid(format!(
                "{} online Hadamard signs for an FFN of {}",
                s.len(),
                c.d_ff
            ))
            .into());
        }
        ts.push((DOWN_SIGNS.into(), vec![c.d_ff as u64], 0, norm(s)));
    }
    let raw: Vec<RawTensor<'_>> = ts
        .iter()
        .map(|(name, dims, t, b)| RawTensor {
            name: name.clone(),
            dims: dims.clone(),
            type_id: *t,
            bytes: b,
        })
        .collect();
    write_gguf_raw(path, &meta, &raw)
}
