"""Decoding wire records without a Python object per token.

A record arrives as a mapping from field name to the field's raw JSON text (msgspec's
``Raw``: a zero-copy slice of the input; `tokencap.loading.raw_records`), or as a line the
typed decode read (`tokencap.loading.typed_lines`). Small fields are decoded normally; the
three token arrays go straight from text to numpy through simdjson's typed buffers.

Full-prompt snapshots repeat each parent's whole sequence inside every child's prompt. So
before parsing a child's prompt we compare its *text* with the text of its claimed
parent's prompt and generation: identical bytes are identical tokens, whatever their
formatting, so only the new suffix is parsed, and the child's prompt becomes a view that
extends its parent's buffer (see `tokencap.tokens`). When the text differs in any way we
simply parse everything: the shortcut never decides anything, it only saves work.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import msgspec
import numpy as np
import simdjson

from ..record_checks import call_id_of, required_field
from ..record_errors import RecordError
from ..records import EngineRefusalRecord, ParentResolutionStatus, TokenEntry
from ..tokens import TOKEN_DTYPE, SequenceArena, as_token_array, prefix_equals
from .raw_records import BLANKS, RawRecord, decode_field, skip_blank
from .typed_lines import WireLine, carried_values_pass

TOKEN_FIELDS = ("prompt_token_ids", "generation_token_ids")
LOGPROB_FIELD = "generation_log_probs"
_RESOLUTIONS = {status.value: status for status in ParentResolutionStatus}


class _Text:
    """A JSON array's text as a zero-copy byte view, with the bounds of its body."""

    __slots__ = ("view", "start", "end")

    def __init__(self, raw: bytes | msgspec.Raw) -> None:
        view = self.view = memoryview(raw).cast("B")  # indexing a memoryview gives ints, cheaply
        start, end = 1, len(view) - 1  # inside the brackets
        while start < end and view[start] in BLANKS:
            start += 1
        while end > start and view[end - 1] in BLANKS:
            end -= 1
        self.start, self.end = start, end

    @property
    def body_len(self) -> int:
        return self.end - self.start

    def is_flat_array(self) -> bool:
        return _is_flat_array(self.view.tobytes())


class _ArrayParser:
    """Typed JSON-array parsing through one reusable simdjson parser."""

    def __init__(self) -> None:
        self._parser = simdjson.Parser()

    def parse(self, raw: bytes | msgspec.Raw, kind: Literal["u", "d"], text: _Text | None = None, *,
              owned: bool = False) -> np.ndarray | None:
        """The array as numpy, or None when it is not a flat array of that kind.

        None sends the caller to the slow path, which names the offending element. An
        array a record keeps (``owned``; log-probabilities always) is copied out of the
        parser's buffer: a view would keep that buffer object alive with every record, and
        each full pass of the garbage collector walks it, at a cost far above the copy's.
        """
        if not (text.is_flat_array() if text is not None else _is_flat_array(bytes(raw))):
            return None
        try:
            # The text is one flat array (checked above), so the document is an Array.
            buffer = cast(simdjson.Array, self._parser.parse(raw)).as_buffer(of_type=kind)
        except (TypeError, ValueError, RuntimeError):
            return None
        arr = np.frombuffer(buffer, dtype=TOKEN_DTYPE if kind == "u" else np.float64)
        if kind == "d" and arr.size and not _all_finite(arr):
            return None
        return arr.copy() if owned or kind == "d" else arr


def _is_flat_array(text: bytes) -> bool:
    # simdjson flattens nested arrays silently; a second '[' means nesting (ids and
    # log-probs are plain numbers, and any string inside fails the typed read anyway).
    return len(text) >= 2 and text[0] == 91 and text[-1] == 93 and text.find(b"[", 1) < 0


def _all_finite(arr: np.ndarray) -> bool:
    """Whether every number is finite. A short array is summed as Python floats, cheaper
    than a ufunc call: an inf or a nan always makes the sum non-finite, and a sum that
    overflows only sends a finite array the exact way, which accepts it."""
    if arr.size <= 256:
        return math.isfinite(sum(arr.tolist()))
    return bool(np.isfinite(arr).all())


