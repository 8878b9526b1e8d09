#!/usr/bin/env bash
# Checks that every C++ file git tracks is formatted by the tree's .clang-format (clang-format 14,
# Debian's, installed by scripts/setup.sh). Prints the files that are not and exits 1.
# Fix with: git ls-files '*.cc' '*.h' '*.cpp' | xargs clang-format-14 -i
set -euo pipefail
cd "$(dirname "$0")/.."
FORMAT=$(command -v clang-format-14 || command -v clang-format)
# clang-format on batches of files, as many at once as there are cores; --Werror names each file
# it would change ("FILE:LINE:COL: error: code should be clang-formatted").
out=$(mktemp)
trap 'rm -f "$out"' EXIT
rc=0
git ls-files -z '*.cc' '*.h' '*.cpp' |
  xargs -0 -n 24 -P "$(nproc)" "$FORMAT" --dry-run --Werror > /dev/null 2> "$out" || rc=$?
mapfile -t bad < <(sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' "$out" | sort -u)
if [ "$rc" -ne 0 ] && [ ${#bad[@]} -eq 0 ]; then
  echo "clang-format failed:"
  cat "$out"
  exit 1
fi
if [ ${#bad[@]} -gt 0 ]; then
  echo "not formatted by .clang-format (${#bad[@]} files):"
  printf '  %s\n' "${bad[@]}"
  echo "fix: git ls-files '*.cc' '*.h' '*.cpp' | xargs $(basename "$FORMAT") -i"
  exit 1
fi
echo "format: $(git ls-files '*.cc' '*.h' '*.cpp' | wc -l) C++ files formatted by .clang-format"
