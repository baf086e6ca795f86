"""Where the app's script runs spend their time: one line per traced span, when asked for.

With ``TOKENCAP_APP_TRACE=FILE`` in the server's environment, every `span` appends a line
``NAME<TAB>SECONDS`` to FILE when it ends (the app's whole script run is the span
``script``; a page part that reruns alone, a Streamlit fragment, has a span of its own).
Without the variable a span costs one dictionary lookup. The benchmarks read the file to
say where a rerun spends its time on the server, and the browser tests to check which parts
of a page a click reran. Nothing of the capture is written: names are the app's own.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TRACE_ENV = "TOKENCAP_APP_TRACE"


@contextmanager
def span(name: str) -> Iterator[None]:
    """Time the block; append ``name`` and its seconds to the trace file, if there is one."""
    path = os.environ.get(TRACE_ENV)
    if not path:
        yield
        return
    start = time.perf_counter()
    try:
        yield
    finally:
        with open(path, "a", encoding="utf-8") as out:
            out.write(f"{name}\t{time.perf_counter() - start:.4f}\n")


def read(path: str | os.PathLike[str]) -> list[tuple[str, float]]:
    """The spans a trace file holds, in the order they ended (an absent file holds none)."""
    file = Path(path)
    if not file.exists():
        return []
    out = []
    for line in file.read_text(encoding="utf-8").splitlines():
        name, _, seconds = line.rpartition("\t")
        if name:
            out.append((name, float(seconds)))
    return out


__all__ = ["TRACE_ENV", "read", "span"]
