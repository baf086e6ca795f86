"""Writing build results as JSON / JSONL, fast and without a Python object per token.

The running prompts of a delivered chain are prefixes of one sequence, so their JSON text
is a prefix of that sequence's JSON text. The sequence is rendered once (orjson, straight
from numpy) and each item's ``prompt_token_ids`` is written as a slice of that text: an
85 MB response costs one render of the final context plus memory copies.

Every writer here produces the same bytes for the same result, so the app's downloads are
exactly what `tokencap build` writes.
"""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import orjson

from .rollout import RolloutResult
from .tokens import TokenArray

_OPTS = orjson.OPT_SERIALIZE_NUMPY


def _default(obj: Any) -> Any:
    if isinstance(obj, TokenArray):
        return obj.view(np.ndarray)
    if isinstance(obj, np.ndarray):
        return np.ascontiguousarray(obj).view(np.ndarray)
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        return float(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def dumps(value: Any) -> bytes:
    """Compact JSON with numpy arrays written as arrays."""
    return orjson.dumps(value, default=_default, option=_OPTS)


class _PrefixText:
    """The JSON text of one token buffer, rendered once, sliced per prefix length."""

    def __init__(self, tokens: np.ndarray) -> None:
        self.text = dumps(tokens)
        raw = np.frombuffer(self.text, dtype=np.uint8)
        self.commas = np.flatnonzero(raw == ord(","))
        self.size = int(tokens.size)

    def write_prefix(self, out: BinaryIO, length: int) -> None:
        if length == 0:
            out.write(b"[]")
        elif length == self.size:
            out.write(self.text)
        else:
            out.write(memoryview(self.text)[: int(self.commas[length - 1])])
            out.write(b"]")


def _prefix_owner(arr: Any) -> tuple[int, np.ndarray] | None:
    """(key, buffer) when ``arr`` is a numpy view starting at the start of a larger buffer."""
    if not isinstance(arr, np.ndarray) or arr.base is None or not isinstance(arr.base, np.ndarray):
        return None
    base = arr.base
    if base.dtype != arr.dtype or base.ndim != 1 or \
            base.__array_interface__["data"][0] != arr.__array_interface__["data"][0]:
        return None
    return id(base), base


def write_response(out: BinaryIO, response: Mapping[str, Any]) -> None:
    """Write a Responses payload as compact JSON, streaming the running prompts."""
    output = response.get("output", [])
    # Render each shared buffer once, only as far as the longest prompt that uses it.
    needed: dict[int, tuple[np.ndarray, int]] = {}
    for item in output:
        owner = _prefix_owner(item.get("prompt_token_ids")) if isinstance(item, Mapping) else None
        if owner is not None:
            key, base = owner
            length = int(item["prompt_token_ids"].size)
            if length > needed.get(key, (base, 0))[1]:
                needed[key] = (base, length)
    texts = {key: _PrefixText(base[:length]) for key, (base, length) in needed.items()}

    head = {k: v for k, v in response.items() if k != "output"}
    head_text = dumps(head)
    out.write(head_text[:-1])
    out.write(b',"output":[' if len(head_text) > 2 else b'"output":[')
    for i, item in enumerate(output):
        if i:
            out.write(b",")
        prompt = item.get("prompt_token_ids") if isinstance(item, Mapping) else None
        owner = _prefix_owner(prompt)
        if owner is None or owner[0] not in texts:
            out.write(dumps(item))
            continue
        rest = dumps({k: v for k, v in item.items() if k != "prompt_token_ids"})
        out.write(b'{"prompt_token_ids":')
        texts[owner[0]].write_prefix(out, int(prompt.size))
        if len(rest) > 2:
            out.write(b",")
            out.write(memoryview(rest)[1:])
        else:
            out.write(b"}")
    out.write(b"]}")


def write_summary(out: BinaryIO, result: RolloutResult) -> None:
    """One build result as a JSON object: rollout_id, mask_sample, mask_reasons, metrics, rebuilt_response."""
    # The head by hand, not `result.summary()`: that would build the JSON-native response,
    # and the writer streams the array payload instead (same bytes, no Python int per token).
    head = dumps({"rollout_id": result.rollout_id, "mask_sample": result.mask_sample,
                  "mask_reasons": list(result.mask_reasons), "metrics": result.metrics})
    response = result.payload
    out.write(head[:-1])
    out.write(b',"rebuilt_response":')
    if response is None:
        out.write(b"null")
    else:
        write_response(out, response)
    out.write(b"}")


def write_results(out: BinaryIO, results: Iterable[RolloutResult], *, jsonl: bool) -> None:
    """One JSON object (``jsonl=False``, exactly one result) or one object per line."""
    results = list(results)
    if not jsonl and len(results) != 1:
        raise ValueError(f"a JSON document holds one rollout; got {len(results)} (write JSONL instead)")
    for result in results:
        write_summary(out, result)
        out.write(b"\n")


def results_bytes(results: Iterable[RolloutResult], *, jsonl: bool) -> bytes:
    buffer = io.BytesIO()
    write_results(buffer, results, jsonl=jsonl)
    return buffer.getvalue()


def response_bytes(response: Mapping[str, Any]) -> bytes:
    buffer = io.BytesIO()
    write_response(buffer, response)
    buffer.write(b"\n")
    return buffer.getvalue()


def write_atomically(path: str | os.PathLike[str], write: Any) -> None:
    """Run ``write(handle)`` into a temporary file beside ``path``, then rename it into place.

    A failure half way leaves nothing at ``path`` (and no temporary file behind).
    """
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=directory)
    try:
        with os.fdopen(fd, "wb", buffering=1 << 20) as handle:
            write(handle)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def loss_mask_csv(mask: Any) -> bytes:
    """A loss mask as CSV: position, token_id, mask, log_prob, provenance, call_id."""
    from .lossmask import GENERATED, INTERSTITIAL

    owners = mask.owner_index()
    names = np.array(("",) + mask.call_ids, dtype=object)
    labels = np.array(["prompt", "interstitial", "generated"], dtype=object)
    kind = np.where(mask.provenance == GENERATED, 2, np.where(mask.provenance == INTERSTITIAL, 1, 0))
    import pandas as pd

    frame = pd.DataFrame({
        "position": np.arange(len(mask)),
        "token_id": mask.token_ids.view(np.ndarray),
        "mask": mask.mask,
        "log_prob": mask.log_probs,
        "provenance": labels[kind],
        "call_id": names[owners + 1],
    })
    return frame.to_csv(index=False).encode()
