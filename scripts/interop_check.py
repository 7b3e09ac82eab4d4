"""Opens every file Orthoformer writes with the real heavy clients and measures agreement;
docs/INTEROP.md quotes its output.

1. `orthoformer export` (GPT-2 folders) in `transformers`: for each attention variant that
   has a GPT-2 form, a model trained a few steps is exported and loaded with
   `AutoModelForCausalLM` + `AutoTokenizer`; the tokenizer must give the checkpoint's ids and
   the logits must equal Orthoformer's own (`export --logits-out`) to 1e-5. Linear attention
   must be refused (exit 2).
2. `orthoformer rotate` of SmolLM2-135M-Instruct to a Hugging Face folder: `AutoTokenizer`,
   chat template, `AutoModelForCausalLM.generate()` must stop at EOS by itself.
3. The rotated F32 and F16 GGUF files in the Python `gguf` reader: every source key kept,
   one-dimensional tensors F32.
4. The same GGUF files in llama.cpp (PyPI `llama-cpp-cffi` 0.4.42): greedy text of F32, F16
   and the original; logits of F16 against F32 along F32's greedy path (top-1 agreement, max
   |Δ|); llama.cpp F32 against `transformers` on the rotated HF folder (max |Δ|).

Needs: torch, transformers, tokenizers, safetensors, gguf, numpy, llama-cpp-cffi==0.4.42 and
cffi, gcc (for the `__cxa_call_terminate` shim, see scripts/bench_llamacpp.py), and the
release binary (`cargo build --release -p orthoformer-cli`).

usage: python3 scripts/interop_check.py [--model SmolLM2-135M-Instruct.Q4_1.gguf]
                                        [--skip-llama] [--json]
Exit 0 when every check passes, 1 otherwise.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "orthoformer")
TEXT = "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak."
from llamacpp_loader import import_llama  # noqa: E402
PROMPT = "What is the capital of France?"
PASSAGE = ("First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak."
           "\n\nFirst Citizen:\nYou are all resolved rather to die than to famish?\n\nAll:\n"
           "Resolved. resolved.\n\nFirst Citizen:\nFirst, you know Caius Marcius is chief "
           "enemy to the people.\n\nAll:\nWe know't, we know't.\n\nFirst Citizen:\nLet us "
           "kill him, and we'll have corn at our own price.\nIs't a verdict?")
results = []


def record(section, what, value, passed, note=""):
    results.append({"section": section, "check": what, "value": value, "passed": bool(passed),
                    "note": note})
    mark = "ok  " if passed else "FAIL"
    print(f"[{mark}] {section}: {what} = {value} {note}", flush=True)


def orthoformer(*args, check=True):
    r = subprocess.run([BIN, *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        sys.exit(f"orthoformer {' '.join(args)} failed ({r.returncode}): {r.stderr}")
    return r


def check_gpt2_exports(tmp):
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    cases = [
        ("softmax", ["--attention", "softmax"]),
        ("orthogonal", ["--attention", "orthogonal"]),
        ("orthogonal-tied", ["--attention", "orthogonal-tied"]),
        ("identity-q", ["--attention", "identity-q"]),
        ("orthogonal-hadamard", ["--attention", "orthogonal-hadamard"]),
        ("orthogonal, BPE 512", ["--attention", "orthogonal", "--tokenizer", "bpe"]),
        ("nanogpt-cpu (no biases, erf GELU)", ["--recipe", "nanogpt-cpu"]),
    ]
    section = f"GPT-2 export in transformers {transformers.__version__}"
    for i, (name, extra) in enumerate(cases):
        ck, hf, ref = (os.path.join(tmp, f"gpt{i}-{s}") for s in ("ck", "hf", "ref.npy"))
        orthoformer("train", "--preset", "shakespeare-char", "--context", "64", "--steps", "30",
                    "--batch", "8", "--eval-every", "30", "--eval-iters", "1", "--warmup", "5",
                    "--out", ck, *extra)
        out = orthoformer("export", "--checkpoint", ck, "--out", hf, "--logits-out", ref,
                          "--logits-text", TEXT, "--json")
        ids = json.loads(out.stdout)["reference_logits"]["ids"]
        want = np.load(ref)
        model = AutoModelForCausalLM.from_pretrained(hf, torch_dtype=torch.float32).eval()
        tok = AutoTokenizer.from_pretrained(hf)
        hf_ids = tok(TEXT)["input_ids"][: len(ids)]
        record(section, f"{name}: tokenizer ids equal ({len(ids)} tokens)", hf_ids == ids,
               hf_ids == ids)
        with torch.no_grad():
            got = model(torch.tensor([ids])).logits[0].numpy()
        diff = float(np.abs(got - want).max())
        record(section, f"{name}: max |Δlogit| ({type(model).__name__})", f"{diff:.2e}",
               diff <= 1e-5, f"(max |logit| {np.abs(want).max():.2f}; tolerance 1e-5)")
    ck = os.path.join(tmp, "lin-ck")
    orthoformer("train", "--preset", "tiny", "--steps", "2", "--eval-every", "2",
                "--eval-iters", "1", "--warmup", "1", "--out", ck, "--attention", "linear")
    r = orthoformer("export", "--checkpoint", ck, "--out", os.path.join(tmp, "lin-hf"),
                    check=False)
    record(section, "linear attention refused", f"exit {r.returncode}: {r.stderr.strip()}",
           r.returncode == 2 and not os.path.exists(os.path.join(tmp, "lin-hf")))


def rotate(model, tmp):
    hf, f32, f16 = (os.path.join(tmp, n) for n in ("rot-hf", "rot-f32.gguf", "rot-f16.gguf"))
    orthoformer("rotate", "--model", model, "--out", hf, "--out", f32, "--seed", "0")
    orthoformer("rotate", "--model", model, "--out", f16, "--gguf-type", "f16", "--seed", "0")
    return hf, f32, f16


def check_hf_llama(hf):
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    section = f"rotated SmolLM2 HF folder in transformers {transformers.__version__}"
    tok = AutoTokenizer.from_pretrained(hf)
    model = AutoModelForCausalLM.from_pretrained(hf, torch_dtype=torch.float32).eval()
    record(section, "eos_token", repr(tok.eos_token), tok.eos_token is not None)
    record(section, "chat_template present", tok.chat_template is not None,
           tok.chat_template is not None)
    prompt = tok.apply_chat_template([{"role": "user", "content": PROMPT}], tokenize=False,
                                     add_generation_prompt=True)
    ids = tok(prompt, return_tensors="pt")["input_ids"]
    max_new = 200
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=max_new, do_sample=False)
    new = out[0, ids.shape[1]:].tolist()
    stopped = new[-1] == model.generation_config.eos_token_id and len(new) < max_new
    text = tok.decode(new, skip_special_tokens=True)
    record(section, "generate() stops at EOS", f"{len(new)} tokens, last id {new[-1]}", stopped,
           f"text {text!r}")
    return prompt, tok, model


def check_gguf_reader(model, f32, f16):
    import gguf

    section = "rotated GGUF in Python gguf"
    src = gguf.GGUFReader(model)
    src_keys = {k for k in src.fields if not k.startswith("GGUF.")}
    for path, mats in ((f32, "F32"), (f16, "F16")):
        r = gguf.GGUFReader(path)
        keys = {k for k in r.fields if not k.startswith("GGUF.")}
        missing = sorted(src_keys - keys)
        record(section, f"{os.path.basename(path)}: source keys kept",
               f"{len(src_keys & keys)}/{len(src_keys)}", not missing,
               f"missing {missing}" if missing else "")
        types = {}
        for t in r.tensors:
            kind = "1-D" if len(t.shape) == 1 else "2-D"
            types.setdefault(kind, set()).add(t.tensor_type.name)
        ok = types.get("1-D") == {"F32"} and types.get("2-D") == {mats}
        record(section, f"{os.path.basename(path)}: tensor types",
               {k: sorted(v) for k, v in types.items()}, ok)
        qv = r.fields.get("general.quantization_version")
        record(section, f"{os.path.basename(path)}: general.quantization_version",
               None if qv is None else int(qv.parts[qv.data[0]][0]), qv is not None)


class LlamaCpp:
    """One GGUF in llama.cpp: greedy decoding, or teacher-forced, with the logits per step."""

    def __init__(self, lib, ffi, path):
        self.lib, self.ffi = lib, ffi
        mp = lib.llama_model_default_params()
        mp.n_gpu_layers = 0
        self.model = lib.llama_model_load_from_file(path.encode(), mp)
        if self.model == ffi.NULL:
            sys.exit(f"llama.cpp could not load {path}")
        self.n_vocab = lib.llama_n_vocab(lib.llama_model_get_vocab(self.model))

    def run(self, prompt_ids, steps, forced=None):
        lib, ffi = self.lib, self.ffi
        cp = lib.llama_context_default_params()
        cp.n_ctx = len(prompt_ids) + steps + 16
        cp.n_batch = cp.n_ubatch = max(len(prompt_ids), 32)
        cp.n_threads = cp.n_threads_batch = 2
        # F32 KV cache (llama.cpp defaults to F16): the comparisons then see the weights only.
        cp.type_k = cp.type_v = 0
        ctx = lib.llama_init_from_model(self.model, cp)
        prompt = ffi.new("int32_t[]", prompt_ids)
        one = ffi.new("int32_t[1]")
        if lib.llama_decode(ctx, lib.llama_batch_get_one(prompt, len(prompt_ids))) != 0:
            sys.exit("llama_decode failed on the prompt")
        toks, logits = [], []
        eos = lib.llama_vocab_eos(lib.llama_model_get_vocab(self.model))
        for i in range(steps):
            row = lib.llama_get_logits_ith(ctx, -1)
            lg = np.frombuffer(ffi.buffer(row, 4 * self.n_vocab), dtype=np.float32).copy()
            logits.append(lg)
            tok = int(forced[i]) if forced is not None else int(lg.argmax())
            toks.append(tok)
            if forced is None and tok == eos:
                break
            one[0] = tok
            if lib.llama_decode(ctx, lib.llama_batch_get_one(one, 1)) != 0:
                sys.exit("llama_decode failed")
        lib.llama_free(ctx)
        return toks, np.stack(logits)


def check_llamacpp(model_path, f32, f16, prompt, tok, hf_model):
    import torch

    lib, ffi = import_llama()
    lib.llama_backend_init()
    section = "rotated GGUF in llama.cpp (llama-cpp-cffi 0.4.42, CPU)"
    ids = tok(prompt)["input_ids"]
    steps = 48
    a = LlamaCpp(lib, ffi, f32)
    toks32, lg32 = a.run(ids, steps)
    b = LlamaCpp(lib, ffi, f16)
    toks16, _ = b.run(ids, steps)
    _, lg16 = b.run(ids, len(toks32), forced=toks32)
    o = LlamaCpp(lib, ffi, model_path)
    toks_orig, _ = o.run(ids, steps)
    _, lg_orig = o.run(ids, len(toks32), forced=toks32)
    text = lambda t: tok.decode(t, skip_special_tokens=True)  # noqa: E731
    print(f"  original Q4_1: {text(toks_orig)!r}\n  rotated F32:   {text(toks32)!r}\n"
          f"  rotated F16:   {text(toks16)!r}", flush=True)
    record(section, "F32 greedy text", repr(text(toks32)[:60]),
           "Paris" in text(toks32), "(contains 'Paris')")
    record(section, "F16 greedy text equals F32's", toks16 == toks32, toks16 == toks32,
           f"({len(toks16)} vs {len(toks32)} tokens)")
    top1 = float(np.mean(lg16.argmax(1) == lg32.argmax(1)))
    d16 = float(np.abs(lg16 - lg32).max())
    record(section, "F16 vs F32 top-1 agreement (F32's greedy path)", f"{top1:.4f}",
           top1 >= 0.95, f"({len(toks32)} positions)")
    record(section, "F16 vs F32 max |Δlogit|", f"{d16:.3e}", d16 < 1.0,
           f"(max |logit| {np.abs(lg32).max():.1f}; F16 weight rounding)")
    # A longer path: F16 and F32 teacher-forced on a passage (the first token is the prompt).
    passage = tok(PASSAGE)["input_ids"]
    _, p32 = a.run(passage[:1], len(passage) - 1, forced=passage[1:])
    _, p16 = b.run(passage[:1], len(passage) - 1, forced=passage[1:])
    top1_p = float(np.mean(p16.argmax(1) == p32.argmax(1)))
    record(section, "F16 vs F32 top-1 agreement on a passage", f"{top1_p:.4f}", top1_p >= 0.95,
           f"({len(passage) - 1} positions, max |Δlogit| {np.abs(p16 - p32).max():.3e})")
    top1_o = float(np.mean(lg_orig.argmax(1) == lg32.argmax(1)))
    record(section, "original Q4_1 file vs rotated F32: top-1 agreement (informational)",
           f"{top1_o:.4f}", True, f"(max |Δlogit| {np.abs(lg_orig - lg32).max():.3e}; "
           "llama.cpp runs Q4_1 with Q8_1 activations, not the dequantised weights)")
    seq = torch.tensor([ids + toks32])
    with torch.no_grad():
        ref = hf_model(seq).logits[0, len(ids) - 1: len(ids) - 1 + len(toks32)].numpy()
    dhf = float(np.abs(ref - lg32).max())
    top1_hf = float(np.mean(ref.argmax(1) == lg32.argmax(1)))
    record(section, "llama.cpp F32 vs transformers (rotated HF folder) max |Δlogit|",
           f"{dhf:.3e}", dhf < 0.1, f"(top-1 agreement {top1_hf:.4f})")


def main():
    ap = argparse.ArgumentParser()
    default = os.environ.get("ORTHOFORMER_SMOLLM2",
                             os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--model", default=default)
    ap.add_argument("--skip-llama", action="store_true")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if not os.path.isfile(BIN):
        sys.exit(f"{BIN} is missing: run cargo build --release -p orthoformer-cli")
    if not os.path.isfile(a.model):
        sys.exit(f"{a.model} is missing: run scripts/fetch_smollm2.sh or pass --model")
    if not a.skip_llama:
        import_llama()  # re-runs the script with the shim first, when it needs one
    with tempfile.TemporaryDirectory(prefix="interop-") as tmp:
        check_gpt2_exports(tmp)
        hf, f32, f16 = rotate(a.model, tmp)
        check_gguf_reader(a.model, f32, f16)
        prompt, tok, hf_model = check_hf_llama(hf)
        if not a.skip_llama:
            check_llamacpp(a.model, f32, f16, prompt, tok, hf_model)
    if a.json:
        print(json.dumps(results, indent=1))
    failed = [r for r in results if not r["passed"]]
    print(f"{len(results) - len(failed)}/{len(results)} checks passed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
