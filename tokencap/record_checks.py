"""The checks that make a value a record's field, each failure naming the record and field.

A record is checked when it is built (docs/contract.md#token-entry): each field's type and
shape, token ids as 64-bit unsigned integers, log-probabilities as finite numbers, and every
carried field as JSON the writer can represent (`carried_problem`). What a record's fields
mean together (its lineage, one log-probability per token) is the record's own rule, in
`tokencap.records`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Literal, TypeVar, overload

import numpy as np

from .limits import CARRIED_INT_MAX, CARRIED_INT_MIN, MAX_CARRIED_DEPTH
from .record_errors import RecordError, shown, type_name
from .tokens import TokenArray, as_token_array

U64_LIMIT = 1 << 64
"""One past the largest 64-bit unsigned integer: token ids and sequence lengths stay below it."""

_EMPTY_IDS = as_token_array(np.zeros(0, dtype=np.uint64))
_EMPTY_LOGPROBS = as_token_array(np.zeros(0, dtype=np.float64))

_Choice = TypeVar("_Choice", bound=enum.Enum)


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


class RecordChecker:
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
    def choice(self, name: str, value: Any, kind: type[_Choice], *, nullable: Literal[False]) -> _Choice: ...
    @overload
    def choice(self, name: str, value: Any, kind: type[_Choice], *, nullable: bool) -> _Choice | None: ...
    def choice(self, name: str, value: Any, kind: type[_Choice], *, nullable: bool) -> _Choice | None:
        """``value`` as a member of the enumeration ``kind``; the message lists every allowed value."""
        if value is None and nullable:
            return None
        try:
            return kind(value)
        except (ValueError, TypeError):
            allowed = ", ".join(repr(s.value) for s in kind)
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
                return frozen_array(value)
            if value.dtype.kind == "u":
                return frozen_array(value.astype(np.uint64))
            if value.dtype.kind == "i":
                if value.size and value.min() < 0:
                    bad = int(np.argmax(value < 0))
                    raise self.fail(name, f"token id at position {bad} is {int(value[bad])}; ids must be in [0, 2^64)")
                return frozen_array(value.astype(np.uint64))
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
            if not 0 <= tok < U64_LIMIT:
                raise self.fail(name, f"token id at position {pos} is {shown(tok)}; ids must be in [0, 2^64)")
        return frozen_array(np.array(value, dtype=np.uint64))

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
        return frozen_array(arr)


def frozen_array(arr: np.ndarray) -> np.ndarray:
    """``arr`` as a read-only `TokenArray`: itself when it is one already, else a view."""
    if type(arr) is TokenArray and not arr.flags.writeable:
        return arr
    return as_token_array(arr)


def required_field(data: Mapping[str, Any], name: str, call_id: str | None, kind: str) -> Any:
    """The value of a field a ``kind`` of record must have; its absence is a RecordError."""
    if name not in data:
        raise RecordError(f"{kind} is missing the required field {name!r}", call_id=call_id)
    return data[name]


def call_id_of(data: Mapping[str, Any]) -> str | None:
    """The call id a record's errors name: its ``model_call_id`` when that is a string."""
    value = data.get("model_call_id")
    return value if isinstance(value, str) else None
