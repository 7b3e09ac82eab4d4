#!/usr/bin/env bash
# Build llama.cpp from its source distribution, once, with native SIMD, into a cache folder:
# the fair peer that `orthoformer bench --model` times.
#
# Source: the sdist of `llama-cpp-python` (pinned below) carries llama.cpp's source under
# vendor/llama.cpp; `pip download --no-binary :all:` fetches it from PyPI like any other package.
# Build: CMake, Release, GGML_NATIVE=ON (-march=native: the binaries suit this machine only),
# static libraries, no CURL, only the five tools Orthoformer uses.
# Check: before the build is cached, its llama-bench prefills 64 tokens of a small model (the
# SmolLM2 file of scripts/fetch_smollm2.sh, or --check-model). A CPU may advertise what it
# faults on (a VM that reports AMX and raises SIGILL on `tileloadd`): when the native build dies
# there, the script rebuilds with explicit ISA flags (GGML_NATIVE=OFF, each of AVX, AVX2, FMA,
# F16C, BMI2, AVX-512 F/VBMI/VNNI/BF16 and AVX-VNNI that /proc/cpuinfo lists, AMX off) and
# checks that build the same way; a build that fails its check is never cached.
# Result: $ORTHOFORMER_CACHE/llamacpp-<version>/bin/{llama-completion,llama-bench,llama-batched-bench,llama-perplexity,
# llama-quantize,llama-imatrix} and a BUILD-INFO file (version, CPU, flags, the check, compiler).
#
# Idempotent: when every binary exists and BUILD-INFO names this machine's CPU and a passed
# check, it prints the folder and exits at once. Concurrent runs wait on a lock. Runs under
# `nice -n 10`.
#
# usage: scripts/build_llamacpp.sh [--print-dir] [--jobs N] [--check-model FILE]
#   --print-dir     print the cache folder and exit (0 if built, 1 if not), build nothing
#   --check-model   the GGUF file of the check (default: models/SmolLM2-135M-Instruct.Q4_1.gguf,
#                   fetched by scripts/fetch_smollm2.sh when absent)
#   env: ORTHOFORMER_CACHE (default ~/.cache/orthoformer), LLAMACPP_PY_VERSION (default pinned),
#        PYTHON (default python3), LLAMACPP_BUILD=native|explicit (default native: explicit
#        skips the native attempt)
set -euo pipefail

VERSION="${LLAMACPP_PY_VERSION:-0.3.36}"
ROOT="${ORTHOFORMER_CACHE:-$HOME/.cache/orthoformer}"
DEST="$ROOT/llamacpp-$VERSION"
PY="${PYTHON:-python3}"
JOBS="$(nproc 2>/dev/null || echo 2)"
# llama-completion is the one-shot text CLI (in this llama.cpp, llama-cli is a chat client built
# on the HTTP server, which needs LLAMA_BUILD_SERVER and its web UI).
TOOLS=(llama-completion llama-bench llama-batched-bench llama-perplexity llama-quantize llama-imatrix)
PRINT_ONLY=0
REPO="$(cd "$(dirname "$0")/.." && pwd)"
CHECK_MODEL=""
MODE="${LLAMACPP_BUILD:-native}"

die() { echo "build_llamacpp: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
    case "$1" in
        --print-dir) PRINT_ONLY=1; shift ;;
        --jobs) [ $# -ge 2 ] || die "--jobs needs a number"; JOBS="$2"; shift 2 ;;
        --check-model) [ $# -ge 2 ] || die "--check-model needs a GGUF file"; CHECK_MODEL="$2"; shift 2 ;;
        -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
        *) die "unknown argument '$1' (try --help)" ;;
    esac
done
case "$JOBS" in ''|*[!0-9]*|0) die "--jobs needs a positive whole number, not '$JOBS'" ;; esac
case "$MODE" in native|explicit) ;; *) die "LLAMACPP_BUILD must be native or explicit, not '$MODE'" ;; esac

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
    [ -f "$DEST/BUILD-INFO" ] && grep -qxF "cpu: $(cpu_id)" "$DEST/BUILD-INFO" \
        && grep -q '^check: passed' "$DEST/BUILD-INFO" \
        && { [ "$MODE" = native ] || grep -q '^flags: -DGGML_NATIVE=OFF' "$DEST/BUILD-INFO"; }
}

# CMake's ISA flags for this CPU without -march=native: each SIMD extension /proc/cpuinfo lists,
# AMX never (the one a VM has been seen to advertise and fault on).
explicit_flags() {
    local flags on
    flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | sed 's/^[^:]*://') "
    on() { case "$flags" in *" $1 "*) echo ON ;; *) echo OFF ;; esac; }
    echo "-DGGML_NATIVE=OFF -DGGML_SSE42=$(on sse4_2) -DGGML_AVX=$(on avx) -DGGML_AVX2=$(on avx2)" \
        "-DGGML_FMA=$(on fma) -DGGML_F16C=$(on f16c) -DGGML_BMI2=$(on bmi2)" \
        "-DGGML_AVX512=$(on avx512f) -DGGML_AVX512_VBMI=$(on avx512vbmi)" \
        "-DGGML_AVX512_VNNI=$(on avx512_vnni) -DGGML_AVX512_BF16=$(on avx512_bf16)" \
        "-DGGML_AVX_VNNI=$(on avx_vnni) -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
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

WORK="$ROOT/llamacpp-$VERSION.build"
mkdir -p "$WORK"

# The check's model: the small SmolLM2 file unless the caller names one.
if [ -z "$CHECK_MODEL" ]; then
    CHECK_MODEL="$REPO/models/SmolLM2-135M-Instruct.Q4_1.gguf"
    if [ ! -s "$CHECK_MODEL" ]; then
        echo "build_llamacpp: fetching the check's model (scripts/fetch_smollm2.sh)"
        "$REPO/scripts/fetch_smollm2.sh" \
            || die "could not fetch the check's model: pass one with --check-model FILE"
    fi
