#!/usr/bin/env bash
# Copies what a ladder needs to be continued elsewhere, and nothing heavier, from the ladder
# folder SRC into DEST: ladder.json (the plan with its recorded data hashes and added rates),
# every finished run's result.json (and its validation-spread.json, the score on windows spread
# over the whole validation split, where `orthoformer ladder --spread-validation` wrote one),
# and the report with its SVG plots if there is one; no
# checkpoints, no transfer.bin (the engine writes it again). DEST is replaced as a whole
# (written beside it, then moved), so a reader never sees half a copy. Continue the ladder
# from such a copy with
#     cp -r DEST /work/ladder && orthoformer ladder --resume --out /work/ladder
# (or python -m orthoformer.ladder --resume): finished runs are read from their result.json,
# the rest train (docs/LADDER.md, "Handing a ladder on").
#     scripts/ladder_results.sh /work/ladder/cpu-pilot results/ladder-cpu-pilot
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 SRC DEST (SRC a ladder folder, DEST the folder to write)" >&2
  exit 2
fi
src=$1
dest=$2
if [ ! -f "$src/ladder.json" ] || [ -L "$src/ladder.json" ]; then
  echo "error: $src holds no ladder (no ladder.json, or it is a link)" >&2
  exit 2
fi
# DEST replaces a folder as a whole: refuse one that is SRC, holds it or lies inside it, which
# would delete what is being copied.
src_real=$(realpath -m -- "$src")
dest_real=$(realpath -m -- "$dest")
case "$dest_real/" in
  "$src_real/"*)
    echo "error: DEST $dest is $src or lies inside it: choose a folder outside the ladder" >&2
    exit 2 ;;
esac
case "$src_real/" in
  "$dest_real/"*)
    echo "error: DEST $dest holds the ladder $src, which replacing it would delete: choose another folder" >&2
    exit 2 ;;
esac
tmp="$dest.tmp.$$"
rm -rf "$tmp"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp"
cp "$src/ladder.json" "$tmp/"
for f in report.json report.md loss-params.svg loss-flops.svg loss-rate.svg; do
  if [ -f "$src/$f" ] && [ ! -L "$src/$f" ]; then cp "$src/$f" "$tmp/"; fi
done
n=0
while IFS= read -r -d '' r; do
  rel=${r#"$src"/}
  mkdir -p "$tmp/$(dirname "$rel")"
  cp "$r" "$tmp/$rel"
  s="$(dirname "$r")/validation-spread.json"
  if [ -f "$s" ] && [ ! -L "$s" ]; then cp "$s" "$tmp/$(dirname "$rel")/"; fi
  n=$((n + 1))
done < <(find "$src" -mindepth 5 -maxdepth 5 -type f -name result.json -print0 | sort -z)
rm -rf "$dest.old"
if [ -e "$dest" ]; then mv "$dest" "$dest.old"; fi
mv "$tmp" "$dest"
rm -rf "$dest.old"
trap - EXIT
echo "copied $n finished runs and the plan of $src to $dest"
