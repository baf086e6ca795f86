"""Fixtures shared by the app tests."""

from __future__ import annotations

import pytest
from streamlit.runtime.media_file_manager import MediaFileManager


@pytest.fixture
def downloads(monkeypatch):
    """file name -> payload function, for every download button the page registered."""
    captured: dict[str, object] = {}
    original = MediaFileManager.add_deferred

    def spy(self, data_callable, mimetype, coordinates, file_name=None, **kwargs):
        captured[file_name] = data_callable
        return original(self, data_callable, mimetype, coordinates, file_name=file_name, **kwargs)

    monkeypatch.setattr(MediaFileManager, "add_deferred", spy)
    return captured
