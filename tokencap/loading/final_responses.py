"""The harness's final responses, one per rollout, for terminal attribution (docs/contract.md#attribution).

Three shapes are read:

* a JSON object ``{"rollout_id": ..., "response": {...}}`` -- a whole rollout record with
  reward and parameters is fine, unknown fields are ignored;
* JSONL, one such object a line;
* a bare Responses object (``"object": "response"``), alone or as a line.

A response without ``rollout_id`` applies only when the source holds a single rollout.

Three facts of a rollout record are kept too, when present (docs/contract.md#scan-rollout-records): ``reward`` (a
finite number), the task index (``_ng_task_index``, else ``task_index``) and the rollout
index (``_ng_rollout_index``, else ``rollout_index``). A ``task_id`` is a name, not an
index: it becomes a note on the rollout, never its task index.

The harness's evidence fields (docs/contract.md#evidence, #delivered: ``ng_agent_observations``, ``ng_trajectory``,
``ng_model_call_capture``, ``mask_sample``, ``_ng_token_capture``) are kept as their raw JSON
text, unchecked, and parsed only when `FinalResponses.evidence_for` is asked: they explain a
diagnosis and never decide a build, so a malformed one is a note there, never a `LoadError`
here, and a file that carries them costs no more to read.

Only what attribution reads is kept per response: each output item's type, role, text,
tool-call name and arguments and reasoning summary, and the token ids of the one item
attribution matches by tokens (the last one that carries generated tokens). A rollout
record can hold a running prompt per item -- 85 MB for a long agent run -- and those other
prompts are never parsed. Everything kept is checked here, so a malformed file is one
`LoadError` naming the file, line and field, and attribution never meets a bad value.
"""

from __future__ import annotations

import math
import mmap
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, cast

import msgspec
import numpy as np
import simdjson

from ..digest import checked_token_ids
from ..record_errors import shown, type_name
from .lines import NON_BLANK, is_blank, iter_lines
from .problems import LoadError, binary_problem, non_finite_problem, not_json

_decode_object = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode
_decode_items = msgspec.json.Decoder(list[dict[str, msgspec.Raw]]).decode
_decode_any = msgspec.json.Decoder().decode

_KEPT_ITEM_FIELDS = ("type", "role", "content", "name", "arguments", "summary")


class _TokenParser:
    """Token arrays straight from JSON text to numpy (simdjson's typed buffer); None sends
    the caller to the exact slow path, which names the offending element."""

    def __init__(self) -> None:
        self._parser = simdjson.Parser()

    def parse(self, raw: bytes) -> np.ndarray | None:
        # A flat array only: simdjson would flatten nested arrays into one buffer.
        if not (raw[:1] == b"[" and raw[-1:] == b"]") or raw.count(b"[") != 1:
            return None
        try:
            # The text is one flat array (checked above), so the document is an Array.
            buffer = cast(simdjson.Array, self._parser.parse(raw)).as_buffer(of_type="u")
        except (TypeError, ValueError, RuntimeError):
            return None
        return np.frombuffer(buffer, dtype=np.uint64).copy()  # the parser reuses its memory


class _Bad(Exception):
    """A problem with one field of one record; the loader adds file and line."""

    def __init__(self, field_path: str, problem: str) -> None:
        super().__init__(problem)
        self.field_path = field_path
        self.problem = problem


class RecordFacts(NamedTuple):
    """What a rollout record says about its rollout besides the response (docs/contract.md#scan-rollout-records)."""

    reward: float | None = None
    task_index: int | None = None
    rollout_index: int | None = None
    note: str | None = None
    """A note for the rollout's ``source_notes`` (a ``task_id`` that is a name, not an index)."""


NO_FACTS = RecordFacts()

EVIDENCE_RECORD_FIELDS = ("ng_agent_observations", "ng_trajectory", "ng_model_call_capture", "mask_sample",
                          "_ng_token_capture")
"""The rollout record's top-level fields handed to the diagnosis by `FinalResponses.evidence_for`."""
EVIDENCE_NOTES_KEY = "_tokencap_notes"
"""Key of the list of notes `evidence_for` adds for a field whose JSON it could not read."""

_INDEX_FIELDS = (("task_index", ("_ng_task_index", "task_index")),
                 ("rollout_index", ("_ng_rollout_index", "rollout_index")))


