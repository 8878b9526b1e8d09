#!/usr/bin/env bash
# Ponder's `bench` and peers' `llama-bench` on one model, alternated round by round in one sitting
# (a drifting machine moves every tool alike), pp and tg at the given thread count.
# Usage: scripts/bench/side_by_side.sh MODEL.gguf [ROUNDS] -- LLAMA_BENCH [LLAMA_BENCH...]
# Environment: PONDER (default build/ponder), PONDER_ISA (e.g. avx2), THREADS (2), PP (512),
# TG (128), REPS (3 repetitions a run). Each peer runs twice a round: default and -rtr 1
# (ik_llama.cpp's run-time repacking; a llama.cpp that lacks the flag is run once).
# Prints one line a run, then the medians and, round by round, Ponder over each peer's best
# configuration (their median and minimum).
set -euo pipefail
cd "$(dirname "$0")/../.."
MODEL=$1
ROUNDS=${2:-3}
shift 2
[ "${1:-}" = "--" ] && shift
PONDER=${PONDER:-build/ponder}
THREADS=${THREADS:-2}
PP=${PP:-512}
TG=${TG:-128}
REPS=${REPS:-3}
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT

# Both tools print llama-bench's JSON: one object a test.
summarize() {
  python3 -c "
import json, sys
for r in json.load(sys.stdin):
    test = f\"pp{r['n_prompt']}\" if r['n_prompt'] else f\"tg{r['n_gen']}\"
    print(sys.argv[1], test, f\"{r['avg_ts']:.2f}\")" "$1"
}
ponder_run() {
  "$PONDER" bench -m "$MODEL" -t "$THREADS" -p "$PP" -n "$TG" -r "$REPS" --no-bandwidth -o json \
    2>/dev/null | summarize "ponder(${PONDER_ISA:-native})"
}
peer_run() {  # $1 llama-bench, $2.. extra flags
  local bin=$1
  shift
  "$bin" -m "$MODEL" -t "$THREADS" -p "$PP" -n "$TG" -r "$REPS" -o json "$@" 2>/dev/null |
    summarize "$(basename "$(dirname "$(dirname "$(dirname "$bin")")")")$(echo "$@" | tr -d ' ')"
}

for round in $(seq "$ROUNDS"); do
  ponder_run | tee -a "$OUT"
  for bin in "$@"; do
    peer_run "$bin" | tee -a "$OUT"
    if "$bin" --help 2>&1 | grep -q -- '-rtr'; then peer_run "$bin" -rtr 1 | tee -a "$OUT"; fi
  done
done
echo "== medians over $ROUNDS rounds ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $THREADS threads)"
python3 - "$OUT" <<'PY'
import statistics, sys, collections
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    tool, test, tps = line.split()
    runs[(tool, test)].append(float(tps))
for (tool, test), v in sorted(runs.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    print(f"{test:8s} {tool:28s} {statistics.median(v):8.2f} t/s  ({', '.join(f'{x:.2f}' for x in v)})")
# Round by round, Ponder over each peer's best configuration of that round (default or -rtr 1):
# on a shared host whose bandwidth swings within minutes, the ratio of runs seconds apart says
# more than the ratio of medians.
ponder = [t for t in runs if t[0].startswith("ponder")]
peers = sorted({t[0].removesuffix("-rtr1") for t in runs if not t[0].startswith("ponder")})
for tool, test in sorted(ponder, key=lambda t: t[1]):
    for peer in peers:
        best = [max(x) for x in zip(*[v for (t2, te), v in runs.items()
                                      if te == test and t2.removesuffix("-rtr1") == peer])]
        ratios = [p / b for p, b in zip(runs[(tool, test)], best)]
        if ratios:
            print(f"{test:8s} x {peer:26s} {statistics.median(ratios):7.2f}x median of rounds, "
                  f"min {min(ratios):.2f}x  ({', '.join(f'{r:.2f}' for r in ratios)})")
PY
