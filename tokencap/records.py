"""Records as the model server writes them: one served call, one refused call, one rollout.

Every record is validated when it is built, so the builder can trust types and shapes and
spend its attention on lineage. Validation is deliberately narrow (docs/contract.md#token-entry): it rejects
what cannot be a record at all and leaves every judgement about lineage to the builder,
which can quarantine or mask instead of refusing the whole file. Each field's own check is
`tokencap.record_checks`; the rules that tie a record's fields together are here, with the
record.

Token arrays are held as read-only numpy arrays (ids as ``uint64``, log-probabilities as
``float64``): a 100k-token context is one buffer, not 100k Python ints. ``list(arr)`` and
``arr.tolist()`` give plain sequences to any caller that wants them.
"""

from __future__ import annotations

import enum
import json
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from .record_checks import U64_LIMIT, RecordChecker, call_id_of, frozen_array, required_field
from .record_errors import RecordError, shown, type_name

TOKEN_ENTRY_SCHEMA_VERSIONS = range(3, 7)
"""Schema versions a reader accepts for TokenEntry (3..6 inclusive)."""

ENGINE_REFUSAL_SCHEMA_VERSIONS = range(1, 2)
CONTEXT_LENGTH_EXCEEDED = "context_length_exceeded"


class ParentResolutionStatus(enum.StrEnum):
    """The request-time decision about which earlier call a call continues."""

    ROOT = "root"
    RESOLVED = "resolved"
    UNRESOLVED = "unresolved"


# --------------------------------------------------------------------------- TokenEntry

_TOKEN_ENTRY_FIELDS = (
    "schema_version", "rollout_id", "model_call_id", "model", "prompt_token_ids",
    "generation_token_ids", "generation_log_probs", "routed_experts", "output_items",
    "token_item_index", "created_at", "parent_resolution", "parent_call_id",
    "parent_resolution_reason", "cum_len", "digest", "prompt_is_delta", "prefix_requested",
    "prefix_supplied", "continuation_fingerprint", "continuation_context_len",
    "continuation_context_digest", "fingerprint_version", "finish_reason",
)
_TOKEN_ENTRY_FIELD_SET = frozenset(_TOKEN_ENTRY_FIELDS)
_TOKEN_ENTRY_CARRIED = ("output_items", "routed_experts", "continuation_fingerprint", "continuation_context_len",
                        "continuation_context_digest", "fingerprint_version")
"""Fields copied to the output (or kept for a round trip) without a type of their own."""


# The rules of docs/contract.md#token-entry beyond the fields' types, each said once: `TokenEntry.__post_init__`
# raises them in its order, `TokenEntry.from_proven` only asks whether any of them fails (and
# `EngineRefusalRecord` raises the lineage rule's parent-id half: a refusal has no delta prompt).

def _count_problem(generation: np.ndarray, log_probs: np.ndarray) -> str | None:
    if generation.size != log_probs.size:
        return (f"{log_probs.size} log-probabilities for {generation.size} generated tokens; there must be one "
                "per token")
    return None


def _index_problem(index: int | None, items: list) -> str | None:
    if index is not None and not 0 <= index < len(items):
        return f"is {index}, but there are {len(items)} output items"
    return None


def _cum_len_problem(cum_len: int | None) -> str | None:
    if cum_len is not None and cum_len < 0:
        return f"is {cum_len}; a sequence length cannot be negative"
    if cum_len is not None and cum_len >= U64_LIMIT:
        return f"is {shown(cum_len)}; a sequence length must fit in 64 bits"
    return None


def _lineage_problem(resolution: ParentResolutionStatus | None, parent_call_id: str | None,
                     prompt_is_delta: bool) -> tuple[str, str] | None:
    """(field, problem) when the lineage fields contradict each other: the parent id is
    meaningful exactly when the decision was "resolved"; anything else is a writer bug the
    builder must not paper over."""
    if resolution is ParentResolutionStatus.RESOLVED and parent_call_id is None:
        return "parent_call_id", "parent_resolution is 'resolved' but no parent_call_id is given"
    if resolution in (ParentResolutionStatus.ROOT, ParentResolutionStatus.UNRESOLVED) and parent_call_id is not None:
        return "parent_call_id", (f"parent_resolution is {resolution.value!r} but a parent_call_id "
                                  f"({parent_call_id!r}) is given")
    if prompt_is_delta and resolution is not ParentResolutionStatus.RESOLVED:
        return "prompt_is_delta", "a delta prompt needs a 'resolved' parent to extend"
    return None


