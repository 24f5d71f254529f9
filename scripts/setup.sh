#!/usr/bin/env bash
# Installs what coa needs on Debian/Ubuntu: Node packages, and Debian's PyTorch with OpenBLAS (the
# embedded engine), bubblewrap (the code sandbox), Chromium (the viewer's browser test) and a C++
# toolchain (better-sqlite3, the search index, compiles from source where its prebuilt binary cannot
# be downloaded; the engine builds its fused decode attention with the gcc that g++ brings).
# Elsewhere: any Python >= 3.11 with torch >= 1.13 (set COA_PYTHON to it) and bubblewrap.
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(python3-torch libopenblas0-pthread bubblewrap g++ make python3)
[ "${COA_SETUP_BROWSER:-1}" = 1 ] && pkgs+=(chromium)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if ! command -v apt-get >/dev/null; then
    echo "setup: not a Debian/Ubuntu system; install ${missing[*]} yourself (see README)" >&2
  else
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    echo "setup: installing ${missing[*]}"
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
fi
# Debian's nodejs ships its headers: node-gyp then needs no download to build native modules.
[ -f /usr/include/node/node.h ] && export npm_config_nodedir="${npm_config_nodedir:-/usr}"
[ -d node_modules ] && [ node_modules -nt package-lock.json ] || npm ci --no-audit --no-fund
