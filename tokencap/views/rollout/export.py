"""The app's downloads, produced by the same writers as `tokencap build`.

* ``result`` -- one rollout's build result (verdict, reasons, metrics, response): the exact
  bytes ``tokencap build FILE [--terminal-call-id ID] -o OUT`` writes for that rollout;
* ``response`` -- the Responses JSON of the delivered chain (``rebuilt_response``), written
  by the same streaming writer;
* ``mask`` -- a chain's loss mask as CSV;
* ``results_jsonl`` -- every loaded rollout's build result, one per line, as
  ``tokencap build`` writes JSONL.

Exports of any size. Every payload can be estimated before it is written (`estimate`,
from the token counts, within a few per cent), and the page decides by size (`route`):

* ``now`` -- small files are rendered with the page and downloaded in one click;
* ``prepare`` -- bigger ones are rendered when asked, with a progress bar (`render`
  writes through a `ProgressWriter`), then the browser download starts by itself;
* ``disk`` -- above `download_limit` a browser download would hold the bytes in the
  server and the browser at once, so the file is written to disk instead (`write_file`,
  atomically, with progress) and the page shows its path and the `tokencap build`
  command that writes the same bytes.

A rendered payload is one ``bytes`` object (``BytesIO.getvalue`` hands over its buffer
without copying), and the page gives that very object to Streamlit: one copy.
"""

from __future__ import annotations

import io
import os
import shlex
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ...export import loss_mask_csv, response_bytes, results_bytes, write_atomically, write_response, write_results
from ...rollout import RolloutResult
from ..formatting import safe_file_stem
from ..model import RolloutView

KINDS = ("response", "result", "mask")

NOW_BYTES = 8_000_000
"""Files up to this size are rendered with the page: one click downloads them."""

DOWNLOAD_LIMIT = 300_000_000
"""Above this size a file is written to disk instead of downloaded through the browser.
``TOKENCAP_DOWNLOAD_LIMIT`` (bytes) overrides it."""


PASS_THROUGH_MIME = "application/zip"
"""The content type prepared downloads are served with. They are attachments with their own
``.json``/``.jsonl``/``.csv`` names and exactly these bytes; the type only keeps Streamlit's
gzip middleware (which skips already-compressed types) from compressing 85 MB in one piece
before the download can start."""


def download_limit() -> int:
    value = os.environ.get("TOKENCAP_DOWNLOAD_LIMIT", "")
    return int(value) if value.isdigit() else DOWNLOAD_LIMIT


def route(size: int, limit: int | None = None, now: int | None = None) -> str:
    """``now``, ``prepare`` or ``disk`` for a file of about ``size`` bytes (see the module docstring)."""
    limit = download_limit() if limit is None else limit
    now = NOW_BYTES if now is None else now
    if size > limit:
        return "disk"
    return "now" if size <= min(now, limit) else "prepare"


