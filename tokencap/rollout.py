"""Rollout assembly: what a trainer receives for one snapshot (docs/contract.md#rollout).

`build_rollout` never raises on bad data. It always returns a `RolloutResult` whose
``mask_sample`` says whether the trainer must drop the sample and whose ``mask_reasons``
say why, in a fixed order. It is fail-closed: any doubt about lineage masks the sample.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .attribution import TerminalAttribution, attribute_terminal, given_metric
from .builder import BuildOutput, chain_prepared, prepare_entries
from .projection import json_native, main_chain_payload, main_chain_status
from .records import TokenCaptureSnapshot
from .verdicts import FinishReasonVerdict, RefusalVerdict, judge_finish_reason, judge_refusals, twins_of

MASK_REASON_ORDER = (
    "load_error", "capture_incomplete", "no_records", "build_error", "unresolved_retries",
    "unresolved_parent_calls", "multiple_roots", "multiple_chains", "no_generated_tokens",
    "terminal_call_not_delivered",
)

MASK_REASON_TEXT = {
    "load_error": "the snapshot could not be loaded",
    "capture_incomplete": ("a call of this rollout failed to capture, or the store files that would say so are "
                           "missing, so the trajectory may be missing a turn"),
    "no_records": "the snapshot holds no token entries",
    "build_error": "the builder failed on this snapshot",
    "unresolved_retries": ("retries of one request generated different tokens and nothing shows which one the "
                           "harness kept"),
    "unresolved_parent_calls": ("some calls' parent links could not be proven (or records were corrupt), so "
                                "fragments may be missing"),
    "multiple_roots": "more than one root: the rollout splits into independent fragments",
    "multiple_chains": "more than one chain: branches or fragments besides the delivered one",
    "no_generated_tokens": "the delivered chain has no generated token to train on",
    "terminal_call_not_delivered": "the terminal call (given, or attributed from the harness's final response) is "
                                   "not provably the delivered chain's end",
}
"""Plain-words explanation of every mask reason, for reports and the app."""


@dataclass
class RolloutResult:
    """One rollout's build, verdict and metrics. Also readable as a mapping (``result["metrics"]``).

    ``payload`` is the delivered chain's Responses payload with token fields as numpy views
    (what the streaming writer in `tokencap.export` reads); ``rebuilt_response`` is the same
    payload in JSON-native types, made on first access.
    """

    rollout_id: str
    mask_sample: bool
    mask_reasons: list[str]
    metrics: dict[str, Any]
    payload: dict[str, Any] | None = field(repr=False)
    build: BuildOutput | None
    refusal_verdicts: list[RefusalVerdict] = field(default_factory=list)
    finish_reason_verdict: FinishReasonVerdict | None = None
    terminal_call_id: str | None = None
    """The call the build was anchored on: the given terminal id, else the attributed one."""
    terminal_attribution: TerminalAttribution | None = None
    """What the harness's final response attributed (kept even when a given id overrode it)."""
    notes: list[str] = field(default_factory=list)
    """What a person must be told about this build that the verdict alone does not say (a
    given terminal call id that names no call of the rollout). Not part of `summary`: the
    build's JSON is fixed by the contract; the command line prints these on stderr and the
    app shows them with the verdict."""

    @cached_property
    def rebuilt_response(self) -> dict[str, Any] | None:
        """The delivered chain as a JSON-native Responses object (``json.dumps`` works), or None."""
        return json_native(self.payload) if self.payload is not None else None

    def __getitem__(self, key: str) -> Any:
        if key not in _MAPPING_KEYS:
            raise KeyError(key)
        return getattr(self, key)

    def keys(self) -> tuple[str, ...]:
        return _MAPPING_KEYS

    def summary(self) -> dict[str, Any]:
        """What `tokencap build` writes: rollout_id, mask_sample, mask_reasons, metrics, rebuilt_response."""
        return {
            "rollout_id": self.rollout_id,
            "mask_sample": self.mask_sample,
            "mask_reasons": list(self.mask_reasons),
            "metrics": self.metrics,
            "rebuilt_response": self.rebuilt_response,
        }


_MAPPING_KEYS = ("rollout_id", "rebuilt_response", "mask_sample", "mask_reasons", "metrics", "build")


def _ordered(reasons: set[str]) -> list[str]:
    return [r for r in MASK_REASON_ORDER if r in reasons]


