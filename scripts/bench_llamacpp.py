"""llama.cpp's prefill and greedy-decode speed on a GGUF file, printed as JSON: the FALLBACK
peer of `orthoformer bench --model`, used (and labelled `wheel (fallback)`) only when no
native build of `scripts/build_llamacpp.sh` is in the cache; the wheel's generic AVX2 build is
not llama.cpp at its best on a given machine.

llama.cpp comes from the PyPI wheel `llama-cpp-cffi` 0.4.42 (`pip install
llama-cpp-cffi==0.4.42 cffi`); its `_llama_cpp_cpu` module (built for AVX2) needs the C++
runtime symbol `__cxa_call_terminate`, which Debian 12's libstdc++ lacks. When the import
fails for that reason, `llamacpp_loader.py` compiles a one-line C shim defining it with `gcc` into a
temporary directory and re-runs this script with the shim in `LD_PRELOAD` (nothing is written
elsewhere, no binary is kept).

The measurement: a prompt of PROMPT token ids (given with --ids, comma-separated, else a fixed
sequence) is decoded as one batch (prefill), then GEN tokens are generated one at a time with
llama.cpp's greedy sampler (decode); the KV cache is cleared between rounds and the best round
of each phase is reported.

usage: python3 scripts/bench_llamacpp.py MODEL.gguf [--threads 2] [--prompt 256] [--gen 128]
                                         [--rounds 3] [--ids 1,2,3,...]
"""
import argparse
import json
import os
import sys
import time

from llamacpp_loader import import_llama  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt", type=int, default=256)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ids", default="")
    a = ap.parse_args()
    lib, ffi = import_llama()
    lib.llama_backend_init()
    mp = lib.llama_model_default_params()
    mp.n_gpu_layers = 0
    model = lib.llama_model_load_from_file(a.model.encode(), mp)
    if model == ffi.NULL:
        sys.exit(f"llama.cpp could not load {a.model}")
    vocab = lib.llama_n_vocab(lib.llama_model_get_vocab(model))
    if a.ids:
        ids = [int(x) for x in a.ids.split(",")]
    else:
        ids = [1000 + (i * 7919) % (vocab - 1000) for i in range(a.prompt)]
    cp = lib.llama_context_default_params()
    cp.n_ctx = len(ids) + a.gen + 16
    cp.n_batch = max(len(ids), 32)
    cp.n_ubatch = max(len(ids), 32)
    cp.n_threads = a.threads
    cp.n_threads_batch = a.threads
    ctx = lib.llama_init_from_model(model, cp)
    if ctx == ffi.NULL:
        sys.exit("llama.cpp could not create a context")
    sampler = lib.llama_sampler_init_greedy()
    prompt = ffi.new("int32_t[]", ids)
    one = ffi.new("int32_t[1]")
    best_prefill, best_decode, generated = float("inf"), float("inf"), []
    for _ in range(a.rounds + 1):  # the first round warms up
        lib.llama_kv_self_clear(ctx)
        t0 = time.perf_counter()
        if lib.llama_decode(ctx, lib.llama_batch_get_one(prompt, len(ids))) != 0:
            sys.exit("llama_decode failed on the prompt")
        t1 = time.perf_counter()
        out = []
        for _ in range(a.gen):
            tok = lib.llama_sampler_sample(sampler, ctx, -1)
            out.append(tok)
            one[0] = tok
            if lib.llama_decode(ctx, lib.llama_batch_get_one(one, 1)) != 0:
                sys.exit("llama_decode failed on a generated token")
        t2 = time.perf_counter()
        best_prefill = min(best_prefill, t1 - t0)
        best_decode = min(best_decode, t2 - t1)
        generated = out
    print(json.dumps({
        "implementation": "llama.cpp (PyPI llama-cpp-cffi 0.4.42, CPU build)",
        "system_info": ffi.string(lib.llama_print_system_info()).decode().strip(),
        "model": a.model,
        "threads": a.threads,
        "prompt_tokens": len(ids),
        "generated_tokens": a.gen,
        "prefill_tokens_per_s": len(ids) / best_prefill,
        "decode_tokens_per_s": a.gen / best_decode,
        "decode_ms_per_token": 1e3 * best_decode / a.gen,
        "first_generated": generated[:16],
    }))
    lib.llama_sampler_free(sampler)
    lib.llama_free(ctx)
    lib.llama_model_free(model)


if __name__ == "__main__":
    main()
