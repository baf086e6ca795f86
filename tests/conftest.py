"""Fixtures shared by the tests: the app tester, the sample run, a free port, a local Ray, the app's
downloads. Helpers that are not fixtures live in tests/helpers*.py; no test module imports another."""

from __future__ import annotations

import functools
import os
import socket
import subprocess
import tempfile

import pytest
from streamlit.runtime.media_file_manager import MediaFileManager

# No spare child scans (tokencap.run.child.keep_spare) in the servers and pages the tests
# start: each would be an idle process with its fork server. tests/test_run_child.py turns
# them on where it tests them.
os.environ.setdefault("TOKENCAP_SPARE_SCAN", "0")

# No test reads this machine's Hugging Face cache: without --tokenizer a rollout's model is looked
# up there (docs/contract.md#tokenizers). Tests of the lookup point HF_HUB_CACHE at a cache they build.
os.environ["HF_HUB_CACHE"] = os.path.join(tempfile.gettempdir(), "tokencap-tests-no-hf-cache")


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray of 2 CPUs (loopback only) shared by a module's Ray tests; the engine joins it."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    yield ray
    ray.shutdown()


@pytest.fixture
def downloads(monkeypatch):
    """file name -> payload function, for every download button the page registered (small files are
    handed over as bytes with the page, big ones when prepared)."""
    captured: dict[str, object] = {}
    deferred, added = MediaFileManager.add_deferred, MediaFileManager.add

    def spy_deferred(self, data_callable, mimetype, coordinates, file_name=None, **kwargs):
        captured[file_name] = data_callable
        return deferred(self, data_callable, mimetype, coordinates, file_name=file_name, **kwargs)

    def spy_add(self, path_or_data, mimetype, coordinates, file_name=None, is_for_static_download=False):
        if is_for_static_download:
            captured[file_name] = lambda data=path_or_data: data
        return added(self, path_or_data, mimetype, coordinates, file_name=file_name,
                     is_for_static_download=is_for_static_download)

    monkeypatch.setattr(MediaFileManager, "add_deferred", spy_deferred)
    monkeypatch.setattr(MediaFileManager, "add", spy_add)
    return captured


@pytest.fixture
def no_server(monkeypatch):
    """Any process started (the app's server, a scan child) fails the test: the command must stop first."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"a process was started: {args}")

    monkeypatch.setattr(subprocess, "Popen", refuse)


@pytest.fixture
def free_port() -> int:
    """A localhost port nothing listened on a moment ago (the kernel's choice): no test depends on a
    fixed port, such as 8501 or 8765, being free."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def app_tester(monkeypatch):
    """Start the app headless: ``app_tester(*args, page=None, state=None, query=None)`` is
    `helpers_app.start_app` (the one AppTest starter) with this test's monkeypatch."""
    from helpers_app import start_app

    return functools.partial(start_app, monkeypatch)


@pytest.fixture(scope="session")
def sample_run():
    """The bundled sample run as the Run page shows it (scanned with its bundled rollout records):
    (table, frame)."""
    from helpers_app import SAMPLE_RECORDS, SAMPLE_RUN

    from tokencap.run import scan_table
    from tokencap.views.run.frame import run_frame

    records = {"final_responses": str(SAMPLE_RECORDS)} if SAMPLE_RECORDS else {}
    table = scan_table(SAMPLE_RUN, workers=1, **records)
    return table, run_frame(table)


@pytest.fixture
def served_app(tmp_path):
    """Serve the app: ``with served_app(*args, env=None) as url`` is `helpers_browser.streamlit_server` (the one
    starter of a served app: `streamlit run app.py [-- ARGS]` on a free localhost port) logging under
    this test's tmp_path."""
    from helpers_browser import streamlit_server as serve

    return functools.partial(serve, tmp_path)
