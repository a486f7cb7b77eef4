#!/usr/bin/env bash
# Installs what the web page's browser tests drive: Debian's Chromium (headless) and
# playwright-core from npm (the driver only; it uses the system Chromium, downloads no
# browser), into a cache outside the repo (default ~/.cache/toolloop). Prints, as shell
# `export` lines, what tests/web_browser.rs reads:
#   TOOLLOOP_CHROMIUM    the Chromium binary
#   TOOLLOOP_PLAYWRIGHT  the node_modules folder holding playwright-core
# A second run only checks.
set -euo pipefail
CACHE="${TOOLLOOP_CACHE:-$HOME/.cache/toolloop}"
log() { printf '[browser] %s\n' "$*" >&2; }

chromium=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chromium" ]; then
  log "installing Debian's chromium"
  if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
  ($sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium) >&2
  chromium=$(command -v chromium)
fi

dir="$CACHE/playwright"
if [ ! -f "$dir/node_modules/playwright-core/package.json" ]; then
  log "installing playwright-core"
  mkdir -p "$dir"
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --silent --no-audit --no-fund --prefix "$dir" playwright-core@1 >&2
fi

printf 'export TOOLLOOP_CHROMIUM=%q\n' "$chromium"
printf 'export TOOLLOOP_PLAYWRIGHT=%q\n' "$dir/node_modules"
