#!/usr/bin/env bash
# Build llama.cpp from its source distribution, once, with native SIMD, into a cache folder:
# the fair peer that `orthoformer bench --model` times (issue 31 item 1).
#
# Source: the sdist of `llama-cpp-python` (pinned below) carries llama.cpp's source under
# vendor/llama.cpp; `pip download --no-binary :all:` fetches it from PyPI like any other package.
# Build: CMake, Release, GGML_NATIVE=ON (-march=native: the binaries suit this machine only),
# static libraries, no CURL, only the five tools Orthoformer uses.
# Result: $ORTHOFORMER_CACHE/llamacpp-<version>/bin/{llama-completion,llama-bench,llama-perplexity,
# llama-quantize,llama-imatrix} and a BUILD-INFO file (version, CPU, flags, compiler).
#
# Idempotent: when every binary exists and BUILD-INFO names this machine's CPU, it prints the
# folder and exits at once. Concurrent runs wait on a lock. Runs under `nice -n 10`.
#
# usage: scripts/build_llamacpp.sh [--print-dir] [--jobs N]
#   --print-dir   print the cache folder and exit (0 if built, 1 if not), build nothing
#   env: ORTHOFORMER_CACHE (default ~/.cache/orthoformer), LLAMACPP_PY_VERSION (default pinned),
#        PYTHON (default python3)
set -euo pipefail

VERSION="${LLAMACPP_PY_VERSION:-0.3.36}"
ROOT="${ORTHOFORMER_CACHE:-$HOME/.cache/orthoformer}"
DEST="$ROOT/llamacpp-$VERSION"
PY="${PYTHON:-python3}"
JOBS="$(nproc 2>/dev/null || echo 2)"
# llama-completion is the one-shot text CLI (in this llama.cpp, llama-cli is a chat client built
# on the HTTP server, which needs LLAMA_BUILD_SERVER and its web UI).
TOOLS=(llama-completion llama-bench llama-perplexity llama-quantize llama-imatrix)
PRINT_ONLY=0

die() { echo "build_llamacpp: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
    case "$1" in
        --print-dir) PRINT_ONLY=1; shift ;;
        --jobs) [ $# -ge 2 ] || die "--jobs needs a number"; JOBS="$2"; shift 2 ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) die "unknown argument '$1' (try --help)" ;;
    esac
done

# The CPU model and its SIMD flags: a model name alone ("AMD EPYC") names CPUs with and without
# AVX-512, and a -march=native build for one is wrong for the other.
cpu_id() {
    local model flags
    model=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //') || true
    flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | tr ' ' '\n' \
        | grep -E '^(avx|avx2|fma|f16c|avx512[a-z_0-9]*|avx_vnni|amx[a-z_0-9]*)$' | sort | tr '\n' ' ') || true
    echo "${model:-$(uname -m)} [${flags% }]"
}

built() {
    for t in "${TOOLS[@]}"; do [ -x "$DEST/bin/$t" ] || return 1; done
    [ -f "$DEST/BUILD-INFO" ] && grep -qxF "cpu: $(cpu_id)" "$DEST/BUILD-INFO"
}

if [ "$PRINT_ONLY" = 1 ]; then
    echo "$DEST"
    built
    exit $?
fi

mkdir -p "$ROOT"
exec 9>"$ROOT/llamacpp-$VERSION.lock"
flock 9
if built; then
    echo "llama.cpp $VERSION already built: $DEST/bin"
    exit 0
fi

command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 \
    || die "no C compiler (cc/gcc) found: install one, e.g. 'apt-get install build-essential'"
command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 \
    || die "no C++ compiler (c++/g++) found: install one, e.g. 'apt-get install build-essential'"
"$PY" -m pip --version >/dev/null 2>&1 \
    || die "'$PY -m pip' is not available: set PYTHON to a Python with pip (needed to fetch the source)"

WORK="$ROOT/llamacpp-$VERSION.build"
mkdir -p "$WORK"

