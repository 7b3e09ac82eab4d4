"""CI's light-client interop check (no torch): every kind of file Orthoformer writes, opened
by the reference readers, in well under a minute.

- safetensors + NumPy load every checkpoint (frozen W_Q/W_K included), optimizer file and
  GPT-2 export, with the names and shapes `transformers` expects;
- `tokenizers` loads every tokenizer.json (checkpoint BPE, exported BPE and character
  WordLevel, rotated Llama) and gives Orthoformer's own ids;
- the `gguf` reader opens the F32 and F16 GGUF files `rotate` writes from a tiny Llama GGUF
  made here by `gguf`'s own writer: every source key kept, one-dimensional tensors F32;
- the `gguf` reader dequantises every block format `quantize --out` writes (through the mixes
  q4_k_m and q5_k_m and single formats, IQ4_XS and IQ4_NL) back to within a rounding step of the
  source weights, and reads each file's record of how it was made.

usage: python3 -m pip install gguf safetensors numpy tokenizers
       python3 scripts/interop_light.py [--bin target/release/orthoformer]
Exit 0 when every check passes, 1 otherwise.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import gguf
import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEXT = ("First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak."
        "\n\nFirst Citizen:\nYou are all resolved rather to die than to famish?")
failures = []


def check(what, ok, detail=""):
    print(f"[{'ok  ' if ok else 'FAIL'}] {what} {detail}", flush=True)
    if not ok:
        failures.append(what)


def run(bin_, *args):
    r = subprocess.run([bin_, *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"orthoformer {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout


def gpt_files(bin_, tmp):
    for name, extra in (("orthogonal-char", ["--attention", "orthogonal"]),
                        ("tied-bpe", ["--attention", "orthogonal-tied", "--tokenizer", "bpe",
                                      "--vocab-size", "300"])):
        ck, hf = os.path.join(tmp, name + "-ck"), os.path.join(tmp, name + "-hf")
        run(bin_, "train", "--preset", "tiny", "--context", "64", "--steps", "3", "--batch",
            "4", "--eval-every", "3", "--eval-iters", "1", "--warmup", "1", "--out", ck, *extra)
        out = run(bin_, "export", "--checkpoint", ck, "--out", hf, "--logits-out",
                  os.path.join(tmp, name + ".npy"), "--logits-text", TEXT, "--json")
        ours = json.loads(out)["reference_logits"]["ids"]
        state = json.load(open(os.path.join(ck, "state.json")))
        cfg = state["model"]
        c, layers, v = cfg["d_model"], cfg["n_layer"], cfg["vocab_size"]
        model = load_file(os.path.join(ck, "model.safetensors"))
        frozen = [k for k in model if k.endswith(("attn.q.weight", "attn.k.weight"))]
        check(f"{name}: checkpoint in safetensors+NumPy, frozen W_Q/W_K stored",
              len(frozen) >= layers and all(model[k].shape == (c, c) for k in frozen),
              f"({len(model)} tensors, frozen {sorted(frozen)})")
        opt = load_file(os.path.join(ck, "optimizer.safetensors"))
        check(f"{name}: optimizer.safetensors in safetensors+NumPy",
              all(np.isfinite(a).all() for a in opt.values()), f"({len(opt)} tensors)")
        ex = load_file(os.path.join(hf, "model.safetensors"))
        want = {"transformer.wte.weight": (v, c),
                "transformer.h.0.attn.c_attn.weight": (c, 3 * c),
                "transformer.h.0.mlp.c_fc.weight": (c, cfg["d_ff"]),
                "transformer.ln_f.bias": (c,)}
        shapes_ok = all(ex[k].shape == s for k, s in want.items())
        q = model["h.0.attn.q.weight"]
        check(f"{name}: GPT-2 export in safetensors+NumPy (names, shapes, c_attn = W_Q^T ...)",
              shapes_ok and np.array_equal(ex["transformer.h.0.attn.c_attn.weight"][:, :c], q.T),
              f"({len(ex)} tensors)")
        hf_cfg = json.load(open(os.path.join(hf, "config.json")))
        check(f"{name}: GPT-2 config.json", hf_cfg["model_type"] == "gpt2"
              and hf_cfg["n_embd"] == c and hf_cfg["vocab_size"] == v)
        for label, path in (("export", os.path.join(hf, "tokenizer.json")),
                            ("checkpoint", os.path.join(ck, "tokenizer.json"))):
            if not os.path.exists(path):
                continue  # the character checkpoint keeps its vocabulary in state.json
            ids = Tokenizer.from_file(path).encode(TEXT).ids[: len(ours)]
            check(f"{name}: {label} tokenizer.json in tokenizers gives our ids", ids == ours,
                  f"({len(ours)} tokens)")
        if state["tokenizer"]["kind"] == "char":
            vocab = state["tokenizer"]["vocab"]
            tok = Tokenizer.from_file(os.path.join(hf, "tokenizer.json"))
            ids = tok.encode(TEXT).ids
            check(f"{name}: WordLevel ids equal the vocabulary's on the whole text",
                  ids == [vocab.index(ch) for ch in TEXT] and tok.decode(ids) == TEXT)


def tiny_llama_gguf(path, d=8, f=16, ctx=64):
    """A tiny Llama GGUF written by `gguf`'s own writer (width d, FFN f, 2 heads, 1 KV head)."""
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("tiny interop model")
    w.add_block_count(1)
    w.add_context_length(ctx)
    w.add_embedding_length(d)
    w.add_feed_forward_length(f)
    w.add_head_count(2)
    w.add_head_count_kv(1)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(0)
    w.add_quantization_version(2)
    toks = ["a", "b", "c", "Ġ", "ab", "<|endoftext|>"]
    w.add_tokenizer_model("gpt2")
    w.add_token_list(toks)
    w.add_token_types([1, 1, 1, 1, 1, 3])
    w.add_token_merges(["a b"])
    w.add_bos_token_id(5)
    w.add_eos_token_id(5)
    w.add_chat_template("{% for m in messages %}{{ m['content'] }}<|endoftext|>{% endfor %}")
    rng = np.random.default_rng(0)
    h = d // 2
    shapes = {"token_embd.weight": (6, d), "blk.0.attn_norm.weight": (d,),
              "blk.0.attn_q.weight": (d, d), "blk.0.attn_k.weight": (h, d),
              "blk.0.attn_v.weight": (h, d), "blk.0.attn_output.weight": (d, d),
              "blk.0.ffn_norm.weight": (d,), "blk.0.ffn_gate.weight": (f, d),
              "blk.0.ffn_up.weight": (f, d), "blk.0.ffn_down.weight": (d, f),
              "output_norm.weight": (d,)}
    for name, shape in shapes.items():
        w.add_tensor(name, (rng.standard_normal(shape) * 0.5).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def gguf_files(bin_, tmp):
    src = os.path.join(tmp, "tiny.gguf")
    tiny_llama_gguf(src)
    hf, f32, f16 = (os.path.join(tmp, n) for n in ("rot-hf", "rot-f32.gguf", "rot-f16.gguf"))
    run(bin_, "rotate", "--model", src, "--out", hf, "--out", f32)
    run(bin_, "rotate", "--model", src, "--out", f16, "--gguf-type", "f16")
    src_keys = {k for k in gguf.GGUFReader(src).fields if not k.startswith("GGUF.")}
    for path, mats in ((f32, "F32"), (f16, "F16")):
        r = gguf.GGUFReader(path)
        keys = {k for k in r.fields if not k.startswith("GGUF.")}
        check(f"{os.path.basename(path)} in gguf: every source key kept",
              src_keys <= keys, f"(missing {sorted(src_keys - keys)})")
        types = {(len(t.shape) == 1, t.tensor_type.name) for t in r.tensors}
        check(f"{os.path.basename(path)} in gguf: 1-D tensors F32, matrices {mats}",
              types == {(True, "F32"), (False, mats)}, f"({sorted(types)})")
    st = load_file(os.path.join(hf, "model.safetensors"))
    check("rotated HF folder: model.safetensors in safetensors+NumPy",
          st["model.embed_tokens.weight"].shape == (6, 8), f"({len(st)} tensors)")
    tok = Tokenizer.from_file(os.path.join(hf, "tokenizer.json"))
    check("rotated HF folder: tokenizer.json in tokenizers", tok.encode("ab c").ids == [4, 3, 2])
    tc = json.load(open(os.path.join(hf, "tokenizer_config.json")))
    gc = json.load(open(os.path.join(hf, "generation_config.json")))
    check("rotated HF folder: eos in tokenizer_config.json and generation_config.json",
          tc.get("eos_token") == "<|endoftext|>" and gc.get("eos_token_id") == 5
          and "chat_template" in tc)


def quantized_files(bin_, tmp):
    """Every block format `quantize --out` writes, dequantised by `gguf` (rows of 256 and 512,
    so the K-quants hold the matrices; the tiny vocabulary keeps the embedding Q8_0)."""
    src = os.path.join(tmp, "tiny-256.gguf")
    tiny_llama_gguf(src, d=256, f=512, ctx=512)
    text = os.path.join(tmp, "calib.txt")
    open(text, "w").write("ab c ba cab " * 200)
    ref = {t.name: np.array(t.data, dtype=np.float32) for t in gguf.GGUFReader(src).tensors}
    seen = set()
    for ty, method in (("q4_k_m", "imatrix"), ("q5_k_m", "gptq"), ("q5_0", "search"),
                       ("q5_1", "imatrix"), ("q4_0", "rtn"), ("q4_1", "gptq"), ("q8_0", "rtn"),
                       ("iq4_xs", "imatrix"), ("iq4_nl", "gptq")):
        out = os.path.join(tmp, f"{ty}.gguf")
        run(bin_, "quantize", "--model", src, "--out", out, "--gguf-type", ty, "--method", method,
            "--data", text, "--calib-tokens", "256", "--context", "32")
        worst = 0.0
        reader = gguf.GGUFReader(out)
        # The file's record of how it was made, as gguf reads it.
        field = reader.fields.get("orthoformer.quantize.type")
        recorded = bytes(field.parts[field.data[0]]).decode() if field else None
        check(f"{ty}: gguf reads the file's record (orthoformer.quantize.type)", recorded == ty,
              f"(read {recorded!r})")
        for t in reader.tensors:
            if len(t.shape) != 2:
                continue
            seen.add(t.tensor_type.name)
            got = gguf.quants.dequantize(t.data, t.tensor_type).reshape(ref[t.name].shape)
            want = ref[t.name]
            if t.name in ("blk.0.attn_q.weight", "blk.0.attn_k.weight"):
                continue  # rows permuted for llama.cpp's RoPE: compare the sets of rows
            scale = np.abs(want).max()
            worst = max(worst, float(np.abs(got - want).max() / scale))
        check(f"{ty} ({method}) in gguf: every matrix dequantises near its source",
              worst < 0.25, f"(largest error {worst:.3f} of the largest weight)")
    want_types = {"Q8_0", "Q6_K", "Q5_K", "Q5_1", "Q5_0", "Q4_K", "Q4_1", "Q4_0", "IQ4_XS", "IQ4_NL"}
    check("quantized files in gguf: every block format written", want_types <= seen,
          f"(seen {sorted(seen)})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "orthoformer"))
    a = ap.parse_args()
    if not os.path.isfile(a.bin):
        sys.exit(f"{a.bin} is missing: run cargo build --release -p orthoformer-cli")
    with tempfile.TemporaryDirectory(prefix="interop-light-") as tmp:
        gpt_files(a.bin, tmp)
        gguf_files(a.bin, tmp)
        quantized_files(a.bin, tmp)
    print(f"{'all' if not failures else len(failures)} light interop checks "
          f"{'passed' if not failures else 'FAILED: ' + ', '.join(failures)}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
