"""The verdict of a rollout in plain words, and the reasoning behind it as tables.

* `verdict_banner`: trainable or masked, each mask reason explained, the response status,
  and the headline metrics;
* `refusal_frames`: every engine refusal with the three conditions of docs/contract.md#refusal-ended evaluated
  one by one, and its outcome;
* `finish_reason_frame`: the finish reasons of the delivered last call's twins and whether
  the verdict was withheld because they disagree;
* `notes_frame`, `failures_frame`, `retry_groups_frame`, `exclusions_frame`: the build notes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ...builder import RULE_UNRESOLVED, BuildOutput
from ...rollout import MASK_REASON_TEXT, RolloutResult, record_model_note
from ..formatting import fmt_fraction, fmt_int, json_text
from ..model import RolloutView
from ..words import NOTE_TEXT, RULE_TEXT, TERMS, label
from .culprits import ReasonLine, culprits_of

STATUS_TEXT = {
    "completed": "the delivered chain ended normally",
    "content_filter": "the last generation was stopped by the content filter",
}


@dataclass
class Metric:
    label: str
    value: str
    help: str = ""
    alert: bool = False


@dataclass
class Banner:
    trainable: bool
    headline: str
    reasons: list[tuple[str, str]] = field(default_factory=list)  # (code, plain words)
    status: str | None = None
    incomplete_reason: str | None = None
    status_text: str = ""
    metrics: list[Metric] = field(default_factory=list)
    error: str | None = None
    anchor: str | None = None
    terminal_chain: str = ""
    lines: list[ReasonLine] = field(default_factory=list)  # each reason with its culprits (banner_of)

    @property
    def status_line(self) -> str:
        if self.status is None:
            return "no response (nothing delivered)"
        if self.incomplete_reason:
            return f"{self.status} ({self.incomplete_reason})"
        return self.status


def verdict_banner(result: RolloutResult) -> Banner:
    m = result.metrics
    trainable = not result.mask_sample
    n_reasons = len(result.mask_reasons)
    headline = ("Trainable — the trainer receives this rollout" if trainable else
                f"Masked — the trainer drops this rollout ({n_reasons} reason{'s' if n_reasons != 1 else ''})")
    status = m.get("status")
    reason = m.get("incomplete_reason")
    ended_by = next((v.refusal.model_call_id for v in result.refusal_verdicts if v.ended_chain), None)
    if not status:
        status_text = "no delivered chain with generated tokens, so no response was built"
    elif ended_by is not None:
        status_text = (f"engine refusal {ended_by} ended the run: the next request did not fit the context window "
                       "(see Verdicts)")
    elif reason == "max_output_tokens":
        status_text = "the last generation hit the output-token limit (finish_reason 'length')"
    else:
        status_text = STATUS_TEXT.get(reason or status, "")
    build = result.build
    boundaries = sum(1 for d in build.links.values() if d.boundary) if build is not None else 0
    excluded = len(build.excluded) + len(build.conflicting_duplicates) if build is not None else 0
    captured = m.get("generated_tokens_captured")
    metrics = [
        Metric("calls", fmt_int(m.get("n_calls")), "distinct call ids among the snapshot's entries"),
        Metric("chains", fmt_int(m.get("chains")), TERMS["chain"] + "; more than one masks the rollout",
               alert=(m.get("chains") or 0) > 1),
        Metric("delivered", fmt_fraction(m.get("delivered_fraction")),
               f"delivered fraction: {TERMS['delivered fraction']} ({fmt_int(m.get('generated_tokens_delivered'))} "
               f"of {fmt_int(captured)} generated tokens)"),
        Metric("quarantined", fmt_int(m.get("quarantined_calls")), f"quarantined calls: {TERMS['quarantined']}"),
        Metric("unproven links", fmt_int(boundaries), f"{TERMS['unproven link']}",
               alert=boundaries > 0),
        Metric("excluded", fmt_int(excluded), f"excluded records: {TERMS['excluded record']}; conflicting copies "
               "of one call id count too", alert=excluded > 0),
        Metric("empty gen.", fmt_int(m.get("empty_generation_calls")),
               f"empty generations: {TERMS['empty generation']}"),
        Metric("refusals", fmt_int(m.get("engine_refusals")), f"engine refusals: {TERMS['engine refusal']}"),
    ]
    return Banner(
        trainable=trainable,
        headline=headline,
        reasons=[(r, MASK_REASON_TEXT.get(r, r)) for r in result.mask_reasons],
        status=status,
        incomplete_reason=reason,
        status_text=status_text,
        metrics=metrics,
        error=m.get("error"),
        anchor=result.terminal_call_id,
        terminal_chain=build.notes.terminal_chain if build is not None else "",
    )


def banner_of(view: RolloutView, tokenizer: Any = None, key: str = "") -> Banner:
    """The view's banner with every reason's culprits (and why each lineage broke, its text refined by
    ``tokenizer``, named by ``key``), computed once per view and tokenizer."""
    def compute(v: RolloutView) -> Banner:
        banner = verdict_banner(v.result)
        banner.lines = culprits_of(v, tokenizer, key)
        return banner
    return view.derived(f"banner:{key}" if tokenizer is not None else "banner", compute)


def record_notes(view: RolloutView) -> list[str]:
    """What the banner says of the rollout record applied to the view, sentence-cased: a record naming a
    model none of the rollout's calls was served by (`tokencap inspect` warns the same)."""
    note = record_model_note(view.snapshot, view.final_response)
    return [note[:1].upper() + note[1:]] if note else []


