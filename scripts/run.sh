#!/usr/bin/env bash
# Installs packages, builds Ponder (Release) and starts its main job, the server (`ponder serve`:
# OpenAI and llama.cpp APIs on http://127.0.0.1:8080), on a model:
#   scripts/run.sh [MODEL.gguf] [extra ponder serve options, e.g. --port 9000]
# The model is the argument, else $PONDER_MODEL, else models/DeepSeek-R1-Distill-Qwen-1.5B-Q4_K_M.gguf.
# When none of these exists, a small demo model with random weights is generated and used.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPONDER_TESTS=OFF > /dev/null
cmake --build build -j"$(nproc)" --target ponder

model="${PONDER_MODEL:-models/DeepSeek-R1-Distill-Qwen-1.5B-Q4_K_M.gguf}"
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then  # a first argument that is not an option: the model
  model="$1"
  shift
fi
if [ ! -f "$model" ]; then
  demo=models/demo-tiny-random.gguf
  echo "run: no model at '$model'."
  echo "run: using a GENERATED DEMO MODEL with RANDOM WEIGHTS ($demo): its answers are noise,"
  echo "run: but every part of Ponder runs. Give a real GGUF path to serve it for real."
  mkdir -p models
  [ -f "$demo" ] || ./build/ponder synth --preset tiny "$demo" --type Q8_0
  model="$demo"
fi
port=8080
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do [ "${args[$i]}" = "--port" ] && port="${args[$((i + 1))]}"; done
echo "run: serving $model on http://127.0.0.1:$port (the chat page: open http://127.0.0.1:$port/ ; OpenAI API at /v1; Ctrl-C stops)"
echo "run: try: curl http://127.0.0.1:$port/v1/chat/completions -d '{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}'"
exec ./build/ponder serve -m "$model" "$@"
