"""Terminal attribution for the app: which final responses apply, and what they decided.

* `FinalResponsesChoice` / `final_responses_choice`: the harness final responses the page
  uses -- an upload beats the file bundled with a sample scenario -- and the note when
  they name rollouts that are not loaded;
* `AttributionView` / `attribution_view`: outcome, method and candidates of one rollout in
  plain words, with a table of the candidate calls (Verdicts tab);
* `anchor_summary`: what the Export tab says about the anchor (the harness's answer, or a
  manual anchor overriding it);
* `none_anchor_label`: how the anchor picker names "no manual anchor".

No Streamlit here; the page only lays these out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ...attribution import AMBIGUOUS, ATTRIBUTED, GIVEN, UNATTRIBUTED
from ...loading import FinalResponses, load_final_responses, responses_for
from ...records import TokenCaptureSnapshot
from ...rollout import RolloutResult
from ..formatting import md_escape
from ..model import RolloutView
from .verdicts import anchor_effect

FINAL_RESPONSE_TYPES = ("json", "jsonl")
"""File types the final-responses uploader accepts."""

METHOD_TEXT = {
    "tokens": "by tokens: a call holds exactly the final answer's token ids",
    "content": "by content: the final response carries no token ids, so its final turn (text, tool calls, "
               "reasoning summaries) was compared with each call's output items",
}


# --------------------------------------------------------------------------- which file applies


@dataclass(frozen=True)
class FinalResponsesChoice:
    """The final responses in use (or why there are none), with a content key for caches."""

    finals: FinalResponses | None = None
    label: str = ""
    """How to name the file: the upload's name, or the bundled file's path."""
    key: str | None = None
    """Content hash plus name: the rollout cache key part (None: no final responses)."""
    bundled: bool = False
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    given: bool = False
    """Named on the command line (``tokencap app FILE --final-responses RECORDS``)."""

    def response_for(self, rollout_id: str, n_rollouts: int) -> tuple[dict[str, Any] | None, str | None]:
        """(final response, cache key) for one loaded rollout; (None, None) when none applies."""
        if self.finals is None:
            return None, None
        single = n_rollouts == 1
        response = self.finals.for_rollout(rollout_id, single_rollout=single)
        return (response, f"{self.key}:{int(single)}") if response is not None else (None, None)


OWN_RECORD_KEY = "own-record"
"""The cache key part of a rollout built with its own record (docs/contract.md#token-rollouts), not an uploaded file."""


def own_record(snapshot: TokenCaptureSnapshot) -> tuple[dict[str, Any] | None, dict[str, Any] | None] | None:
    """(final response, harness evidence) of a rollout read from a rollout record's output items
    (docs/contract.md#token-rollouts): its record is its own, whatever file is uploaded beside it; None for a
    # capture."""
    if snapshot.record is None:
        return None
    return responses_for(snapshot, None, single_rollout=True, evidence=True)


def read_final_responses(name: str, data: bytes) -> tuple[FinalResponses | None, str | None]:
    """Parse uploaded bytes; never raises (the loader's message names file, line and field)."""
    try:
        return load_final_responses(data, name=name), None
    except ValueError as exc:
        return None, " ".join(str(exc).split())


def content_key(name: str, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    return f"{digest}-{hashlib.sha256(name.encode('utf-8', 'surrogateescape')).hexdigest()[:12]}"


def final_responses_choice(upload: tuple[str, bytes] | None, bundled: Path | None,
                           parse: Any = read_final_responses, given: Path | None = None) -> FinalResponsesChoice:
    """The upload when there is one, else the scenario's bundled file, else the file ``given`` on the
    command line for the path shown, else nothing.

    ``parse(name, data)`` returns ``(FinalResponses | None, error | None)``; the page passes
    a cached version of `read_final_responses`.
    """
    if upload is not None:
        name, data = upload
        finals, error = parse(name, data)
        return FinalResponsesChoice(finals, name, content_key(name, data) if finals else None, False, error)
    if bundled is not None:
        try:
            data = bundled.read_bytes()
        except OSError as exc:
            return FinalResponsesChoice(None, str(bundled), None, True, f"{bundled}: cannot be read ({exc})")
        label = f"sample_data/{bundled.parent.name}/{bundled.name}"
        finals, error = parse(label, data)
        return FinalResponsesChoice(finals, label, content_key(label, data) if finals else None, True, error)
    if given is not None:
        try:
            data = given.read_bytes()
        except OSError as exc:
            return FinalResponsesChoice(None, str(given), None, error=f"{given}: cannot be read "
                                        f"({exc.strerror or exc})", given=True)
        finals, error = parse(str(given), data)
        return FinalResponsesChoice(finals, str(given), content_key(str(given), data) if finals else None, False,
                                    error, given=True)
    return FinalResponsesChoice()


def choice_caption(choice: FinalResponsesChoice) -> str | None:
    """What the sidebar says about the final responses in use (Markdown; None when there are none)."""
    if choice.finals is None:
        return None
    n = len(choice.finals)
    where = "bundled with this scenario" if choice.bundled else "from the command line" if choice.given else "uploaded"
    return (f"Terminal attribution from {md_escape(choice.label)} ({where}, {n} final "
            f"response{'s' if n != 1 else ''}); a manual anchor under Export overrides it.")


def run_records_caption(choice: FinalResponsesChoice) -> str:
    """What the sidebar says when a rollout handed over by the Run page is built with its run's records."""
    return f"Built with the run's rollout records: {md_escape(Path(choice.label).name)}"


def with_notes(choice: FinalResponsesChoice, rollout_ids: Iterable[str]) -> FinalResponsesChoice:
    """The choice with notes about responses that apply to no loaded rollout (not errors)."""
    if choice.finals is None:
        return choice
    return FinalResponsesChoice(choice.finals, choice.label, choice.key, choice.bundled, choice.error,
                                choice.finals.notes(list(rollout_ids)), choice.given)


# --------------------------------------------------------------------------- one rollout


@dataclass
class AttributionView:
    outcome: str
    """attributed / ambiguous / unattributed / given."""
    tone: str
    """success / warning / error / info -- how the page frames the summary."""
    headline: str
    summary: str
    method: str
    candidates: pd.DataFrame


def _candidates_frame(view: RolloutView, ids: Iterable[str], attributed: str | None) -> pd.DataFrame:
    build = view.build
    roles = view.roles
    notes = build.notes if build is not None else None
    rows = []
    for cid in ids:
        entry = build.entries.get(cid) if build is not None else None
        if notes is not None and notes.terminal_chain == "main" and cid == notes.terminal_call_id:
            role = "anchored: the delivered chain ends here"
        elif cid == attributed:
            role = "attributed (the anchor moved to its twin)" if notes is not None and \
                notes.terminal_call_id != cid else "attributed"
        else:
            role = (roles.get(cid) or "not chained").replace("_", " ")
        rows.append({
            "call": cid,
            "role": role,
            "finish_reason": "null" if entry is None or entry.finish_reason is None else entry.finish_reason,
            "prompt": int(entry.prompt_token_ids.size) if entry is not None else None,
            "generated": int(entry.generation_token_ids.size) if entry is not None else None,
        })
    return pd.DataFrame(rows, columns=["call", "role", "finish_reason", "prompt", "generated"])


def attribution_view(view: RolloutView) -> AttributionView | None:
    """The rollout's terminal attribution in plain words; None without a final response."""
    result = view.result
    metric = result.metrics.get("terminal_attribution")
    if metric is None:
        return None
    attribution = result.terminal_attribution
    outcome = metric["outcome"]
    if outcome == GIVEN:
        alone = attribution.describe() if attribution is not None else "the final response was not read"
        candidates = attribution.candidates if attribution is not None else []
        return AttributionView(
            outcome, "info", f"Manual anchor {metric['call_id']} overrides the harness's final answer",
            f"An explicit terminal call always wins. On its own, the final response says: {alone}.",
            METHOD_TEXT.get(attribution.method or "", "") if attribution is not None else "",
            _candidates_frame(view, candidates, attribution.call_id if attribution is not None else None))
    method = METHOD_TEXT.get(metric["method"] or "", "")
    frame = _candidates_frame(view, metric["candidates"], metric["call_id"])
    summary = attribution.describe() if attribution is not None else ""
    if outcome == ATTRIBUTED:
        build = result.build
        notes = build.notes if build is not None else None
        if notes is not None and notes.terminal_chain == "main":
            headline = f"Attributed: the delivered chain ends on the harness's final answer ({notes.terminal_call_id})"
            if notes.after_terminal_calls:
                summary += (f". Sent after the final answer and not delivered: "
                            f"{', '.join(notes.after_terminal_calls)}")
            return AttributionView(outcome, "success", headline, summary, method, frame)
        where = notes.terminal_chain if notes is not None and notes.terminal_chain else "not placed"
        return AttributionView(outcome, "error", f"Attributed to {metric['call_id']}, but that call is {where}",
                               summary + "; it cannot be delivered, so the sample is masked "
                               "(terminal_call_not_delivered)", method, frame)
    if outcome == AMBIGUOUS:
        return AttributionView(outcome, "error", "Ambiguous: the final answer matches calls with different tokens",
                               summary, method, frame)
    assert outcome == UNATTRIBUTED, outcome
    return AttributionView(outcome, "error", "Unattributed: no captured call produced the final answer",
                           summary, method, frame)


# --------------------------------------------------------------------------- export tab


def none_anchor_label(base: RolloutResult) -> str:
    """The anchor picker's "no manual anchor" entry."""
    metric = base.metrics.get("terminal_attribution")
    if metric is not None and metric["outcome"] == ATTRIBUTED:
        return f"(none) — anchored on the harness's final answer ({metric['call_id']})"
    if metric is not None:
        return f"(none) — the harness's final answer is {metric['outcome']}: no anchor"
    return "(none) — deliver the default chain"


def anchor_summary(base: RolloutResult, view: RolloutResult, manual_anchor: str | None) -> str:
    """One or two sentences on what the delivered chain is anchored on."""
    metric = base.metrics.get("terminal_attribution")
    if manual_anchor is None:
        if metric is None:
            return anchor_effect(base, view)
        if metric["outcome"] == ATTRIBUTED:
            notes = view.build.notes if view.build is not None else None
            moved = f" (its token-identical twin {notes.terminal_call_id} was anchored)" \
                if notes is not None and notes.terminal_call_id not in (None, metric["call_id"]) else ""
            return (f"Anchored on the harness's final answer: {metric['call_id']}{moved}, matched by "
                    f"{metric['method']}. Choose a call above to override it.")
        return (f"The harness's final answer is {metric['outcome']}, so no anchor is used and the sample is masked "
                "(terminal_call_not_delivered). Choose a call above to anchor by hand.")
    text = anchor_effect(base, view)
    if metric is not None and metric["outcome"] == ATTRIBUTED and metric["call_id"] != manual_anchor:
        text += f" This manual anchor overrides the harness's final answer ({metric['call_id']})."
    elif metric is not None and metric["outcome"] != ATTRIBUTED:
        text += f" It overrides the final-response attribution ({metric['outcome']})."
    return text
