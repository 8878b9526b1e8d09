#!/usr/bin/env bash
# The Q8_0 cache's decode attention kernel alone (attn_block/attn_block_bench.cc), built against
# a build directory's libraries and run in L2 (64 blocks) and from memory (57344 blocks):
#   scripts/bench/attn_block.sh /work/build-o1 [PASSES]
#   PONDER_ISA=avxvnni scripts/bench/attn_block.sh /work/build-o1
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:?usage: attn_block.sh BUILD_DIR [PASSES]}" && pwd)
PASSES=${2:-300}
OUT="$B/attn_block_bench"
c++ -std=c++20 -O2 -I"$HERE/../../src" "$HERE/attn_block/attn_block_bench.cc" -o "$OUT" \
  "$B/src/kernels/libponder_kernels.a" "$B/src/quant/libponder_quant.a" \
  "$B/src/gguf/libponder_gguf.a" "$B/src/cpu/libponder_cpu.a" "$B/src/base/libponder_base.a" \
  -lfmt -lpthread
"$OUT" 64 "$PASSES"
"$OUT" 57344 3