class _ParsedTokens:
    """A call's parsed prompt and generation, plus their texts for prefix sharing.

    A full-prompt call's two arrays are views of one arena lane (``full``), so a child's
    prompt can extend it; a delta record's are its own small arrays (``full`` is None):
    nothing shares them, and the builder copies them into its rebuilt lane anyway. The
    texts are wrapped (`_Text`) only when a child's prompt text is matched against them.
    """

    __slots__ = ("prompt", "generation", "full", "_prompt_raw", "_generation_raw", "_texts")

    def __init__(self, prompt: np.ndarray, generation: np.ndarray, full: np.ndarray | None,
                 prompt_raw: msgspec.Raw | bytes | None, generation_raw: msgspec.Raw | bytes | None,
                 texts: tuple[_Text, _Text] | None = None) -> None:
        self.prompt, self.generation, self.full = prompt, generation, full
        self._prompt_raw, self._generation_raw, self._texts = prompt_raw, generation_raw, texts

    @classmethod
    def in_lane(cls, full: np.ndarray, prompt_len: int, prompt_raw: msgspec.Raw | bytes,
                generation_raw: msgspec.Raw | bytes, texts: tuple[_Text, _Text] | None = None) -> _ParsedTokens:
        return cls(full[:prompt_len], full[prompt_len:], full, prompt_raw, generation_raw, texts)

    def texts(self) -> tuple[_Text, _Text]:
        if self._texts is None:
            # Only a full-prompt call's tokens are matched against, and those keep their texts.
            assert self._prompt_raw is not None and self._generation_raw is not None
            self._texts = (_Text(self._prompt_raw), _Text(self._generation_raw))
        return self._texts


_MATCH_TEXT_ABOVE = 4096
"""Prompt text (bytes) above which a child's prompt is matched against its parent's text
before it is parsed; a shorter one is parsed whole and compared as tokens, which costs
less than the match."""


