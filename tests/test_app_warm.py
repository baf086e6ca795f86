"""The server is made ready in a thread, once per process (tokencap/app/rollout/warm.py): the Rollout page's
imports, then what is loaded frozen out of the garbage collector's walk."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_a_fresh_process_has_the_rollout_page_ready_after_the_thread() -> None:
    script = """
import sys
import tokencap.app.rollout.warm as warm
import gc
assert 'tokencap.app.rollout.tabs' not in sys.modules
assert gc.get_freeze_count() == 0
first = warm.warm_server()
assert warm.warm_server() is first  # once per process
first.join(120)
missing = [m for m in warm.ROLLOUT_PARTS if m not in sys.modules]
assert not missing, missing
assert 'tokencap.app.rollout.rollout' not in sys.modules  # the page itself is never imported (it would run)
import gc
assert gc.get_freeze_count() > 10_000, gc.get_freeze_count()  # the modules, out of each collection's walk
print('ready')
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("ready")


def _warm_up_spans(tmp_path: Path, *args: str) -> list[str]:
    """The spans (tokencap.views.trace) the server's warm-up run draws, started on ``args``, as
    `tokencap app` starts it: Streamlit's script health check on, asked once, no browser."""
    from helpers_browser import streamlit_server

    from tokencap.cli.server import warm_up_app
    from tokencap.views import trace

    spans = tmp_path / "spans.tsv"
    env = {"STREAMLIT_SERVER_SCRIPT_HEALTH_CHECK_ENABLED": "true", trace.TRACE_ENV: str(spans),
           "TOKENCAP_CACHE_DIR": str(tmp_path / "cache")}
    with streamlit_server(tmp_path, *args, env=env, browser=False) as url:
        assert warm_up_app(url), "".join(log.read_text() for log in tmp_path.glob("streamlit-*.log"))
        return [name for name, _ in trace.read(spans)]


def test_the_warm_up_on_a_rollout_file_draws_the_rollout_page(tmp_path: Path) -> None:
    # A browser's first run switches to the Rollout page (a rerun); the warm-up has one run, so it draws
    # that page itself, and the first visit finds the rollout loaded and built.
    spans = _warm_up_spans(tmp_path, str(REPO / "sample_data" / "clean_multiturn_tools.json"))
    assert "rollout banner" in spans, spans


def test_the_warm_up_on_a_run_draws_the_run_page(tmp_path: Path) -> None:
    spans = _warm_up_spans(tmp_path, str(REPO / "sample_data" / "run"))
    assert "script" in spans and "rollout banner" not in spans, spans
