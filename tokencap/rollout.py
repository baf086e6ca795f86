"""Rollout assembly: what a trainer receives for one snapshot (SPEC 7).

`build_rollout` never raises on bad data. It always returns a `RolloutResult` whose
``mask_sample`` says whether the trainer must drop the sample and whose ``mask_reasons``
say why, in a fixed order. It is fail-closed: any doubt about lineage masks the sample.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .builder import BuildOutput, prefix_merging
from .projection import project_main_chain_response
from .records import TokenCaptureSnapshot
from .verdicts import FinishReasonVerdict, RefusalVerdict, judge_finish_reason, judge_refusals, twins_of

MASK_REASON_ORDER = (
    "load_error", "capture_incomplete", "no_records", "build_error", "unresolved_retries",
    "unresolved_parent_calls", "multiple_roots", "multiple_chains", "no_generated_tokens",
    "terminal_call_not_delivered",
)

MASK_REASON_TEXT = {
    "load_error": "the snapshot could not be loaded",
    "capture_incomplete": "a call of this rollout failed to capture, so the trajectory may be missing a turn",
    "no_records": "the snapshot holds no token entries",
    "build_error": "the builder failed on this snapshot",
    "unresolved_retries": "retries of one request generated different tokens and nothing shows which one the harness kept",
    "unresolved_parent_calls": "some calls' parent links could not be proven (or records were corrupt), so fragments may be missing",
    "multiple_roots": "more than one root: the rollout splits into independent fragments",
    "multiple_chains": "more than one chain: branches or fragments besides the delivered one",
    "no_generated_tokens": "the delivered chain has no generated token to train on",
    "terminal_call_not_delivered": "the requested terminal call is not on the delivered chain",
}
"""Plain-words explanation of every mask reason, for reports and the app."""


@dataclass
class RolloutResult:
    """One rollout's build, verdict and metrics. Also readable as a mapping (``result["metrics"]``)."""

    rollout_id: str
    mask_sample: bool
    mask_reasons: list[str]
    metrics: dict[str, Any]
    rebuilt_response: dict[str, Any] | None
    build: BuildOutput | None
    refusal_verdicts: list[RefusalVerdict] = field(default_factory=list)
    finish_reason_verdict: FinishReasonVerdict | None = None
    terminal_call_id: str | None = None

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


def _metrics(snapshot: TokenCaptureSnapshot, build: BuildOutput | None, response: dict | None,
             error: str | None) -> dict[str, Any]:
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
        "status": response["status"] if response else None,
        "incomplete_reason": response["incomplete_details"]["reason"] if response and "incomplete_details" in response else None,
        "error": error,
    }


def build_rollout(snapshot: TokenCaptureSnapshot, terminal_call_id: str | None = None, model: str = "") -> RolloutResult:
    """Build, judge and project one snapshot. Never raises on bad data (SPEC 7)."""
    reasons: set[str] = set()
    if snapshot.incomplete:
        reasons.add("capture_incomplete")
    if snapshot.load_error is not None or not snapshot.entries:
        reasons.add("load_error" if snapshot.load_error is not None else "no_records")
        return RolloutResult(snapshot.rollout_id, True, _ordered(reasons),
                             _metrics(snapshot, None, None, snapshot.load_error), None, None,
                             terminal_call_id=terminal_call_id)
    try:
        return _build_checked(snapshot, terminal_call_id, model, set(reasons))
    except Exception as exc:  # noqa: BLE001 -- fail closed: a bug or a malformed record masks, never crashes a run
        reasons.add("build_error")
        message = f"{type(exc).__name__}: {exc}"
        return RolloutResult(snapshot.rollout_id, True, _ordered(reasons), _metrics(snapshot, None, None, message),
                             None, None, terminal_call_id=terminal_call_id)


def _build_checked(snapshot: TokenCaptureSnapshot, terminal_call_id: str | None, model: str,
                   reasons: set[str]) -> RolloutResult:
    build = prefix_merging(snapshot.entries, terminal_call_id=terminal_call_id)
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
    if terminal_call_id is not None and notes.terminal_chain != "main":
        reasons.add("terminal_call_not_delivered")

    main = build.main
    terminal = main.links[-1].entry if main is not None and main.links else None
    twins = twins_of(terminal, build) if terminal is not None else None
    refusal_verdicts = judge_refusals(snapshot.engine_refusals, terminal, build, twins)
    finish_verdict = judge_finish_reason(terminal, build, twins)
    response = None
    if main is None or main.generated_tokens == 0:
        reasons.add("no_generated_tokens")
    else:
        response = project_main_chain_response(
            snapshot.rollout_id, build, model=model or terminal.model,  # type: ignore[union-attr]
            finish_reason_resolved=finish_verdict.resolved, engine_refusals=snapshot.engine_refusals)
    return RolloutResult(
        rollout_id=snapshot.rollout_id,
        mask_sample=bool(reasons),
        mask_reasons=_ordered(reasons),
        metrics=_metrics(snapshot, build, response, None),
        rebuilt_response=response,
        build=build,
        refusal_verdicts=refusal_verdicts,
        finish_reason_verdict=finish_verdict,
        terminal_call_id=terminal_call_id,
    )
