"""The harness's own evidence about a rollout's calls (docs/contract.md#evidence).

NeMo Gym's rollout records may carry what the harness observed: ``ng_agent_observations``
(``{source, records, gaps}``, records of kind ``agent_invocation``, ``tool_call``,
``context_compaction``, ``sandbox``), ``ng_trajectory`` (schema ``"1.0"``: ``invocations``,
``model_calls``, ``tool_calls``, ``turns``, ``gaps``) and ``ng_model_call_capture``
(``{calls: [{model_call_id, response_id, ...}]}``).

Why joins are strict: evidence replaces a break's cause (a compaction, a sub-agent), so a
reference counts only when it names a captured call -- by ``model_call_id``, or by a
``response_id`` that exactly one call of ``ng_model_call_capture`` carries together with a
``model_call_id``. Anything else is counted as not joined and never matched by time,
position or text. Why malformed evidence is a note: the records are the harness's, written
by code tokencap does not control; a wrong value must not cost the user the whole scan, so
the item is left out and one note names the rollout and the field.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, overload

from ..loading.final_responses import EVIDENCE_NOTES_KEY as NOTES_KEY
from ..record_errors import type_name

EVIDENCE_FIELDS = ("ng_agent_observations", "ng_trajectory", "ng_model_call_capture")
"""The rollout record's fields the harness evidence is read from."""
DELIVERY_FIELDS = ("mask_sample", "_ng_token_capture")
"""The rollout record's fields saying what NeMo Gym delivered (docs/contract.md#delivered)."""
# NOTES_KEY: a list of str a loader may put in the record it hands over (problems it met
# reading the evidence fields), reported as notes like the parser's own.

OBSERVATION_KINDS = ("agent_invocation", "tool_call", "context_compaction", "sandbox")
TRAJECTORY_SCHEMA = "1.0"
MAX_NOTES = 20


class _Bad(Exception):
    def __init__(self, path: str, problem: str) -> None:
        super().__init__(problem)
        self.path, self.problem = path, problem


@dataclass(frozen=True)
class Invocation:
    """One agent invocation with the captured calls its ``model_calls`` joined."""

    invocation_id: str
    parent_invocation_id: str | None
    spawned_by_tool_call_id: str | None
    calls: tuple[str, ...]


@dataclass(frozen=True)
class Compaction:
    """One ``context_compaction``: the call it came after and its summariser calls (joined)."""

    after_call: str | None
    calls: tuple[str, ...]
    trigger: str | None
    tokens_before: int | None
    tokens_after: int | None
    observed_at: float | str | None


@dataclass(frozen=True)
class ToolCall:
    """One ``tool_call`` observation, by the id the model's ``function_call`` gave it."""

    tool_call_id: str
    tool_name: str | None
    status: str | None
    duration_ms: float | None


@dataclass
class HarnessEvidence:
    """The evidence of one rollout record, joined to its captured calls.

    ``unjoined`` counts model-call references that named no captured call; ``notes`` says
    what was left out and why (each names the rollout and the field)."""

    rollout_id: str
    invocations: dict[str, Invocation] = field(default_factory=dict)
    compactions: list[Compaction] = field(default_factory=list)
    tool_calls: dict[str, ToolCall] = field(default_factory=dict)
    unjoined: int = 0
    notes: list[str] = field(default_factory=list)

    def for_call(self, call_id: str, function_call_ids: Collection[str] = ()) -> list[dict[str, Any]]:
        """The evidence objects about ``call_id`` (docs/contract.md#evidence), JSON-native, each with a
        ``kind`` and the ``call_id`` it is about. ``function_call_ids``: the ``call_id`` of
        each ``function_call`` in the call's output items, for its tool-call timings."""
        out: list[dict[str, Any]] = []
        for inv in self.invocations.values():
            if call_id in inv.calls:
                out.append({"kind": "invocation", "call_id": call_id, "invocation_id": inv.invocation_id,
                            "parent_invocation_id": inv.parent_invocation_id,
                            "spawned_by_tool_call_id": inv.spawned_by_tool_call_id})
        for comp in self.compactions:
            if comp.after_call == call_id:
                out.append({"kind": "compaction_after", "call_id": call_id, "trigger": comp.trigger,
                            "tokens_before": comp.tokens_before, "tokens_after": comp.tokens_after,
                            "observed_at": comp.observed_at})
            if call_id in comp.calls:
                out.append({"kind": "compaction_call", "call_id": call_id, "trigger": comp.trigger,
                            "observed_at": comp.observed_at})
        tools = [self.tool_calls[t] for t in function_call_ids if t in self.tool_calls]
        if tools:
            out.append({"kind": "tool_calls", "call_id": call_id, "calls": [
                {"tool_call_id": t.tool_call_id, "tool_name": t.tool_name, "status": t.status,
                 "duration_ms": t.duration_ms} for t in tools]})
        return out

    def cause_for(self, call_id: str, created: Mapping[str, tuple[float, str]]) -> str | None:
        """The cause the evidence gives ``call_id``, or None: ``compaction`` when a
        compaction's ``after_model_call`` is the call, else ``compaction_summary`` when it is
        one of a compaction's ``model_calls``, else ``subagent`` when it is the earliest
        joined call (by ``created``, its ``(created_at, call id)``) of an invocation that
        has a parent invocation."""
        if any(c.after_call == call_id for c in self.compactions):
            return "compaction"
        if any(call_id in c.calls for c in self.compactions):
            return "compaction_summary"
        for inv in self.invocations.values():
            if inv.parent_invocation_id is None or call_id not in inv.calls:
                continue
            timed = [c for c in inv.calls if c in created]
            if timed and min(timed, key=lambda c: created[c]) == call_id:
                return "subagent"
        return None


