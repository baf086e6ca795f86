"""Rollouts whose output items carry token ids, read as captures (docs/contract.md#token-rollouts).

Without token capture, NeMo Gym's vLLM model server can put each call's tokens on the output
item that ends it (``return_token_id_information``): ``prompt_token_ids`` (the whole
prompt), ``generation_token_ids`` and ``generation_log_probs``. A record of such a file
(a rollout record with ``response``, or a bare Responses object) is one rollout: each
token-bearing item is a call ``item-NNNN`` whose claimed parent is the call before it, with
no digest, so the builder links it exactly when its prompt starts with every token before
it -- the check NeMo RL makes before training. Everything downstream is the capture's path.

The file is read twice, never held as values: `index_rollouts` decodes each record into a
few small fields (its rollout id, whether an item carries tokens) and keeps its byte span;
`rollout_at` then builds one record's snapshot from its span. A line can be tens of MB (every
call's whole prompt): the token arrays go from text to numpy through the same decoder as a
store's lines, and a call's prompt text is matched against the call before it, so only its
new tokens are parsed and the rollout's calls share one buffer. Memory is one rollout's.

The record is also the rollout's final response and rollout record: the snapshot carries it
(`TokenCaptureSnapshot.record`), so attribution, reward, indices, harness evidence and
delivery come from it wherever the snapshot goes.
"""

from __future__ import annotations

import mmap
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import msgspec

from ..record_errors import RecordError
from ..records import TokenCaptureSnapshot
from .capture_text import is_text
from .final_responses import FinalResponses, carries_tokens, decode_record, one_record
from .lines import line_spans
from .problems import FINAL_RESPONSES_HINT, LoadError, looks_like_rollout_record
from .raw_records import TOO_DEEP, decode_raw_object, decode_value
from .skeleton import CUT_ABOVE, TOKEN_ARRAY_FIELDS, address, cut_token_arrays
from .wire import RecordDecoder

CALL_PREFIX = "item-"
"""A call read from an output item is named ``item-NNNN`` by the item's output index."""

READ_FROM_ITEMS = "the calls were read from the output items' token ids"
"""Words of the source note every such rollout carries (the app and `check` find it by them)."""

_STRIPPED = frozenset(("prompt_token_ids", "generation_token_ids", "generation_log_probs", "routed_experts"))
_FINISH = {"max_output_tokens": "length", "content_filter": "content_filter"}
_encode = msgspec.json.encode
_decode_items = msgspec.json.Decoder(list[dict[str, msgspec.Raw]]).decode


class _PeekItem(msgspec.Struct):
    generation_token_ids: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b"null"))


class _PeekBody(msgspec.Struct):
    id: Any = None
    output: list[_PeekItem] | None = None


class _PeekRecord(msgspec.Struct):
    """What the index reads of a record: its ids, and whether an item carries tokens."""

    rollout_id: Any = None
    task: Any = msgspec.field(default=None, name="_ng_task_index")
    rollout: Any = msgspec.field(default=None, name="_ng_rollout_index")
    response: _PeekBody | None = None
    object: Any = None
    id: Any = None
    output: list[_PeekItem] | None = None
    token_capture: Any = msgspec.field(default=None, name="_ng_token_capture")


_peek = msgspec.json.Decoder(_PeekRecord).decode


