#!/usr/bin/env bash
# The UI tests drive a real headless browser: Debian's chromium and its chromedriver, from apt-get if missing.
set -euo pipefail
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  echo "installing chromium and chromium-driver for the UI tests (apt-get)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
fi
