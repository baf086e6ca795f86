"""Records as the model server writes them: one served call, one refused call, one rollout.

Every record is validated when it is built, so the builder can trust types and shapes and
spend its attention on lineage. Validation is deliberately narrow (docs/contract.md#token-entry): it rejects
what cannot be a record at all and leaves every judgement about lineage to the builder,
which can quarantine or mask instead of refusing the whole file.

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
from typing import Any, Literal, overload

import numpy as np

from .limits import CARRIED_INT_MAX, CARRIED_INT_MIN, MAX_CARRIED_DEPTH
from .tokens import TokenArray, as_token_array

TOKEN_ENTRY_SCHEMA_VERSIONS = range(3, 7)
"""Schema versions a reader accepts for TokenEntry (3..6 inclusive)."""

ENGINE_REFUSAL_SCHEMA_VERSIONS = range(1, 2)
CONTEXT_LENGTH_EXCEEDED = "context_length_exceeded"

_U64_LIMIT = 1 << 64
_EMPTY_IDS = as_token_array(np.zeros(0, dtype=np.uint64))
_EMPTY_LOGPROBS = as_token_array(np.zeros(0, dtype=np.float64))


class ParentResolutionStatus(enum.StrEnum):
    """The request-time decision about which earlier call a call continues."""

    ROOT = "root"
    RESOLVED = "resolved"
    UNRESOLVED = "unresolved"


class RecordError(ValueError):
    """A record that cannot be a record: names the call, the field and the problem.

    Loaders add where it came from (``source``: the file and line) so the message a user
    reads says exactly what to fix.
    """

    record_index: int | None = None
    """The failing record's position in the batch a decoder was given, when it knows it."""

    def __init__(self, problem: str, *, call_id: str | None = None, field: str | None = None,
                 source: str | None = None) -> None:
        self.problem = problem
        self.call_id = call_id
        self.field = field
        self.source = source
        super().__init__(self._render())

    def _render(self) -> str:
        parts = []
        if self.source:
            parts.append(self.source)
        if self.call_id is not None:
            parts.append(f"call {self.call_id!r}")
        if self.field:
            parts.append(f"field {self.field!r}")
        parts.append(self.problem)
        return ": ".join(parts)

    def located(self, source: str) -> RecordError:
        """The same error with where it came from prepended (file, line, record)."""
        if self.source:
            source = f"{source}: {self.source}"
        return RecordError(self.problem, call_id=self.call_id, field=self.field, source=source)


# --------------------------------------------------------------------------- coercion


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple, np.ndarray)):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def shown(value: Any, limit: int = 60) -> str:
    """A value for an error message: deterministic, short, and never a memory address.

    JSON scalars are shown as written (long strings cut); anything else by its kind, so
    the same input always gives the same message bytes.
    """
    if value is None or isinstance(value, (bool, float, np.bool_, np.floating)):
        return repr(value.item() if isinstance(value, np.generic) else value)
    if isinstance(value, (int, np.integer)):
        value = int(value)
        return repr(value) if value.bit_length() <= 128 else f"an integer of {value.bit_length()} bits"
    if isinstance(value, str):
        text = repr(value)
        return text if len(text) <= limit else f"{text[: limit - 5]}...' ({len(value)} characters)"
    return type_name(value)


def _carried_path(field: str, link: tuple | None) -> str:
    """Where in the field, as ``field[0]['key']``; a deep path keeps its first steps only."""
    path = []
    while link is not None:
        link, key = link
        path.append(key)
    path.reverse()
    steps = "".join(f"[{p}]" if isinstance(p, int) else f"[{shown(p, 30)}]" for p in path[:6])
    return field + steps + ("..." if len(path) > 6 else "")


_PLAIN_NUMBERS = (int, float, bool)
_SCALARS = frozenset((str, bool, type(None)))