@dataclass(frozen=True, eq=False, slots=True)
class TokenEntry:
    """One served model call: exact prompt and sampled tokens plus request-time lineage."""

    rollout_id: str
    model_call_id: str
    prompt_token_ids: np.ndarray
    generation_token_ids: np.ndarray
    generation_log_probs: np.ndarray
    schema_version: int = 5
    model: str = ""
    routed_experts: Any = None
    output_items: list[dict[str, Any]] = field(default_factory=list)
    token_item_index: int | None = None
    created_at: float = 0.0
    parent_resolution: ParentResolutionStatus | None = None
    parent_call_id: str | None = None
    parent_resolution_reason: str = ""
    cum_len: int | None = None
    digest: str | None = None
    prompt_is_delta: bool = False
    prefix_requested: bool = False
    prefix_supplied: bool = False
    continuation_fingerprint: Any = ""
    continuation_context_len: Any = 0
    continuation_context_digest: Any = ""
    fingerprint_version: Any = None
    finish_reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    """Fields this reader does not know, kept so a round trip loses nothing."""

    def __post_init__(self) -> None:
        check = RecordChecker(self.model_call_id if isinstance(self.model_call_id, str) else None)
        put = object.__setattr__
        put(self, "schema_version", check.identity(self, TOKEN_ENTRY_SCHEMA_VERSIONS, "token entry"))
        put(self, "prompt_token_ids", check.token_ids("prompt_token_ids", self.prompt_token_ids))
        put(self, "generation_token_ids", check.token_ids("generation_token_ids", self.generation_token_ids))
        put(self, "generation_log_probs", check.log_probs("generation_log_probs", self.generation_log_probs))
        problem = _count_problem(self.generation_token_ids, self.generation_log_probs)
        if problem is not None:
            raise check.fail("generation_log_probs", problem)
        check.string("model", self.model)
        items = self.output_items
        if not isinstance(items, list) or not all(isinstance(it, Mapping) for it in items):
            raise check.fail("output_items", "must be a list of objects")
        index = check.integer("token_item_index", self.token_item_index, nullable=True)
        problem = _index_problem(index, items)
        if problem is not None:
            raise check.fail("token_item_index", problem)
        put(self, "token_item_index", index)
        put(self, "created_at", check.number("created_at", self.created_at))
        resolution = check.choice("parent_resolution", self.parent_resolution, ParentResolutionStatus, nullable=True)
        put(self, "parent_resolution", resolution)
        check.string("parent_call_id", self.parent_call_id, nullable=True)
        check.string("parent_resolution_reason", self.parent_resolution_reason)
        cum_len = check.integer("cum_len", self.cum_len, nullable=True)
        problem = _cum_len_problem(cum_len)
        if problem is not None:
            raise check.fail("cum_len", problem)
        put(self, "cum_len", cum_len)
        check.string("digest", self.digest, nullable=True)
        for flag in ("prompt_is_delta", "prefix_requested", "prefix_supplied"):
            put(self, flag, check.boolean(flag, getattr(self, flag)))
        check.string("finish_reason", self.finish_reason, nullable=True)
        lineage = _lineage_problem(resolution, self.parent_call_id, self.prompt_is_delta)
        if lineage is not None:
            raise check.fail(*lineage)
        check.carried(self, _TOKEN_ENTRY_CARRIED)

    # -- conversions ---------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TokenEntry:
        """Build from a wire-format object; unknown fields are kept in ``extra``."""
        if not isinstance(data, Mapping):
            raise RecordError(f"a token entry must be a JSON object, got {type_name(data)}")
        call_id = call_id_of(data)
        kwargs = {name: data[name] for name in _TOKEN_ENTRY_FIELDS if name in data}
        for name in ("rollout_id", "model_call_id", "prompt_token_ids", "generation_token_ids", "generation_log_probs"):
            required_field(data, name, call_id, "token entry")
        for name in ("output_items", "model", "parent_resolution_reason", "prompt_is_delta", "prefix_requested",
                     "prefix_supplied", "created_at", "schema_version"):
            # An explicit null where the table has a non-null default is a type error,
            # except where the table itself allows null; dataclass defaults cover absence.
            if name in kwargs and kwargs[name] is None:
                raise RecordError("must not be null", call_id=call_id, field=name)
        extra = {k: v for k, v in data.items() if k not in _TOKEN_ENTRY_FIELD_SET}
        return cls(**kwargs, extra=extra)

    @classmethod
    def from_proven(cls, values: Sequence[Any]) -> TokenEntry | None:
        """The entry of field values whose types a typed decode has already proved, or None
        when a rule beyond the types fails (`from_dict` of the same values then says which).

        ``values`` holds every field but ``extra`` (which is empty) in declaration order
        (`PROVEN_FIELDS`), each already what ``__post_init__`` would make of it: ids and
        texts ``str``; counts ``int``, never ``bool``; ``created_at`` a ``float``;
        ``parent_resolution`` a `ParentResolutionStatus` or None; flags ``bool``; the token
        arrays read-only 1-D ``uint64`` and finite ``float64`` `TokenArray`s;
        ``output_items`` a list of dicts; every carried value one ``carried_problem``
        passes. What is still checked here is what no type says: the schema version's
        range, one log-probability per token, the output item index, the cumulative length's
        range and the lineage rules.
        """
        entry = object.__new__(cls)
        for setter, value in zip(_PROVEN_SETTERS, values, strict=True):  # values holds every proven field
            setter(entry, value)
        _EXTRA_SETTER(entry, {})
        if (entry.schema_version not in TOKEN_ENTRY_SCHEMA_VERSIONS
                or _count_problem(entry.generation_token_ids, entry.generation_log_probs) is not None
                or _index_problem(entry.token_item_index, entry.output_items) is not None
                or _cum_len_problem(entry.cum_len) is not None
                or _lineage_problem(entry.parent_resolution, entry.parent_call_id, entry.prompt_is_delta) is not None):
            return None
        return entry

    def to_dict(self) -> dict[str, Any]:
        """Every known field (defaults filled in) plus the unknown ones, as plain JSON types."""
        out: dict[str, Any] = {}
        for name in _TOKEN_ENTRY_FIELDS:
            value = getattr(self, name)
            if isinstance(value, np.ndarray):
                value = value.tolist()
            elif isinstance(value, enum.Enum):
                value = value.value
            out[name] = value
        out.update(self.extra)
        return out

    def with_full_prompt(self, prompt: np.ndarray, generation: np.ndarray) -> TokenEntry:
        """This delta record with its rebuilt full prompt (``prompt_is_delta`` false).

        Only the token arrays change, and a rebuilt sequence is uint64 tokens by
        construction, so the record is not validated again (`dataclasses.replace` would
        re-run every check of the record for nothing). ``generation`` must hold this
        record's generated tokens.
        """
        if generation.size != self.generation_token_ids.size:
            raise ValueError("the rebuilt generation must be the record's own")
        copy = object.__new__(TokenEntry)
        for setter, value in zip(_SLOT_SETTERS, _slot_values(self), strict=True):  # one getter per setter
            setter(copy, value)
        put = object.__setattr__
        put(copy, "prompt_token_ids", frozen_array(np.asarray(prompt, dtype=np.uint64)))
        put(copy, "generation_token_ids", frozen_array(np.asarray(generation, dtype=np.uint64)))
        put(copy, "prompt_is_delta", False)
        return copy

    # -- derived facts -------------------------------------------------------------

    @property
    def full_len(self) -> int:
        """Length of prompt + generation as stored (for a delta record: suffix + generation)."""
        return int(self.prompt_token_ids.size + self.generation_token_ids.size)