@dataclass
class FinalResponses:
    """Final responses by rollout id, plus at most one that names no rollout.

    Plain data (dicts, lists, str, numpy arrays), so it pickles to worker processes.
    """

    name: str
    by_rollout: dict[str, dict[str, Any]] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)
    """Rollout id -> the line its response came from."""
    unnamed: dict[str, Any] | None = None
    """The response without a ``rollout_id``, if any."""
    unnamed_line: int | None = None
    facts: dict[str, RecordFacts] = field(default_factory=dict)
    """Rollout id -> reward and indices of its record (only records that carry any)."""
    unnamed_facts: RecordFacts = NO_FACTS
    evidence: dict[str, dict[str, bytes]] = field(default_factory=dict)
    """Rollout id -> the raw JSON of its record's evidence fields (records that carry any)."""
    unnamed_evidence: dict[str, bytes] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.by_rollout) + (self.unnamed is not None)

    @property
    def rollout_ids(self) -> list[str]:
        return sorted(self.by_rollout)

    def for_rollout(self, rollout_id: str, *, single_rollout: bool) -> dict[str, Any] | None:
        """The final response for ``rollout_id``; the unnamed one only when the source holds
        a single rollout (with several, nothing says which rollout it finished)."""
        response = self.by_rollout.get(rollout_id)
        if response is None and single_rollout:
            response = self.unnamed
        return response

    def facts_for(self, rollout_id: str, *, single_rollout: bool) -> RecordFacts:
        """Reward and indices for ``rollout_id``, by the same rule as `for_rollout`."""
        if rollout_id in self.by_rollout:
            return self.facts.get(rollout_id, NO_FACTS)
        return self.unnamed_facts if single_rollout and self.unnamed is not None else NO_FACTS

    def evidence_for(self, rollout_id: str, *, single_rollout: bool) -> dict[str, Any] | None:
        """The evidence fields of ``rollout_id``'s record as parsed JSON (only those present),
        by the same rule as `for_rollout`; None when no record applies.

        For `tokencap.diagnose`'s ``evidence``. A field whose JSON cannot be read (nested too
        deeply) is left out and named in a note under `EVIDENCE_NOTES_KEY`; nothing here
        raises, and nothing is checked beyond JSON: the diagnosis checks the shapes."""
        if rollout_id in self.by_rollout:
            raw, line = self.evidence.get(rollout_id, {}), self.lines.get(rollout_id)
        elif single_rollout and self.unnamed is not None:
            raw, line = self.unnamed_evidence, self.unnamed_line
        else:
            return None
        out: dict[str, Any] = {}
        notes: list[str] = []
        for name, text in raw.items():
            try:
                out[name] = _decode_any(text)
            except (msgspec.MsgspecError, RecursionError) as exc:
                notes.append(f"{self.name}, line {line}: field {name!r} cannot be read "
                             f"({' '.join(str(exc).split())[:120]}); left out")
        if notes:
            out[EVIDENCE_NOTES_KEY] = notes
        return out

    def unmatched(self, rollout_ids: Iterable[str]) -> list[str]:
        """Rollout ids this file names that are not among ``rollout_ids`` (sorted)."""
        present = set(rollout_ids)
        return sorted(r for r in self.by_rollout if r not in present)

    def notes(self, rollout_ids: Iterable[str]) -> list[str]:
        """Plain-words notes about responses that apply to no rollout of a source (not errors)."""
        ids = list(rollout_ids)
        out = []
        missing = self.unmatched(ids)
        if missing:
            shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
            names = "s name rollouts" if len(missing) > 1 else " names a rollout"
            out.append(f"{self.name}: {len(missing)} final response{names} not in the source: {shown}")
        if self.unnamed is not None and len(set(ids)) != 1:
            out.append(f"{self.name}, line {self.unnamed_line}: a final response without 'rollout_id' applies only "
                       f"to a source holding a single rollout; this one holds {len(set(ids))}, so it is not used")
        return out


