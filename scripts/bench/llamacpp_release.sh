#!/usr/bin/env bash
# llama.cpp mainline as released, for side-by-side benchmarks where its repository cannot be
# fetched and built: the prebuilt library of the npm package @node-llama-cpp/linux-x64 (x86-64
# Linux; ggml-org/llama.cpp built with every CPU variant, the best one chosen at load), unpacked
# into DIR outside the tree, with a llama-bench-like timer (llamacpp_release/rel_bench.c) and a
# wrapper with llama-bench's flags and JSON at DIR/build/bin/llama-bench:
#   scripts/bench/llamacpp_release.sh /work/ext/llamacpp-rel
#   scripts/bench/side_by_side.sh MODEL.gguf 1 -- /work/ext/llamacpp-rel/build/bin/llama-bench
# Prints the llama.cpp commit and compiler the package was built from.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DIR=${1:?usage: llamacpp_release.sh DIR [VERSION]}
VERSION=${2:-3.22.1}
mkdir -p "$DIR/build/bin"
DIR=$(cd "$DIR" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
(cd "$TMP" && npm pack --silent "@node-llama-cpp/linux-x64@$VERSION" > /dev/null && tar xzf ./*.tgz)
cp "$TMP"/package/bins/linux-x64/*.so "$TMP"/package/bins/linux-x64/_nlcBuildMetadata.json "$DIR/"
ln -sf "$(basename "$(ls "$DIR"/libllama.v*.so | head -1)")" "$DIR/libllama.so"
ln -sf "$(basename "$(ls "$DIR"/libggml.v*.so | head -1)")" "$DIR/libggml.so"
cc -O2 -o "$DIR/rel_bench" "$HERE/llamacpp_release/rel_bench.c" -ldl -lm
cp "$HERE/llamacpp_release/llama-bench" "$DIR/build/bin/llama-bench"
cat > "$TMP/version.c" <<'C'
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
  void *h = dlopen(argv[1], RTLD_NOW);
  if (!h) return 1;
  const char **commit = dlsym(h, "LLAMA_COMMIT"), **compiler = dlsym(h, "LLAMA_COMPILER");
  printf("llama.cpp commit %s, %s\n", commit ? *commit : "?", compiler ? *compiler : "?");
  return 0;
}
C
cc -o "$TMP/version" "$TMP/version.c" -ldl
LD_LIBRARY_PATH=$DIR "$TMP/version" "$DIR/libllama-common.so"
echo "llama-bench: $DIR/build/bin/llama-bench"
