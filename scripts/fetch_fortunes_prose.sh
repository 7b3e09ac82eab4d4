#!/usr/bin/env bash
# 61,440 bytes of English prose that no calibration, tuning or training in the project has seen:
# Debian's `fortunes` and `fortunes-min` packages (the files literature, wisdom, politics,
# science, people, work and education, in that order, their `%` separator lines dropped, the
# first 61,440 bytes kept), checked against a SHA-256. A scoring text for the quantisation
# comparison (scripts/quant_vs_llamacpp.sh). Not committed: the fortune files carry their own
# mixed licences; this script fetches them with `apt-get download` (Debian's archive) as the
# machines here allow.
#
# usage: scripts/fetch_fortunes_prose.sh [OUT]   (default data/fortunes-prose.txt)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-data/fortunes-prose.txt}
sha=be1254ff25f8d4bd0c4ed3aca69660a7a543d961e612c5fb3ba7ee2dad0798c1
if [ -f "$out" ] && [ "$(sha256sum "$out" | cut -d' ' -f1)" = "$sha" ]; then
    echo "$out is already there"; exit 0
fi
command -v apt-get >/dev/null || { echo "error: apt-get is needed to fetch Debian's fortunes packages" >&2; exit 2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download fortunes fortunes-min >/dev/null 2>&1) \
    || { echo "error: apt-get download fortunes fortunes-min failed (no Debian archive reachable?)" >&2; exit 2; }
for deb in "$tmp"/*.deb; do dpkg -x "$deb" "$tmp/x"; done
d="$tmp/x/usr/share/games/fortunes"
(cd "$d" && cat literature wisdom politics science people work education) | grep -v '^%$' > "$tmp/all.txt"
head -c 61440 "$tmp/all.txt" > "$tmp/prose.txt"
got=$(sha256sum "$tmp/prose.txt" | cut -d' ' -f1)
[ "$got" = "$sha" ] || { echo "error: the fortunes text hashes to $got, not $sha (another package version?)" >&2; exit 2; }
mkdir -p "$(dirname "$out")"
mv "$tmp/prose.txt" "$out"
echo "wrote $out (61,440 bytes, SHA-256 $sha)"