def load_final_responses(source: str | os.PathLike[str] | bytes | bytearray | memoryview, *,
                         name: str | None = None) -> FinalResponses:
    """Read a final-responses file (or its bytes). Raises `LoadError` naming file, line and field."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        label = name or "final responses"
        return _parse(bytes(source), label)
    path = Path(source)
    label = name or str(path)
    if path.is_dir():
        raise LoadError(f"{label}: is a directory; expected a final-responses file (JSON or JSONL)")
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            data: bytes | mmap.mmap = handle.read() if size < (8 << 20) else \
                mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except FileNotFoundError:
        raise LoadError(f"{label}: no such file or directory") from None
    except OSError as exc:
        raise LoadError(f"{label}: cannot be read ({exc.strerror or exc})") from None
    return _parse(data, label)


def _parse(data: bytes | mmap.mmap, label: str) -> FinalResponses:
    if bytes(data[:4]) == b"PAR1":
        raise LoadError(f"{label}: a parquet file (a scan table, as `tokencap scan` writes it?), not rollout "
                        "records; --final-responses takes the harness's rollout records as JSONL (one JSON object "
                        "a line, with rollout_id and response)")
    problem = binary_problem(data, "final responses (a JSON object with 'response', JSON lines of them, or a "
                                   "bare Responses object)")
    if problem is not None:  # said from the first bytes, not after decoding gigabytes
        raise LoadError(f"{label}: {problem}")
    if is_blank(data):
        raise LoadError(f"{label}: the file is empty; expected final responses (a JSON object with 'response', "
                        "JSON lines of them, or a bare Responses object)")
    out = FinalResponses(name=label)
    parser = _TokenParser()
    try:
        try:
            whole = _decode_object(data)
        except msgspec.MsgspecError as exc:
            problem = non_finite_problem(exc, data) if isinstance(exc, msgspec.DecodeError) else None
            if problem is not None:  # not a reason to read it line by line
                raise LoadError(f"{label}: {problem}") from None
            whole = None  # several values, or not one object: read it line by line
        if whole is not None:
            _add(out, whole, _first_line(data), label, parser)
            return out
        for line, chunk in iter_lines(data):
            _add(out, decode_record(chunk, f"{label}, line {line}"), line, label, parser)
    except RecursionError:
        raise LoadError(f"{label}: JSON nested too deeply to read (a hostile or corrupt file?)") from None
    return out


def decode_record(chunk: Any, where: str) -> dict[str, msgspec.Raw]:
    """One line's record as its fields' raw texts; a `LoadError` at ``where`` when it is not one object."""
    try:
        return _decode_object(chunk)
    except msgspec.ValidationError:
        raise LoadError(f"{where}: expected one JSON object per line") from None
    except msgspec.DecodeError as exc:
        raise LoadError(f"{where}: {not_json(exc, chunk)}") from None


def _first_line(data: bytes | mmap.mmap) -> int:
    view = memoryview(data)
    for index in range(min(len(view), 1 << 16)):
        if view[index] not in b" \t\r\n":
            return bytes(view[:index]).count(b"\n") + 1
    return 1


def _add(out: FinalResponses, record: dict[str, msgspec.Raw], line: int, label: str, parser: _TokenParser) -> None:
    where = f"{label}, line {line}"
    try:
        rollout_id, response = _record(record, parser)
        facts = _facts(record, where)
    except _Bad as bad:
        raise LoadError(f"{where}: field {bad.field_path!r}: {bad.problem}") from None
    if rollout_id is None:
        if out.unnamed is not None:
            raise LoadError(f"{where}: field 'rollout_id' is missing, and line {out.unnamed_line} has no rollout_id "
                            "either; with several final responses every one must name its rollout")
        out.unnamed, out.unnamed_line, out.unnamed_facts = response, line, facts
        out.unnamed_evidence = _evidence(record)
        return
    if rollout_id in out.by_rollout:
        raise LoadError(f"{where}: field 'rollout_id': rollout {rollout_id!r} already has a final response "
                        f"(line {out.lines[rollout_id]}); keep one per rollout")
    _keep(out, rollout_id, line, response, facts, record)


def _keep(out: FinalResponses, rollout_id: str, line: int, response: dict[str, Any], facts: RecordFacts,
          record: dict[str, msgspec.Raw]) -> None:
    """Keep one rollout's response, the line it came from, its facts and its evidence."""
    out.by_rollout[rollout_id] = response
    out.lines[rollout_id] = line
    if facts != NO_FACTS:
        out.facts[rollout_id] = facts
    evidence = _evidence(record)
    if evidence:
        out.evidence[rollout_id] = evidence


def _evidence(record: dict[str, msgspec.Raw]) -> dict[str, bytes]:
    """The raw JSON of the record's evidence fields (parsed only when asked for)."""
    return {name: bytes(record[name]) for name in EVIDENCE_RECORD_FIELDS if name in record}