_TOKEN_ENTRY_SLOTS = tuple(f.name for f in fields(TokenEntry))
PROVEN_FIELDS = _TOKEN_ENTRY_SLOTS[:-1]
"""The fields `TokenEntry.from_proven` takes, in its order (all but ``extra``)."""
# A frozen dataclass refuses setattr; its slots' own descriptors set them directly.
_SLOT_SETTERS = tuple(getattr(TokenEntry, name).__set__ for name in _TOKEN_ENTRY_SLOTS)
_PROVEN_SETTERS = _SLOT_SETTERS[:-1]
_EXTRA_SETTER = _SLOT_SETTERS[-1]
_slot_values = operator.attrgetter(*_TOKEN_ENTRY_SLOTS)


# --------------------------------------------------------------------------- EngineRefusalRecord

_REFUSAL_FIELDS = ("schema_version", "rollout_id", "model_call_id", "parent_resolution", "parent_call_id",
                   "code", "message", "recorded_at")
_REFUSAL_FIELD_SET = frozenset(_REFUSAL_FIELDS)


@dataclass(frozen=True, eq=False, slots=True)
class EngineRefusalRecord:
    """A request the engine refused: it produced no TokenEntry, so it is recorded here."""

    rollout_id: str
    model_call_id: str
    recorded_at: float
    schema_version: int = 1
    parent_resolution: ParentResolutionStatus = ParentResolutionStatus.UNRESOLVED
    parent_call_id: str | None = None
    code: str | None = None
    message: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check = RecordChecker(self.model_call_id if isinstance(self.model_call_id, str) else None)
        put = object.__setattr__
        put(self, "schema_version", check.identity(self, ENGINE_REFUSAL_SCHEMA_VERSIONS, "engine refusal"))
        put(self, "recorded_at", check.number("recorded_at", self.recorded_at))
        resolution = check.choice("parent_resolution", self.parent_resolution, ParentResolutionStatus, nullable=False)
        put(self, "parent_resolution", resolution)
        check.string("parent_call_id", self.parent_call_id, nullable=True)
        check.string("code", self.code, nullable=True)
        check.string("message", self.message)
        lineage = _lineage_problem(resolution, self.parent_call_id, prompt_is_delta=False)
        if lineage is not None:
            raise check.fail(*lineage)
        check.carried(self, ())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EngineRefusalRecord:
        if not isinstance(data, Mapping):
            raise RecordError(f"an engine refusal must be a JSON object, got {type_name(data)}")
        call_id = call_id_of(data)
        for name in ("rollout_id", "model_call_id", "recorded_at"):
            required_field(data, name, call_id, "engine refusal")
        kwargs = {name: data[name] for name in _REFUSAL_FIELDS if name in data}
        for name in ("schema_version", "message"):
            if name in kwargs and kwargs[name] is None:
                raise RecordError("must not be null", call_id=call_id, field=name)
        extra = {k: v for k, v in data.items() if k not in _REFUSAL_FIELD_SET}
        return cls(**kwargs, extra=extra)

    def to_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in _REFUSAL_FIELDS}
        out["parent_resolution"] = self.parent_resolution.value
        out.update(self.extra)
        return out