def _metrics(snapshot: TokenCaptureSnapshot, build: BuildOutput | None, status: tuple[str, str | None] | None,
             error: str | None, attribution: dict[str, Any] | None = None) -> dict[str, Any]:
    n_calls = len({getattr(e, "model_call_id", None) for e in snapshot.entries})
    notes = build.notes if build is not None else None
    quarantined = len(build.quarantined) if build is not None else 0
    return {
        "n_calls": n_calls,
        "chains": notes.chains if notes else 0,
        "roots": notes.roots if notes else 0,
        "quarantined_calls": quarantined,
        "quarantined_fraction": round(quarantined / n_calls, 4) if n_calls else 0.0,
        "delivered_fraction": notes.delivered_fraction if notes else 0.0,
        "generated_tokens_captured": notes.generated_tokens_captured if notes else 0,
        "generated_tokens_delivered": notes.generated_tokens_delivered if notes else 0,
        "parent_link_failures": dict(notes.parent_link_failures) if notes else {},
        "unresolved_parent_calls": len(notes.unresolved_parent_calls) if notes else 0,
        "empty_generation_calls": len(notes.empty_generation_calls) if notes else 0,
        "after_terminal_calls": len(notes.after_terminal_calls) if notes else 0,
        "engine_refusals": len(snapshot.engine_refusals),
        "capture_incomplete": bool(snapshot.incomplete),
        "status": status[0] if status else None,
        "incomplete_reason": status[1] if status else None,
        "error": error,
        "terminal_attribution": attribution,
    }


def build_rollout(snapshot: TokenCaptureSnapshot, terminal_call_id: str | None = None, model: str = "",
                  final_response: Mapping[str, Any] | None = None, *, project: bool = True) -> RolloutResult:
    """Build, judge and project one snapshot. Never raises on bad data (docs/contract.md#rollout).

    ``project=False`` skips the Responses payload (``payload`` and ``rebuilt_response`` are
    None) and changes nothing else: the verdict and every metric, status included, are the
    same. A run scan, which reads only those, builds this way.

    With the harness's ``final_response`` (a Responses object) and no ``terminal_call_id``,
    the terminal call is attributed from it first and the build is anchored there
    (docs/contract.md#attribution); an explicit ``terminal_call_id`` always wins. A snapshot that
    is not built (load error, no records, build error) reports no attribution (``terminal_attribution`` null).
    A snapshot read from a rollout record's output items (docs/contract.md#token-rollouts) is its own final
    response: without ``final_response``, its ``record``'s is used.
    """
    if final_response is None and snapshot.record is not None:
        final_response = snapshot.record.for_rollout(snapshot.rollout_id, single_rollout=True)
    reasons: set[str] = set()
    if snapshot.incomplete:
        reasons.add("capture_incomplete")
    if snapshot.load_error is not None or not snapshot.entries:
        reasons.add("load_error" if snapshot.load_error is not None else "no_records")
        return RolloutResult(snapshot.rollout_id, True, _ordered(reasons),
                             _metrics(snapshot, None, None, snapshot.load_error), None, None,
                             terminal_call_id=terminal_call_id)
    try:
        return _build_checked(snapshot, terminal_call_id, model, set(reasons), final_response, project)
    except Exception as exc:  # noqa: BLE001 -- fail closed: a bug or a malformed record masks, never crashes a run
        reasons.add("build_error")
        message = f"{type(exc).__name__}: {exc}"
        return RolloutResult(snapshot.rollout_id, True, _ordered(reasons), _metrics(snapshot, None, None, message),
                             None, None, terminal_call_id=terminal_call_id)