def carried_problem(value: Any, field: str) -> str | None:
    """Why ``value`` cannot be carried through to the output unchanged, or None.

    A carried field (output items, routed experts, an unknown field) is copied into the
    response and written as JSON, so it must be JSON the writer can represent: objects
    with string keys, lists, strings, finite numbers, integers in the 64-bit range, and
    at most `MAX_CARRIED_DEPTH` levels of nesting. Checked here, when the record is
    built, so a bad value is a record error at load time -- never a crash at write time
    or a valid sample masked for a harmless payload. Iterative (no recursion), and a
    list of plain numbers is checked by ``sum``/``min``/``max`` at C speed.
    """
    # Each stack entry: (value, depth, link); link = (parent link, key) names the path
    # lazily, built into text only for the message.
    stack: list[tuple[Any, int, tuple | None]] = [(value, 0, None)]
    pop, push = stack.pop, stack.append
    while stack:
        node, depth, link = pop()
        kind = type(node)
        if kind in _SCALARS:
            continue
        if kind is int:
            if not CARRIED_INT_MIN <= node <= CARRIED_INT_MAX:
                return (f"{_carried_path(field, link)} is an integer outside the 64-bit range "
                        f"({shown(node)}); a carried value must fit in 64 bits")
            continue
        if kind is float:
            if node - node != 0.0:  # inf - inf and nan - nan are nan
                return f"{_carried_path(field, link)} is {node!r}; a carried number must be finite"
            continue
        is_list = kind is list or kind is tuple or (kind is not dict and isinstance(node, (list, tuple)))
        if is_list or kind is dict or isinstance(node, Mapping):
            if depth >= MAX_CARRIED_DEPTH:
                return (f"{_carried_path(field, link)} is nested deeper than {MAX_CARRIED_DEPTH} levels, the limit "
                        "for a carried field")
            # Strings, booleans and nulls always pass: they are not pushed (most of an output
            # item's nodes are strings).
            if is_list:
                if node and type(node[0]) in _PLAIN_NUMBERS and _numbers_fit(node):
                    continue
                for i in range(len(node) - 1, -1, -1):
                    if type(node[i]) not in _SCALARS:
                        push((node[i], depth + 1, (link, i)))
            else:
                keys = list(node)
                for key in keys:
                    if type(key) is not str:
                        return f"{_carried_path(field, link)} has a key that is {type_name(key)}; keys must be strings"
                for key in reversed(keys):
                    if type(node[key]) not in _SCALARS:
                        push((node[key], depth + 1, (link, key)))
            continue
        if isinstance(node, np.ndarray):
            if node.dtype.kind not in "biuf" or depth + node.ndim > MAX_CARRIED_DEPTH:
                return f"{_carried_path(field, link)} is an array of {node.dtype} that JSON cannot carry"
            if node.dtype.kind == "f" and node.size and not np.isfinite(node).all():
                return f"{_carried_path(field, link)} holds a number that is not finite"
            continue
        if isinstance(node, (np.integer, np.floating, np.bool_)):
            push((node.item(), depth, link))
            continue
        if isinstance(node, (str, int, float)):  # a subclass (an IntEnum, say): judge its plain value
            push(((str if isinstance(node, str) else float if isinstance(node, float) else int)(node), depth, link))
            continue
        return f"{_carried_path(field, link)} is {type_name(node)}, which JSON cannot carry"
    return None


def _numbers_fit(seq: list | tuple) -> bool:
    """True when ``seq`` holds only plain integers (and booleans), all within 64 bits.

    ``sum`` fails on anything that is not a number and turns float the moment a float
    is present; either way the element-wise walk takes over and names the bad element.
    """
    try:
        total = sum(seq)
    except TypeError:
        return False
    if type(total) is not int:
        return False
    return CARRIED_INT_MIN <= min(seq) and max(seq) <= CARRIED_INT_MAX


