"""Loads llama.cpp's CPU build from the PyPI wheel `llama-cpp-cffi` 0.4.42, for the scripts
that run it (`bench_llamacpp.py`, `interop_check.py`).

Its `_llama_cpp_cpu` module needs the C++ runtime symbol `__cxa_call_terminate`, which
Debian 12's libstdc++ lacks. When the import fails for that reason, `import_llama` compiles a
one-line C shim defining it with `gcc` into a temporary directory and re-runs the calling
script with the shim in `LD_PRELOAD` (nothing is written elsewhere, no binary is kept).
"""
import os
import subprocess
import sys
import tempfile

SHIM_SOURCE = "#include <stdlib.h>\nvoid __cxa_call_terminate(void *e) { (void)e; abort(); }\n"
SHIM_FLAG = "ORTHOFORMER_LLAMACPP_SHIM"


def import_llama():
    """The cffi `lib` and `ffi` of llama.cpp's CPU build, re-executing with the shim if needed."""
    try:
        from llama._llama_cpp_cpu import ffi, lib  # noqa: PLC0415

        return lib, ffi
    except ImportError as e:
        if "__cxa_call_terminate" not in str(e) or os.environ.get(SHIM_FLAG):
            raise
    tmp = tempfile.mkdtemp(prefix="llamacpp-shim-")
    src, so = os.path.join(tmp, "shim.c"), os.path.join(tmp, "libshim.so")
    with open(src, "w") as f:
        f.write(SHIM_SOURCE)
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", so, src], check=True)
    env = dict(os.environ, **{SHIM_FLAG: "1"})
    env["LD_PRELOAD"] = (so + " " + env.get("LD_PRELOAD", "")).strip()
    try:
        r = subprocess.run([sys.executable] + sys.argv, env=env)
    finally:
        for p in (src, so):
            os.remove(p)
        os.rmdir(tmp)
    sys.exit(r.returncode)
