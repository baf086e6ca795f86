"""Package names imported on first use (PEP 562), so a command pays only for what it runs.

`tokencap build` needs the records, the loaders, the builder and the writer; importing the
whole public surface of `tokencap`, `tokencap.diagnosis` and `tokencap.run` eagerly would
add the diagnosis, the process pool and more to every start (tens of milliseconds, a
tenth of a big build). Each of those packages maps its public names to the submodule that
defines them, and the first use of a name imports that submodule and binds all its names.

A lazy name must not also be a submodule's name: once another module imported that
submodule, the package attribute would be the module, not the name (so `tokencap.run`
binds `discover` over its module, and the module defining `scan` is named `scanning`).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def lazy_names(package: str, names: Mapping[str, Iterable[str]]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``names`` maps each submodule (relative) to
    the public names it defines, and the first use of one of them imports that submodule."""
    home_of = {name: home for home, held in names.items() for name in held}

    def __getattr__(name: str) -> Any:
        home = home_of.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(f".{home}", package)
        namespace = sys.modules[package].__dict__
        # Importing the submodule binds the package attribute of its own name to it; the
        # public names bound here (a function named like its module among them) win.
        for other in names[home]:
            namespace[other] = getattr(module, other)
        return namespace[name]

    return __getattr__
