"""The bundled samples and settings are found the same way in a checkout and a wheel (tokencap.bundled),
and the command line names a sample as ``sample:NAME`` from any directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokencap import bundled
from tokencap.cli import main

REPO = Path(__file__).resolve().parent.parent


def test_a_checkout_finds_its_top_level_folders() -> None:
    # In a checkout the package holds no copy: the one copy is at the repository's top level.
    assert not (REPO / "tokencap" / "sample_data").exists()
    assert bundled.SAMPLE_DATA == REPO / "sample_data"
    assert bundled.STREAMLIT_CONFIG == REPO / ".streamlit" / "config.toml"


def test_the_package_s_own_copy_wins_when_it_has_one(tmp_path: Path) -> None:
    installed, checkout = tmp_path / "pkg" / "sample_data", tmp_path / "sample_data"
    checkout.mkdir()
    assert bundled._installed_or_checkout(installed, checkout) == checkout
    installed.mkdir(parents=True)
    assert bundled._installed_or_checkout(installed, checkout) == installed


def test_sample_names_resolve_inside_the_sample_folder_only() -> None:
    assert bundled.sample_path("sample:clean_multiturn_tools.json") == str(REPO / "sample_data" /
                                                                           "clean_multiturn_tools.json")
    assert bundled.sample_path("sample:rollout_records/run.jsonl").endswith("sample_data/rollout_records/run.jsonl")
    for bad in ("sample:", "sample:nope.json", "sample:../pyproject.toml", "sample:/etc/passwd", "sample:."):
        with pytest.raises(bundled.UnknownSample, match=r"no bundled sample of that name; the samples are"):
            bundled.sample_path(bad)


def test_build_names_a_sample_from_any_directory(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["build", "sample:clean_multiturn_tools.json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["rollout_id"] == "clean-multiturn-tools" and out["mask_sample"] is False


def test_an_unknown_sample_is_one_line_and_exit_2(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["inspect", "sample:nope.json"]) == 2
    assert capsys.readouterr().err == ("tokencap: error: sample:nope.json: no bundled sample of that name; the "
                                       f"samples are the files and folders in {REPO / 'sample_data'} (sample:NAME "
                                       "names one, e.g. sample:clean_multiturn_tools.json)\n")


def test_a_missing_relative_path_is_never_read_as_a_sample_but_the_error_names_it(tmp_path: Path, monkeypatch,
                                                                                 capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["build", "sample_data/clean_multiturn_tools.json"]) == 2
    assert capsys.readouterr().err == ("tokencap: error: sample_data/clean_multiturn_tools.json: no such file or "
                                       "directory; the bundled sample of that name is "
                                       "sample:clean_multiturn_tools.json\n")
    assert main(["build", "no_such_thing.json"]) == 2
    assert capsys.readouterr().err == "tokencap: error: no_such_thing.json: no such file or directory\n"


def test_every_path_option_takes_a_sample_name(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["scan", "sample:run", "-o", "run.parquet", "--final-responses", "sample:rollout_records/run.jsonl",
                 "--workers", "1"]) == 0
    assert "173 trainable" in capsys.readouterr().err.replace(",", "")


def test_the_streamlit_settings_become_flags(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[server]\nheadless = true\nmaxUploadSize = 256\n[theme]\nbase = "light"\n')
    assert bundled.streamlit_flags(config) == ["--server.headless", "true", "--server.maxUploadSize", "256",
                                               "--theme.base", "light"]
    assert bundled.streamlit_flags(tmp_path / "none.toml") == []