# --------------------------------------------------------------------------- parsing


def _get(obj: Mapping[str, Any], key: str, path: str, kinds: tuple[type, ...], what: str,
         required: bool = False) -> Any:
    value = obj.get(key)
    if value is None:
        if required:
            raise _Bad(f"{path}.{key}", "is missing")
        return None
    if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
        raise _Bad(f"{path}.{key}", f"must be {what}, got {type_name(value)}")
    return value


def _number(obj: Mapping[str, Any], key: str, path: str) -> float | None:
    value = _get(obj, key, path, (int, float), "a number")
    return value


def _integer(obj: Mapping[str, Any], key: str, path: str) -> int | None:
    return _get(obj, key, path, (int,), "a whole number")


@overload
def _text(obj: Mapping[str, Any], key: str, path: str, required: Literal[True]) -> str: ...
@overload
def _text(obj: Mapping[str, Any], key: str, path: str, required: bool = False) -> str | None: ...
def _text(obj: Mapping[str, Any], key: str, path: str, required: bool = False) -> str | None:
    return _get(obj, key, path, (str,), "a string", required)


def _object(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _Bad(path, f"must be an object, got {type_name(value)}")
    return value


def _list(obj: Mapping[str, Any], key: str, path: str) -> list[Any]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Bad(f"{path}.{key}", f"must be a list, got {type_name(value)}")
    return value


class _Parser:
    def __init__(self, rollout_id: str, call_ids: Collection[str]) -> None:
        self.out = HarnessEvidence(rollout_id)
        self.call_ids = call_ids
        self.by_response: dict[str, str | None] = {}  # response id -> its one model call id; None: several
        self.dropped = 0

    def note(self, path: str, problem: str) -> None:
        if len(self.out.notes) < MAX_NOTES:
            self.out.notes.append(f"rollout {self.out.rollout_id}: harness evidence {path} {problem}; left out")
        else:
            self.dropped += 1

    def each(self, items: list[Any], path: str, read) -> None:
        for index, item in enumerate(items):
            try:
                read(_object(item, f"{path}[{index}]"), f"{path}[{index}]")
            except _Bad as bad:
                self.note(bad.path, bad.problem)

    # references ------------------------------------------------------------

    def capture(self, value: Any) -> None:
        try:
            obj = _object(value, "ng_model_call_capture")
            calls = _list(obj, "calls", "ng_model_call_capture")
        except _Bad as bad:
            self.note(bad.path, bad.problem)
            return
        seen: dict[str, set[str]] = {}

        def read(call: Mapping[str, Any], path: str) -> None:
            call_id = _text(call, "model_call_id", path)
            response_id = _text(call, "response_id", path)
            if response_id is not None and call_id is not None:  # a call without an id joins nothing
                seen.setdefault(response_id, set()).add(call_id)
        self.each(calls, "ng_model_call_capture.calls", read)
        for response_id, ids in seen.items():
            self.by_response[response_id] = next(iter(ids)) if len(ids) == 1 else None

    def join(self, ref: Any, path: str) -> str | None:
        """The captured call a model-call reference names, or None (counted as not joined)."""
        obj = _object(ref, path)
        call_id = _text(obj, "model_call_id", path)
        response_id = _text(obj, "response_id", path)
        if call_id is None and response_id is not None:
            call_id = self.by_response.get(response_id)
        if call_id is not None and call_id in self.call_ids:
            return call_id
        self.out.unjoined += 1
        return None

    def joined(self, obj: Mapping[str, Any], key: str, path: str) -> tuple[str, ...]:
        refs = _list(obj, key, path)
        calls = []
        for index, ref in enumerate(refs):
            call_id = self.join(ref, f"{path}.{key}[{index}]")
            if call_id is not None and call_id not in calls:
                calls.append(call_id)
        return tuple(calls)

    # records ---------------------------------------------------------------

    def invocation(self, obj: Mapping[str, Any], path: str) -> None:
        inv = Invocation(_text(obj, "invocation_id", path, required=True),
                         _text(obj, "parent_invocation_id", path), _text(obj, "spawned_by_tool_call_id", path),
                         self.joined(obj, "model_calls", path))
        known = self.out.invocations.get(inv.invocation_id)
        if known is not None:  # seen in the other source: counted once, its calls united
            inv = Invocation(known.invocation_id, known.parent_invocation_id or inv.parent_invocation_id,
                             known.spawned_by_tool_call_id or inv.spawned_by_tool_call_id,
                             known.calls + tuple(c for c in inv.calls if c not in known.calls))
        self.out.invocations[inv.invocation_id] = inv

    def tool_call(self, obj: Mapping[str, Any], path: str) -> None:
        tool = ToolCall(_text(obj, "tool_call_id", path, required=True),
                        _text(obj, "tool_name", path), _text(obj, "status", path), _number(obj, "duration_ms", path))
        self.out.tool_calls.setdefault(tool.tool_call_id, tool)

    def compaction(self, obj: Mapping[str, Any], path: str) -> None:
        trigger, before = _text(obj, "trigger", path), _integer(obj, "tokens_before", path)
        after_tokens = _integer(obj, "tokens_after", path)
        observed = _get(obj, "observed_at", path, (int, float, str), "a number or a string")
        after = obj.get("after_model_call")
        after_call = self.join(after, f"{path}.after_model_call") if after is not None else None
        self.out.compactions.append(Compaction(after_call, self.joined(obj, "model_calls", path), trigger, before,
                                               after_tokens, observed))

    def observation(self, obj: Mapping[str, Any], path: str) -> None:
        kind = _text(obj, "kind", path, required=True)
        if kind not in OBSERVATION_KINDS:
            raise _Bad(f"{path}.kind", f"is {kind!r}, not a known kind ({', '.join(OBSERVATION_KINDS)})")
        if kind == "agent_invocation":
            self.invocation(obj, path)
        elif kind == "tool_call":
            self.tool_call(obj, path)
        elif kind == "context_compaction":
            self.compaction(obj, path)

    def observations(self, value: Any) -> None:
        try:
            records = _list(_object(value, "ng_agent_observations"), "records", "ng_agent_observations")
        except _Bad as bad:
            self.note(bad.path, bad.problem)
            return
        self.each(records, "ng_agent_observations.records", self.observation)

    def trajectory(self, value: Any) -> None:
        path = "ng_trajectory"
        try:
            obj = _object(value, path)
            schema = obj.get("schema")
            if schema is not None and schema != TRAJECTORY_SCHEMA:
                raise _Bad(f"{path}.schema", f"is {schema!r}; only schema {TRAJECTORY_SCHEMA!r} is read")
            invocations = _list(obj, "invocations", path)
            tool_calls = _list(obj, "tool_calls", path)
            model_calls = _list(obj, "model_calls", path)
        except _Bad as bad:
            self.note(bad.path, bad.problem)
            return
        self.each(invocations, f"{path}.invocations", self.invocation)
        self.each(tool_calls, f"{path}.tool_calls", self.tool_call)
        self.each(model_calls, f"{path}.model_calls", self.model_call)

    def model_call(self, obj: Mapping[str, Any], path: str) -> None:
        """A trajectory model call that names its invocation joins that invocation."""
        invocation_id = _text(obj, "invocation_id", path)
        call_id = self.join(obj, path)
        if invocation_id is None or call_id is None:
            return
        known = self.out.invocations.get(invocation_id)
        if known is None:
            known = Invocation(invocation_id, None, None, ())
        if call_id not in known.calls:
            known = Invocation(known.invocation_id, known.parent_invocation_id, known.spawned_by_tool_call_id,
                               known.calls + (call_id,))
        self.out.invocations[invocation_id] = known


def parse_evidence(record: Any, *, rollout_id: str, call_ids: Collection[str]) -> HarnessEvidence:
    """The harness evidence of one rollout record, joined to ``call_ids`` (the captured
    calls). Never raises: whatever is malformed is left out with a note."""
    parser = _Parser(rollout_id, call_ids)
    if record is None:
        return parser.out
    if not isinstance(record, Mapping):
        parser.note("(the record)", f"must be an object, got {type_name(record)}")
        return parser.out
    loader_notes = record.get(NOTES_KEY)
    if isinstance(loader_notes, list):
        parser.out.notes.extend(str(n) for n in loader_notes[:MAX_NOTES])
    try:
        if record.get("ng_model_call_capture") is not None:
            parser.capture(record["ng_model_call_capture"])
        if record.get("ng_agent_observations") is not None:
            parser.observations(record["ng_agent_observations"])
        if record.get("ng_trajectory") is not None:
            parser.trajectory(record["ng_trajectory"])
    except RecursionError:  # pragma: no cover -- parsed JSON is never this deep; still never fail
        parser.note("(the record)", "is nested too deeply to read")
    if parser.out.unjoined:
        n = parser.out.unjoined
        parser.out.notes.append(f"rollout {rollout_id}: {n} model-call reference{'s' if n != 1 else ''} in the harness "
                                f"evidence join{'s' if n == 1 else ''} no captured call (by model_call_id, or a "
                                "response_id exactly one captured call has); not used")
    if parser.dropped:
        parser.out.notes.append(f"rollout {rollout_id}: {parser.dropped} more problems in the harness evidence")
    return parser.out


__all__ = ["Compaction", "DELIVERY_FIELDS", "EVIDENCE_FIELDS", "HarnessEvidence", "Invocation", "NOTES_KEY",
           "OBSERVATION_KINDS", "ToolCall", "parse_evidence"]
