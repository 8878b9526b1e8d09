#!/usr/bin/env bash
# Peak RSS and load time of `ponder serve` on one model, started twice (the second start finds the
# x16 layout in its cache and the file in the page cache, as a restart does): each start answers
# one 64-token request, then the process's VmHWM (peak resident set) is read and it is stopped.
# Usage: scripts/bench/serve_memory.sh MODEL.gguf [CTX] [extra ponder serve flags...]
# Environment: PONDER (default build/ponder), PORT (18479).
set -euo pipefail
cd "$(dirname "$0")/../.."
MODEL=$1
CTX=${2:-8192}
shift 2 || shift $#
PONDER=${PONDER:-build/ponder}
PORT=${PORT:-18479}
LOG=$(mktemp)
trap 'rm -f "$LOG"; [ -n "${PID:-}" ] && kill "$PID" 2>/dev/null || true' EXIT
echo "== $(basename "$MODEL") ($(stat -c %s "$MODEL" | awk '{printf "%.2f GB", $1/1e9}')), -c $CTX," \
  "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), MemAvailable" \
  "$(awk '/MemAvailable/ {printf "%.1f GB", $2*1024/1e9}' /proc/meminfo)"
for start in first second; do
  "$PONDER" serve -m "$MODEL" -c "$CTX" --port "$PORT" --host 127.0.0.1 "$@" > "$LOG" 2>&1 &
  PID=$!
  for _ in $(seq 1200); do
    curl -sf "http://127.0.0.1:$PORT/health" > /dev/null 2>&1 && break
    kill -0 "$PID" 2>/dev/null || { cat "$LOG"; exit 1; }
    sleep 0.5
  done
  curl -sf "http://127.0.0.1:$PORT/v1/completions" -H 'Content-Type: application/json' \
    -d '{"prompt": "The history of the printing press", "max_tokens": 64, "temperature": 0}' > /dev/null
  hwm=$(awk '/VmHWM/ {printf "%.2f GB", $2*1024/1e9}' "/proc/$PID/status")
  rss=$(awk '/VmRSS/ {printf "%.2f GB", $2*1024/1e9}' "/proc/$PID/status")
  kill "$PID"
  wait "$PID" 2>/dev/null || true
  PID=
  echo "$start start: $(grep -o 'loaded in [0-9.]* s[^;]*' "$LOG" | head -1); peak RSS $hwm, RSS after the answer $rss"
  grep -o 'x16 cache.*' "$LOG" | head -1 || true
done
