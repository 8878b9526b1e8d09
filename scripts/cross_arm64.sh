#!/usr/bin/env bash
# The ARM check: cross-compiles the kernel layers (base, cpu, gguf, quant, kernels) for aarch64
# and runs their tests under qemu-user with a CPU that has the dot-product extension, so the NEON
# x16 kernels (src/kernels/arm/) are compared bit for bit with the scalar x16 order on every run.
# Fails if those tests did not run (a skipped check is no check). Idempotent; safe to re-run.
# Usage: scripts/cross_arm64.sh            (as root or with sudo for the first, installing run)
# Build tree: build-arm64/ (toolchain file cmake/aarch64-linux-gnu.cmake).
set -euo pipefail
cd "$(dirname "$0")/.."

NATIVE=$(dpkg --print-architecture)
# Host tools, for this machine's architecture.
HOST_PACKAGES=(cmake ninja-build g++-aarch64-linux-gnu qemu-user)
# Target libraries, multiarch :arm64 copies beside the host's: the only ones the kernel layers
# link (fmt, and GoogleTest for the tests), and the libc whose loader runs the tests under qemu.
ARM_PACKAGES=(libc6 libfmt-dev libgtest-dev)

# Installed for architecture $2 (or arch-independent), as scripts/setup.sh checks.
installed() {
  dpkg-query -W -f='${db:Status-Abbrev}${Architecture}\n' "$1" 2>/dev/null | grep -qE "^ii ($2|all)$"
}

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
t0=$(date +%s)
missing=()
for p in "${HOST_PACKAGES[@]}"; do installed "$p" "$NATIVE" || missing+=("$p:$NATIVE"); done
for p in "${ARM_PACKAGES[@]}"; do installed "$p" arm64 || missing+=("$p:arm64"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "cross_arm64: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "cross_arm64: all packages present"
fi
t1=$(date +%s)

# Release, as the x86 tests: the kernels must be checked as they are compiled for users. The
# options are given every time so a value left in the cache by hand cannot weaken the check.
# (--no-warn-unused-cli: CMake reads the toolchain file again on its own when reconfiguring.)
echo "== aarch64 build (build-arm64/)"
cmake -S . -B build-arm64 -G Ninja --no-warn-unused-cli -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DPONDER_KERNELS_ONLY=ON \
  -DPONDER_TESTS=ON -DPONDER_WERROR=ON -DPONDER_SANITIZE=OFF > /dev/null
# kernels_test only: cpu_test compares with /proc/cpuinfo and the NUMA policy syscalls, which
# under qemu-user are the x86 host's or not emulated.
nice -n 19 cmake --build build-arm64 -j2 --target kernels_test
t2=$(date +%s)

# As the toolchain file's CMAKE_CROSSCOMPILING_EMULATOR (which says why no -L): an emulated CPU
# with every extension qemu knows (-cpu max: dotprod, without which the NEON kernels are not
# chosen and their tests skip).
QEMU=(qemu-aarch64 -cpu max)
echo "== aarch64 tests (${QEMU[*]})"
log=build-arm64/kernels_test.log
echo "-- kernels_test (full output: $log)"
status=0
if "${QEMU[@]}" build-arm64/src/kernels/kernels_test > "$log" 2>&1; then
  grep -E '^\[  [A-Z]+ +\] [0-9]+ tests?' "$log" || true
else
  status=1
  grep -vE '^\[ +(RUN|OK) +\]' "$log" >&2 || true
fi
t3=$(date +%s)

# The NEON x16 kernels (matmul_x16_neon.cc) must have run and passed: each test of each type.
# A type the file has no kernel for (Q5_K) skips its _neon cases and is not counted.
expected=0
for type in Q4_K Q6_K Q8_0; do
  for test in SimdOnInterleavedRowsEqualsScalarX16Order ExtremeCodesDoNotSaturate; do
    expected=$((expected + 1))
    name="X16/X16KernelTest.$test/${type}_neon"
    if ! grep -qF "[       OK ] $name (" "$log"; then
      echo "cross_arm64: $name did not pass: $(grep -F "] $name" "$log" | tail -n 1)" >&2
      status=1
    fi
  done
done
passed=$(grep -cE '^\[       OK \] X16/X16KernelTest\..*_neon ' "$log" || true)

echo "== timings: install $((t1 - t0)) s, build $((t2 - t1)) s, tests $((t3 - t2)) s"
if [ "$status" -ne 0 ]; then
  echo "== aarch64 check FAILED (log: $log)" >&2
  exit 1
fi
echo "== aarch64 kernels_test passed; NEON x16 tests passed: $passed (required: $expected)"