CONDITION_QUESTIONS = {
    "context window": ("Was it a context-window refusal?", "yes"),
    "continued the last call": ("Did it continue the delivered chain's last call (or a twin of it)?", "yes"),
    "not recovered": ("Was the last call (or a twin) served again at or after the refusal?", "no"),
}
"""Each condition of docs/contract.md#refusal-ended as a positively phrased question, with the answer under which the
refusal ends the run. ("not recovered ✗" would be a double negative.)"""


def conditions_frame(verdict: Any) -> pd.DataFrame:
    """An engine refusal's conditions (docs/contract.md#refusal-ended) as questions: the answer, the answer that
    would end
    the run, whether it is met (✓/✗), and why."""
    rows = []
    for c in verdict.conditions:
        question, needed = CONDITION_QUESTIONS.get(c.name, (c.name, "yes"))
        answer = needed if c.holds else ("no" if needed == "yes" else "yes")
        rows.append({"question": question, "answer": answer, "ends the run if": needed,
                     "met": "✓" if c.holds else "✗", "why": c.detail})
    return pd.DataFrame(rows, columns=["question", "answer", "ends the run if", "met", "why"])


def verdict_label(result: RolloutResult) -> str:
    """Short verdict for a rollout picker: '✓ trainable' / '✗ masked: reason, …', the reasons in words."""
    if not result.mask_sample:
        status = result.metrics.get("status")
        return "✓ trainable" + (f" · {status}" if status and status != "completed" else "")
    reasons = result.mask_reasons
    shown = ", ".join(label(r) for r in reasons[:2]) + (f" +{len(reasons) - 2}" if len(reasons) > 2 else "")
    return f"✗ masked: {shown}"


def _status(result: RolloutResult) -> str:
    status, reason = result.metrics.get("status"), result.metrics.get("incomplete_reason")
    if status is None:
        return "no response"
    return f"{status} ({reason})" if reason else str(status)


def verdict_changes(a: RolloutResult, b: RolloutResult) -> list[str]:
    """Every difference between two results' verdicts, in words: verdict, each mask reason that
    came or went, the response status, and every metric that moved (nothing is left out)."""
    out = []
    verdict_a = "trainable" if not a.mask_sample else "masked"
    verdict_b = "trainable" if not b.mask_sample else "masked"
    if verdict_a != verdict_b:
        out.append(f"verdict: {verdict_a} → {verdict_b}")
    gone = [r for r in a.mask_reasons if r not in b.mask_reasons]
    came = [r for r in b.mask_reasons if r not in a.mask_reasons]
    if gone:
        out.append("no longer masked for " + ", ".join(gone))
    if came:
        out.append("now masked for " + ", ".join(came))
    if _status(a) != _status(b):
        out.append(f"response status: {_status(a)} → {_status(b)}")
    for key in dict.fromkeys(list(a.metrics) + list(b.metrics)):
        if key in ("status", "incomplete_reason"):
            continue
        va, vb = a.metrics.get(key), b.metrics.get(key)
        if va != vb:
            out.append(f"{key}: {_metric_text(va)} → {_metric_text(vb)}")
    return out


def _metric_text(value: Any) -> str:
    return json_text(value)


def anchor_effect(base: RolloutResult, anchored: RolloutResult) -> str:
    """How anchoring changed the result: where the anchor sits, then every change (or that nothing changed)."""
    if anchored.terminal_call_id is None:
        return "No anchor: the delivered chain is the one that starts earliest and ends latest."
    terminal_chain = anchored.build.notes.terminal_chain if anchored.build is not None else ""
    where = {"main": "is on the delivered chain, which now ends on it",
             "quarantined": "was quarantined (it lost its retry group), so it cannot be delivered",
             "missing": "is not among the chained calls (empty generation, excluded or unknown)"}.get(
        terminal_chain, "could not be placed")
    anchored_on = anchored.build.notes.terminal_call_id if anchored.build is not None else anchored.terminal_call_id
    moved = f" (the anchor moved to its token-identical twin {anchored_on})" \
        if anchored_on is not None and anchored_on != anchored.terminal_call_id else ""
    changes = verdict_changes(base, anchored)
    if not changes:
        verdict = "trainable" if not anchored.mask_sample else "masked"
        return f"The terminal call {where}{moved}. Nothing else changes: the verdict stays {verdict}."
    return f"The terminal call {where}{moved}. Compared with no anchor: " + "; ".join(changes) + "."


# --------------------------------------------------------------------------- refusals and finish reason


@dataclass
class RefusalView:
    refusal_id: str
    code: str | None
    parent: str | None
    recorded_at: float
    message: str
    ended_chain: bool
    summary: str
    conditions: pd.DataFrame


