"""The server is made ready in a thread, once per process (app_pages/rollout/warm.py): the Rollout page's
imports and proof layouts, then what is loaded frozen out of the garbage collector's walk."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_a_fresh_process_has_the_rollout_page_ready_after_the_thread() -> None:
    script = """
import sys
import app_pages.rollout.warm as warm
from tokencap.views import figures
import gc
assert 'app_pages.rollout.tabs' not in sys.modules and figures._stacked_axes.cache_info().currsize == 0
assert gc.get_freeze_count() == 0
first = warm.warm_server()
assert warm.warm_server() is first  # once per process
first.join(120)
missing = [m for m in warm.ROLLOUT_PARTS if m not in sys.modules]
assert not missing, missing
assert 'app_pages.rollout.rollout' not in sys.modules  # the page itself is never imported (it would run)
assert figures._stacked_axes.cache_info().currsize == 2, figures._stacked_axes.cache_info()
import gc
assert gc.get_freeze_count() > 10_000, gc.get_freeze_count()  # the modules, out of each collection's walk
print('ready')
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("ready")
