#!/usr/bin/env bash
# Checks that every C++ file git tracks is formatted by the tree's .clang-format (clang-format 14,
# Debian's, installed by scripts/setup.sh). Prints the files that are not and exits 1.
# Fix with: git ls-files '*.cc' '*.h' '*.cpp' | xargs clang-format-14 -i
set -euo pipefail
cd "$(dirname "$0")/.."
FORMAT=$(command -v clang-format-14 || command -v clang-format)
bad=()
while IFS= read -r f; do
  "$FORMAT" --dry-run --Werror "$f" > /dev/null 2>&1 || bad+=("$f")
done < <(git ls-files '*.cc' '*.h' '*.cpp')
if [ ${#bad[@]} -gt 0 ]; then
  echo "not formatted by .clang-format (${#bad[@]} files):"
  printf '  %s\n' "${bad[@]}"
  echo "fix: git ls-files '*.cc' '*.h' '*.cpp' | xargs $(basename "$FORMAT") -i"
  exit 1
fi
echo "format: $(git ls-files '*.cc' '*.h' '*.cpp' | wc -l) C++ files formatted by .clang-format"
