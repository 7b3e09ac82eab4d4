#!/usr/bin/env bash
# Fetches the GNU Collaborative International Dictionary of English (GCIDE, GPL-2-or-later)
# from Debian's `dict-gcide` package and cleans it into data/gcide/gcide.txt (git-ignored),
# the ladder's corpus (docs/DATA.md). The package version and its .deb's SHA-256 are pinned,
# and so are the uncompressed dictionary's size and the cleaned text's SHA-256: any mismatch
# is refused. Idempotent: does nothing when the cleaned file is there with the right hash.
# Needs apt-get (a Debian or Ubuntu host with the bookworm archive), dpkg, gzip, python3.
set -euo pipefail
cd "$(dirname "$0")/.."
version=0.48.5+nmu2
deb_sha256=7b0af5cfde3cbdef5e9d6e78f92ec335ced7c2790f37a40f49bebc6f7347ac0f
dict_bytes=39952321
text_sha256=3c7b8688fa674c0e44ce4a537f4497b2876cb76f2547c132c5b8421e47050344
out=data/gcide/gcide.txt
python=${PYTHON:-python3}

sha256() { sha256sum "$1" | cut -d' ' -f1; }

if [ -s "$out" ] && [ "$(sha256 "$out")" = "$text_sha256" ]; then
  exit 0
fi
if [ -e "$out" ]; then
  echo "error: $out is there but its SHA-256 is not $text_sha256: remove it and run this again" >&2
  exit 2
fi
mkdir -p data/gcide
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download "dict-gcide=$version" >/dev/null 2>"$tmp/apt.log") || {
  echo "error: apt-get download dict-gcide=$version failed (a Debian 12 archive is needed):" >&2
  tail -n 3 "$tmp/apt.log" >&2
  exit 2
}
deb=$(ls "$tmp"/dict-gcide_*_all.deb)
got=$(sha256 "$deb")
if [ "$got" != "$deb_sha256" ]; then
  echo "error: $(basename "$deb") has SHA-256 $got, not the pinned $deb_sha256: refusing it" >&2
  exit 2
fi
dpkg -x "$deb" "$tmp/x"
gzip -dc "$tmp/x/usr/share/dictd/gcide.dict.dz" >"$tmp/gcide.dict"
size=$(stat -c %s "$tmp/gcide.dict")
if [ "$size" != "$dict_bytes" ]; then
  echo "error: gcide.dict is $size bytes uncompressed, not $dict_bytes: refusing it" >&2
  exit 2
fi
"$python" scripts/clean_gcide.py "$tmp/gcide.dict" "$tmp/x/usr/share/dictd/gcide.index" "$tmp/gcide.txt"
got=$(sha256 "$tmp/gcide.txt")
if [ "$got" != "$text_sha256" ]; then
  echo "error: the cleaned text has SHA-256 $got, not $text_sha256 (scripts/clean_gcide.py changed?)" >&2
  exit 2
fi
# The licence travels with the text (GPL: the notice stays with every copy).
cp "$tmp/x/usr/share/doc/dict-gcide/copyright" data/gcide/COPYRIGHT
mv "$tmp/gcide.txt" "$out.tmp"
mv "$out.tmp" "$out"
echo "fetched $out: $(stat -c %s "$out") bytes, sha256 $text_sha256 (dict-gcide $version, GPL-2+)"