class ProgressWriter:
    """A binary file wrapper that reports how much was written, about every ``step`` bytes."""

    def __init__(self, out: BinaryIO, total: int, report: Callable[[int, int], None], step: int | None = None) -> None:
        self.out, self.total, self.report = out, max(total, 1), report
        self.step = step if step is not None else max(self.total // 50, 1 << 16)  # about 50 updates
        self.written = 0
        self._next = self.step

    def write(self, data: Any) -> int:
        n = self.out.write(data)
        self.written += len(data) if n is None else n
        if self.written >= self._next:
            self._next = self.written + self.step
            self.report(self.written, self.total)
        return n if n is not None else len(data)


# --------------------------------------------------------------------------- sizes


def _json_len_of_ids(ids: np.ndarray) -> int:
    """Length of ``[a,b,...]`` for non-negative integer ids, from their digit counts."""
    n = int(ids.size)
    if n == 0:
        return 2
    return int(np.floor(np.log10(np.maximum(np.asarray(ids, dtype=np.float64), 1))).sum()) + n + (n - 1) + 2


class _IdLengths:
    """JSON lengths of id arrays, where a prefix of a buffer seen before costs O(1).

    Every running prompt of a chain is a prefix of one shared buffer (see DESIGN), so
    sizing them one by one is quadratic in the chain's length; the running digit counts of
    the buffer, computed once, give each prefix's length at once.
    """

    def __init__(self) -> None:
        self._running: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def __call__(self, ids: np.ndarray) -> int:
        n = int(ids.size)
        base = ids.base
        if n == 0 or not isinstance(base, np.ndarray) or base.ndim != 1 or ids.ndim != 1 or n > base.size \
                or ids.strides != base.strides or ids.__array_interface__["data"][0] != \
                base.__array_interface__["data"][0]:
            return _json_len_of_ids(ids)
        held = self._running.get(id(base))
        if held is None or held[0] is not base:
            digits = np.floor(np.log10(np.maximum(np.asarray(base, dtype=np.float64), 1)))
            held = self._running[id(base)] = (base, np.cumsum(digits, dtype=np.int64))
        return int(held[1][n - 1]) + n + (n - 1) + 2


def _response_estimate(response: Mapping[str, Any], report: Callable[[int, int], None] | None = None) -> int:
    total = 200
    id_length = _IdLengths()
    items = response.get("output", [])
    for i, item in enumerate(items):
        total += 120
        for key, value in item.items():
            if isinstance(value, np.ndarray):
                if value.dtype.kind == "f":
                    total += int(value.size) * 21 + 2  # orjson floats: up to 20 characters and a comma
                else:
                    total += id_length(value)
            elif isinstance(value, str):
                total += len(value) + len(key) + 6
            else:
                total += 80
        if report is not None and i % 64 == 63:
            report(i + 1, len(items))
    return total


SIZES = "export_sizes"
"""The `RolloutView.derived` name under which a view's export sizes are kept (sized once per view:
one rollout, one anchor)."""


def sizes(view: RolloutView, report: Callable[[int, int], None] | None = None) -> dict[str, int]:
    """About how many bytes each export (response, result, mask) of ``view`` takes, without writing
    it; computed once per view, reporting (items sized, items) while it runs the first time."""
    def measure(v: RolloutView) -> dict[str, int]:
        response = v.result.payload  # token fields as arrays: sized from their digits, never converted
        body = _response_estimate(response, report) if response is not None else 0
        mask = v.mask("main")
        return {"response": body, "result": 2_000 + body, "mask": 0 if mask is None else len(mask) * 48}

    return view.derived(SIZES, measure)


def sized(view: RolloutView) -> bool:
    """Whether ``view``'s export sizes are known already (no progress to show)."""
    return view.has_derived(SIZES)


def estimate(view: RolloutView, kind: str) -> int:
    """About how many bytes ``kind`` (response, result, mask) would take, without writing it."""
    if kind not in KINDS:
        raise ValueError(f"unknown export {kind!r}")
    return sizes(view)[kind]


def estimate_all(views: Iterable[RolloutView]) -> int:
    return sum(estimate(v, "result") for v in views)


# --------------------------------------------------------------------------- writing


def write_kind(out: BinaryIO, view: RolloutView, kind: str) -> None:
    """The bytes of ``kind`` into ``out``: exactly what the download (and `tokencap build`) gives."""
    if kind == "response":
        # The array payload, not `rebuilt_response`: the same bytes, without a Python int per token.
        if view.result.payload is None:
            raise ValueError("no delivered chain with generated tokens: there is no response to write")
        write_response(out, view.result.payload)
        out.write(b"\n")
    elif kind == "result":
        write_results(out, [view.result], jsonl=False)
    elif kind == "mask":
        data = mask_csv(view)
        if data is None:
            raise ValueError("no delivered chain: there is no loss mask to write")
        out.write(data)
    else:
        raise ValueError(f"unknown export {kind!r}")


def render(view: RolloutView, kind: str, report: Callable[[int, int], None] | None = None) -> bytes:
    """``kind`` as one bytes object, reporting progress against the estimate while it is written."""
    buffer = io.BytesIO()
    out: Any = ProgressWriter(buffer, estimate(view, kind), report) if report is not None else buffer
    write_kind(out, view, kind)
    return buffer.getvalue()


def render_all(views: list[RolloutView], report: Callable[[int, int], None] | None = None) -> bytes:
    buffer = io.BytesIO()
    out: Any = ProgressWriter(buffer, estimate_all(views), report) if report is not None else buffer
    write_results(out, [v.result for v in views], jsonl=True)
    return buffer.getvalue()


def write_results_to(out: BinaryIO, results: list[RolloutResult]) -> None:
    """Every build result, one per line (as `tokencap build` writes JSONL)."""
    write_results(out, results, jsonl=True)


def write_file(path: str | os.PathLike[str], write: Callable[[BinaryIO], None], total: int,
               report: Callable[[int, int], None] | None = None) -> int:
    """Write a file atomically (nothing is left at ``path`` on failure), with progress; the bytes written."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    counted: dict[str, int] = {}

    def run(handle: BinaryIO) -> None:
        writer = ProgressWriter(handle, total, report or (lambda done, of: None))
        write(writer)  # type: ignore[arg-type]
        counted["n"] = writer.written

    write_atomically(target, run)
    return counted["n"]


def default_export_dir() -> str:
    """Where big exports go unless the reader says otherwise: ``tokencap-exports`` in the app's working directory."""
    return str(Path.cwd() / "tokencap-exports")


@dataclass(frozen=True)
class Download:
    label: str
    file_name: str
    mime: str
    available: bool = True
    why_not: str = ""
    what: str = ""


def result_json(result: RolloutResult) -> bytes:
    return results_bytes([result], jsonl=False)


def response_json(result: RolloutResult) -> bytes | None:
    return response_bytes(result.payload) if result.payload is not None else None


def mask_csv(view: RolloutView, chain_id: str = "main") -> bytes | None:
    mask = view.mask(chain_id)
    return loss_mask_csv(mask) if mask is not None else None


def results_jsonl(results: Iterable[RolloutResult]) -> bytes:
    return results_bytes(list(results), jsonl=True)


def _suffix(anchor: str | None) -> str:
    return f".at-{safe_file_stem(anchor, 'anchor')}" if anchor else ""


def downloads(view: RolloutView) -> dict[str, Download]:
    """What can be downloaded for one rollout view, with file names and why something cannot."""
    stem = safe_file_stem(view.rollout_id) + _suffix(view.anchor)
    has_response = view.result.payload is not None
    has_main = view.chain("main") is not None
    return {
        "response": Download("Responses JSON", f"{stem}.response.json", "application/json",
                             has_response, "" if has_response else "no delivered chain with generated tokens",
                             "the delivered chain as a Responses payload (rebuilt_response)"),
        "result": Download("Build result JSON", f"{stem}.result.json", "application/json",
                           what="verdict, mask reasons, metrics and response, as tokencap build writes it"),
        "mask": Download("Loss mask CSV", f"{stem}.loss_mask.csv", "text/csv", has_main,
                         "" if has_main else "no delivered chain",
                         "main chain: position, token id, mask, log-prob, provenance, call"),
    }


def cli_command(source_label: str, rollout_id: str | None, anchor: str | None, several: bool,
                final_responses: str | None = None, out: str = "result.json") -> str:
    """The `tokencap build` command that writes the same result (shown next to the downloads)."""
    parts = ["python", "-m", "tokencap", "build", source_label]
    if several and rollout_id is not None:
        parts += ["--rollout", rollout_id]
    if anchor is not None:
        parts += ["--terminal-call-id", anchor]
    if final_responses is not None:
        parts += ["--final-responses", final_responses]
    parts += ["-o", out]
    return " ".join(shlex.quote(p) for p in parts)