class _Pages:
    """Gives a mapped file's pages back once the records on them are read, so a pass over a
    big rollouts file keeps only the record at hand resident (they are the file's own pages:
    read again from it if ever touched again)."""

    def __init__(self, data: Any) -> None:
        self.data = data if isinstance(data, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED") else None
        self.done = 0

    def release(self, end: int) -> None:
        if self.data is None:
            return
        upto = end - end % mmap.PAGESIZE
        if upto > self.done:
            self.data.madvise(mmap.MADV_DONTNEED, self.done, upto - self.done)
            self.done = upto


class _Skeleton:
    """A big record's text with its token arrays cut out (`skeleton.cut_token_arrays`), so the
    decodes that split it into fields read only the rest; each token field read from the
    skeleton gets its array's text back by address (a view of the record's bytes)."""

    def __init__(self, chunk: Any) -> None:
        self.text, self.cuts, self._base = chunk, None, 0
        if len(chunk) > CUT_ABOVE:
            found = cut_token_arrays(bytes(chunk) if isinstance(chunk, memoryview) else chunk)
            if found is not None:
                self.text, self.cuts = found
                self._base = address(self.text)

    def array(self, raw: Any) -> Any:
        """A token field's text: its cut array's when ``raw`` is a cut's ``[]``, else ``raw``."""
        if self.cuts is None or raw is None or len(raw) != 2:
            return raw
        return self.cuts.get(address(raw) - self._base, raw)

    def restore(self, items: list[dict[str, Any]]) -> bool:
        """Give the items' token fields their arrays' texts back. False when some cut was not a
        token field of an item (a key elsewhere with that name): the skeleton then differs
        from the record beyond those fields and must not be used."""
        if self.cuts is None:
            return True
        used = 0
        for item in items:
            for name in TOKEN_ARRAY_FIELDS:
                raw = item.get(name)
                text = self.array(raw)
                if text is not raw:
                    item[name] = text
                    used += 1
        return used == len(self.cuts)


@dataclass(frozen=True, slots=True)
class RecordSpan:
    """One record of a rollouts file: where its bytes are, and the rollout id it is read as."""

    line: int
    start: int
    end: int
    rollout_id: str
    tokens: bool
    """Whether one of its output items carries a non-empty ``generation_token_ids``."""
    delivered_by_capture: bool = False
    """Whether the record says its tokens were delivered through token capture (``_ng_token_capture``)."""
    note: str | None = None


_MARKS = (b'"response', b'"object"', b'"reward"')
"""Keys one of which a rollout record or a Responses object has (`looks_like_rollout_record`)."""
_RECORD_MARKS = re.compile(b"|".join(_MARKS))


def _has_mark(data: Any, start: int = 0, end: int | None = None) -> bool:
    """Whether ``data[start:end]`` holds one of `_MARKS`: a byte search (memchr speed where the
    buffer has ``find``: bytes, mmap), never a decode."""
    end = len(data) if end is None else end
    find = getattr(data, "find", None)
    if find is None:
        return _RECORD_MARKS.search(data, start, end) is not None
    return any(find(mark, start, end) >= 0 for mark in _MARKS)


def is_rollouts_text(data: Any) -> bool:
    """Whether a text is a rollouts file: its first non-blank line (or the whole text, when
    that line is not a JSON object of its own) is a rollout record or a Responses object,
    not captured calls (docs/contract.md#token-rollouts-format). Keys are found by byte search before anything is
    decoded, so a capture's text is never decoded here."""
    for _line, start, end in line_spans(data):
        if not _has_mark(data, start, end):
            if bytes(data[max(start, end - 8):end]).rstrip().endswith(b"}"):
                return False  # a whole line of JSONL that is no record
            break
        try:
            return looks_like_rollout_record(decode_raw_object(data[start:end]))
        except (msgspec.MsgspecError, RecursionError):
            break  # a pretty-printed object, or not JSON: judged as a whole below
    if not _has_mark(data):
        return False
    try:
        return looks_like_rollout_record(decode_raw_object(data))
    except (msgspec.MsgspecError, RecursionError):
        return False


def _decodes(chunk: Any) -> bool:
    try:
        decode_raw_object(chunk)
    except (msgspec.MsgspecError, RecursionError):
        return False
    return True


def _is_one_object(data: Any) -> tuple[int, int, int] | None:
    """(first line, start, end) when the text is one JSON object spanning lines."""
    first = next(line_spans(data), None)
    if first is None or _decodes(data[first[1]:first[2]]):
        return None  # the first line is a whole record: JSONL
    return first[0], first[1], len(data)


def index_rollouts(data: Any, name: str) -> list[RecordSpan]:
    """Every record of a rollouts text with the rollout id it is read as (docs/contract.md#token-rollouts-calls): its
    ``rollout_id``; else ``task<T>-rollout<R>``; else its response's ``id``; else
    ``<file name>:<line>``. A later record with an id already seen gets ``#2``, ``#3``, ...
    and a note. A record that cannot be read here is kept (``tokens`` false): reading it
    says what is wrong."""
    whole = _is_one_object(data)
    spans = [whole] if whole is not None else line_spans(data)
    base = os.path.basename(name)
    out: list[RecordSpan] = []
    seen: dict[str, int] = {}
    counts: dict[str, int] = {}
    pages = _Pages(data)
    for line, start, end in spans:
        skeleton = _Skeleton(data[start:end])
        pages.release(end)
        try:
            peek = _peek(skeleton.text)
        except (msgspec.MsgspecError, RecursionError):
            peek = None
        rid = _rollout_id(peek, f"{base}:{line}")
        note = None
        if rid in seen:
            counts[rid] = counts.get(rid, 1) + 1
            new = f"{rid}#{counts[rid]}"
            note = (f"{name}, line {line}: rollout id {rid!r} was already read from line {seen[rid]}; this record "
                    f"is read as {new!r}")
            rid = new
        seen.setdefault(rid, line)
        out.append(RecordSpan(line, start, end, rid, _has_tokens(peek, skeleton),
                              peek is not None and isinstance(peek.token_capture, dict), note))
    return out


def _rollout_id(peek: _PeekRecord | None, fallback: str) -> str:
    if peek is None:
        return fallback
    if isinstance(peek.rollout_id, str):
        return peek.rollout_id
    if _index(peek.task) and _index(peek.rollout):
        return f"task{peek.task}-rollout{peek.rollout}"
    response_id = peek.response.id if peek.response is not None else peek.id
    return response_id if isinstance(response_id, str) and response_id else fallback


def _index(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _has_tokens(peek: _PeekRecord | None, skeleton: _Skeleton) -> bool:
    if peek is None:
        return False
    output = peek.response.output if peek.response is not None else peek.output
    return any(carries_tokens(skeleton.array(item.generation_token_ids)) for item in output or ())


def no_token_ids_message(name: str, records: list[RecordSpan]) -> str:
    """Why a file of rollout records is not a source (docs/contract.md#token-rollouts-format): none of its
    records carries token ids, or its records say a capture delivered their tokens."""
    first = records[0].line if records else 1
    if any(r.delivered_by_capture for r in records):
        why = ("its records say their tokens were delivered through token capture ('_ng_token_capture'), so that "
               "capture is the source")
    else:
        why = ("the file holds rollouts without token ids (NeMo Gym writes token ids on output items only with "
               "`return_token_id_information`, or delivers them through token capture)")
    return (f"{name}, line {first}: a rollout record or Responses object, not a captured call: {why}; "
            f"{FINAL_RESPONSES_HINT}")


def is_source(records: list[RecordSpan]) -> bool:
    """Whether a rollouts file loads as rollouts: a record carries token ids, and no record says
    a capture delivered its rollout's tokens (``_ng_token_capture``: the file is then that
    capture run's records, for ``--final-responses``, and its items' ids are copies)."""
    return any(r.tokens for r in records) and not any(r.delivered_by_capture for r in records)


def iter_rollouts(data: Any, name: str, records: list[RecordSpan] | None = None,
                  rollout_id: str | None = None) -> Iterator[TokenCaptureSnapshot]:
    """Each record's rollout, in file order (only ``rollout_id``'s, when given). Raises
    `LoadError` at once (not on iteration) when no record carries token ids; a record that
    cannot be read is a rollout with its `load_error`."""
    records = index_rollouts(data, name) if records is None else records
    if not is_source(records):
        raise LoadError(no_token_ids_message(name, records))
    return _each(data, name, [r for r in records if rollout_id is None or r.rollout_id == rollout_id])


def _each(data: Any, name: str, records: list[RecordSpan]) -> Iterator[TokenCaptureSnapshot]:
    pages = _Pages(data)
    for record in records:
        chunk = data[record.start:record.end]
        pages.release(record.end)
        yield rollout_at(chunk, record, name)


def beside_captures_note(label: str, names: list[str]) -> str:
    """Why a directory's token-bearing rollouts files were not loaded (docs/contract.md#token-rollouts-format)."""
    listed = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
    return (f"{label}: not loaded, as the directory also holds captures: {listed} (rollout records whose "
            "output items carry token ids, most likely this run's own records); give "
            f"{'it' if len(names) == 1 else 'them'} as --final-responses, or open "
            f"{'it' if len(names) == 1 else 'each'} alone to read its rollouts from their token ids")


def source_records(data: Any, name: str) -> list[RecordSpan] | None:
    """The records of a text when it is a rollouts file that loads as rollouts (`is_source`), else None."""
    if is_text(data) and is_rollouts_text(data):
        records = index_rollouts(data, name)
        if is_source(records):
            return records
    return None


def read_rollouts(data: Any, name: str | None, rollout_id: str | None = None
                  ) -> Iterator[TokenCaptureSnapshot] | None:
    """The rollouts of a text when it is a rollouts file (docs/contract.md#token-rollouts), one record at a time
    (`iter_rollouts`); None when it is not one (a snapshot JSON or entries JSONL, for
    `load_text`, which also says what is neither)."""
    if is_text(data) and is_rollouts_text(data):
        return iter_rollouts(data, name or "input", rollout_id=rollout_id)
    return None


def rollout_at(chunk: Any, span: RecordSpan, name: str) -> TokenCaptureSnapshot:
    """The rollout of one record (its bytes ``chunk``); never raises: a record that cannot be
    read is a rollout with its `load_error` (and an empty ``record``: `from_output_items`)."""
    notes = [span.note] if span.note else []
    try:
        return read_record(chunk, span, name, notes)
    except (LoadError, RecordError) as exc:
        error = str(exc)
    except RecursionError:
        error = f"{name}, line {span.line}: {TOO_DEEP}"
    # Still a rollout of a rollouts file: its records are the file's own (none usable), so
    # --final-responses stays refused beside it and its tokens are said to come from items.
    return TokenCaptureSnapshot(rollout_id=span.rollout_id, incomplete=True, load_error=error, source_notes=notes,
                                record=FinalResponses(name=name))


def _value(raw: msgspec.Raw, where: str, path: str) -> Any:
    try:
        return decode_value(raw)
    except msgspec.MsgspecError as exc:
        raise LoadError(f"{where}: field {path!r}: the value cannot be read: {str(exc).split(' - at ')[0]}") from None


def read_record(chunk: Any, span: RecordSpan, name: str, notes: list[str]) -> TokenCaptureSnapshot:
    """One record's snapshot (docs/contract.md#token-rollouts-calls); raises `LoadError` naming file, line, call
    and field."""
    where = f"{name}, line {span.line}"
    skeleton = _Skeleton(chunk)
    record, body, prefix, output = _split(skeleton.text, where)
    if not skeleton.restore(output):
        record, body, prefix, output = _split(chunk, where)
    calls = [i for i, item in enumerate(output) if carries_tokens(item.get("generation_token_ids"))]
    if not calls:
        raise LoadError(f"{where}: rollout {span.rollout_id!r}: no output item carries generation_token_ids, so "
                        "there is no call to build (NeMo Gym writes token ids only with "
                        "`return_token_id_information`)")
    model = _value(body["model"], where, f"{prefix}model") if "model" in body else ""
    raws = _call_records(output, calls, span.rollout_id, model if isinstance(model, str) else "",
                         _last_finish(body, where, prefix), where, prefix)
    try:
        entries = RecordDecoder().entries(raws)  # raw texts and bytes, as a store line
    except RecordError as exc:
        raise LoadError(str(exc.located(where))) from None
    last = entries[-1]
    finals = one_record(record, span.line, name, span.rollout_id,
                        (calls[-1], last.prompt_token_ids, last.generation_token_ids))
    snapshot_id = _value(body["id"], where, f"{prefix}id") if "id" in body else ""
    notes.insert(0, f"{where}: {READ_FROM_ITEMS} ({len(calls)} token-bearing item{'s' if len(calls) > 1 else ''}; "
                    "no token capture)")
    return TokenCaptureSnapshot(rollout_id=span.rollout_id, snapshot_id=snapshot_id if isinstance(snapshot_id, str)
                                else "", entries=entries, source_notes=notes, record=finals)


def _split(text: Any, where: str) -> tuple[dict[str, Any], dict[str, Any], str, list[dict[str, Any]]]:
    """(the record's fields, its response's fields, the response's path, its output items' fields)."""
    record = decode_record(text, where)
    if "response" in record:
        try:
            body, prefix = decode_raw_object(record["response"]), "response."
        except msgspec.MsgspecError:
            raise LoadError(f"{where}: field 'response': must be a Responses object (a JSON object with "
                            "'output')") from None
    elif looks_like_rollout_record(record):
        body, prefix = record, ""
    else:
        raise LoadError(f"{where}: not a rollout record (no 'response') nor a Responses object ('object': "
                        "'response'); every line of a rollouts file is one rollout's record")
    if "output" not in body:
        raise LoadError(f"{where}: field '{prefix}output': is missing: a Responses object lists its output items there")
    try:
        output = _decode_items(body["output"])
    except msgspec.MsgspecError:
        raise LoadError(f"{where}: field '{prefix}output': must be a list of output-item objects") from None
    return record, body, prefix, output


def from_output_items(snapshot: TokenCaptureSnapshot) -> bool:
    """Whether a rollout was read from a rollout record's output items (docs/contract.md#token-rollouts), even one
    that failed to load; False for a capture."""
    return snapshot.record is not None


def call_id(index: int) -> str:
    """The call read from the output item at ``index``."""
    return f"{CALL_PREFIX}{index:04d}"


def _last_finish(body: dict[str, msgspec.Raw], where: str, prefix: str) -> str:
    """The last call's finish reason, from the response's status (docs/contract.md#token-rollouts-calls)."""
    status = _value(body["status"], where, f"{prefix}status") if "status" in body else None
    if status != "incomplete" or "incomplete_details" not in body:
        return "stop"
    details = _value(body["incomplete_details"], where, f"{prefix}incomplete_details")
    reason = details.get("reason") if isinstance(details, dict) else None
    return _FINISH.get(reason, "stop") if isinstance(reason, str) else "stop"


def _call_records(output: list[dict[str, msgspec.Raw]], calls: list[int], rollout_id: str, model: str,
                  finish: str, where: str, prefix: str) -> list[dict[str, Any]]:
    """The token-entry records of a rollout's calls, as raw fields for `RecordDecoder`."""
    raws: list[dict[str, Any]] = []
    previous = -1
    for k, index in enumerate(calls):
        item = output[index]
        last = k == len(calls) - 1
        items = []
        for j in range(previous + 1, len(output) if last else index + 1):
            items.append({key: _value(raw, where, f"{prefix}output[{j}].{key}")
                          for key, raw in output[j].items() if key not in _STRIPPED})
        prompt = item.get("prompt_token_ids")
        raw: dict[str, Any] = {
            "rollout_id": _encode(rollout_id),
            "model_call_id": _encode(call_id(index)),
            "prompt_token_ids": b"[]" if prompt is None or (len(prompt) < 16 and bytes(prompt).strip() == b"null")
            else prompt,
            "generation_token_ids": item["generation_token_ids"],
            "model": _encode(model),
            "output_items": _encode(items),
            "token_item_index": _encode(index - previous - 1),
            "created_at": _encode(float(k + 1)),
            "parent_resolution": _encode("root" if k == 0 else "resolved"),
            "parent_call_id": _encode(None if k == 0 else call_id(calls[k - 1])),
            "finish_reason": _encode(finish if last else None),
        }
        if "generation_log_probs" in item:
            raw["generation_log_probs"] = item["generation_log_probs"]
        raws.append(raw)
        previous = index
    return raws


__all__ = ["CALL_PREFIX", "READ_FROM_ITEMS", "RecordSpan", "beside_captures_note", "call_id", "from_output_items",
           "index_rollouts", "is_rollouts_text", "is_source", "iter_rollouts", "no_token_ids_message", "read_record",
           "read_rollouts", "rollout_at", "source_records"]
