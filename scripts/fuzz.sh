#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang, ASan + UBSan) and runs each for a fixed budget.
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]    (default 15 s each, every target)
# The working corpus lives in $PONDER_FUZZ_DIR (default build-fuzz/work/<target>), seeded from
# fuzz/corpus/<target>: a later run resumes from what earlier ones found, so hours add up across
# sittings (`PONDER_FUZZ_DIR=~/ponder-fuzz scripts/fuzz.sh 3600`). A crash, a sanitizer report, a
# leak, one allocation above 128 MiB or an RSS above 1 GiB is a finding: its input is kept in
# <build>/findings/ and the script fails. Prints executions, coverage and corpus per target. The
# targets run one a core at a time ($PONDER_FUZZ_JOBS, default nproc), each for the whole budget.
# $PONDER_FUZZ_BUILD: the build directory (default build-fuzz; scripts/test.sh passes its clang
# ASan build, configured with PONDER_FUZZ=ON, which then only builds the targets).
set -euo pipefail
cd "$(dirname "$0")/.."
BUDGET=${1:-15}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(fuzz_gguf fuzz_model fuzz_tokenizer fuzz_request fuzz_responses fuzz_http fuzz_safetensors fuzz_hf_files fuzz_grammar fuzz_kv_disk)
B=${PONDER_FUZZ_BUILD:-build-fuzz}
WORK=${PONDER_FUZZ_DIR:-$B/work}

if ! grep -qs '^PONDER_FUZZ:BOOL=ON' "$B/CMakeCache.txt"; then
  CC=clang CXX=clang++ cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DPONDER_FUZZ=ON -DPONDER_TESTS=OFF -DPONDER_WERROR=OFF > /dev/null
fi
cmake --build "$B" -j"$(nproc)" --target "${TARGETS[@]}"
mkdir -p "$B/findings"
JOBS=${PONDER_FUZZ_JOBS:-$(nproc)}

# fuzz_one TARGET: runs it for the budget and writes its table row to $B/TARGET.row ("FINDING" in
# it for a finding, with the log's key lines after it).
fuzz_one() {
  local t=$1 log=$B/$1.log rc execs cov ft corpus unit result
  mkdir -p "$WORK/$t"
  set +e
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 UBSAN_OPTIONS=print_stacktrace=1 \
    "$B/fuzz/$t" "$WORK/$t" "fuzz/corpus/$t" -max_total_time="$BUDGET" -malloc_limit_mb=128 -rss_limit_mb=1024 \
    -timeout=10 -max_len=65536 -print_final_stats=1 -artifact_prefix="$B/findings/$t-" > "$log" 2>&1
  rc=$?
  set -e
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+' || echo "?")
  ft=$(grep -oE 'ft: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+' || echo "?")
  corpus=$(find "$WORK/$t" -type f | wc -l)
  # libFuzzer times each input by the wall clock: a fuzzer paused (SIGSTOP) or starved of CPU reports
  # a timeout on whatever input it was running. A timeout counts only if its input, run again
  # alone, still takes longer than the limit.
  if [ $rc -ne 0 ] && grep -q 'ERROR: libFuzzer: timeout' "$log"; then
    unit=$(grep -o 'Test unit written to [^ ]*timeout-[0-9a-f]*' "$log" | tail -1 | awk '{print $NF}')
    if [ -n "$unit" ] && timeout 10 "$B/fuzz/$t" "$unit" > /dev/null 2>&1; then
      echo "$t: a timeout that did not reproduce (the input runs within 10 s alone): $unit kept, not a finding"
      rc=0
    fi
  fi
  if [ $rc -eq 0 ]; then result=ok; else result="FINDING (rc $rc, $log)"; fi
  printf '%-18s %10s %8s %8s %9s %s\n' "$t" "$execs" "$cov" "$ft" "$corpus" "$result" > "$B/$t.row"
  if [ $rc -ne 0 ]; then grep -E 'ERROR|SUMMARY|Test unit written|deadly|==[0-9]+==' "$log" | head -20 >> "$B/$t.row"; fi
}

# One target a core at a time (each keeps its whole budget), the rows printed in order after.
for t in "${TARGETS[@]}"; do
  rm -f "$B/$t.row"
  fuzz_one "$t" &
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
done
wait
status=0
printf '%-18s %10s %8s %8s %9s %s\n' target executions cov features corpus result
for t in "${TARGETS[@]}"; do
  if [ ! -f "$B/$t.row" ]; then echo "$t: no result (the script that runs it failed)"; status=1; continue; fi
  cat "$B/$t.row"
  if grep -q FINDING "$B/$t.row"; then status=1; fi
done
exit $status
