#!/usr/bin/env bash
# A ladder's token folder: fetches the corpus, then tokenises it with a byte-level BPE of 8,192
# tokens trained on its training share into data/<corpus>-bpe8k/ (git-ignored): the first 90%
# of the bytes are train.bin, the last 10% val.bin (--val-fraction 0.1); the ladder keeps the
# last 10% of train.bin as its held-out split. Prints the token counts and hashes
# (docs/DATA.md has them). Idempotent: does nothing when the folder holds a finished
# meta.json for this text and vocabulary.
#     PYTHON=/path/to/venv/bin/python scripts/prepare_corpus.sh gcide|sotu
#   gcide: GCIDE, the dictionary (scripts/fetch_gcide.sh), data/gcide-bpe8k
#   sotu:  the State of the Union addresses, documents in a fixed shuffled order
#          (scripts/fetch_sotu.sh), data/sotu-bpe8k
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
vocab=8192
case "${1:-}" in
  gcide) text=data/gcide/gcide.txt; scripts/fetch_gcide.sh ;;
  sotu) text=data/sotu/sotu.txt; scripts/fetch_sotu.sh ;;
  *) echo "usage: $0 gcide|sotu" >&2; exit 2 ;;
esac
out=data/$1-bpe8k
text_sha256=$(sha256sum "$text" | cut -d' ' -f1)
done_already=$("$python" - "$out" "$vocab" <<'PY'
import json, pathlib, sys
meta = pathlib.Path(sys.argv[1]) / "meta.json"
try:
    trained = json.loads(meta.read_text())["tokenizer"]["trained"]
    print("yes" if trained["vocab"] == int(sys.argv[2]) else "no")
except (OSError, ValueError, KeyError, TypeError):
    print("no")
PY
)
if [ "$done_already" != yes ]; then
  start=$(date +%s)
  # The installed package when $python has one; the source tree only for an in-place build
  # (python/orthoformer/_native*.so), which an installed package must not be shadowed by.
  pythonpath=${PYTHONPATH:-}
  if ! "$python" -c 'import orthoformer._native' 2>/dev/null; then
    pythonpath=python${PYTHONPATH:+:$PYTHONPATH}
  fi
  PYTHONPATH=$pythonpath "$python" -m orthoformer.prepare \
    --input "$text" --out "$out" --train-bpe "$vocab" --val-fraction 0.1
  echo "prepared $out in $(( $(date +%s) - start )) s"
fi
"$python" - "$out" "$text_sha256" <<'PY'
import hashlib, json, pathlib, sys
out = pathlib.Path(sys.argv[1])
meta = json.loads((out / "meta.json").read_text())
trained = meta["tokenizer"]["trained"]
for name in ("train.bin", "val.bin", "tokenizer.json"):
    print(f"{name}: sha256 {hashlib.sha256((out / name).read_bytes()).hexdigest()}")
text = meta["text_bytes"]
tokens = meta["train_tokens"] + meta["val_tokens"]
print(f"text: {text} bytes, sha256 {sys.argv[2]}; BPE trained on {trained['train_bytes']} bytes "
      f"(sha256 {trained['train_sha256']}), vocabulary {meta['vocab_size']}")
print(f"tokens: train {meta['train_tokens']}, val {meta['val_tokens']}, {tokens / text:.4f} per byte")
PY