def _match_segments(text: _Text, segments: Iterable[_Text]) -> tuple[bytes, int] | None:
    """``text`` as bytes and the offset in it just past the bodies of ``segments`` (in order)
    at its start, or None when they are not there.

    ``text`` is copied into one bytes object (a memcpy), so each segment is compared by one
    ``bytes.startswith`` against the segment's zero-copy view: a memcmp, where comparing two
    memoryview slices steps through them an element at a time. Only the child's
    text is copied, and only for the match; the parents' texts stay views of the input. The
    match must end on a token boundary (the next non-blank byte is ',' or ']'), so "[12,34"
    never matches inside "[12,345".
    """
    data = text.view.tobytes()
    size = len(data)
    pos = 1
    first = True
    for seg in segments:
        n = seg.body_len
        if n <= 0:
            continue
        pos = skip_blank(data, pos)
        if not first:
            if pos >= size or data[pos] != 44:  # ','
                return None
            pos = skip_blank(data, pos + 1)
        if pos + n > size or not data.startswith(seg.view[seg.start: seg.end], pos):
            return None
        pos += n
        first = False
    end = skip_blank(data, pos)
    if end >= size or data[end] not in b",]":
        return None
    return data, pos


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

    def entries(self, raws: Sequence[RawRecord | WireLine]) -> list[TokenEntry]:
        """Decode the token entries of one rollout, sharing prompt storage along lineage.

        Records are parsed shortest prompt text first so a parent is parsed before the
        children whose text may reuse it. The result keeps the input order. A `WireLine`
        (a line the typed decode read) has no small field left to decode, so it never
        fails the first pass; every other record fails there exactly as before.
        """
        plain: list[dict[str, Any] | None] = []
        for i, r in enumerate(raws):
            if type(r) is WireLine:
                plain.append(None)
                continue
            try:
                plain.append(self._plain_fields(r, TOKEN_FIELDS + (LOGPROB_FIELD,)))
            except RecordError as exc:
                exc.record_index = i
                raise
        parsed: dict[str, _ParsedTokens] = {}
        results: list[TokenEntry | None] = [None] * len(raws)
        order = sorted(range(len(raws)), key=lambda i: _prompt_text_len(raws[i]))
        for i in order:
            r = raws[i]
            try:
                if type(r) is WireLine:
                    results[i] = self._proven_entry(r, parsed)
                else:
                    data = plain[i]
                    assert data is not None  # the first pass decoded every raw record's small fields
                    results[i] = self._entry(r, data, parsed)
            except RecordError as exc:
                exc.record_index = i  # lets the loader name the line or entry number
                raise
        return cast(list[TokenEntry], results)  # ``order`` visits every index once, so none is left None

    def _proven_entry(self, line: WireLine, parsed: dict[str, _ParsedTokens]) -> TokenEntry:
        """A typed line's entry, built without re-checking what the decode proved; at the
        first doubt (an array only the exact path reads, a carried value to judge, a rule
        of docs/contract.md#token-entry broken) the exact path builds it or names what is wrong."""
        w = line.wire
        call_id = w.model_call_id
        tokens = self._tokens(w.prompt_token_ids, w.generation_token_ids, w.parent_call_id, w.prompt_is_delta, parsed)
        entry = None
        if tokens is not None:
            logprobs = self._arrays.parse(w.generation_log_probs, "d")
            created_at = w.created_at
            if type(created_at) is int:
                try:
                    created_at = float(created_at)
                except OverflowError:
                    logprobs = None  # too large a number of seconds: the exact path says so
            if logprobs is not None and carried_values_pass(line):
                resolution = w.parent_resolution
                entry = TokenEntry.from_proven((
                    w.rollout_id, call_id, tokens.prompt, tokens.generation,
                    as_token_array(logprobs), w.schema_version, w.model, line.routed_experts, line.output_items,
                    w.token_item_index, created_at, _RESOLUTIONS[resolution] if resolution is not None else None,
                    w.parent_call_id, w.parent_resolution_reason, w.cum_len, w.digest, w.prompt_is_delta,
                    w.prefix_requested, w.prefix_supplied, w.continuation_fingerprint, w.continuation_context_len,
                    w.continuation_context_digest, w.fingerprint_version, w.finish_reason,
                ))
        if entry is None:
            return self._entry(line.raw_fields(), line.plain_fields(), parsed)
        if tokens is not None and call_id not in parsed and not w.prompt_is_delta:  # an entry means tokens
            parsed[call_id] = tokens
        return entry

    def _entry(self, raw: RawRecord, data: dict[str, Any], parsed: dict[str, _ParsedTokens]) -> TokenEntry:
        call_id = call_id_of(data)
        for name in TOKEN_FIELDS + (LOGPROB_FIELD,):
            required_field(raw, name, call_id, "token entry")
        parent_id = data.get("parent_call_id")
        tokens = self._tokens(raw["prompt_token_ids"], raw["generation_token_ids"],
                              parent_id if isinstance(parent_id, str) else None, data.get("prompt_is_delta") is True,
                              parsed)
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
        data["prompt_token_ids"] = tokens.prompt
        data["generation_token_ids"] = tokens.generation
        entry = TokenEntry.from_dict(data)
        if call_id is not None and call_id not in parsed and not entry.prompt_is_delta:
            parsed[call_id] = tokens
        return entry

    def _tokens(self, prompt_raw: msgspec.Raw, gen_raw: msgspec.Raw, parent_id: str | None, delta: bool,
                parsed: dict[str, _ParsedTokens]) -> _ParsedTokens | None:
        """The prompt and generation, or None when either is not a flat array of token ids.

        A full-prompt record's become one lane of the arena, extending its claimed parent's
        (``parent_id``) when the prompt starts with the parent's tokens: a long prompt's text
        is first matched against the parent's texts, so only its new tokens are parsed; a
        short one is parsed whole and compared. A delta record's (``delta``) are parsed as
        they are."""
        if delta:  # no text is kept: nothing is matched against a delta record's
            generation = self._arrays.parse(gen_raw, "u", owned=True)
            if generation is None:
                return None
            prompt = self._arrays.parse(prompt_raw, "u", owned=True)
            if prompt is None:
                return None
            return _ParsedTokens(as_token_array(prompt), as_token_array(generation), None, None, None)
        parent = parsed.get(parent_id) if parent_id is not None else None
        if len(prompt_raw) <= _MATCH_TEXT_ABOVE:
            generation = self._arrays.parse(gen_raw, "u")
            if generation is None:
                return None
            prompt = self._arrays.parse(prompt_raw, "u")
            if prompt is None:
                return None
            base = parent.full if parent is not None else None  # None for a delta parent's, never shared
            if base is not None:
                n = base.size
                if 0 < n <= prompt.size and prefix_equals(prompt, base):
                    full = self.arena.extend(base, prompt[n:], generation)
                    return _ParsedTokens.in_lane(full, prompt.size, prompt_raw, gen_raw)
            full = self.arena.fresh(prompt, generation)
            return _ParsedTokens.in_lane(full, prompt.size, prompt_raw, gen_raw)
        prompt_text, gen_text = _Text(prompt_raw), _Text(gen_raw)
        generation = self._arrays.parse(gen_raw, "u", gen_text)
        if generation is None:
            return None
        prompt_view = prompt_text.view
        base = parent.full if parent is not None else None
        if parent is not None and base is not None and len(prompt_view) and prompt_view[0] == 91:
            matched = _match_segments(prompt_text, parent.texts())
            if matched is not None:
                data, end = matched
                rest_start = skip_blank(data, end)
                rest: np.ndarray | None
                if data[rest_start] == 93:  # ']': nothing beyond the parent
                    rest = np.zeros(0, dtype=TOKEN_DTYPE)
                else:  # ',' then the new tokens: parse just those
                    rest = self._arrays.parse(b"[" + data[rest_start + 1:], "u")
                del data
                if rest is not None:
                    full = self.arena.extend(base, rest, generation)
                    return _ParsedTokens.in_lane(full, base.size + rest.size, prompt_raw, gen_raw,
                                                 (prompt_text, gen_text))
        prompt = self._arrays.parse(prompt_raw, "u", prompt_text)
        if prompt is None:
            return None
        full = self.arena.fresh(prompt, generation)
        return _ParsedTokens.in_lane(full, prompt.size, prompt_raw, gen_raw, (prompt_text, gen_text))


def _prompt_text_len(record: RawRecord | WireLine) -> int:
    if type(record) is WireLine:
        return len(record.wire.prompt_token_ids)
    return len(record.get("prompt_token_ids", b""))
