#!/usr/bin/env bash
# Everything the test suite needs on a fresh machine, then the whole suite.
# Installs the package with its test extras and Debian's Chromium (for the browser test;
# Playwright drives /usr/bin/chromium and never downloads a browser of its own).
#
#   bash scripts/test.sh [--load N] [--no-install] [PYTEST ARGS...]
#
# --load N      run N busy processes (CPU burners) beside the suite, as on a loaded machine; they
#               are stopped when this script exits, however it ends (and stop by themselves if it
#               is killed outright). Their process ids are in $TOKENCAP_TEST_LOAD_PIDS.
# --no-install  skip the installs: the environment is already set up (pip install -e ".[test]").
# Every other argument goes to pytest (`bash scripts/test.sh --load 2 -m browser`).
set -euo pipefail
cd "$(dirname "$0")/.."

load=0
install=1
pytest_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --load)
      if [ $# -lt 2 ]; then echo "scripts/test.sh: --load needs a number of busy processes" >&2; exit 2; fi
      load="$2"; shift 2 ;;
    --load=*) load="${1#--load=}"; shift ;;
    --no-install) install=0; shift ;;
    *) pytest_args+=("$1"); shift ;;
  esac
done
case "$load" in
  ''|*[!0-9]*) echo "scripts/test.sh: --load takes a whole number of busy processes, not '$load'" >&2; exit 2 ;;
esac

if [ "$install" = 1 ]; then
  if [ ! -x /usr/bin/chromium ]; then
    if [ "$(id -u)" = "0" ]; then
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq && apt-get install -y -qq chromium >/dev/null
    else
      echo "note: /usr/bin/chromium is missing and this is not root; the browser test will be skipped" >&2
    fi
  fi
  # The distribution was called tokencap before it became tokencap-rl: one left installed under the old
  # name owns the same import package and would shadow this checkout's (its editable finder comes first).
  if python -m pip show -q tokencap >/dev/null 2>&1; then
    python -m pip uninstall -q -y --disable-pip-version-check tokencap
  fi
  python -m pip install -q --disable-pip-version-check -e ".[test]"
fi

if [ "$load" = 0 ]; then
  exec python -m pytest -n 2 ${pytest_args[@]+"${pytest_args[@]}"}
fi

burners=()
stop_burners() {
  for pid in ${burners[@]+"${burners[@]}"}; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in ${burners[@]+"${burners[@]}"}; do
    wait "$pid" 2>/dev/null || true
  done
}
trap stop_burners EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# A pure-CPU loop that ends when this script is gone (its parent changes), even after a SIGKILL.
for _ in $(seq "$load"); do
  python -c '
import os
parent = os.getppid()
while os.getppid() == parent:
    for _ in range(1_000_000):
        pass
' &
  burners+=("$!")
done
export TOKENCAP_TEST_LOAD_PIDS="${burners[*]}"
echo "scripts/test.sh: --load $load: busy processes $TOKENCAP_TEST_LOAD_PIDS beside the suite" >&2
status=0
python -m pytest -n 2 ${pytest_args[@]+"${pytest_args[@]}"} || status=$?
exit "$status"
