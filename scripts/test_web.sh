#!/usr/bin/env bash
# The page end to end: web/test/e2e.mjs drives Debian's Chromium (playwright-core) against a real
# `ponder serve` on a tiny model; screenshots of the main states land in BUILD_DIR/web-shots/.
# Usage: scripts/test_web.sh [BUILD_DIR]   (default build/)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
[ -x /usr/bin/chromium ] || { echo "test_web: /usr/bin/chromium is missing (scripts/setup.sh installs it)"; exit 1; }
[ -d web/node_modules/playwright-core ] || npm ci --silent --no-audit --no-fund --prefix web
cmake --build "$BUILD" --target ponder > /dev/null  # the page is embedded: rebuild after web/ edits
SHOTS="$BUILD/web-shots"
rm -rf "$SHOTS"
node --test-reporter=spec web/test/e2e.mjs "$BUILD/ponder" ../shared/models/tiny-Q8_0.gguf "$SHOTS"
echo "test_web: all passed; screenshots in $SHOTS"
