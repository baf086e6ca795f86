"""The app's downloads, produced by the same writers as `tokencap build`.

* ``result`` -- one rollout's build result (verdict, reasons, metrics, response): the exact
  bytes ``tokencap build FILE [--terminal-call-id ID] -o OUT`` writes for that rollout;
* ``response`` -- the Responses JSON of the delivered chain (``rebuilt_response``), written
  by the same streaming writer;
* ``mask`` -- a chain's loss mask as CSV;
* ``results_jsonl`` -- every loaded rollout's build result, one per line, as
  ``tokencap build`` writes JSONL.

Each payload is a function of the built result, so the app can hand Streamlit a callable
and nothing is serialised until the user asks for it.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from dataclasses import dataclass

from ..export import loss_mask_csv, response_bytes, results_bytes
from ..rollout import RolloutResult
from .model import RolloutView
from .text import safe_file_stem


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
                final_responses: str | None = None) -> str:
    """The `tokencap build` command that writes the same result (shown next to the downloads)."""
    parts = ["python", "-m", "tokencap", "build", source_label]
    if several and rollout_id is not None:
        parts += ["--rollout", rollout_id]
    if anchor is not None:
        parts += ["--terminal-call-id", anchor]
    if final_responses is not None:
        parts += ["--final-responses", final_responses]
    parts += ["-o", "result.json"]
    return " ".join(shlex.quote(p) for p in parts)
