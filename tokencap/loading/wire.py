"""Decoding wire records without a Python object per token.

A record arrives as a mapping from field name to the field's raw JSON text (msgspec's
``Raw``: a zero-copy slice of the input). Small fields are decoded normally; the three
token arrays go straight from text to numpy through simdjson's typed buffers.

Full-prompt snapshots repeat each parent's whole sequence inside every child's prompt. So
before parsing a child's prompt we compare its *text* with the text of its claimed
parent's prompt and generation: identical bytes are identical tokens, whatever their
formatting, so only the new suffix is parsed, and the child's prompt becomes a view that
extends its parent's buffer (see `tokencap.tokens`). When the text differs in any way we
simply parse everything: the shortcut never decides anything, it only saves work.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np
import simdjson

from ..limits import MAX_CARRIED_DEPTH
from ..records import EngineRefusalRecord, RecordError, TokenEntry
from ..tokens import TOKEN_DTYPE, SequenceArena

TOKEN_FIELDS = ("prompt_token_ids", "generation_token_ids")
LOGPROB_FIELD = "generation_log_probs"
_WHITESPACE = b" \t\r\n"

RawRecord = Mapping[str, msgspec.Raw]

TOO_DEEP = f"JSON nested too deeply to read (a carried field may nest at most {MAX_CARRIED_DEPTH} levels)"
"""The message for JSON so deep the decoder itself gives up (hundreds of levels): the same
rule as a carried field's depth limit, said the same way wherever it is hit."""

_decode_raw_object = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode
_decode_any = msgspec.json.Decoder().decode


def decode_raw_object(text: bytes | memoryview) -> dict[str, msgspec.Raw]:
    """Split one JSON object into its fields' raw texts (raises msgspec errors)."""
    return _decode_raw_object(text)


def decode_value(raw: msgspec.Raw | bytes) -> Any:
    return _decode_any(raw)


def decode_field(record: RawRecord, name: str) -> Any:
    """One field's value; an undecodable one (a number out of range, invalid UTF-8) is a
    RecordError naming the call and the field."""
    try:
        return _decode_any(record[name])
    except (msgspec.MsgspecError, RecursionError) as exc:
        call_id = None
        if name != "model_call_id" and "model_call_id" in record:
            try:
                value = _decode_any(record["model_call_id"])
                call_id = value if isinstance(value, str) else None
            except msgspec.MsgspecError:
                pass
        if isinstance(exc, RecursionError):
            raise RecordError(TOO_DEEP, call_id=call_id, field=name) from None
        problem = str(exc).split(" - at ")[0]
        raise RecordError(f"the value cannot be read: {problem}", call_id=call_id, field=name) from None


class _Text:
    """A JSON array's text as a zero-copy byte view, with the bounds of its body."""

    __slots__ = ("view", "start", "end")

    def __init__(self, raw: bytes | msgspec.Raw) -> None:
        view = self.view = memoryview(raw).cast("B")  # indexing a memoryview gives ints, cheaply
        start, end = 1, len(view) - 1  # inside the brackets
        while start < end and view[start] in _WHITESPACE:
            start += 1
        while end > start and view[end - 1] in _WHITESPACE:
            end -= 1
        self.start, self.end = start, end

    @property
    def body_len(self) -> int:
        return self.end - self.start

    def is_flat_array(self) -> bool:
        # simdjson flattens nested arrays silently; a second '[' means nesting (ids and
        # log-probs are plain numbers, and any string inside fails the typed read anyway).
        view = self.view
        return len(view) >= 2 and view[0] == 91 and view[-1] == 93 and view.tobytes().find(b"[", 1) < 0


class _ArrayParser:
    """Typed JSON-array parsing through one reusable simdjson parser."""

    def __init__(self) -> None:
        self._parser = simdjson.Parser()

    def parse(self, raw: bytes | msgspec.Raw, kind: str, text: _Text | None = None) -> np.ndarray | None:
        """The array as numpy, or None when it is not a flat array of that kind.

        None sends the caller to the slow path, which names the offending element.
        """
        if not (text or _Text(raw)).is_flat_array():
            return None
        try:
            buffer = self._parser.parse(raw).as_buffer(of_type=kind)
        except (TypeError, ValueError, RuntimeError):
            return None
        arr = np.frombuffer(buffer, dtype=TOKEN_DTYPE if kind == "u" else np.float64)
        if kind == "d" and arr.size and not np.isfinite(arr).all():
            return None
        return arr


@dataclass
class _ParsedTokens:
    """A call's parsed prompt and generation, plus their texts for prefix sharing."""

    full: np.ndarray
    prompt_len: int
    prompt_text: _Text
    generation_text: _Text


def _skip_ws(view: memoryview, pos: int) -> int:
    n = len(view)
    while pos < n and view[pos] in _WHITESPACE:
        pos += 1
    return pos