class _Checker:
    """Type checks for one record, each failure naming the record and field."""

    def __init__(self, call_id: str | None) -> None:
        self.call_id = call_id

    def identity(self, record: Any, versions: range, kind: str) -> int:
        """Check the ids every record carries and its schema version; returns the version."""
        self.string("model_call_id", record.model_call_id)
        self.string("rollout_id", record.rollout_id)
        version = self.integer("schema_version", record.schema_version)
        if version not in versions:
            accepted = f"{versions.start}..{versions.stop - 1}" if len(versions) > 1 else str(versions.start)
            raise self.fail("schema_version", f"{kind} schema version {version} is not supported; this reader "
                            f"accepts {accepted}")
        return version

    def fail(self, name: str, problem: str) -> RecordError:
        return RecordError(problem, call_id=self.call_id, field=name)

    @overload
    def string(self, name: str, value: Any, *, nullable: Literal[False] = False) -> str: ...
    @overload
    def string(self, name: str, value: Any, *, nullable: bool) -> str | None: ...
    def string(self, name: str, value: Any, *, nullable: bool = False) -> str | None:
        if value is None and nullable:
            return None
        if not isinstance(value, str):
            want = "a string or null" if nullable else "a string"
            raise self.fail(name, f"must be {want}, got {type_name(value)}")
        return value

    @overload
    def integer(self, name: str, value: Any, *, nullable: Literal[False] = False) -> int: ...
    @overload
    def integer(self, name: str, value: Any, *, nullable: bool) -> int | None: ...
    def integer(self, name: str, value: Any, *, nullable: bool = False) -> int | None:
        if value is None and nullable:
            return None
        # bool is an int subclass in Python; a JSON true is never a count or an index.
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            want = "an integer or null" if nullable else "an integer"
            raise self.fail(name, f"must be {want}, got {type_name(value)}")
        return int(value)

    def number(self, name: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise self.fail(name, f"must be a number, got {type_name(value)}")
        try:
            return float(value)
        except OverflowError:
            raise self.fail(name, "is too large to be a number of seconds") from None

    def boolean(self, name: str, value: Any) -> bool:
        if not isinstance(value, (bool, np.bool_)):
            raise self.fail(name, f"must be true or false, got {type_name(value)}")
        return bool(value)

    @overload
    def resolution(self, name: str, value: Any, *, nullable: Literal[False]) -> ParentResolutionStatus: ...
    @overload
    def resolution(self, name: str, value: Any, *, nullable: bool) -> ParentResolutionStatus | None: ...
    def resolution(self, name: str, value: Any, *, nullable: bool) -> ParentResolutionStatus | None:
        if value is None and nullable:
            return None
        try:
            return ParentResolutionStatus(value)
        except (ValueError, TypeError):
            allowed = ", ".join(repr(s.value) for s in ParentResolutionStatus)
            extra = " or null" if nullable else ""
            raise self.fail(name, f"must be one of {allowed}{extra}, got {shown(value)}") from None

    def carried(self, record: Any, names: tuple[str, ...]) -> None:
        """Every carried field (and every unknown one) must survive the trip to JSON output."""
        for name in names:
            value = getattr(record, name)
            kind = type(value)
            if kind in _SCALARS or (kind is int and CARRIED_INT_MIN <= value <= CARRIED_INT_MAX):
                continue  # what carried_problem passes first, without the call
            problem = carried_problem(value, name)
            if problem is not None:
                raise self.fail(name, problem)
        if not isinstance(record.extra, Mapping):
            raise self.fail("extra", f"must be a mapping of unknown fields, got {type_name(record.extra)}")
        for name, value in record.extra.items():
            problem = carried_problem(value, name)
            if problem is not None:
                raise self.fail(name, problem)

    def token_ids(self, name: str, value: Any) -> np.ndarray:
        if isinstance(value, np.ndarray):
            if value.ndim != 1:
                raise self.fail(name, "must be a flat list of token ids")
            if value.dtype == np.uint64:
                return _frozen(value)
            if value.dtype.kind == "u":
                return _frozen(value.astype(np.uint64))
            if value.dtype.kind == "i":
                if value.size and value.min() < 0:
                    bad = int(np.argmax(value < 0))
                    raise self.fail(name, f"token id at position {bad} is {int(value[bad])}; ids must be in [0, 2^64)")
                return _frozen(value.astype(np.uint64))
            if value.size == 0:
                return _EMPTY_IDS
            raise self.fail(name, f"must hold integer token ids, got an array of {value.dtype}")
        if not isinstance(value, (list, tuple)):
            raise self.fail(name, f"must be a list of token ids, got {type_name(value)}")
        if not value:
            return _EMPTY_IDS
        for pos, tok in enumerate(value):
            if isinstance(tok, (bool, np.bool_)) or not isinstance(tok, (int, np.integer)):
                raise self.fail(name, f"token id at position {pos} is {type_name(tok)} ({shown(tok)}); "
                                "ids must be integers in [0, 2^64)")
            if not 0 <= tok < _U64_LIMIT:
                raise self.fail(name, f"token id at position {pos} is {shown(tok)}; ids must be in [0, 2^64)")
        return _frozen(np.array(value, dtype=np.uint64))

    def log_probs(self, name: str, value: Any) -> np.ndarray:
        if isinstance(value, np.ndarray):
            if value.ndim != 1 or (value.size and value.dtype.kind not in "fiu"):
                raise self.fail(name, "must be a flat list of numbers")
            arr = value.astype(np.float64, copy=False)
        else:
            if not isinstance(value, (list, tuple)):
                raise self.fail(name, f"must be a list of numbers, got {type_name(value)}")
            if not value:
                return _EMPTY_LOGPROBS
            for pos, lp in enumerate(value):
                if isinstance(lp, (bool, np.bool_)) or not isinstance(lp, (int, float, np.integer, np.floating)):
                    raise self.fail(name, f"log-probability at position {pos} is {type_name(lp)} ({shown(lp)}); "
                                    "it must be a finite number")
            try:
                arr = np.array(value, dtype=np.float64)
            except OverflowError:
                bad = next(i for i, lp in enumerate(value) if isinstance(lp, int) and abs(lp) > 1e308)
                raise self.fail(name, f"log-probability at position {bad} is too large; "
                                "it must be a finite number") from None
        if arr.size and not np.isfinite(arr).all():
            bad = int(np.argmin(np.isfinite(arr)))
            raise self.fail(name, f"log-probability at position {bad} is {shown(float(arr[bad]))}; "
                            "it must be a finite number")
        return _frozen(arr)


def _frozen(arr: np.ndarray) -> np.ndarray:
    if type(arr) is TokenArray and not arr.flags.writeable:
        return arr
    return as_token_array(arr)


def _required(data: Mapping[str, Any], name: str, call_id: str | None, kind: str) -> Any:
    if name not in data:
        raise RecordError(f"{kind} is missing the required field {name!r}", call_id=call_id)
    return data[name]


def _peek_call_id(data: Mapping[str, Any]) -> str | None:
    value = data.get("model_call_id")
    return value if isinstance(value, str) else None


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
# raises them in its order, `TokenEntry.from_proven` only asks whether any of them fails.

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
    if cum_len is not None and cum_len >= _U64_LIMIT:
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
        check = _Checker(self.model_call_id if isinstance(self.model_call_id, str) else None)
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
        resolution = check.resolution("parent_resolution", self.parent_resolution, nullable=True)
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
        call_id = _peek_call_id(data)
        kwargs = {name: data[name] for name in _TOKEN_ENTRY_FIELDS if name in data}
        for name in ("rollout_id", "model_call_id", "prompt_token_ids", "generation_token_ids", "generation_log_probs"):
            _required(data, name, call_id, "token entry")
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
        put(copy, "prompt_token_ids", _frozen(np.asarray(prompt, dtype=np.uint64)))
        put(copy, "generation_token_ids", _frozen(np.asarray(generation, dtype=np.uint64)))
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
        check = _Checker(self.model_call_id if isinstance(self.model_call_id, str) else None)
        put = object.__setattr__
        put(self, "schema_version", check.identity(self, ENGINE_REFUSAL_SCHEMA_VERSIONS, "engine refusal"))
        put(self, "recorded_at", check.number("recorded_at", self.recorded_at))
        resolution = check.resolution("parent_resolution", self.parent_resolution, nullable=False)
        put(self, "parent_resolution", resolution)
        check.string("parent_call_id", self.parent_call_id, nullable=True)
        check.string("code", self.code, nullable=True)
        check.string("message", self.message)
        if resolution is ParentResolutionStatus.RESOLVED and self.parent_call_id is None:
            raise check.fail("parent_call_id", "parent_resolution is 'resolved' but no parent_call_id is given")
        if resolution is not ParentResolutionStatus.RESOLVED and self.parent_call_id is not None:
            raise check.fail("parent_call_id", f"parent_resolution is {resolution.value!r} but a parent_call_id "
                             f"({self.parent_call_id!r}) is given")
        check.carried(self, ())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EngineRefusalRecord:
        if not isinstance(data, Mapping):
            raise RecordError(f"an engine refusal must be a JSON object, got {type_name(data)}")
        call_id = _peek_call_id(data)
        for name in ("rollout_id", "model_call_id", "recorded_at"):
            _required(data, name, call_id, "engine refusal")
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

