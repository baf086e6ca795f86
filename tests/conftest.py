"""Fixtures shared by the app tests."""

from __future__ import annotations

import os

import pytest
from streamlit.runtime.media_file_manager import MediaFileManager

# No spare child scans (tokencap.run.child.keep_spare) in the servers and pages the tests
# start: each would be an idle process with its fork server. tests/test_run_child.py turns
# them on where it tests them.
os.environ.setdefault("TOKENCAP_SPARE_SCAN", "0")


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