def _match_segments(text: _Text, segments: Iterable[_Text]) -> int | None:
    """Offset in ``text`` just past the bodies of ``segments`` (in order) at its start.

    Compares bytes (memoryview slices, no copies). The match must end on a token boundary
    (the next non-blank byte is ',' or ']'), so "[12,34" never matches inside "[12,345".
    """
    view = text.view
    size = len(view)
    pos = 1
    first = True
    for seg in segments:
        n = seg.body_len
        if n <= 0:
            continue
        pos = _skip_ws(view, pos)
        if not first:
            if pos >= size or view[pos] != 44:  # ','
                return None
            pos = _skip_ws(view, pos + 1)
        if pos + n > size or view[pos: pos + n] != seg.view[seg.start: seg.end]:
            return None
        pos += n
        first = False
    end = _skip_ws(view, pos)
    if end >= size or view[end] not in b",]":
        return None
    return pos


@dataclass
class RecordDecoder:
    """Turns raw records into TokenEntry / EngineRefusalRecord objects for one source."""

    arena: SequenceArena = field(default_factory=SequenceArena)
    _arrays: _ArrayParser = field(default_factory=_ArrayParser)

    # -- small fields ---------------------------------------------------------------

    def _plain_fields(self, raw: RawRecord, skip: tuple[str, ...]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, value in raw.items():
            if name not in skip:
                out[name] = decode_field(raw, name)
        return out

    def refusal(self, raw: RawRecord) -> EngineRefusalRecord:
        data = self._plain_fields(raw, ())
        data.pop("record_type", None)
        return EngineRefusalRecord.from_dict(data)

    # -- token entries ----------------------------------------------------------------

    def entries(self, raws: list[RawRecord]) -> list[TokenEntry]:
        """Decode the token entries of one rollout, sharing prompt storage along lineage.

        Records are parsed shortest prompt text first so a parent is parsed before the
        children whose text may reuse it. The result keeps the input order.
        """
        plain = []
        for i, r in enumerate(raws):
            try:
                plain.append(self._plain_fields(r, TOKEN_FIELDS + (LOGPROB_FIELD,)))
            except RecordError as exc:
                exc.record_index = i
                raise
        parsed: dict[str, _ParsedTokens] = {}
        results: list[TokenEntry | None] = [None] * len(raws)
        order = sorted(range(len(raws)), key=lambda i: len(raws[i].get("prompt_token_ids", b"")))
        for i in order:
            try:
                results[i] = self._entry(raws[i], plain[i], parsed)
            except RecordError as exc:
                exc.record_index = i  # lets the loader name the line or entry number
                raise
        return results  # type: ignore[return-value]

    def _entry(self, raw: RawRecord, data: dict[str, Any], parsed: dict[str, _ParsedTokens]) -> TokenEntry:
        call_id = data.get("model_call_id") if isinstance(data.get("model_call_id"), str) else None
        for name in TOKEN_FIELDS + (LOGPROB_FIELD,):
            if name not in raw:
                raise RecordError(f"token entry is missing the required field {name!r}", call_id=call_id)
        tokens = self._tokens(raw, data, parsed, call_id)
        if tokens is None:
            # Slow, exact path: Python values, so validation can name the bad element.
            for name in TOKEN_FIELDS + (LOGPROB_FIELD,):
                data[name] = decode_field(raw, name)
            return TokenEntry.from_dict(data)
        logprobs = self._arrays.parse(raw[LOGPROB_FIELD], "d")
        if logprobs is None:
            data[LOGPROB_FIELD] = decode_field(raw, LOGPROB_FIELD)
        else:
            data[LOGPROB_FIELD] = logprobs
        data["prompt_token_ids"] = tokens.full[: tokens.prompt_len]
        data["generation_token_ids"] = tokens.full[tokens.prompt_len:]
        entry = TokenEntry.from_dict(data)
        if call_id is not None and call_id not in parsed and not entry.prompt_is_delta:
            parsed[call_id] = tokens
        return entry

    def _tokens(self, raw: RawRecord, data: dict[str, Any], parsed: dict[str, _ParsedTokens],
                call_id: str | None) -> _ParsedTokens | None:
        prompt_raw, gen_raw = raw["prompt_token_ids"], raw["generation_token_ids"]
        prompt_text, gen_text = _Text(prompt_raw), _Text(gen_raw)
        generation = self._arrays.parse(gen_raw, "u", gen_text)
        if generation is None:
            return None
        parent_id = data.get("parent_call_id")
        parent = parsed.get(parent_id) if isinstance(parent_id, str) and data.get("prompt_is_delta") is not True else None
        prompt_view = prompt_text.view
        if parent is not None and len(prompt_view) and prompt_view[0] == 91:
            end = _match_segments(prompt_text, (parent.prompt_text, parent.generation_text))
            if end is not None:
                rest_start = _skip_ws(prompt_view, end)
                if prompt_view[rest_start] == 93:  # ']': nothing beyond the parent
                    rest = np.zeros(0, dtype=TOKEN_DTYPE)
                else:  # ',' then the new tokens: parse just those
                    rest = self._arrays.parse(b"[" + prompt_view[rest_start + 1:].tobytes(), "u")
                if rest is not None:
                    full = self.arena.extend(parent.full, rest, generation)
                    return _ParsedTokens(full, parent.full.size + rest.size, prompt_text, gen_text)
        prompt = self._arrays.parse(prompt_raw, "u", prompt_text)
        if prompt is None:
            return None
        full = self.arena.fresh(prompt, generation)
        return _ParsedTokens(full, prompt.size, prompt_text, gen_text)