def _value(raw: msgspec.Raw, path: str) -> Any:
    try:
        return _decode_any(raw)
    except msgspec.MsgspecError as exc:
        raise _Bad(path, f"the value cannot be read: {str(exc).split(' - at ')[0]}") from None


def _facts(record: dict[str, msgspec.Raw], where: str) -> RecordFacts:
    """Reward, task and rollout index of a rollout record, checked (docs/contract.md#scan-rollout-records)."""
    reward = None
    if "reward" in record:
        value = _value(record["reward"], "reward")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise _Bad("reward", f"must be a finite number, got {shown(value)}")
        reward = float(value)
    indices: dict[str, int | None] = {}
    for kept, names in _INDEX_FIELDS:
        indices[kept] = None
        for name in names:
            value = _value(record[name], name) if name in record else None
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2 ** 63:
                    raise _Bad(name, f"must be a whole number from 0 up, got {shown(value)}")
                indices[kept] = value
                break
    note = None
    if "task_id" in record:
        task_id = _value(record["task_id"], "task_id")
        if task_id is not None:
            note = (f"{where}: task_id {shown(task_id)} names the task but is not an index "
                    "(task_index comes from _ng_task_index or task_index)")
    return RecordFacts(reward, indices["task_index"], indices["rollout_index"], note)


def one_record(record: dict[str, msgspec.Raw], line: int, label: str, rollout_id: str,
               last_tokens: tuple[int, np.ndarray, np.ndarray]) -> FinalResponses:
    """The records of one rollout read from its own record (docs/contract.md#token-rollouts-calls): ``record`` is its
    final response and rollout record, under ``rollout_id`` (which the record may not carry).
    ``last_tokens`` are the last token-bearing item's output index, prompt and generation,
    already read (its token fields are not read again: they may be cut out of ``record``).
    Raises `LoadError` naming the file, line and field."""
    out = FinalResponses(name=label)
    where = f"{label}, line {line}"
    try:
        _, response = _record(record, None, last_tokens)
        facts = _facts(record, where)
    except _Bad as bad:
        raise LoadError(f"{where}: field {bad.field_path!r}: {bad.problem}") from None
    _keep(out, rollout_id, line, response, facts, record)
    return out


def _record(record: dict[str, msgspec.Raw], parser: _TokenParser | None,
            last_tokens: tuple[int, np.ndarray, np.ndarray] | None = None) -> tuple[str | None, dict[str, Any]]:
    """(rollout id or None, the compact response) of one record; ``last_tokens``: the last
    token-bearing item's output index, prompt and generation when the caller has read them."""
    rollout_id = None
    if "rollout_id" in record:
        value = _value(record["rollout_id"], "rollout_id")
        if value is not None and not isinstance(value, str):
            raise _Bad("rollout_id", f"must be a string, got {type_name(value)}")
        rollout_id = value
    if "response" in record:
        try:
            body = _decode_object(record["response"])
        except msgspec.MsgspecError:
            raise _Bad("response", "must be a Responses object (a JSON object with 'output')") from None
        prefix = "response."
    elif "object" in record and _value(record["object"], "object") == "response":
        body, prefix = record, ""
    elif "entries" in record or "model_call_id" in record or "prompt_token_ids" in record:
        # The most likely mix-up: the capture itself given where the harness's records go.
        what = "a capture snapshot (it has 'entries')" if "entries" in record else \
            "a captured call (a token entry: 'model_call_id', 'prompt_token_ids')"
        raise _Bad("response", f"is missing: this is {what}, not a rollout record; rollout records are the "
                   "harness's own, one per rollout with its final 'response'. Open captures as the run instead")
    else:
        raise _Bad("response", "is missing: expected a record with 'response' (and optional 'rollout_id'), or a "
                   "bare Responses object ('object': 'response')")
    if "output" not in body:
        raise _Bad(f"{prefix}output", "is missing: a Responses object lists its output items there")
    try:
        raws = _decode_items(body["output"])
    except msgspec.ValidationError:
        raise _Bad(f"{prefix}output", "must be a list of output-item objects") from None
    except msgspec.DecodeError as exc:
        raise _Bad(f"{prefix}output", f"the value cannot be read: {exc}") from None
    response: dict[str, Any] = {"object": "response", "output": _items(raws, f"{prefix}output", parser, last_tokens)}
    model = _value(body["model"], f"{prefix}model") if "model" in body else None
    if isinstance(model, str) and model:  # kept to note a record applied to another model's rollout
        response["model"] = model
    return rollout_id, response