# CMake: the system's if it is new enough, else the `cmake` wheel installed into the cache.
CMAKE="$(command -v cmake || find "$ROOT/tools" -path '*/data/bin/cmake' -type f 2>/dev/null | head -1 || true)"
if [ -n "$CMAKE" ] && ! "$CMAKE" --version | head -1 | grep -qE 'version ([4-9]|3\.(1[4-9]|[2-9][0-9]))'; then
    CMAKE=""
fi
if [ -z "$CMAKE" ]; then
    echo "build_llamacpp: cmake not found (or older than 3.14): installing the cmake wheel into $ROOT/tools"
    "$PY" -m pip install --quiet --target "$ROOT/tools" cmake \
        || die "could not install cmake with pip: install it yourself ('apt-get install cmake' or 'pip install cmake')"
    CMAKE="$(find "$ROOT/tools" -path '*/data/bin/cmake' -type f | head -1)"
    [ -x "$CMAKE" ] || die "the cmake wheel did not provide a cmake binary under $ROOT/tools"
fi

# The source distribution, fetched once.
SDIST="$(find "$WORK" -maxdepth 1 -name "llama_cpp_python-$VERSION.tar.gz" | head -1)"
if [ -z "$SDIST" ]; then
    echo "build_llamacpp: fetching the llama-cpp-python $VERSION source distribution"
    # Only this package as source: its build backend (scikit-build-core) may come as a wheel,
    # pip needs it to read the sdist's metadata.
    "$PY" -m pip download --quiet --no-binary llama-cpp-python --no-deps \
        -d "$WORK" "llama-cpp-python==$VERSION" \
        || die "could not download llama-cpp-python==$VERSION's sdist (network? set LLAMACPP_PY_VERSION?)"
    SDIST="$(find "$WORK" -maxdepth 1 -name 'llama_cpp_python-*.tar.gz' | head -1)"
fi
[ -n "$SDIST" ] || die "no sdist in $WORK after the download"
SRC="$WORK/src"
if [ ! -f "$SRC/vendor/llama.cpp/CMakeLists.txt" ]; then
    rm -rf "$SRC"; mkdir -p "$SRC"
    tar -xzf "$SDIST" -C "$SRC" --strip-components=1
fi
[ -f "$SRC/vendor/llama.cpp/CMakeLists.txt" ] || die "the sdist has no vendor/llama.cpp/CMakeLists.txt"

echo "build_llamacpp: building llama.cpp (Release, GGML_NATIVE=ON, $JOBS jobs, niced); this takes a while"
nice -n 10 "$CMAKE" -S "$SRC/vendor/llama.cpp" -B "$WORK/build" \
    -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DGGML_OPENMP=ON >"$WORK/configure.log" 2>&1 \
    || die "cmake configure failed: see $WORK/configure.log"
nice -n 10 "$CMAKE" --build "$WORK/build" --config Release -j "$JOBS" --target "${TOOLS[@]}" \
    >"$WORK/build.log" 2>&1 || die "the build failed: see $WORK/build.log"

mkdir -p "$DEST/bin"
for t in "${TOOLS[@]}"; do
    f="$(find "$WORK/build" -type f -name "$t" -perm -u+x | head -1)"
    [ -n "$f" ] || die "the build produced no $t (see $WORK/build.log)"
    cp "$f" "$DEST/bin/$t"
done
{
    echo "llama-cpp-python: $VERSION"
    echo "llama.cpp commit: $(grep -m1 -oE 'LLAMA_BUILD_COMMIT[^)]*' "$WORK/build/common/build-info.cpp" 2>/dev/null || echo unknown)"
    echo "cpu: $(cpu_id)"
    echo "flags: GGML_NATIVE=ON Release static"
    echo "compiler: $(c++ --version | head -1)"
    echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
} >"$DEST/BUILD-INFO"
echo "llama.cpp $VERSION built: $DEST/bin"