def _build_checked(snapshot: TokenCaptureSnapshot, terminal_call_id: str | None, model: str,
                   reasons: set[str], final_response: Mapping[str, Any] | None, project: bool = True) -> RolloutResult:
    prepared = prepare_entries(snapshot.entries)
    attribution: TerminalAttribution | None = None
    attribution_metric: dict[str, Any] | None = None
    anchor = terminal_call_id
    if final_response is not None:
        # Attribution reads only the materialized entries (docs/contract.md#attribution: build.entries), so it
        # runs between preparation and chaining and the build happens once, anchored.
        if terminal_call_id is not None:
            attribution_metric = given_metric(terminal_call_id)  # an explicit id always wins
            try:  # what the final response alone would say, for display only
                attribution = attribute_terminal(BuildOutput(entries=prepared.full), final_response)
            except ValueError:
                attribution = None
        else:
            attribution = attribute_terminal(BuildOutput(entries=prepared.full), final_response)
            attribution_metric = attribution.metric()
            if attribution.attributed:
                anchor = attribution.call_id
            else:
                # Unattributed or ambiguous: the harness's answer is not provably the
                # delivered chain's end, so no anchor is guessed and the sample is masked.
                reasons.add("terminal_call_not_delivered")
    build = chain_prepared(prepared, terminal_call_id=anchor)
    for chain in build.chains:
        chain.validate()
    notes = build.notes
    if notes.unresolved_retries:
        reasons.add("unresolved_retries")
    if notes.unresolved_parent_calls:
        reasons.add("unresolved_parent_calls")
    if notes.roots > 1:
        reasons.add("multiple_roots")
    if notes.chains > 1:
        reasons.add("multiple_chains")
    if anchor is not None and notes.terminal_chain != "main":
        reasons.add("terminal_call_not_delivered")
    said = [] if terminal_call_id is None or notes.terminal_chain != "missing" else \
        [terminal_not_chained_note(snapshot, build, terminal_call_id)]
    other_model = record_model_note(snapshot, final_response)
    if other_model:
        said.append(other_model)

    main = build.main
    terminal = main.links[-1].entry if main is not None and main.links else None
    twins = twins_of(terminal, build) if terminal is not None else None
    refusal_verdicts = judge_refusals(snapshot.engine_refusals, terminal, build, twins)
    finish_verdict = judge_finish_reason(terminal, build, twins)
    if terminal_call_id is None and attribution is not None and attribution.attributed \
            and notes.terminal_chain == "main" and not attribution.finish_reason_resolved and finish_verdict.resolved:
        # Attributed twins that disagree on the finish reason withhold it. The delivered
        # last call's own twin group is normally the same group, so this rarely changes
        # anything; it makes sure the status never rests on which twin drew the smaller id.
        disagreeing = {cid: build.entries[cid].finish_reason for cid in attribution.candidates}
        finish_verdict = FinishReasonVerdict(finish_verdict.terminal_call_id,
                                             {**finish_verdict.finish_reasons, **disagreeing}, False)
    finish_resolved = finish_verdict.resolved
    payload = None
    status = None
    if main is None or main.generated_tokens == 0:
        reasons.add("no_generated_tokens")
    else:
        if project:
            assert terminal is not None  # a main chain with generated tokens has calls
            payload = main_chain_payload(
                snapshot.rollout_id, build, model=model or terminal.model,
                finish_reason_resolved=finish_resolved, engine_refusals=snapshot.engine_refusals)
            status = (payload["status"], payload.get("incomplete_details", {}).get("reason"))
        else:
            status = main_chain_status(build, finish_resolved, snapshot.engine_refusals)
    return RolloutResult(
        rollout_id=snapshot.rollout_id,
        mask_sample=bool(reasons),
        mask_reasons=_ordered(reasons),
        metrics=_metrics(snapshot, build, status, None, attribution_metric),
        payload=payload,
        build=build,
        refusal_verdicts=refusal_verdicts,
        finish_reason_verdict=finish_verdict,
        terminal_call_id=anchor,
        terminal_attribution=attribution,
        notes=said,
    )


def record_model_note(snapshot: TokenCaptureSnapshot, final_response: Mapping[str, Any] | None) -> str | None:
    """A note when the rollout record applied to ``snapshot`` names a model none of its calls was served
    by: likely a record of another run (a record without a rollout_id is applied to a source's only
    rollout, whatever it is), whose final answer then decides the rollout's anchor, or masks it."""
    model = final_response.get("model") if final_response is not None else None
    served = sorted({e.model for e in snapshot.entries if e.model})
    if not isinstance(model, str) or not model or not served or model in served:
        return None
    return (f"the rollout record applied to {snapshot.rollout_id} names model {model!r}, but its calls were served "
            f"by {', '.join(repr(m) for m in served)}: check that the record belongs to this rollout (a record "
            "without a rollout_id is applied to a source holding a single rollout)")


_LISTED_CALLS = 5


def terminal_not_chained_note(snapshot: TokenCaptureSnapshot, build: BuildOutput, call_id: str) -> str:
    """Why a given terminal call id anchors nothing: no call of the rollout has it, or it is
    not among the chained calls (no generated token, or excluded as unverifiable)."""
    masked = "the rollout is masked (terminal_call_not_delivered)"
    ids = sorted({e.model_call_id for e in snapshot.entries})
    if call_id not in ids:
        listed = ", ".join(ids[:_LISTED_CALLS]) + (f" and {len(ids) - _LISTED_CALLS} more"
                                                   if len(ids) > _LISTED_CALLS else "")
        return f"terminal call {call_id} is not in rollout {snapshot.rollout_id}; {masked} (its calls: {listed})"
    if call_id in build.notes.empty_generation_calls:
        why = "it generated no token, so it is not chained"
    else:
        why = f"it was excluded ({build.excluded.get(call_id, 'not chained')})"
    return f"terminal call {call_id} of rollout {snapshot.rollout_id} is not delivered: {why}; {masked}"