# --------------------------------------------------------------------------- snapshot


class FrozenList(list):
    """A list that refuses changes: a loaded snapshot is immutable, yet still equals a list."""

    def _refuse(self, *_args: Any, **_kwargs: Any) -> None:
        raise TypeError("a loaded snapshot is immutable; build a new TokenCaptureSnapshot instead")

    append = extend = insert = remove = pop = clear = sort = reverse = _refuse
    # The in-place operators return the list itself in list's signature; these only refuse.
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse  # type: ignore[assignment]

    def __reduce__(self):
        return (FrozenList, (list(self),))


@dataclass(frozen=True, eq=False)
class TokenCaptureSnapshot:
    """All records of one rollout, frozen; plus what the loader had to skip or infer."""

    rollout_id: str
    snapshot_id: str = ""
    version: int = 0
    incomplete: bool = False
    entries: list[TokenEntry] = field(default_factory=list)
    engine_refusals: list[EngineRefusalRecord] = field(default_factory=list)
    source_notes: list[str] = field(default_factory=list)
    load_error: str | None = None
    record: Any = field(default=None, repr=False, compare=False)
    """The rollout's own record when its calls were read from a rollout record's output items
    (docs/contract.md#token-rollouts): a `tokencap.loading.FinalResponses` naming this rollout only, for terminal
    attribution, reward, indices, harness evidence and delivery. Not part of the wire format
    (`to_dict` leaves it out); None for a capture."""

    def __post_init__(self) -> None:
        for name in ("entries", "engine_refusals", "source_notes"):
            value = getattr(self, name)
            if not isinstance(value, FrozenList):
                object.__setattr__(self, name, FrozenList(value))

    def to_dict(self) -> dict[str, Any]:
        return {
            "rollout_id": self.rollout_id,
            "snapshot_id": self.snapshot_id,
            "version": self.version,
            "incomplete": self.incomplete,
            "entries": [e.to_dict() for e in self.entries],
            "engine_refusals": [r.to_dict() for r in self.engine_refusals],
            "source_notes": list(self.source_notes),
            "load_error": self.load_error,
        }

    @classmethod
    def failed(cls, rollout_id: str, error: str, notes: Sequence[str] = ()) -> TokenCaptureSnapshot:
        """A rollout that could not be loaded: no records, incomplete, with the reason."""
        return cls(rollout_id=rollout_id, incomplete=True, load_error=error, source_notes=list(notes))


def canonical_json(entry: TokenEntry) -> bytes:
    """The canonical bytes used to order copies of one call id (docs/contract.md#builder-dedupe).

    Sorted keys, compact separators, ASCII escapes -- the stdlib encoder, because its float
    formatting is the one other implementations reproduce.
    """
    return json.dumps(entry.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")



__all__ = [
    "CONTEXT_LENGTH_EXCEEDED",
    "EngineRefusalRecord",
    "ParentResolutionStatus",
    "RecordError",
    "TokenCaptureSnapshot",
    "TokenEntry",
    "canonical_json",
]