def _items(raws: list[dict[str, msgspec.Raw]], path: str, parser: _TokenParser | None,
           last_tokens: tuple[int, np.ndarray, np.ndarray] | None = None) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    generations: list[np.ndarray | None] = []
    for index, raw in enumerate(raws):
        here = f"{path}[{index}]"
        item = {name: _value(raw[name], f"{here}.{name}") for name in _KEPT_ITEM_FIELDS if name in raw}
        _check_item(item, here)
        items.append(item)
        gen = None
        if last_tokens is not None:
            continue
        if "generation_token_ids" in raw:
            gen = _token_ids(raw["generation_token_ids"], f"{here}.generation_token_ids", parser)
        generations.append(gen)
    if last_tokens is not None:
        index, prompt, generation = last_tokens
        items[index]["prompt_token_ids"], items[index]["generation_token_ids"] = prompt, generation
        return items
    # Attribution by tokens reads only the last item that carries generated tokens; only its
    # prompt is parsed (the others can be whole running contexts).
    for index in range(len(raws) - 1, -1, -1):
        gen = generations[index]
        if gen is not None and gen.size:
            raw = raws[index]
            prompt_ids = _token_ids(raw["prompt_token_ids"], f"{path}[{index}].prompt_token_ids", parser) \
                if "prompt_token_ids" in raw else None
            items[index]["generation_token_ids"] = gen
            items[index]["prompt_token_ids"] = prompt_ids if prompt_ids is not None else np.zeros(0, dtype=np.uint64)
            break
    return items


def carries_tokens(raw: msgspec.Raw | bytes | memoryview | None) -> bool:
    """Whether a ``generation_token_ids`` value's JSON text carries tokens: anything but a
    missing value, ``null`` or ``[]`` (read from its first bytes: a generation is never parsed
    to learn this). A value that is no list of ids carries them too: reading it says what is wrong."""
    if raw is None:
        return False
    view = memoryview(raw).cast("B")
    first = NON_BLANK.search(view)
    if first is None or bytes(view[first.start():first.start() + 4]) == b"null":
        return False
    if view[first.start()] != 0x5B:  # not '[': a malformed value, for the reader to name
        return True
    inner = NON_BLANK.search(view, first.end())
    return inner is not None and view[inner.start()] != 0x5D  # not ']'


def _token_ids(raw: msgspec.Raw, path: str, parser: _TokenParser | None) -> np.ndarray | None:
    """A token array (None for JSON null), checked: integers in [0, 2^64). Without a
    ``parser`` only the exact path reads it."""
    text = bytes(raw).strip()
    if text == b"null":
        return None
    fast = parser.parse(text) if parser is not None else None
    if fast is not None:
        return fast
    value = _value(raw, path)
    if not isinstance(value, list):
        raise _Bad(path, f"must be a list of token ids, got {type_name(value)}")
    try:
        return checked_token_ids(value)
    except ValueError as exc:
        raise _Bad(path, str(exc)) from None


def _check_item(item: dict[str, Any], path: str) -> None:
    """Types of the fields attribution compares (anything else in an item is ignored)."""
    for name in ("type", "role", "name"):
        if name in item and item[name] is not None and not isinstance(item[name], str):
            raise _Bad(f"{path}.{name}", f"must be a string, got {type_name(item[name])}")
    if "arguments" in item and item["arguments"] is not None and not isinstance(item["arguments"], (str, dict)):
        raise _Bad(f"{path}.arguments", f"must be a JSON string or an object, got {type_name(item['arguments'])}")
    for name in ("content", "summary"):
        value = item.get(name)
        if value is None or (name == "content" and isinstance(value, str)):
            continue
        if not isinstance(value, list):
            raise _Bad(f"{path}.{name}", f"must be a list of parts, got {type_name(value)}")
        for j, part in enumerate(value):
            if not isinstance(part, dict):
                raise _Bad(f"{path}.{name}[{j}]", f"must be an object, got {type_name(part)}")
            if "text" in part and part["text"] is not None and not isinstance(part["text"], str):
                raise _Bad(f"{path}.{name}[{j}].text", f"must be a string, got {type_name(part['text'])}")


__all__ = ["EVIDENCE_NOTES_KEY", "EVIDENCE_RECORD_FIELDS", "NO_FACTS", "FinalResponses", "RecordFacts",
           "carries_tokens", "decode_record", "load_final_responses", "one_record"]