def refusal_views(result: RolloutResult) -> list[RefusalView]:
    out = []
    for v in result.refusal_verdicts:
        r = v.refusal
        out.append(RefusalView(r.model_call_id, r.code, r.parent_call_id, r.recorded_at, r.message,
                               v.ended_chain, v.summary, conditions_frame(v)))
    return out


def finish_reason_frame(result: RolloutResult) -> tuple[str, bool | None, pd.DataFrame]:
    """(summary, resolved, one row per twin of the delivered last call with its finish reason)."""
    verdict = result.finish_reason_verdict
    if verdict is None or verdict.terminal_call_id is None:
        return "No delivered chain, so no finish reason applies.", None, pd.DataFrame(columns=["call", "finish_reason"])
    frame = pd.DataFrame([{"call": k, "finish_reason": "null" if v is None else v,
                           "role": "delivered last call" if k == verdict.terminal_call_id else "token-identical twin"}
                          for k, v in verdict.finish_reasons.items()])
    if verdict.resolved:
        summary = (f"Applies: every twin of {verdict.terminal_call_id} recorded the same finish reason, so it decides "
                   "the response status.")
    else:
        summary = (f"Withheld: the token-identical twins of {verdict.terminal_call_id} disagree, so the status cannot "
                   "depend on which twin drew the smaller id; the response is reported completed unless a refusal "
                   "ended the chain.")
    return summary, verdict.resolved, frame


# --------------------------------------------------------------------------- notes


def notes_frame(build: BuildOutput) -> pd.DataFrame:
    n = build.notes

    def ids(values: list[str]) -> str:
        return ", ".join(values) if values else "—"

    rows = [
        ("builder", n.builder, ""),
        ("roots", fmt_int(n.roots), "calls with no proven parent that start a fragment"),
        ("chains", fmt_int(n.chains), TERMS["chain"]),
        ("generated tokens captured", fmt_int(n.generated_tokens_captured), "generated by every chained call"),
        ("generated tokens delivered", fmt_int(n.generated_tokens_delivered), "generated on the delivered chain"),
        ("delivered fraction", fmt_fraction(n.delivered_fraction), TERMS["delivered fraction"]),
        ("terminal call", n.terminal_call_id if n.terminal_call_id is not None else "—",
         "the anchor (after a twin swap), when one was given"),
        ("terminal chain", n.terminal_chain or "—", "where the anchor ended up: main, quarantined or missing"),
        ("after terminal calls", ids(n.after_terminal_calls), "calls below the anchor: never delivered"),
        ("unresolved retries", ids(n.unresolved_retries), RULE_TEXT[RULE_UNRESOLVED]),
        ("unresolved parent calls", ids(n.unresolved_parent_calls),
         "calls whose parent link is unproven, plus corrupt, unrebuildable or conflicting records"),
        ("empty generation calls", ids(n.empty_generation_calls), TERMS["empty generation"]),
        ("quarantined calls", ids(build.quarantined), TERMS["quarantined"]),
    ]
    return pd.DataFrame(rows, columns=["note", "value", "meaning"])


def failures_frame(build: BuildOutput) -> pd.DataFrame:
    """Parent-link notes with their counts and meaning (a recovered link does not mask): a readable label,
    and the note's key last, for those who script against `tokencap build`'s output."""
    rows = []
    for reason, count in build.notes.parent_link_failures.items():
        rows.append({"note": label(reason), "calls": count,
                     "masks": "no" if reason == "parent_call_id_missing_recovered" else "yes",
                     "meaning": NOTE_TEXT.get(reason, ""), "key": reason})
    return pd.DataFrame(rows, columns=["note", "calls", "masks", "meaning", "key"])


def retry_groups_frame(build: BuildOutput) -> pd.DataFrame:
    rows = [{"parent": g.parent or "(roots)", "members": ", ".join(g.members), "kept": ", ".join(g.kept),
             "quarantined": ", ".join(g.quarantined) or "—", "rule": g.rule, "why": RULE_TEXT.get(g.rule, "")}
            for g in build.retry_groups]
    return pd.DataFrame(rows, columns=["parent", "members", "kept", "quarantined", "rule", "why"])


def exclusions_frame(build: BuildOutput) -> pd.DataFrame:
    rows = [{"call": cid, "reason": reason, "meaning": NOTE_TEXT.get(reason, "")}
            for cid, reason in build.excluded.items()]
    rows += [{"call": cid, "reason": "duplicate_call_id_conflict", "meaning": NOTE_TEXT["duplicate_call_id_conflict"]}
             for cid in build.conflicting_duplicates]
    rows += [{"call": cid, "reason": f"{n} identical extra cop{'y' if n == 1 else 'ies'} dropped",
              "meaning": "Exact duplicates of one record; one copy is kept."}
             for cid, n in build.duplicate_copies.items() if cid not in build.conflicting_duplicates]
    return pd.DataFrame(rows, columns=["call", "reason", "meaning"])


def metrics_frame(result: RolloutResult) -> pd.DataFrame:
    """The raw metrics exactly as `tokencap build` reports them."""
    return pd.DataFrame([(k, json_text(v)) for k, v in result.metrics.items()], columns=["metric", "value"])
