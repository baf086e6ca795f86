"""The public names of `tokencap.run` (and of the other lazy packages) stay what docs/cli.md and
docs/python-api.md document, whichever submodule was imported first: a submodule that shared a
name with a function (`tokencap.run.scan` was both) made the name a module once imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _in_a_fresh_interpreter(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    return json.loads(out.stdout.splitlines()[-1])


def test_run_scan_is_the_documented_function_after_its_module_was_imported_first() -> None:
    seen = _in_a_fresh_interpreter(
        "import importlib, inspect, json, pkgutil\n"
        "import tokencap.run\n"
        # every submodule first, as a script importing `scan_table` from its home module would
        "for m in pkgutil.iter_modules(tokencap.run.__path__): importlib.import_module('tokencap.run.' + m.name)\n"
        "scan = tokencap.run.scan\n"
        "print(json.dumps({'module': inspect.ismodule(scan), 'callable': callable(scan),\n"
        "                  'home': getattr(scan, '__module__', None),\n"
        "                  'parameters': list(inspect.signature(scan).parameters) if callable(scan) else []}))")
    assert seen["module"] is False and seen["callable"] is True, seen
    assert seen["home"] == "tokencap.run.scanning"
    assert seen["parameters"][:2] == ["source", "out"] and "workers" in seen["parameters"]  # scan(RUN, OUT, workers=N)


def test_no_name_imported_on_first_use_is_also_a_submodule_name() -> None:
    # Such a name is the module as soon as anything imports that submodule (see tokencap.lazy).
    import pkgutil

    import tokencap
    import tokencap.diagnosis
    import tokencap.run

    shared = []
    for package, homes in ((tokencap, tokencap._HOMES), (tokencap.diagnosis, tokencap.diagnosis._HOMES),
                           (tokencap.run, tokencap.run._LAZY)):
        submodules = {m.name for m in pkgutil.iter_modules(package.__path__)}
        shared += [f"{package.__name__}.{name}" for names in homes.values() for name in names if name in submodules]
    assert shared == []
