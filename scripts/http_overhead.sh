#!/usr/bin/env bash
# The HTTP overhead at 1 client, in interleaved rounds so that the machine's drift hits all three
# alike: the raw forward (`ponder bench -p 0 -n G`), the Engine without HTTP (`ponder bench
# --concurrent 1 --prompt 1 --gen G`) and one streaming client over HTTP (scripts/http_probe.py
# against an idle `ponder serve --no-response-cache`), greedy, EOS ignored. Prints each round's
# decode t/s, then the medians and the mean of the rounds' HTTP/raw ratios with its standard error.
# Usage: scripts/http_overhead.sh MODEL.gguf [ROUNDS=12] [GEN=128] [BUILD_DIR=build]
set -euo pipefail
cd "$(dirname "$0")/.."
M=$1 ROUNDS=${2:-12} GEN=${3:-128} B=${4:-build}
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$B/ponder" serve -m "$M" -t 2 --no-response-cache --port "$PORT" > /dev/null 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null || true' EXIT
until curl -sf "http://127.0.0.1:$PORT/health" > /dev/null; do sleep 0.5; done
python3 scripts/http_probe.py "$PORT" --prompt 1 --gen 32 --requests 1 --temperature 0 > /dev/null  # warm-up
LOG=$(mktemp)
for i in $(seq 1 "$ROUNDS"); do
  raw=$("$B/ponder" bench -m "$M" -t 2 -p 0 -n "$GEN" -r 1 2>&1 | grep -o "tg$GEN t=2: [0-9.]*" | awk '{print $3}')
  eng=$("$B/ponder" bench -m "$M" -t 2 --concurrent 1 --prompt 1 --gen "$GEN" 2>&1 | grep '^| 1 |' | awk -F'|' '{print $6+0}')
  http=$(python3 scripts/http_probe.py "$PORT" --prompt 1 --gen "$GEN" --requests 1 --temperature 0 | grep -o 'decode [0-9.]*' | awk '{print $2}')
  echo "round $i: raw $raw  engine $eng  http $http t/s" | tee -a "$LOG"
done
python3 - "$LOG" <<'PY'
import re, statistics as s, sys
rows = [tuple(map(float, re.findall(r"[\d.]+ ", l.split(":", 1)[1] + " ")[:3])) for l in open(sys.argv[1])]
raw, eng, http = zip(*rows)
d = [h / r - 1 for r, _, h in rows]
print(f"medians: raw {s.median(raw):.2f}, engine {s.median(eng):.2f}, http {s.median(http):.2f} t/s; "
      f"http/raw per round: mean {100 * s.mean(d):+.1f}% +- {100 * s.stdev(d) / len(d) ** 0.5:.1f}% (standard error), "
      f"median {100 * s.median(d):+.1f}%")
PY
rm -f "$LOG"