fi
[ -f "$CHECK_MODEL" ] && [ -s "$CHECK_MODEL" ] || die "--check-model '$CHECK_MODEL' is not a GGUF file"

# check BENCH LOG: prefill 64 tokens with the llama-bench BENCH; prints the result line, fails
# (naming the exit status or signal) when the run does not finish cleanly.
check() {
    local bench="$1" log="$2" rc
    [ -x "$bench" ] || { echo "no llama-bench at $bench"; return 1; }
    set +e
    timeout 600 "$bench" -m "$CHECK_MODEL" -p 64 -n 0 -r 1 -t "$JOBS" -o csv >"$log" 2>&1
    rc=$?
    set -e
    if [ "$rc" -ne 0 ]; then
        if [ "$rc" -gt 128 ] && [ "$rc" -ne 124 ]; then
            echo "prompt processing died with signal $((rc - 128)) ($(kill -l $((rc - 128)) 2>/dev/null || echo '?'))"
        else
            echo "prompt processing failed with exit status $rc (see $log)"
        fi
        return 1
    fi
    echo "passed (llama-bench -p 64 -n 0 -t $JOBS on $(basename "$CHECK_MODEL"): $(tail -1 "$log" | awk -F, '{print $(NF-1)}' | tr -d '"') tok/s, commit $(tail -1 "$log" | cut -d, -f1 | tr -d '"'))"
}

# A cached build from before the check: check its binaries once and record the result.
if [ -f "$DEST/BUILD-INFO" ] && grep -qxF "cpu: $(cpu_id)" "$DEST/BUILD-INFO" \
    && ! grep -q '^check:' "$DEST/BUILD-INFO"; then
    if RESULT="$(check "$DEST/bin/llama-bench" "$WORK/cached-check.log")"; then
        echo "check: $RESULT" >>"$DEST/BUILD-INFO"
        if built; then
            echo "llama.cpp $VERSION already built, now checked: $DEST/bin"
            exit 0
        fi
    else
        echo "build_llamacpp: the cached build failed its check ($RESULT): rebuilding"
    fi
fi

command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 \
    || die "no C compiler (cc/gcc) found: install one, e.g. 'apt-get install build-essential'"
command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 \
    || die "no C++ compiler (c++/g++) found: install one, e.g. 'apt-get install build-essential'"
"$PY" -m pip --version >/dev/null 2>&1 \
    || die "'$PY -m pip' is not available: set PYTHON to a Python with pip (needed to fetch the source)"


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

# build NAME FLAGS...: configures and builds the tools into $WORK/NAME.
build() {
    local name="$1"; shift
    echo "build_llamacpp: building llama.cpp (Release, $*, $JOBS jobs, niced); this takes a while"
    nice -n 10 "$CMAKE" -S "$SRC/vendor/llama.cpp" -B "$WORK/$name" \
        -DCMAKE_BUILD_TYPE=Release "$@" -DBUILD_SHARED_LIBS=OFF \
        -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DGGML_OPENMP=ON >"$WORK/$name-configure.log" 2>&1 \
        || die "cmake configure failed: see $WORK/$name-configure.log"
    nice -n 10 "$CMAKE" --build "$WORK/$name" --config Release -j "$JOBS" --target "${TOOLS[@]}" \
        >"$WORK/$name.log" 2>&1 || die "the build failed: see $WORK/$name.log"
}

NAME=build
FLAGS="-DGGML_NATIVE=ON"
RESULT=""
NOTE=""
if [ "$MODE" = native ]; then
    build build -DGGML_NATIVE=ON
    if RESULT="$(check "$WORK/build/bin/llama-bench" "$WORK/build-check.log")"; then :; else
        NOTE="native build (GGML_NATIVE=ON) failed its check: $RESULT"
        echo "build_llamacpp: $NOTE; rebuilding with explicit ISA flags"
        RESULT=""
    fi
fi
if [ -z "$RESULT" ]; then
    NAME=build-explicit
    FLAGS="$(explicit_flags)"
    # shellcheck disable=SC2086 # one CMake argument per word
    build "$NAME" $FLAGS
    RESULT="$(check "$WORK/$NAME/bin/llama-bench" "$WORK/$NAME-check.log")" || die "the explicit-flags build failed its check too: $RESULT; nothing cached"
fi

rm -rf "$DEST.new"
mkdir -p "$DEST.new/bin"
for t in "${TOOLS[@]}"; do
    f="$(find "$WORK/$NAME" -type f -name "$t" -perm -u+x | head -1)"
    [ -n "$f" ] || die "the build produced no $t (see $WORK/$NAME.log)"
    cp "$f" "$DEST.new/bin/$t"
done
{
    echo "llama-cpp-python: $VERSION"
    echo "llama.cpp commit: $(grep -m1 -oE 'LLAMA_BUILD_COMMIT[^)]*' "$WORK/$NAME/common/build-info.cpp" 2>/dev/null || echo unknown)"
    echo "cpu: $(cpu_id)"
    echo "flags: $FLAGS Release static"
    echo "check: $RESULT"
    [ -z "$NOTE" ] || echo "note: $NOTE"
    echo "compiler: $(c++ --version | head -1)"
    echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
} >"$DEST.new/BUILD-INFO"
# The binaries and their BUILD-INFO are replaced as a set.
rm -rf "$DEST.old"
[ ! -e "$DEST" ] || mv "$DEST" "$DEST.old"
mv "$DEST.new" "$DEST"
rm -rf "$DEST.old"
echo "llama.cpp $VERSION built ($FLAGS): $DEST/bin"
