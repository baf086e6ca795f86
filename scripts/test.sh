#!/usr/bin/env bash
# Everything the test suite needs on a fresh machine, then the whole suite.
# Installs the package with its test extras and Debian's Chromium (for the browser test;
# Playwright drives /usr/bin/chromium and never downloads a browser of its own).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = "0" ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq chromium >/dev/null
  else
    echo "note: /usr/bin/chromium is missing and this is not root; the browser test will be skipped" >&2
  fi
fi

python -m pip install -q --disable-pip-version-check -e ".[test]"
exec python -m pytest -n 2 "$@"
