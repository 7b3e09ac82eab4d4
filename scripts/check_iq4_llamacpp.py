"""Do llama.cpp and Orthoformer run the IQ4_XS and IQ4_NL files `orthoformer quantize` writes
alike? Each file is written from SRC (`--method imatrix`, calibration on the tail of
TinyShakespeare), loaded in llama.cpp (the PyPI wheel `llama-cpp-cffi` 0.4.42, CPU: a generic
build, here for correctness, not speed) and decoded greedily from a prompt, beside
`orthoformer generate` on the same file. Prints both continuations and how many leading
characters they share; exits 1 when llama.cpp cannot load a file or the continuations part
within the first word.

usage: python3 scripts/check_iq4_llamacpp.py SRC.gguf OUTDIR [--bin target/release/orthoformer]
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llamacpp_loader import import_llama  # noqa: E402

PROMPT = "The capital of France is"
STEPS = 24


def llama_greedy(lib, ffi, path, prompt, steps):
    """llama.cpp's greedy continuation of `prompt` in the model at `path`, as text."""
    mp = lib.llama_model_default_params()
    mp.n_gpu_layers = 0
    model = lib.llama_model_load_from_file(path.encode(), mp)
    if model == ffi.NULL:
        return None
    vocab = lib.llama_model_get_vocab(model)
    buf = ffi.new("int32_t[]", 512)
    raw = prompt.encode()
    n = lib.llama_tokenize(vocab, raw, len(raw), buf, 512, False, False)
    ids = [buf[i] for i in range(n)]
    cp = lib.llama_context_default_params()
    cp.n_ctx = len(ids) + steps + 16
    cp.n_batch = cp.n_ubatch = max(len(ids), 32)
    cp.n_threads = cp.n_threads_batch = 2
    ctx = lib.llama_init_from_model(model, cp)
    prompt_ids = ffi.new("int32_t[]", ids)
    if lib.llama_decode(ctx, lib.llama_batch_get_one(prompt_ids, len(ids))) != 0:
        return None
    one = ffi.new("int32_t[1]")
    n_vocab = lib.llama_n_vocab(vocab)
    piece = ffi.new("char[]", 256)
    text = ""
    for _ in range(steps):
        row = lib.llama_get_logits_ith(ctx, -1)
        tok = max(range(n_vocab), key=lambda i: row[i])
        k = lib.llama_token_to_piece(vocab, tok, piece, 256, 0, False)
        text += ffi.buffer(piece, max(k, 0))[:].decode("utf-8", "replace")
        if tok == lib.llama_vocab_eos(vocab):
            break
        one[0] = tok
        if lib.llama_decode(ctx, lib.llama_batch_get_one(one, 1)) != 0:
            return None
    lib.llama_free(ctx)
    lib.llama_model_free(model)
    return text


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("src")
    p.add_argument("outdir")
    p.add_argument("--bin", default="target/release/orthoformer")
    a = p.parse_args()
    lib, ffi = import_llama()
    lib.llama_backend_init()
    os.makedirs(a.outdir, exist_ok=True)
    ok = True
    for ty in ("iq4_xs", "iq4_nl"):
        out = os.path.join(a.outdir, f"{ty}.gguf")
        if not os.path.exists(out):
            subprocess.run([a.bin, "quantize", "--model", a.src, "--data", "data/tinyshakespeare.txt",
                            "--method", "imatrix", "--gguf-type", ty, "--out", out, "--json"],
                           check=True, stdout=subprocess.DEVNULL)
        g = subprocess.run([a.bin, "generate", "--model", out, "--prompt", PROMPT, "--temperature", "0",
                            "--max-new-tokens", str(STEPS), "--json"],
                           check=True, capture_output=True, text=True)
        ours = json.loads(g.stdout)["text"]
        theirs = llama_greedy(lib, ffi, out, PROMPT, STEPS)
        if theirs is None:
            print(f"{ty}: llama.cpp could not load or run {out}")
            ok = False
            continue
        same = 0
        while same < min(len(ours), len(theirs)) and ours[same] == theirs[same]:
            same += 1
        first_word = len(ours.split()[0]) + 1 if ours.split() else 1
        print(f"{ty} ({os.path.getsize(out)} bytes)\n  orthoformer: {ours!r}\n  llama.cpp:   {theirs!r}\n"
              f"  the first {same} characters agree")
        ok &= same >= first_word
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
