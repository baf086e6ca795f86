"""Finding a tokenizer (docs/contract.md#tokenizers): a tokenizer.json, a model directory, or Org/Name in the local
Hugging Face cache (a fake cache layout built in a temp dir); refs/main or the newest snapshot; the
lookup by a rollout's model, once per process; the one-line error; and --since with a tokenizer
found in the cache. Nothing downloads."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from diagnosis_cases import Case, tiny_tokenizer
from helpers_diagnosis import broken_rollout, run_cli, tokenizer_file

from tokencap import diagnose
from tokencap.diagnosis import (
    FoundTokenizer,
    TokenizerError,
    find_tokenizer,
    load_tokenizer,
    tokenizer_for_model,
)
from tokencap.diagnosis import tokenizer_lookup as lookup
from tokencap.run import read_scan, scan, scan_table

MODEL = "Acme/Tiny-1B"


@pytest.fixture(autouse=True)
def fresh_lookups(monkeypatch):
    """Each test starts as a new process would: no model looked up, nothing said yet."""
    lookup._reset()
    yield
    lookup._reset()


def cache_model(cache: Path, model: str, revs: dict[str, Path | None], main: str | None = None,
                mtimes: dict[str, int] | None = None) -> Path:
    """``models--Org--Name/snapshots/REV/tokenizer.json`` for each rev (None: a snapshot without one),
    ``refs/main`` naming ``main``; snapshot directories stamped with ``mtimes`` (seconds)."""
    root = cache / ("models--" + model.replace("/", "--"))
    for rev, source in revs.items():
        snap = root / "snapshots" / rev
        snap.mkdir(parents=True)
        if source is not None:
            (snap / "tokenizer.json").write_bytes(source.read_bytes())
        (snap / "config.json").write_text("{}")
    for rev, when in (mtimes or {}).items():
        os.utime(root / "snapshots" / rev, (when, when))
    if main is not None:
        (root / "refs").mkdir(parents=True, exist_ok=True)
        (root / "refs" / "main").write_text(main + "\n")
    return root


@pytest.fixture
def toks(tmp_path) -> dict[str, Path]:
    """Two different tokenizer.json files."""
    a = tmp_path / "tokA" / "tokenizer.json"
    a.parent.mkdir()
    tiny_tokenizer(a)
    b = tokenizer_file(tmp_path / "tokB.json")
    return {"a": a, "b": b}


def test_a_tokenizer_json_file(toks):
    found = find_tokenizer(str(toks["a"]))
    assert isinstance(found, FoundTokenizer) and found.label == f"tokenizer.json at {toks['a']}"
    assert found.path == os.path.abspath(toks["a"]) and len(found.sha256) == 64
    assert found.decode(found.tokenizer.encode("hello world").ids) == "hello world"


def test_a_model_directory(toks):
    found = find_tokenizer(toks["a"].parent)
    assert found.label == f"model directory {toks['a'].parent}" and found.path == os.path.abspath(toks["a"])


@pytest.mark.parametrize("where", ["HF_HUB_CACHE", "HF_HOME", "HOME"])
def test_a_model_name_in_the_local_cache(tmp_path, toks, monkeypatch, where):
    for name in ("HF_HUB_CACHE", "HF_HOME"):
        monkeypatch.delenv(name, raising=False)
    base = tmp_path / "somewhere"
    cache = {"HF_HUB_CACHE": base, "HF_HOME": base / "hub", "HOME": base / ".cache" / "huggingface" / "hub"}[where]
    monkeypatch.setenv(where, str(base))
    root = cache_model(cache, MODEL, {"abc123": toks["a"]}, main="abc123")
    found = find_tokenizer(MODEL)
    snap = root / "snapshots" / "abc123"
    assert found.label == f"{MODEL} from the local Hugging Face cache ({snap})"
    assert found.path == os.path.abspath(snap / "tokenizer.json")


def test_refs_main_names_the_snapshot_else_the_newest_that_holds_one(tmp_path, toks, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    root = cache_model(tmp_path / "hub", MODEL, {"old": toks["a"], "new": toks["b"], "newest": None},
                       main="old", mtimes={"old": 1_000, "new": 2_000, "newest": 3_000})
    assert "snapshots/old" in find_tokenizer(MODEL).path  # refs/main wins over time
    (root / "refs" / "main").write_text("gone\n")  # names a snapshot that is not there
    assert "snapshots/new" in find_tokenizer(MODEL).path  # the newest snapshot that holds one
    (root / "refs" / "main").unlink()
    assert "snapshots/new" in find_tokenizer(MODEL).path
    os.utime(root / "snapshots" / "old", (4_000, 4_000))
    assert "snapshots/old" in find_tokenizer(MODEL).path


def test_anything_else_is_one_line_naming_the_three_forms(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    (tmp_path / "empty").mkdir()
    for spec in ("nonsense", "Nobody/Nothing", str(tmp_path / "missing.json"), str(tmp_path / "empty"), "../x/y"):
        with pytest.raises(TokenizerError) as err:
            find_tokenizer(spec)
        message = str(err.value)
        assert "\n" not in message and message.startswith(f"{spec}: ")
        assert "a tokenizer.json file, a directory holding one" in message and "Org/Name" in message
    with pytest.raises(TokenizerError, match="nothing is downloaded"):
        find_tokenizer("Nobody/Nothing")


def test_nothing_is_downloaded_and_huggingface_hub_is_never_imported(tmp_path, toks, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    before = "huggingface_hub" in sys.modules
    cache_model(tmp_path / "hub", MODEL, {"r": toks["a"]})
    find_tokenizer(MODEL)
    with pytest.raises(TokenizerError):
        find_tokenizer("Other/Model")
    assert ("huggingface_hub" in sys.modules) == before
    assert sorted(p.name for p in (tmp_path / "hub").iterdir()) == ["models--Acme--Tiny-1B"]  # nothing written


def test_load_tokenizer_and_diagnose_take_the_three_forms(tmp_path, toks, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    cache_model(tmp_path / "hub", MODEL, {"r": toks["a"]})
    case = Case()
    case.brk(case.opening + case.x + case.g2)
    result = case.result()
    for spec in (str(toks["a"]), str(toks["a"].parent), MODEL):
        assert load_tokenizer(spec).sha256 == find_tokenizer(toks["a"]).sha256
        (b,) = diagnose(result, tokenizer=spec)
        assert b.cause == "generation_dropped"


# --------------------------------------------------------------------------- the lookup by a rollout's model


def _model_case(tokenizer, model: str) -> Case:
    """A reasoning-dropping break whose every call names ``model``; ids the tiny tokenizer decodes."""
    from synth_snapshots import Capture

    enc = lambda text: tokenizer.encode(text).ids
    opening = enc("<|im_start|>the model reads the question<|im_end|>")
    think, answer = enc("<think>the model thinks about the answer</think>"), enc("hello world, this is the answer")
    case = Case.__new__(Case)
    case.c = Capture("by-model", seed=1)
    case.c.call("a", prompt=opening, generation=think + answer, model=model)
    case.c.call("b", prompt=opening + answer + enc("<|im_end|>the tool returned"), generation=[5],
                resolution="unresolved", model=model)
    return case


def test_a_rollout_decodes_with_its_model_s_tokenizer_from_the_cache_looked_up_once(tmp_path, toks, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    root = cache_model(tmp_path / "hub", MODEL, {"r": toks["a"]})
    reads = []
    real = lookup.read_tokenizer_file
    monkeypatch.setattr(lookup, "read_tokenizer_file", lambda *a: reads.append(a) or real(*a))
    tok = tiny_tokenizer()
    case = _model_case(tok, MODEL)
    (b,) = diagnose(case.result())
    assert b.reasoning is True and b.parent_text.lstrip().startswith("<think>")
    assert f"text decoded with {MODEL} from the local Hugging Face cache ({root / 'snapshots' / 'r'})" in b.notes
    diagnose(case.result())
    assert tokenizer_for_model(MODEL) is tokenizer_for_model(MODEL) and len(reads) == 1  # once per model and process


def test_a_model_not_in_the_cache_decodes_nothing_and_says_so_once(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    case = _model_case(tiny_tokenizer(), "Acme/Missing")
    (b,) = diagnose(case.result())
    assert b.parent_text is None and b.reasoning is False
    said = (f"no tokenizer for model Acme/Missing in the local Hugging Face cache ({tmp_path / 'hub'}); nothing was "
            "decoded (give --tokenizer: a tokenizer.json, a model directory or Org/Name)")
    assert [n for n in b.notes if "no tokenizer for model Acme/Missing" in n] == [said]
    (again,) = diagnose(case.result())
    assert not any("Acme/Missing" in n for n in again.notes)
    (served,) = diagnose(_model_case(tiny_tokenizer(), "policy").result())  # a served name, not a hub name
    assert served.notes == ()


def test_a_given_tokenizer_wins_over_the_model_s(tmp_path, toks, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    cache_model(tmp_path / "hub", MODEL, {"r": toks["b"]})  # the word-level one: cannot decode these ids
    case = _model_case(tiny_tokenizer(), MODEL)
    (b,) = diagnose(case.result(), tokenizer=str(toks["a"]))
    assert b.parent_text is not None and f"text decoded with tokenizer.json at {toks['a']}" in b.notes


# --------------------------------------------------------------------------- the command line and --since


def test_inspect_names_the_tokenizer_and_where_it_came_from(tmp_path, toks, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    root = cache_model(tmp_path / "hub", MODEL, {"r": toks["a"]})
    case = _model_case(tiny_tokenizer(), MODEL)
    src = tmp_path / "snap.json"
    src.write_bytes(case.c.json_bytes())
    for argv in ((), ("--tokenizer", MODEL)):
        lookup._reset()
        code, out, _ = run_cli(capsys, "inspect", str(src), *argv)
        assert code == 0 and '"<think>' in out
        assert f"text decoded with {MODEL} from the local Hugging Face cache ({root / 'snapshots' / 'r'})" in out
    code, out, err = run_cli(capsys, "inspect", str(src), "--tokenizer", "Nobody/Nothing")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Org/Name" in err


def _model_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    for i in range(3):
        rid = f"r{i:02d}"
        snap = broken_rollout(rid, replaced=i == 0)
        for entry in snap["entries"]:
            entry["model"] = MODEL
        (run / f"{rid}.json").write_text(json.dumps(snap))
    return run


def test_scan_decodes_with_the_model_s_tokenizer_and_since_compares_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    run = _model_run(tmp_path)
    plain = scan_table(run, workers=1)
    assert plain.column("break_causes").to_pylist()[0] == ["tokens_replaced"]  # no tokenizer in the cache yet
    first = tmp_path / "first.parquet"
    scan(run, first, workers=1)
    lookup._reset()
    root = cache_model(tmp_path / "hub", MODEL, {"r1": tokenizer_file(tmp_path / "word.json")}, main="r1")
    again = tmp_path / "again.parquet"
    summary = scan(run, again, workers=1, since=str(first))  # a tokenizer appeared in the cache: built again
    assert summary.reused == 0
    assert any("another tokenizer was found in the local Hugging Face cache" in n for n in summary.notes), summary.notes
    assert read_scan(again).column("break_causes").to_pylist()[0] == ["retokenized"]
    assert scan(run, tmp_path / "same.parquet", workers=1, since=str(again)).reused == 3
    lookup._reset()
    changed = root / "snapshots" / "r2"
    changed.mkdir()
    (changed / "tokenizer.json").write_bytes((root / "snapshots" / "r1" / "tokenizer.json").read_bytes() + b"\n")
    (root / "refs" / "main").write_text("r2")
    summary = scan(run, tmp_path / "third.parquet", workers=1, since=str(again))
    assert summary.reused == 0  # another tokenizer.json for the model: nothing reused


def test_a_file_in_a_cache_layout_is_named_by_its_model(tmp_path, toks):
    """What `--tokenizer Org/Name` hands a worker or the app is the cache's file: it keeps its origin."""
    root = cache_model(tmp_path / "elsewhere", MODEL, {"abc": toks["a"]})
    file = root / "snapshots" / "abc" / "tokenizer.json"
    assert find_tokenizer(file).label == f"{MODEL} from the local Hugging Face cache ({file.parent})"
    assert lookup.file_label(toks["a"]) == f"tokenizer.json at {toks['a']}"


def test_a_snapshot_file_linked_into_the_blobs_keeps_its_model_s_name(tmp_path, toks, monkeypatch):
    """The cache's own layout: snapshots/REV/tokenizer.json is a link into blobs/."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    root = tmp_path / "hub" / "models--Acme--Tiny-1B"
    (root / "blobs").mkdir(parents=True)
    blob = root / "blobs" / "0123abcd"
    blob.write_bytes(toks["a"].read_bytes())
    snap = root / "snapshots" / "rev1"
    snap.mkdir(parents=True)
    (snap / "tokenizer.json").symlink_to(Path("..") / ".." / "blobs" / "0123abcd")
    found = find_tokenizer(MODEL)
    assert found.path == os.path.abspath(snap / "tokenizer.json")
    assert lookup.file_label(found.path) == f"{MODEL} from the local Hugging Face cache ({snap})"
    assert find_tokenizer(found.path).sha256 == find_tokenizer(toks["a"]).sha256
