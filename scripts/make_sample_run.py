#!/usr/bin/env python3
"""Write the bundled sample run in ``sample_data/run/`` (or the directory given).

A *run* is what a training job leaves behind: one capture-store directory in the upstream
file-store layout (``R.tokens.jsonl``, ``R.tokens.intents``, ``R.tokens.state.json``, and
where the situation calls for it ``R.tokens.refusals.jsonl`` and ``R.tokens.incomplete``)
holding a few hundred rollouts. Most are ordinary agent loops; mixed in, at realistic
rates, is every situation of ``sample_data/`` (retries, twins, branches, compaction,
broken lineage, refusals, stops, interrupted captures) plus two that only show up at run
scale: rollouts stuck at one call, and rollouts whose files cannot be loaded.

The records are written by ``make_sample_data.RolloutWriter``, so digests and ``cum_len``
are stamped exactly as the model server stamps them. The verdict of every rollout is
*declared by the situation that built it* (never by running the builder) and written to
``expected.json.txt`` with a summary of the whole run. That file is JSON; it does not end
in ``.json`` because a capture-store directory loads every other ``*.json`` file in it as
a snapshot (docs/contract.md#input), and the expectations are not a rollout.

Deterministic: every random choice comes from seeded ``random.Random`` instances and the
clock is fixed, so re-running writes byte-identical files.

With it, the same run after a harness fix (``sample_data/run_after_fix/``) and both runs'
rollout records (``sample_data/rollout_records/``: reward, task and rollout index, final
response), with what ``tokencap diff`` of the two must report and the reward and group
facts of each, declared in ``rollout_records/expected.json`` (see "The run after a fix").

About a third of the rollouts have a broken lineage (docs/contract.md#diagnosis): every situation declares its
breaks (cause, predecessor) next to its data, and, for a scan with the rollout records,
``rollout_records/diagnosis.json`` declares them with the record as harness evidence, with
what NeMo Gym delivered (``mask_sample``, ``_ng_token_capture``) and which rollouts it
trained on although tokencap masks them. The situations added for the causes are drawn as
plain delta-record loops and converted after the shuffle, so every older rollout keeps its
id, situation, size and seed.

Usage::

    python scripts/make_sample_run.py                  # sample_data/run, run_after_fix, rollout_records
    python scripts/make_sample_run.py OUTPUT_DIR       # only the run
    python scripts/make_sample_run.py --pair ROOT      # all three under ROOT
"""

from __future__ import annotations

import random
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import orjson

SCRIPTS = Path(__file__).resolve().parent
if str(SCRIPTS) not in sys.path:  # the record writer lives next to this script
    sys.path.insert(0, str(SCRIPTS))

from make_sample_data import (  # noqa: E402
    CAUSE_ORDER,
    MASK_REASON_ORDER,
    REPO_ROOT,
    T0,
    TOKENIZER_NAME,
    RolloutWriter,
    brk,
    chat,
    cid,
    model_ref,
    other_token,
    response_id,
    tool_observations,
    expect,
    structure,
)

RUN_SEED = 20240611
EXPECTED_NAME = "expected.json.txt"

# Store file suffixes (upstream file-store layout plus this project's refusals file).
ENTRIES, INTENTS, STATE, REFUSALS, INCOMPLETE = (
    ".tokens.jsonl", ".tokens.intents", ".tokens.state.json", ".tokens.refusals.jsonl", ".tokens.incomplete")
STORE_SUFFIXES = (ENTRIES, INTENTS, STATE, REFUSALS, INCOMPLETE)


# --------------------------------------------------------------------------- one rollout


@dataclass
class Profile:
    """How big one rollout's pieces are: prompts, tool outputs and answers vary per rollout."""

    root: int  # tokens of the first prompt (system prompt + task)
    tool: int  # largest tool output / user turn between calls
    gen: int  # largest generation

    @classmethod
    def draw(cls, rng: random.Random) -> Profile:
        return cls(root=rng.randint(24, 160), tool=rng.choice((8, 12, 16, 32)), gen=rng.choice((8, 16, 32, 48)))


class StoreRollout(RolloutWriter):
    """A `RolloutWriter` that also knows what the store puts on disk for its rollout.

    Call ids are handed out in order (``call-0001``, ...), refusals included, because the
    server mints one id per request. ``intents`` are the ids the store wrote before serving
    each request; the other fields are the store-level damage a situation may ask for.
    """

    def __init__(self, rollout_id: str, seed: int, t0: float) -> None:
        super().__init__(rollout_id, seed, t0)
        self.p = Profile.draw(self.rng)
        self.n_ids = 0
        self.intents: list[str] = []
        self.torn: bytes = b""  # bytes after the last newline of R.tokens.jsonl
        self.marker = False  # write R.tokens.incomplete
        self.state_incomplete = False  # the state file says incomplete
        self.frozen = True
        self.line_edits: list[Callable[[list[bytes]], None]] = []  # damage to the committed lines
        self.state_edit: Callable[[bytes], bytes] | None = None
        self.last_record: dict[str, Any] = {}
        self.answer: dict[str, Any] | None = None  # the harness's final call, when not the last recorded one
        self.record_breaks: list[dict[str, Any]] | None = None  # the breaks with the rollout record (None: as declared)
        self.observations: dict[str, Any] | None = None  # the harness's evidence fields of the rollout record

    def next_id(self) -> str:
        self.n_ids += 1
        return cid(self.n_ids)

    def inter(self) -> int:
        return self.rng.randint(3, self.p.tool)

    def gen_len(self) -> int:
        return self.rng.randint(4, self.p.gen)

    def turn(self, parent: str | None, *, kind: str = "tool", finish: str | None = "tool_calls",
             delta: bool = False, intent: bool = True, **kw: Any) -> str:
        """One served call continuing ``parent`` (a fresh conversation when None)."""
        c = self.next_id()
        if parent is None:
            kw.setdefault("resolution", "root")
            kw.setdefault("extends", None)
            kw.setdefault("interstitial", self.p.root)
            delta = False
        kw.setdefault("interstitial", self.inter())
        kw.setdefault("gen", self.gen_len())
        self.last_record = self.call(c, parent=parent, kind=kind, finish=finish, delta=delta, **kw)
        if intent:
            self.intents.append(c)
        return c

    def refuse(self, parent: str, **kw: Any) -> dict[str, Any]:
        c = self.next_id()
        self.intents.append(c)
        return self.refusal(c, parent=parent, **kw)

    def run(self, parent: str | None, k: int, *, delta: bool, last_finish: str | None = "stop",
            ends: bool = True) -> list[str]:
        """``k`` calls of a plain agent loop from ``parent``: tool turns, then (when ``ends``)
        a final answer finishing with ``last_finish``."""
        ids: list[str] = []
        for i in range(k):
            last = ends and i == k - 1
            kind = "text" if last else self.rng.choice(("tool", "tool", "tool_only"))
            ids.append(self.turn(ids[-1] if ids else parent, kind=kind,
                                 finish=last_finish if last else "tool_calls", delta=delta))
        return ids

    def retry_of(self, call_id: str, parent: str | None, *, same_tokens: bool = False, delta: bool = False,
                 **kw: Any) -> str:
        """The request of ``call_id`` served again (same parent, same full prompt)."""
        prompt = self.prompt_of(call_id)
        base = self.cum[parent] if parent is not None else []
        if not same_tokens:
            kw.setdefault("differ_from", call_id)
        if same_tokens:
            kw.setdefault("gen", self.records[call_id]["generation_token_ids"])
            kw.setdefault("lps", self.records[call_id]["generation_log_probs"])
            kw.setdefault("items", self.records[call_id]["output_items"])
        if parent is None:
            kw.setdefault("resolution", "root")
        return self.turn(parent, interstitial=prompt[len(base):], delta=delta and parent is not None, **kw)

    # -- on disk -------------------------------------------------------------

    def files(self) -> dict[str, bytes]:
        def lines(records: list[dict[str, Any]]) -> list[bytes]:
            return [orjson.dumps(r, option=orjson.OPT_SORT_KEYS) + b"\n" for r in records]

        entry_lines = lines(self.entries)
        for edit in self.line_edits:
            edit(entry_lines)
        committed = b"".join(entry_lines)
        state = {"frozen": self.frozen, "incomplete": self.state_incomplete, "indexed_size": len(committed),
                 "retired": False, "snapshot_id": self.snapshot_id() if self.frozen else "",
                 "version": self.rng.randint(1, 6)}
        state_bytes = orjson.dumps(state, option=orjson.OPT_SORT_KEYS)
        if self.state_edit is not None:
            state_bytes = self.state_edit(state_bytes)
        p = self.rollout_id
        out = {
            p + ENTRIES: committed + self.torn,
            p + INTENTS: b"".join(f"{i}\n".encode() for i in self.intents),
            p + STATE: state_bytes,
        }
        if self.refusals:
            out[p + REFUSALS] = b"".join(lines(self.refusals))
        if self.marker:
            out[p + INCOMPLETE] = b""
        return out


# --------------------------------------------------------------------------- situations
#
# Each situation builds one rollout of ``n`` calls (or about that many) and returns its
# declared verdict. The verdicts follow from the builder rules in docs/contract.md#builder, #projection and #rollout; the
# one-line ``why`` of each situation says which rule earns it.


@dataclass
class Ctx:
    """What a situation may know about the run: the other rollout ids, and which occurrence
    of the situation this is (so variants alternate rather than depend on luck)."""

    ids: Sequence[str]
    occurrence: int


@dataclass
class Situation:
    name: str
    count: int  # rollouts of this situation in the bundled run
    min_calls: int  # fewest calls the situation can be built with
    max_calls: int | None  # most calls it can have (None: no limit)
    build: Callable[[StoreRollout, int, Ctx], dict[str, Any]]
    what: str
    why: str
    bundle_cap: int = 40  # most calls in the bundled run (full-prompt situations stay small)
    drawn_as: str | None = None  # drawn in place of this situation's rollouts, then converted (see `plan_run`)


def _full(w: StoreRollout, ids: Sequence[str], reasons: Sequence[str] = (), **kw: Any) -> dict[str, Any]:
    """The declaration for a rollout whose delivered chain is ``ids``."""
    return expect(reasons, main_chain=list(ids), generated_tokens_delivered=w.chain(ids), **kw)


def _delta(w: StoreRollout, n: int) -> bool:
    """Long rollouts are stored as delta records, as the store does for continued requests."""
    return n > 6 or w.rng.random() < 0.5


def s_clean(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    ids = w.run(None, n, delta=False)
    return _full(w, ids, **structure(n))


def s_delta(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    ids = w.run(None, n, delta=True)
    return _full(w, ids, **structure(n))


def s_stuck(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    # The server had no tool-call parser for this model: the model's tool call came back as
    # plain text with finish_reason "stop", the harness saw a final answer and ended.
    call = chat.render_tool_call("run_tests", {"path": "tests/"})
    c = w.turn(None, items=[{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": call}]}],
               finish="stop")
    return _full(w, [c], **structure(1))


def s_final_retry(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    delta = _delta(w, n)
    ids = w.run(None, n - 1, delta=delta)
    parent = ids[-2] if len(ids) > 1 else None
    w.retry_of(ids[-1], parent, kind="text", finish="stop", delta=delta)
    return expect(["unresolved_retries"], main_chain=ids, **structure(n, quarantined=1))


def s_retry_resolved(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    delta = _delta(w, n)
    k = w.rng.randint(2, n - 2)  # calls k and k+1 are the retried request
    ids = w.run(None, k, delta=delta, ends=False)
    kept = w.retry_of(ids[-1], ids[-2], delta=delta)
    rest = w.run(kept, n - k - 1, delta=delta)
    main = ids[:-1] + [kept] + rest
    return _full(w, main, **structure(n, quarantined=1))


def s_twins(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    delta = _delta(w, n)
    ids = w.run(None, n - 1, delta=delta)
    w.retry_of(ids[-1], ids[-2], same_tokens=True, kind="text", finish="stop", delta=delta)
    return _full(w, ids, **structure(n, quarantined=1))


def s_twins_finish(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    delta = _delta(w, n)
    first, second = w.rng.choice((("length", "stop"), ("stop", "length")))
    ids = w.run(None, n - 1, delta=delta, last_finish=first)
    w.retry_of(ids[-1], ids[-2], same_tokens=True, kind="text", finish=second, delta=delta)
    return _full(w, ids, **structure(n, quarantined=1))


def observations(w: StoreRollout, records: list[dict[str, Any]],
                 invocations: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """The harness's evidence fields of a rollout record (docs/contract.md#evidence): its observations, its
    trajectory's invocations and model calls, and the capture's call ids by response id."""
    captured = [r["model_call_id"] for r in w.entries]
    out: dict[str, Any] = {"ng_agent_observations": {"source": "sample-harness", "records": records, "gaps": []}}
    if invocations:
        out["ng_trajectory"] = {"schema": "1.0", "invocations": list(invocations), "model_calls": [],
                                "tool_calls": [], "turns": [], "gaps": []}
    out["ng_model_call_capture"] = {"calls": [{"model_call_id": c, "response_id": response_id(c)} for c in captured]}
    return out


def invocation(invocation_id: str, calls: Sequence[str], parent: str | None = None,
               spawned_by: str | None = None) -> dict[str, Any]:
    return {"kind": "agent_invocation", "invocation_id": invocation_id, "parent_invocation_id": parent,
            "spawned_by_tool_call_id": spawned_by, "model_calls": [model_ref(c) for c in calls]}


def last_tool_call_id(w: StoreRollout, call_id: str) -> str | None:
    calls = [i["call_id"] for i in w.items_of[call_id] if i["type"] == "function_call"]
    return calls[-1] if calls else None


def s_subagent(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    delta = _delta(w, n)
    j = w.rng.randint(1, n - 2)  # the orchestrator's calls before the fork
    s = w.rng.randint(1, n - j - 1)  # the sub-agent's calls
    orch = w.run(None, j, delta=delta, ends=False)
    fork = orch[-1]
    sub = [w.turn(orch[-1], kind="tool", finish="tool_calls", delta=delta)]
    sub += w.run(sub[-1], s - 1, delta=delta, last_finish=w.rng.choice(("stop", "length")))
    orch += w.run(orch[-1], n - j - s, delta=delta)
    # The harness observed the fork: a sub-agent invocation spawned by the orchestrator's tool call.
    w.observations = observations(w, [invocation("inv-main", orch),
                                      invocation("inv-sub-1", sub, "inv-main", last_tool_call_id(w, fork)),
                                      *tool_observations(w, orch + sub)])
    branch = brk(sub[0], "branch", "branch", fork, "branch_point", token_cause="link_intact")
    w.record_breaks = [{**branch, "cause": "subagent"}]
    return expect(["multiple_chains"], main_chain=orch, generated_tokens_delivered=w.chain(orch),
                  breaks=[branch], **structure(n, chains=2))


def s_compaction(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    delta = _delta(w, n)
    a = w.rng.randint(1, n - 1)
    before = w.run(None, a, delta=delta, ends=False)
    # The history was replaced by a summary: a fresh conversation, recorded as a root.
    after = [w.turn(None, interstitial=w.compacted_prompt(),
                    reason="compacted history: request shares no prefix with earlier calls")]
    after += w.run(after[0], n - a - 1, delta=delta)
    w.observations = observations(w, [compaction(w, after[0], before[-1]), *tool_observations(w, before + after)])
    # With the record the harness's final answer anchors the post-compaction conversation; the
    # break is still where the conversation started over in time, the later root (docs/contract.md#breaks), and
    # the record's compaction right before it makes its cause `compaction`.
    w.record_breaks = [brk(after[0], "extra_root", "compaction", before[-1], "nearest", token_cause="new_context")]
    return expect(["multiple_roots", "multiple_chains"], main_chain=before,
                  generated_tokens_delivered=w.chain(before),
                  breaks=[brk(after[0], "extra_root", "new_context", before[-1], "nearest")],
                  **structure(n, roots=2, chains=2))


def compaction(w: StoreRollout, first_after: str, last_before: str, summariser: Sequence[str] = ()) -> dict[str, Any]:
    """The harness's `context_compaction` observation: ``after_model_call`` names the first call
    after the compaction (docs/contract.md#evidence), ``model_calls`` the request that wrote the summary, if any."""
    return {"kind": "context_compaction", "trigger": "token_limit", "tokens_before": len(w.cum[last_before]),
            "tokens_after": len(w.prompt_of(first_after)),
            "observed_at": round(w.records[first_after]["created_at"] - 0.25, 3),
            "after_model_call": model_ref(first_after), "model_calls": [model_ref(c) for c in summariser]}


def s_unresolved_continuation(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    delta = _delta(w, n)
    k = w.rng.randint(1, n - 1)
    before = w.run(None, k, delta=delta, ends=False)
    # Extends the last call, but the resolver could not prove it at request time.
    c = w.turn(None, extends=before[-1], resolution="unresolved", interstitial=w.inter())
    w.run(c, n - k - 1, delta=delta)
    boundary = brk(c, "boundary", "link_intact", before[-1], "nearest")
    # The answer anchors c's fragment; before[0] is still the earliest root, never a break (docs/contract.md#breaks).
    return expect(["unresolved_parent_calls", "multiple_roots", "multiple_chains"], main_chain=before,
                  breaks=[boundary],
                  **structure(n, roots=2, chains=2, failures={"parent_unresolved": 1}, unresolved=1))


def figure_positions(w: StoreRollout, ids: Sequence[int], start: int) -> list[int]:
    """Positions (from ``start``) of the digits of a tool output's closing figure (`212 passed`,
    `(184 lines)`, `(12 ms)`): a token no other stretch of the rollout repeats with what follows."""
    out = []
    for k in range(start, len(ids) - 4):
        if chat.decode(ids[k:k + 1]).strip().isdigit() and chat.decode(ids[k + 1:k + 2]).strip() in ("passed", "lines", "ms"):
            out.append(k)
    return out


def s_stale_parent(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    delta = _delta(w, n)
    k = w.rng.randint(1, n - 1)
    before = w.run(None, k, delta=delta, ends=False)
    # The harness re-rendered an earlier tool output: one figure of the parent's history changed
    # (or, with no tool output yet, the first generated token).
    edited = list(w.cum[before[-1]])
    opening = len(w.prompt_of(before[0]))
    at = w.rng.choice(figure_positions(w, edited, opening) or [opening])
    edited[at] = other_token(edited[at])
    c = w.turn(before[-1], prompt=edited + w.turn_after(before[-1], w.inter()))
    w.run(c, n - k - 1, delta=delta)
    boundary = brk(c, "boundary", "tokens_replaced", before[-1], "claimed")
    return expect(["unresolved_parent_calls", "multiple_roots", "multiple_chains"], main_chain=before,
                  breaks=[boundary],
                  **structure(n, roots=2, chains=2, failures={"parent_digest_mismatch": 1}, unresolved=1))


def s_legacy(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    ids: list[str] = []
    for i in range(n):
        last = i == n - 1
        ids.append(w.turn(None, extends=ids[-1] if ids else None, resolution=None, reason="", schema_version=4,
                          interstitial=w.inter() if ids else w.p.root,
                          kind="text" if last else "tool", finish="stop" if last else "tool_calls"))
    multiple = ["multiple_roots", "multiple_chains"] if n > 1 else []
    breaks = [brk(ids[0], "boundary", "new_context")]
    breaks += [brk(c, "boundary", "link_intact", p, "nearest") for p, c in zip(ids, ids[1:])]
    return expect(["unresolved_parent_calls", *multiple], main_chain=ids[:1], breaks=breaks,
                  **structure(n, roots=n, chains=n, failures={"missing_resolution": n}, unresolved=n))


def s_empty_generation(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    k = w.rng.randint(2, n - 1)  # call k generated nothing
    before = w.run(None, k - 1, delta=False, ends=False)
    empty = w.turn(before[-1], gen=[], lps=[], kind="text", finish="stop")
    # The harness appended a nudge and asked again, naming the empty call as the parent.
    after = w.run(empty, n - k, delta=False)
    main = before + after
    return _full(w, main, **structure(n, failures={"parent_call_id_missing_recovered": 1}, empty=1))


def s_broken_delta(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    # n records; one more call (k) was served but neither its record nor its intent reached
    # the store, and every record after it is a delta built on it.
    k = w.rng.randint(2, n)
    before = w.run(None, k - 1, delta=w.rng.random() < 0.5, ends=False)
    lost = w.turn(before[-1], record=False, intent=False)
    gone = w.run(lost, n - k + 1, delta=True)
    lost_after = n - k + 1
    return expect(["unresolved_parent_calls"], main_chain=before,
                  breaks=[brk(c, "record_fault", "record_fault") for c in gone],
                  **structure(n, failures={"delta_chain_unreconstructable": lost_after}, unresolved=lost_after))


def s_corrupt(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    delta = _delta(w, n)
    k = w.rng.randint(2, n - 1)
    before = w.run(None, k - 1, delta=delta, ends=False)
    bad = w.turn(before[-1])  # full prompt: its own digest is what fails
    rec = w.records[bad]
    i = w.rng.randrange(len(rec["generation_token_ids"]))
    rec["generation_token_ids"][i] = other_token(rec["generation_token_ids"][i])  # changed after the digest was stamped
    nxt = w.turn(bad)  # full prompt, so it is re-attached by prefix, not rebuilt
    rest = w.run(nxt, n - k - 1, delta=delta)
    main = before + [nxt] + rest
    return expect(["unresolved_parent_calls"], main_chain=main, generated_tokens_delivered=w.chain(main),
                  breaks=[brk(bad, "record_fault", "record_fault")],
                  **structure(n, failures={"entry_digest_mismatch": 1, "parent_call_id_missing_recovered": 1},
                              unresolved=1))


def s_duplicate(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    delta = _delta(w, n)
    ids = w.run(None, n, delta=delta)
    last = ids[-1]
    first = w.records[last]
    # A writer replay stored a second record under the same id with another sample of the
    # same length (so the delivered count does not depend on which copy is kept).
    w.n_ids -= 1
    w.retry_of(last, ids[-2] if n > 1 else None, gen_len=len(first["generation_token_ids"]), kind="text",
               finish="stop", delta=delta, intent=False)
    w.records[last] = first
    return expect(["unresolved_parent_calls"], main_chain=ids, generated_tokens_delivered=w.chain(ids),
                  breaks=[brk(last, "record_fault", "record_fault")],
                  **structure(n, failures={"duplicate_call_id_conflict": 1}, unresolved=1))


def s_refusal_ended(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    ids = w.run(None, n, delta=_delta(w, n), ends=False)
    w.refuse(ids[-1])  # the next request did not fit the context window; the run stopped
    return expect(status="incomplete", incomplete_reason="max_output_tokens", main_chain=ids,
                  generated_tokens_delivered=w.chain(ids), **structure(n, refusals=1))


def s_refusal_recovered(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    delta = _delta(w, n)
    ids = w.run(None, n - 1, delta=delta)
    refused = w.refuse(ids[-1])
    # The harness rolled back and re-served the last request: same tokens, at the refusal's time.
    w.retry_of(ids[-1], ids[-2], same_tokens=True, kind="text", finish="stop", delta=delta,
               created_at=refused["recorded_at"])
    return _full(w, ids, **structure(n, quarantined=1, refusals=1))


def s_refusal_earlier(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    delta = _delta(w, n)
    k = w.rng.randint(1, n - 1)
    before = w.run(None, k, delta=delta, ends=False)
    w.refuse(before[-1])  # a huge tool output did not fit; the harness truncated it and went on
    main = before + w.run(before[-1], n - k, delta=delta)
    return _full(w, main, **structure(n, refusals=1))


def s_parameter_refusal(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    delta = _delta(w, n)
    k = w.rng.randint(1, n - 1)
    before = w.run(None, k, delta=delta, ends=False)
    w.refuse(before[-1], code=None)  # an output-token parameter was rejected; the turn was re-sent
    main = before + w.run(before[-1], n - k, delta=delta)
    return _full(w, main, **structure(n, refusals=1))


def s_length(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    ids = w.run(None, n, delta=_delta(w, n), last_finish="length")
    return _full(w, ids, status="incomplete", incomplete_reason="max_output_tokens", **structure(n))


def s_content_filter(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    ids = w.run(None, n, delta=_delta(w, n), last_finish="content_filter")
    return _full(w, ids, status="incomplete", incomplete_reason="content_filter", **structure(n))


def s_interrupted(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    ids = w.run(None, n, delta=True, ends=False)
    # The process died while writing the next call: its intent is there, its line is torn.
    c = w.turn(ids[-1], kind="text", finish="stop", delta=True, record=False)
    w.answer = w.last_record  # the harness finished on it; the capture never stored it
    line = orjson.dumps(w.last_record, option=orjson.OPT_SORT_KEYS)
    w.torn = line[: w.rng.randint(40, len(line) - 1)]
    w.frozen = False
    notes = ["torn", w.rollout_id + ENTRIES, str(len(w.torn)), c]
    return _full(w, ids, ["capture_incomplete"], source_notes_contain=notes, **structure(n, capture_incomplete=True))


def s_incomplete_marker(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    ids = w.run(None, n, delta=_delta(w, n), ends=False)
    # A call failed to capture before it was even recorded as an intent; the store said so.
    if ctx.occurrence % 2 == 0:
        w.marker, note = True, w.rollout_id + INCOMPLETE
    else:
        w.state_incomplete, note = True, w.rollout_id + STATE
    return _full(w, ids, ["capture_incomplete"], source_notes_contain=[note], **structure(n, capture_incomplete=True))


def _load_error(w: StoreRollout, contains: list[str]) -> dict[str, Any]:
    out = expect(["load_error", "capture_incomplete"], status=None, n_calls=0, capture_incomplete=True)
    out["error_contains"] = contains
    return out


def s_bad_field(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    ids = w.run(None, n, delta=_delta(w, n))
    i = w.rng.randrange(1, n)
    rec = w.records[ids[i]]
    if ctx.occurrence % 2 == 0:
        rec["generation_log_probs"].pop()  # one log-probability short
        fld = "generation_log_probs"
    else:
        rec["schema_version"] = 9  # a newer writer than this reader knows
        fld = "schema_version"
    return _load_error(w, [w.rollout_id + ENTRIES, f"line {i + 1}", ids[i], fld])


def s_foreign_record(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    ids = w.run(None, n, delta=_delta(w, n))
    i = w.rng.randrange(1, n)
    other = sibling(w.rollout_id, ctx.ids)
    w.records[ids[i]]["rollout_id"] = other  # a sibling rollout's id: the writer mixed up buffers
    return _load_error(w, [w.rollout_id + ENTRIES, other])


def s_invalid_json(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    ids = w.run(None, n, delta=_delta(w, n))
    i = w.rng.randrange(0, n - 1)
    cut = w.rng.randint(30, 200)

    def truncate(lines: list[bytes]) -> None:
        # A line cut short (a crash mid-write) and then followed by later appends.
        lines[i] = lines[i][:cut] + b"\n"

    w.line_edits.append(truncate)
    return _load_error(w, [w.rollout_id + ENTRIES, f"line {i + 1}"])


def s_bad_state(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    w.run(None, n, delta=_delta(w, n))
    w.state_edit = lambda data: data[: len(data) // 2]  # the state file was cut off mid-write
    return _load_error(w, [w.rollout_id + STATE, "not valid JSON"])


# --------------------------------------------------------------------------- why lineage broke (docs/contract.md#diagnosis)
#
# A faulty harness or template at run scale: the situations of sample_data/'s cause scenarios.
# They replace some of the plain delta-record loops (`drawn_as`), so every other rollout keeps
# its id and data. Calls whose prompt the resolver cannot match are recorded `unresolved`.
# With the rollout record, the harness's final answer anchors the last fragment; the first call
# is still the earliest root, never a break (docs/contract.md#breaks: every root but the earliest).


def _broken_every_turn(w: StoreRollout, n: int, render: Callable[[str], list[int]], cause: str,
                       *, resolved: bool = False, reasoning: bool = False,
                       kinds: Callable[[int], str] | None = None) -> dict[str, Any]:
    """``n`` calls whose every next prompt renders the previous generation with ``render``."""
    history = w.root_prompt()
    ids: list[str] = []
    for i in range(n):
        last = i == n - 1
        kind = "text" if last else (kinds(i) if kinds else w.rng.choice(("tool", "tool_only")))
        finish = "stop" if last else "tool_calls"
        if not ids:
            c = w.turn(None, interstitial=history, kind=kind, finish=finish)
        elif resolved:
            c = w.turn(ids[-1], prompt=history, kind=kind, finish=finish,
                       reason="parent named by the harness (previous_response_id)")
        else:
            c = w.turn(None, prompt=history, resolution="unresolved", kind=kind, finish=finish)
        ids.append(c)
        if not last:
            history = history + render(c) + w.turn_after(c, w.inter())
    relation = "claimed" if resolved else "nearest"
    breaks = [brk(c, "boundary", cause, p, relation, reasoning=reasoning) for p, c in zip(ids, ids[1:])]
    note = "parent_digest_mismatch" if resolved else "parent_unresolved"
    return expect(["unresolved_parent_calls", "multiple_roots", "multiple_chains"], main_chain=ids[:1], breaks=breaks,
                  **structure(n, roots=n, chains=n, failures={note: n - 1}, unresolved=n - 1))


def s_reasoning_stripped(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    w.think = True  # a reasoning model behind a template that strips earlier reasoning
    return _broken_every_turn(w, n, lambda c: w.generation_without(c, "think"), "generation_dropped",
                              reasoning=True)


def s_end_token_lost(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    return _broken_every_turn(w, n, lambda c: w.generation_without(c, "end"), "seam")


def s_tool_call_rerendered(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    return _broken_every_turn(w, n, w.generation_rerendered, "tokens_replaced", resolved=True,
                              kinds=lambda i: "tool")


def _one_break(w: StoreRollout, before: list[str], c: str, rest_from: str, k_rest: int, cause: str,
               *, without_tokenizer: str | None = None, n: int) -> dict[str, Any]:
    """A loop ``before``, one unresolved call ``c`` continuing ``before[-1]`` badly, then a clean
    loop of ``k_rest`` calls from ``rest_from``."""
    w.run(rest_from, k_rest, delta=False)
    boundary = brk(c, "boundary", cause, before[-1], "nearest", without_tokenizer=without_tokenizer)
    return expect(["unresolved_parent_calls", "multiple_roots", "multiple_chains"], main_chain=before,
                  breaks=[boundary],
                  **structure(n, roots=2, chains=2, failures={"parent_unresolved": 1}, unresolved=1))


def _without_text(sampled: list[int], canonical: list[int]) -> str:
    """The cause of a word the model sampled as ``sampled`` and the next prompt carries as
    ``canonical``, read without a tokenizer (docs/contract.md#causes). The two line up again at their common
    ends, so D and I are what is left between; D is generated, so a short I for a long D
    (1 <= |I| <= 4, |D| >= 4 |I|) reads as a stub in place of the model's output."""
    head = 0
    while head < min(len(sampled), len(canonical)) and sampled[head] == canonical[head]:
        head += 1
    tail = 0
    while tail < min(len(sampled), len(canonical)) - head and sampled[-1 - tail] == canonical[-1 - tail]:
        tail += 1
    d, i = len(sampled) - head - tail, len(canonical) - head - tail
    return "generation_dropped" if 1 <= i <= 4 and d >= 4 * i else "tokens_replaced"


def s_retokenized(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    k = w.rng.randint(1, n - 1)
    before = w.run(None, k - 1, delta=False, ends=False)
    # The model sampled one word of its message as single characters; the harness keeps text
    # and encodes it again for the next request.
    items, parts = w.generation("tool", w.gen_len())
    message = next(i for i in items if i["type"] == "message")["content"][0]["text"]
    words = message.split(" ")
    at = max(range(1, len(words)), key=lambda i: (len(words[i]), -i))
    head, word, rest = " ".join(words[:at]), " " + words[at], "".join(" " + x for x in words[at + 1:])
    sampled = []
    for name, piece in parts:
        sampled += (list(chat.encode(head)) + chat.encode_chars(word) + list(chat.encode(rest + "\n"))
                    if name == "text" else piece)
    if before:
        odd = w.turn(before[-1], gen=sampled, items=items)
    else:
        odd = w.turn(None, gen=sampled, items=items)
    before.append(odd)
    canonical = [i for _, piece in parts for i in piece]
    assert canonical != sampled
    prompt = w.prompt_of(odd) + canonical + w.turn_after(odd, w.inter())
    c = w.turn(None, prompt=prompt, resolution="unresolved")
    return _one_break(w, before, c, c, n - k - 1, "retokenized", n=n,
                      without_tokenizer=_without_text(chat.encode_chars(word), list(chat.encode(word))))


def s_system_prompt_changed(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    k = w.rng.randint(1, n - 1)
    before = w.run(None, k, delta=False, ends=False)
    old = w.root_prompt()
    new = w.root_prompt(system=chat.SYSTEM_PROMPT.replace("2024-06-11", "2024-06-12"))
    prompt = new + w.cum[before[-1]][len(old):] + w.turn_after(before[-1], w.inter())
    c = w.turn(None, prompt=prompt, resolution="unresolved")
    return _one_break(w, before, c, c, n - k - 1, "opening_changed", n=n)


def s_history_truncated(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    # A first answer and a user follow-up, a tool loop, then the harness drops that first exchange.
    first = w.turn(None, kind="text", finish="stop")
    second = w.turn(first, interstitial=w.turn_after(first, text=w.pick("nudge", chat.NUDGES)), kind="tool")
    before = [first, second] + w.run(second, n - 3, delta=False, ends=False)
    opening, cut = len(w.prompt_of(first)), len(w.prompt_of(second))
    kept = w.cum[before[-1]][:opening] + w.cum[before[-1]][cut:]
    c = w.turn(None, prompt=kept + w.turn_after(before[-1], w.inter()), resolution="unresolved", kind="text",
               finish="stop")
    return _one_break(w, before, c, c, 0, "history_dropped", n=n)


def s_tool_output_elided(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    first = w.turn(None, tool=("read_file", {"path": w.pick("files", chat.FILES)}))
    output = "\n".join(f"{n + 1:3d} {line}" for n, line in enumerate(chat.LISTING)) + f"\n({w.rng.randint(120, 400)} lines)"
    pieces = w.turn_pieces(first, output=output)
    second = w.turn(first, interstitial=chat.ids_of(pieces))
    before = [first, second] + w.run(second, n - 3, delta=False, ends=False)
    start = len(w.cum[first]) + len(chat.ids_of(pieces[:2]))
    end = start + len(chat.encode(output))
    full = w.cum[before[-1]]
    elided = full[:start] + list(chat.encode("[output elided]")) + full[end:]
    c = w.turn(None, prompt=elided + w.turn_after(before[-1], w.inter()), resolution="unresolved", kind="text",
               finish="stop")
    # read_file's output pool shares lines with the listing. A shared line (8 tokens or more) in a
    # later tool output is where the walk lines the elided stretch up again (docs/contract.md#alignment), on the later
    # copy: the history in between then stands whole earlier in the prompt, and a dropped span of 16
    # or more tokens found whole there is `history_reordered`, whatever the first divergence says.
    later = chat.decode(full[end:])
    repeated = any(len(chat.encode(line)) >= 8 and f"\n{line}\n" in later for line in chat.LISTING)
    return _one_break(w, before, c, c, 0, "history_reordered" if repeated else "history_replaced", n=n)


def s_tool_result_annotated(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    first = w.turn(None, tool=("run_tests", {"path": w.pick("tests", chat.TEST_PATHS)}))
    pieces = w.turn_pieces(first)
    second = w.turn(first, interstitial=chat.ids_of(pieces))
    before = [first, second] + w.run(second, n - 3, delta=False, ends=False)
    at = len(w.cum[first]) + len(chat.ids_of(pieces[:3]))
    full = w.cum[before[-1]]
    annotated = full[:at] + list(chat.encode(f"\n(took {w.rng.uniform(1, 9):.2f}s)")) + full[at:]
    c = w.turn(None, prompt=annotated + w.turn_after(before[-1], w.inter()), resolution="unresolved", kind="text",
               finish="stop")
    return _one_break(w, before, c, c, 0, "tokens_inserted", n=n)


def s_compaction_observed(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    a = w.rng.randint(1, n - 1)
    before = w.run(None, a, delta=False, ends=False)
    # The harness compacted (writing the summary itself) and went on from the system prompt and
    # the summary; the server matched no stored prefix. Its record observes the compaction.
    first = w.turn(None, interstitial=w.compacted_prompt(), resolution="unresolved")
    after = [first] + w.run(first, n - a - 1, delta=False)
    w.observations = observations(w, [invocation("inv-main", before + after), compaction(w, first, before[-1]),
                                      *tool_observations(w, before + after)])
    w.record_breaks = [brk(first, "boundary", "compaction", before[-1], "nearest", token_cause="new_context")]
    return expect(["unresolved_parent_calls", "multiple_roots", "multiple_chains"], main_chain=before,
                  breaks=[brk(first, "boundary", "new_context", before[-1], "nearest")],
                  **structure(n, roots=2, chains=2, failures={"parent_unresolved": 1}, unresolved=1))


def s_subagent_observed(w: StoreRollout, n: int, ctx: Ctx) -> dict[str, Any]:
    j = w.rng.randint(1, n - 3)  # the orchestrator's calls up to the spawn
    s = w.rng.randint(1, n - j - 1)  # the helper's calls
    orch = w.run(None, j - 1, delta=False, ends=False)
    spawn = w.turn(orch[-1] if orch else None, tool=("spawn_agent", {"task": "callers of split_tokens"}))
    orch.append(spawn)
    helper = w.root_prompt(system="You are a helper agent. Answer the orchestrator briefly.", tools=None,
                           task="Report every call site of split_tokens with file and line.")
    sub = [w.turn(None, interstitial=helper, tool=("search_code", {"query": "split_tokens("}))]
    sub += w.run(sub[0], s - 1, delta=False)
    report = "src/cli.py:88 and src/parser.py:12 call split_tokens."
    orch.append(w.turn(spawn, interstitial=w.turn_after(spawn, output=report)))
    orch += w.run(orch[-1], n - j - s - 1, delta=False)
    w.observations = observations(w, [invocation("inv-main", orch),
                                      invocation("inv-helper-1", sub, "inv-main", last_tool_call_id(w, spawn)),
                                      *tool_observations(w, orch + sub)])
    w.record_breaks = [brk(sub[0], "extra_root", "subagent", spawn, "nearest", token_cause="new_context")]
    return expect(["multiple_roots", "multiple_chains"], main_chain=orch, generated_tokens_delivered=w.chain(orch),
                  breaks=[brk(sub[0], "extra_root", "new_context", spawn, "nearest")],
                  **structure(n, roots=2, chains=2))


SITUATIONS: tuple[Situation, ...] = (
    Situation("delta_records", 42, 2, None, s_delta,  # 110 drawn, 68 converted to the situations at the end
              "A plain agent loop stored as delta records (each prompt only beyond its parent's tokens).",
              "Delta prompts rebuild by replaying the parent chain and check against each stamped digest."),
    Situation("clean_multiturn_tools", 40, 1, None, s_clean,
              "A plain agent loop with full prompts: tool calls and tool outputs, then a final answer.",
              "Every link is proven by the parent's digest: one chain ending on `stop`.",
              bundle_cap=8),
    Situation("length_stop", 20, 1, None, s_length,
              "The final answer hit the output-token limit.",
              "`length` on the delivered last call gives `incomplete` / `max_output_tokens`."),
    Situation("stuck_at_one_call", 12, 1, 1, s_stuck,
              "One call only: the model's tool call came back as plain text (no tool-call parser on the "
              "server), so the harness took it for the final answer.",
              "Nothing is wrong with the lineage, so it is trainable; only the call count (1) gives it away."),
    Situation("retry_resolved_by_child", 12, 4, None, s_retry_resolved,
              "One request was sent twice with different samples; the run went on from the second.",
              "The retry with a linked child is kept; the abandoned sample is quarantined."),
    Situation("final_retry_unresolved", 10, 3, None, s_final_retry,
              "The last request was sent twice and sampled two different answers.",
              "Nothing says which answer the harness kept: `unresolved_retries`."),
    Situation("subagent_branch", 10, 3, None, s_subagent,
              "A sub-agent forked off an orchestrator call with its own prompt.",
              "Two root-to-leaf chains: `multiple_chains`; the orchestrator's (latest leaf) is delivered."),
    Situation("engine_refusal_ended", 10, 1, None, s_refusal_ended,
              "The harness's next request was refused with `context_length_exceeded` and the run stopped.",
              "A context-window refusal continuing the delivered last call ends it: `incomplete`."),
    Situation("token_identical_twins", 8, 3, None, s_twins,
              "The last request was served twice with the very same generated tokens.",
              "Token-identical retries are interchangeable: the smallest id is kept, trainable."),
    Situation("compaction_new_root", 8, 2, None, s_compaction,
              "Mid-run compaction: a summary prompt starts a fresh conversation.",
              "Two roots, two chains: `multiple_roots`, `multiple_chains`; the first conversation is delivered."),
    Situation("unresolved_continuation", 6, 2, None, s_unresolved_continuation,
              "A call recorded `parent_resolution: unresolved` although its prompt extends the previous call.",
              "An unresolved call starts its own fragment and is never prefix-matched."),
    Situation("empty_generation_parent_recovered", 6, 3, None, s_empty_generation,
              "A call generated nothing; the next call names it as parent.",
              "The empty call is left out and its child re-attached by longest prefix: trainable.",
              bundle_cap=10),
    Situation("stale_parent_link", 5, 2, None, s_stale_parent,
              "A call names its parent, but one token of the parent's history changed in its prompt.",
              "The parent's digest does not match the prompt prefix: `parent_digest_mismatch`, a new fragment."),
    Situation("engine_refusal_earlier_call", 5, 2, None, s_refusal_earlier,
              "A context-window refusal of a request continuing an earlier call; the harness carried on.",
              "Only a refusal continuing the delivered last call can end the chain."),
    Situation("capture_interrupted", 6, 1, None, s_interrupted,
              "The capture died mid-write: the last call's intent is there, its line is torn.",
              "Torn bytes are skipped; the dangling intent makes the capture incomplete."),
    Situation("legacy_missing_resolution", 4, 2, None, s_legacy,
              "Schema-4 records with no request-time parent decision.",
              "No link is trusted without a parent decision: every call is its own fragment.",
              bundle_cap=8),
    Situation("broken_delta_chain", 4, 2, None, s_broken_delta,
              "Delta records whose ancestor was never captured.",
              "A delta that cannot be rebuilt is excluded with every delta built on it."),
    Situation("engine_refusal_recovered", 4, 3, None, s_refusal_recovered,
              "A context-window refusal of the next request; the harness re-served the last request and finished.",
              "A twin served at or after the refusal shows the harness recovered: `completed`."),
    Situation("twins_finish_reason_disagree", 4, 3, None, s_twins_finish,
              "Token-identical twins of the last call with different finish reasons (`length` / `stop`).",
              "The finish-reason verdict is withheld: `completed`."),
    Situation("content_filter_stop", 4, 1, None, s_content_filter,
              "The final answer was stopped by the content filter.",
              "`content_filter` on the delivered last call gives `incomplete` / `content_filter`."),
    Situation("parameter_refusal", 4, 2, None, s_parameter_refusal,
              "The engine rejected an output-token parameter (refusal with a null code); the turn was re-sent.",
              "A refusal with no context-window code is only counted."),
    Situation("capture_incomplete_marker", 3, 1, None, s_incomplete_marker,
              "The store marked the rollout incomplete (`R.tokens.incomplete`, or `incomplete` in the state file).",
              "A call failed to capture, so the trajectory may be missing a turn: masked."),
    Situation("corrupt_record", 3, 3, None, s_corrupt,
              "A call's generated tokens were altered after its digest was stamped.",
              "The record is excluded (`entry_digest_mismatch`); its child is re-attached by prefix, but masked."),
    Situation("duplicate_call_id", 3, 2, None, s_duplicate,
              "Two records share the last call's id with different samples.",
              "Conflicting copies cannot both be true: `duplicate_call_id_conflict`, masked."),
    Situation("load_error_bad_field", 2, 2, None, s_bad_field,
              "A record with a bad field (a log-probability missing, or a schema version from the future).",
              "The rollout cannot be loaded; the error names the file, line, call and field. Others still load."),
    Situation("load_error_foreign_record", 1, 2, None, s_foreign_record,
              "A record in the rollout's file names another rollout.",
              "A store file belongs to one rollout: a record naming another is an error of this rollout."),
    Situation("load_error_invalid_json", 1, 2, None, s_invalid_json,
              "A line in the middle of the records file is cut short (not JSON).",
              "Only bytes after the last newline are a torn tail; a broken line before it is an error."),
    Situation("load_error_bad_state", 1, 1, None, s_bad_state,
              "The state file was cut off mid-write.",
              "A state file that is not JSON makes the rollout unloadable."),
    Situation("reasoning_stripped_by_template", 24, 2, None, s_reasoning_stripped,
              "A reasoning model behind a chat template that renders earlier turns without their `<think>` reasoning.",
              "No prompt extends the previous call: every call is its own fragment (`generation_dropped`, reasoning).",
              bundle_cap=6, drawn_as="delta_records"),
    Situation("end_token_lost", 6, 2, None, s_end_token_lost,
              "The harness renders each assistant turn back without its end-of-turn token.",
              "Each prompt lacks the previous call's last token: every call is its own fragment (`seam`).",
              bundle_cap=6, drawn_as="delta_records"),
    Situation("tool_call_rerendered", 6, 2, None, s_tool_call_rerendered,
              "The harness renders every tool call back as compact JSON and names the previous call as parent.",
              "The named parent's digest does not match: `parent_digest_mismatch` on every call (`tokens_replaced`).",
              bundle_cap=6, drawn_as="delta_records"),
    Situation("retokenized_history", 5, 2, None, s_retokenized,
              "The model sampled a word as single characters; the harness encoded the text again for the next request.",
              "The next prompt holds other ids for the same text: an unresolved call (`retokenized`; without a "
              "tokenizer, a short span for many generated tokens reads as a stub: `generation_dropped`).",
              bundle_cap=7, drawn_as="delta_records"),
    Situation("system_prompt_changed", 4, 2, None, s_system_prompt_changed,
              "Mid-run the harness rendered the system prompt again with a new date.",
              "The prompt differs only inside the opening: an unresolved call (`opening_changed`).",
              bundle_cap=7, drawn_as="delta_records"),
    Situation("history_truncated", 4, 3, None, s_history_truncated,
              "A sliding-window harness dropped the oldest exchange before the last request.",
              "The prompt skips a stretch of history right after the opening: an unresolved call (`history_dropped`).",
              bundle_cap=7, drawn_as="delta_records"),
    Situation("tool_output_elided", 4, 3, None, s_tool_output_elided,
              "The harness replaced a long earlier tool output with a placeholder before the last request.",
              "A long stretch of history was replaced: an unresolved call (`history_replaced`; `history_reordered` "
              "where a later tool output repeats a line of it, which the walk lines the rest up on).",
              bundle_cap=7, drawn_as="delta_records"),
    Situation("tool_result_annotated", 4, 3, None, s_tool_result_annotated,
              "The harness appended a duration to an earlier tool result before the last request.",
              "A few tokens were inserted into the history: an unresolved call (`tokens_inserted`).",
              bundle_cap=7, drawn_as="delta_records"),
    Situation("compaction_observed", 6, 2, None, s_compaction_observed,
              "The harness compacted the context and went on from its own summary; its record observes the compaction.",
              "An unresolved call after the compaction (`compaction` with the record, `new_context` without).",
              bundle_cap=7, drawn_as="delta_records"),
    Situation("subagent_observed", 5, 4, None, s_subagent_observed,
              "A `spawn_agent` tool call started a helper agent with its own system prompt; its record observes both.",
              "The helper's first call is an extra root (`subagent` with the record, `new_context` without).",
              bundle_cap=8, drawn_as="delta_records"),
)
SITUATION_BY_NAME = {s.name: s for s in SITUATIONS}


# --------------------------------------------------------------------------- the run


def rollout_ids(rng: random.Random, n: int, *, tasks: int = 1000, per_task: int = 4) -> list[str]:
    """``n`` realistic rollout ids: ``task0042-rollout3-attempt0``, a few re-run attempts."""
    out: list[str] = []
    digits = max(4, len(str(tasks - 1)))
    n_tasks = min(tasks, -(-n // per_task))
    for task in sorted(rng.sample(range(tasks), n_tasks)):
        for r in range(per_task):
            out.append(f"task{task:0{digits}d}-rollout{r}-attempt0")
            if rng.random() < 0.04:  # the trainer re-ran this rollout
                out.append(f"task{task:0{digits}d}-rollout{r}-attempt1")
            if len(out) >= n:
                return out[:n]
    return out


def sibling(rid: str, ids: Sequence[str]) -> str:
    """Another rollout of the same task when there is one (else any other rollout)."""
    task = rid.split("-", 1)[0]
    same = [i for i in ids if i != rid and i.startswith(task + "-")]
    return same[0] if same else next(i for i in ids if i != rid)


def draw_calls(rng: random.Random, lo: int, hi: int) -> int:
    """Mostly short rollouts, some long ones (up to ~40 calls)."""
    n = rng.randint(20, 40) if rng.random() < 0.08 else 1 + int(rng.expovariate(1 / 4.5))
    return max(lo, min(hi, n))


@dataclass
class Planned:
    rollout_id: str
    situation: str
    files: dict[str, bytes]  # file name -> bytes, in the store directory
    declared: dict[str, Any]
    answer: dict[str, Any] | None = None  # the harness's final answer: output items and generated tokens
    record_breaks: list[dict[str, Any]] | None = None  # declared breaks with the rollout record as evidence
    observations: dict[str, Any] | None = None  # the harness's evidence fields for the rollout record


@dataclass(frozen=True)
class Slot:
    """One rollout of a run before it is written: everything `make_rollout` needs."""

    rollout_id: str
    situation: str
    n_calls: int
    seed: int
    t0: float
    ctx: Ctx


def final_answer(w: StoreRollout) -> dict[str, Any] | None:
    """What the harness finished on, as its rollout record stores it: the output items and
    generated tokens of the last call it made (``w.answer`` when a situation says otherwise,
    e.g. a call whose record never reached the store)."""
    record = w.answer or next((w.records[r["model_call_id"]] for r in reversed(w.entries)
                               if r["generation_token_ids"]), None)
    if record is None:
        return None
    return {"items": record["output_items"], "generation_token_ids": list(record["generation_token_ids"])}


def make_rollout(rid: str, situation: str, n_calls: int, seed: int, t0: float, ctx: Ctx) -> Planned:
    w = StoreRollout(rid, seed, t0)
    declared = SITUATION_BY_NAME[situation].build(w, n_calls, ctx)
    declared = {"situation": situation, "load_fails": "load_error" in declared["mask_reasons"], **declared}
    record_breaks = declared["breaks"] if w.record_breaks is None else w.record_breaks
    return Planned(rid, situation, w.files(), declared, final_answer(w), record_breaks, w.observations)


def plan_run(counts: dict[str, int], *, seed: int, calls: Callable[[random.Random, Situation], int],
             tasks: int = 1000, spread: float = 3600.0) -> Iterator[Slot]:
    """Every rollout of a run as a `Slot`: ids, situations shuffled over them, each with its own
    seed. ``calls`` picks a rollout's number of calls for its situation."""
    rng = random.Random(seed)
    # Situations added later are drawn as the situation they replace and converted after the
    # shuffle, so every other rollout keeps its id, situation, size and seed.
    drawn: dict[str, int] = {}
    for name, k in counts.items():
        carrier = SITUATION_BY_NAME[name].drawn_as or name
        drawn[carrier] = drawn.get(carrier, 0) + k
    names = [name for name, k in drawn.items() for _ in range(k)]
    ids = rollout_ids(rng, len(names), tasks=tasks)
    assert len(ids) == len(names), "not enough task ids for the run"
    rng.shuffle(names)
    convert_drawn(names, ids, counts)
    seen: dict[str, int] = {}
    for i, (rid, name) in enumerate(zip(ids, names)):
        n = calls(rng, SITUATION_BY_NAME[name])
        t0 = round(T0 + rng.uniform(0.0, spread), 3)  # rollouts of a run overlap in time
        seen[name] = seen.get(name, 0) + 1
        yield Slot(rid, name, n, seed * 1_000_003 + i, t0, Ctx(ids, seen[name] - 1))


PROTECTED_TASKS = frozenset({3, 17, 56, 153, 694, 922})
"""Tasks whose rollouts tests and the app name (and the re-tokenized and re-run ones): never converted."""


def convert_drawn(names: list[str], ids: Sequence[str], counts: dict[str, int]) -> None:
    """Give the situations drawn as another (``drawn_as``) their rollouts: in run order, the
    carrier's rollouts outside `PROTECTED_TASKS` take them round robin until each has its count."""
    left = {name: k for name, k in counts.items() if SITUATION_BY_NAME[name].drawn_as and k}
    for i, (rid, name) in enumerate(zip(ids, names)):
        if not left:
            return
        if indices_of(rid)[0] in PROTECTED_TASKS:
            continue
        want = next((n for n in left if SITUATION_BY_NAME[n].drawn_as == name), None)
        if want is None:
            continue
        names[i] = want
        left[want] -= 1
        if not left[want]:
            del left[want]
        # round robin: the next conversion goes to the next situation
        left = dict(list(left.items())[1:] + list(left.items())[:1]) if want in left else left
    assert not left, f"not enough rollouts to convert: {left}"


def iter_run(counts: dict[str, int], *, seed: int, calls: Callable[[random.Random, Situation], int],
             tasks: int = 1000, spread: float = 3600.0) -> Iterator[Planned]:
    """Every rollout of a run, one at a time (`plan_run`, each slot made by `make_rollout`)."""
    for slot in plan_run(counts, seed=seed, calls=calls, tasks=tasks, spread=spread):
        yield make_rollout(slot.rollout_id, slot.situation, slot.n_calls, slot.seed, slot.t0, slot.ctx)


def summarize(planned: Sequence[Planned]) -> dict[str, Any]:
    decl = [p.declared for p in planned]
    reasons = {r: sum(r in d["mask_reasons"] for d in decl) for r in MASK_REASON_ORDER}
    status: dict[str, int] = {}
    incomplete: dict[str, int] = {}
    situations: dict[str, int] = {}
    for p in planned:
        key = p.declared["status"] or "none"
        status[key] = status.get(key, 0) + 1
        if p.declared["incomplete_reason"]:
            incomplete[p.declared["incomplete_reason"]] = incomplete.get(p.declared["incomplete_reason"], 0) + 1
        situations[p.situation] = situations.get(p.situation, 0) + 1
    return {
        "rollouts": len(decl),
        "trainable": sum(not d["mask_sample"] for d in decl),
        "masked": sum(d["mask_sample"] for d in decl),
        "load_errors": sum(d["load_fails"] for d in decl),
        "mask_reasons": reasons,
        "status": dict(sorted(status.items())),
        "incomplete_reason": dict(sorted(incomplete.items())),
        "situations": dict(sorted(situations.items())),
    }


ABOUT = ("Declared verdicts of the sample run, written by scripts/make_sample_run.py from the situation that "
         "built each rollout (never by running the builder). `status` null / `none` means no response (the "
         "rollout failed to load).")


def expected_document(planned: Sequence[Planned], seed: int, about: str = ABOUT) -> dict[str, Any]:
    return {
        "about": about,
        "seed": seed,
        "summary": summarize(planned),
        "situations": {s.name: {"what": s.what, "why": s.why} for s in SITUATIONS},
        "rollouts": {p.rollout_id: p.declared for p in sorted(planned, key=lambda p: p.rollout_id)},
    }


def expected_bytes(doc: dict[str, Any]) -> bytes:
    """Indented JSON, except that each rollout's declaration sits on one line (easy to grep and diff)."""
    head = {k: v for k, v in doc.items() if k != "rollouts"}
    body = orjson.dumps(head, option=orjson.OPT_INDENT_2)[:-2]  # drop the closing "\n}"
    rows = ",\n".join(f"    {orjson.dumps(rid).decode()}: {orjson.dumps(d).decode()}"
                      for rid, d in doc["rollouts"].items())
    return body + b',\n  "rollouts": {\n' + rows.encode() + b"\n  }\n}\n"


def clear_store(out_dir: Path) -> None:
    """Remove an earlier run's files (only store files and the expectations) before writing."""
    if not out_dir.is_dir():
        return
    for p in out_dir.iterdir():
        if p.is_file() and (p.name == EXPECTED_NAME or any(p.name.endswith(s) for s in STORE_SUFFIXES)):
            p.unlink()


def write_run(out_dir: Path, planned: Iterable[Planned], *, seed: int, about: str = ABOUT) -> dict[str, Any]:
    """Write every rollout's store files as it is made (only declarations stay in memory),
    then the expectations; returns the expectations document."""
    out_dir.mkdir(parents=True, exist_ok=True)
    clear_store(out_dir)
    kept: list[Planned] = []
    for p in planned:
        for name, data in sorted(p.files.items()):
            (out_dir / name).write_bytes(data)
        kept.append(Planned(p.rollout_id, p.situation, {}, p.declared))
    expected = expected_document(kept, seed, about)
    (out_dir / EXPECTED_NAME).write_bytes(expected_bytes(expected))
    return expected


def sample_calls(rng: random.Random, s: Situation) -> int:
    return draw_calls(rng, s.min_calls, min(s.bundle_cap, s.max_calls or s.bundle_cap))


def generate(out_dir: Path, seed: int = RUN_SEED) -> dict[str, Any]:
    return write_run(out_dir, iter_run({s.name: s.count for s in SITUATIONS}, seed=seed, calls=sample_calls),
                     seed=seed)


# --------------------------------------------------------------------------- the run after a fix
#
# The same tasks run again after a harness fix, to compare with `tokencap diff`: most rollouts
# are byte-identical (same seed), the fix makes two kinds of lineage trouble go away, one
# rollout regresses, one changes its reasons, and two rollouts were re-run under a new
# attempt id. Both runs come with the harness's rollout records (reward, task and rollout
# index, final response), written next to them, never inside them.

RUN_NAME, AFTER_FIX_NAME, RECORDS_NAME = "run", "run_after_fix", "rollout_records"
RECORDS_EXPECTED = "expected.json"
AFTER_FIX_SALT = 7_919  # a changed rollout is drawn from another seed
FIXED_BY_THE_HARNESS = ("unresolved_continuation", "stale_parent_link", "reasoning_stripped_by_template")
"""Situations the fix removes (the harness records its parent decision and stops re-rendering
history): these rollouts are clean agent loops after the fix."""

WITH_RECORDS: dict[str, tuple[list[str] | None, list[str], str]] = {
    # situation -> (reasons without the record to drop (None: all), reasons to add, why)
    "final_retry_unresolved": (None, [], "the record carries the generated tokens of the answer the harness kept, "
                               "so that call anchors and the retry group is decided (docs/contract.md#attribution, #builder-retries): trainable"),
    "capture_interrupted": ([], ["terminal_call_not_delivered"],
                            "the harness's final answer is the call whose line was torn: no captured call matches "
                            "it (unattributed)"),
    "broken_delta_chain": ([], ["terminal_call_not_delivered"],
                           "the final answer is on a delta that cannot be rebuilt: no built call matches it "
                           "(unattributed)"),
}
"""How a rollout record changes a situation's declared verdict (the status never changes)."""

ID_PARTS = re.compile(r"task(\d+)-rollout(\d+)-attempt(\d+)")


def indices_of(rollout_id: str) -> tuple[int, int, int]:
    """(task index, rollout index, attempt) of a sample rollout id."""
    match = ID_PARTS.fullmatch(rollout_id)
    assert match, rollout_id
    return int(match[1]), int(match[2]), int(match[3])


def with_records(declared: dict[str, Any], *, retokenized: bool = False) -> list[str]:
    """The declared mask reasons of a rollout scanned with its rollout record. A record whose
    tokens were re-tokenized by the harness matches no call: unattributed, so
    `terminal_call_not_delivered` (docs/contract.md#attribution), and the record decides nothing."""
    if declared["load_fails"]:
        return list(declared["mask_reasons"])  # not built: the record is never read
    if retokenized:
        return [r for r in MASK_REASON_ORDER if r in declared["mask_reasons"] or r == "terminal_call_not_delivered"]
    drop, add, _ = WITH_RECORDS.get(declared["situation"], ([], [], ""))
    kept = [] if drop is None else [r for r in declared["mask_reasons"] if r not in drop]
    return [r for r in MASK_REASON_ORDER if r in kept or r in add]


RETOKENIZED_TASKS = 2
"""Tasks whose rollout records in the first run carry re-tokenized answers (the harness bug the
fix removes): the longest tasks whose rollouts are otherwise all trainable."""


def retokenized_tasks(planned: Sequence[Planned], avoid: set[str]) -> set[int]:
    tasks: dict[int, list[Planned]] = {}
    for p in planned:
        tasks.setdefault(indices_of(p.rollout_id)[0], []).append(p)
    clean = [(sum(p.declared["metrics"]["n_calls"] for p in group), task) for task, group in tasks.items()
             if len(group) == 4 and not any(p.declared["mask_reasons"] or p.rollout_id in avoid for p in group)]
    return {task for _, task in sorted(clean, reverse=True)[:RETOKENIZED_TASKS]}


def plan_after_fix(slots: Sequence[Slot]) -> tuple[list[Slot], dict[str, list[str]]]:
    """The run after the fix, slot for slot, and which rollout ids each change touched (the
    rollouts of re-tokenized tasks are added to ``fixed`` by the caller)."""
    rerun = {indices_of(s.rollout_id)[:2] for s in slots if indices_of(s.rollout_id)[2] > 0}
    ordered = sorted(slots, key=lambda s: s.rollout_id)
    plain = [s for s in ordered if s.situation == "delta_records" and indices_of(s.rollout_id)[:2] not in rerun]
    regressed, moved = plain[0], plain[-2:]
    compaction = next(s for s in ordered if s.situation == "compaction_new_root" and s.n_calls >= 3)
    story: dict[str, list[str]] = {"fixed": [], "broke": [regressed.rollout_id],
                                   "reasons_changed": [compaction.rollout_id],
                                   "only_a": sorted(s.rollout_id for s in moved), "only_b": []}
    out: list[Slot] = []
    for slot in slots:
        again = replace(slot, seed=slot.seed + AFTER_FIX_SALT)
        if slot.situation in FIXED_BY_THE_HARNESS:
            out.append(replace(again, situation="delta_records"))
            story["fixed"].append(slot.rollout_id)
        elif slot is regressed:  # the capture died mid-write this time
            out.append(replace(again, situation="capture_interrupted"))
        elif slot is compaction:  # no compaction this time, but a sub-agent
            out.append(replace(again, situation="subagent_branch"))
        elif slot in moved:  # the trainer re-ran it: a new attempt id, the same task and rollout index
            new_id = slot.rollout_id.replace("-attempt0", "-attempt1")
            out.append(replace(again, rollout_id=new_id))
            story["only_b"].append(new_id)
        else:
            out.append(slot)
    story["fixed"].sort()
    story["only_b"].sort()
    return out, story


def reward_of(task: int, index: int, masked: bool, n_calls: int) -> float:
    """A pass/fail reward for one task and rollout index, the same in both runs. Rewards are
    biased on purpose: rollouts masked in the first run (and long ones) pass more often, so
    dropping masked rollouts shifts the reward a trainer sees."""
    rng = random.Random(f"reward:{task}:{index}")
    p = 0.3 + (0.4 if masked else 0.0) + (0.15 if n_calls >= 12 else 0.0)
    return 1.0 if rng.random() < p else 0.0


GYM_DELIVERY_IGNORES = ("multiple_roots", "multiple_chains", "terminal_call_not_delivered")
"""Reasons the delivery of the NeMo Gym release that wrote these records did not mask for: it
trained on a rollout's main chain and dropped its other chains (and never saw the harness's
final answer). Rollouts masked by tokencap only for these were trained on."""
AGENT_MASKED = ("capture_interrupted",)
"""Situations whose harness masked the rollout itself (it timed out while the capture died):
``mask_sample`` true without ``_ng_token_capture``."""


def delivered(p: Planned, reasons: Sequence[str]) -> tuple[bool, str]:
    """(``mask_sample``, who set it) as the rollout record carries them (docs/contract.md#delivered)."""
    if p.situation in AGENT_MASKED:
        return True, "agent"
    return bool([r for r in reasons if r not in GYM_DELIVERY_IGNORES]), "token_capture"


def retokenized_answer(tokens: list[int]) -> list[int]:
    """The answer's ids as the harness got them back from encoding its text again: one word of
    the second half split into characters (the same text, other ids)."""
    for at in range(len(tokens) // 2, len(tokens)):
        text = chat.decode(tokens[at:at + 1])
        if len(text) >= 2 and text.isprintable() and not text.startswith("<"):
            return tokens[:at] + chat.encode_chars(text) + tokens[at + 1:]
    raise AssertionError("no token to split")


def latest_records(planned: Sequence[Planned]) -> dict[tuple[int, int], Planned]:
    """The rollout each record describes: one per task and rollout index, the last attempt."""
    latest: dict[tuple[int, int], Planned] = {}
    for p in sorted(planned, key=lambda p: p.rollout_id):
        latest[indices_of(p.rollout_id)[:2]] = p  # attempts sort in order: the last one wins
    return latest


def records_bytes(planned: Sequence[Planned], rewards: dict[tuple[int, int], float],
                  retokenized: set[int] = frozenset()) -> bytes:  # type: ignore[assignment]
    """The harness's rollout records of a run (JSONL, by rollout id): one per task and rollout
    index -- a re-run attempt replaces the earlier attempt's record. For the ``retokenized``
    tasks the answer's tokens are the harness's own re-tokenization, not the server's. Each
    record carries what NeMo Gym delivered (``mask_sample``, ``_ng_token_capture``) and, for
    compactions and sub-agents, the harness's observations."""
    lines = []
    for (task, index), p in sorted(latest_records(planned).items(), key=lambda kv: kv[1].rollout_id):
        assert p.answer is not None, p.rollout_id
        items = [dict(item) for item in p.answer["items"]]
        tokens = list(p.answer["generation_token_ids"])
        if task in retokenized:
            tokens = retokenized_answer(tokens)
        items[-1]["generation_token_ids"] = tokens
        mask, by = delivered(p, with_records(p.declared, retokenized=task in retokenized))
        record: dict[str, Any] = {"rollout_id": p.rollout_id, "_ng_task_index": task, "_ng_rollout_index": index,
                                  "reward": rewards[(task, index)], "mask_sample": mask}
        if by == "token_capture":
            gym_reasons = [r for r in p.declared["mask_reasons"] if r not in GYM_DELIVERY_IGNORES]
            record["_ng_token_capture"] = {"builder": "prefix_merging", "mask_reasons": gym_reasons}
        record["response"] = {"id": f"resp_{task:04d}_{index}", "object": "response", "status": "completed",
                              "output": items}
        record.update(p.observations or {})
        lines.append(orjson.dumps(record) + b"\n")
    return b"".join(lines)


def diagnosis_facts(planned: Sequence[Planned], retokenized: set[int] = frozenset()  # type: ignore[assignment]
                    ) -> dict[str, Any]:
    """What the diagnosis of a run scanned with its records must say (docs/contract.md#scan-diagnosis-columns, #diagnosis), from the
    situations alone: per rollout its breaks (with its record as evidence and the bundled
    tokenizer), what was delivered, and per cause the rollouts that have it."""
    records = {p.rollout_id for p in latest_records(planned).values()}
    rollouts: dict[str, Any] = {}
    delivery: dict[str, tuple[bool | None, str | None, bool]] = {}
    for p in sorted(planned, key=lambda p: p.rollout_id):
        has_record = p.rollout_id in records
        breaks = (p.record_breaks or []) if has_record else p.declared["breaks"]
        reasons = with_records(p.declared, retokenized=indices_of(p.rollout_id)[0] in retokenized) if has_record \
            else p.declared["mask_reasons"]
        mask, by = delivered(p, reasons) if has_record else (None, None)
        delivery[p.rollout_id] = (mask, by, mask is False and bool(reasons))
        if breaks:
            rollouts[p.rollout_id] = {
                "break_causes": [c for c in CAUSE_ORDER if any(b["cause"] == c for b in breaks)],
                "first_break_call": breaks[0]["call_id"], "breaks": breaks}
    causes = {c: sorted(r for r, d in rollouts.items() if c in d["break_causes"]) for c in CAUSE_ORDER}
    return {
        "rollouts_with_breaks": len(rollouts),
        "cause_rollouts": {c: len(v) for c, v in causes.items()},
        "delivered_masked": sorted(r for r, (mask, _, _) in delivery.items() if mask),
        "delivered_trainable": sorted(r for r, (mask, _, _) in delivery.items() if mask is False),
        "masked_by_agent": sorted(r for r, (_, by, _) in delivery.items() if by == "agent"),
        "trained_on_in_doubt": sorted(r for r, (_, _, doubt) in delivery.items() if doubt),
        "rollouts": rollouts,
    }


def reward_facts(planned: Sequence[Planned], rewards: dict[tuple[int, int], float],
                 retokenized: set[int] = frozenset()) -> dict[str, Any]:  # type: ignore[assignment]
    """What the reward and group views of a run must show, from the declarations alone."""
    latest: dict[tuple[int, int], Planned] = {}
    for p in sorted(planned, key=lambda p: p.rollout_id):
        latest[indices_of(p.rollout_id)[:2]] = p
    trainable: dict[int, list[float]] = {}
    kept, dropped = [], []
    for (task, index), p in latest.items():
        reward = rewards[(task, index)]
        trainable.setdefault(task, [])
        if with_records(p.declared, retokenized=task in retokenized):
            dropped.append(reward)
        else:
            kept.append(reward)
            trainable[task].append(reward)
    return {
        "rollouts_with_reward": len(latest),
        "mean_reward": round(sum(kept + dropped) / len(latest), 6),
        "mean_reward_trainable": round(sum(kept) / len(kept), 6),
        "mean_reward_masked": round(sum(dropped) / len(dropped), 6),
        "groups": len(trainable),
        "groups_under_2_trainable": sum(len(r) < 2 for r in trainable.values()),
        "groups_one_reward": sum(len(r) >= 2 and len(set(r)) == 1 for r in trainable.values()),
    }


def diff_facts(a: Sequence[Planned], b: Sequence[Planned], story: dict[str, list[str]],
               retokenized: set[int]) -> dict[str, Any]:
    """The declared result of `tokencap diff` on the two runs (each scanned with its records)."""
    reasons_a = {p.rollout_id: with_records(p.declared, retokenized=indices_of(p.rollout_id)[0] in retokenized)
                 for p in a}
    reasons_b = {p.rollout_id: with_records(p.declared) for p in b}
    both = sorted(set(reasons_a) & set(reasons_b))
    change: dict[str, list[str]] = {"fixed": [], "broke": [], "reasons_changed": [], "same": []}
    for rid in both:
        ra, rb = reasons_a[rid], reasons_b[rid]
        key = "fixed" if ra and not rb else "broke" if rb and not ra else "reasons_changed" if ra != rb else "same"
        change[key].append(rid)
    only_a, only_b = sorted(set(reasons_a) - set(reasons_b)), sorted(set(reasons_b) - set(reasons_a))
    for key in ("fixed", "broke", "reasons_changed"):
        assert change[key] == story[key], (key, change[key], story[key])  # the story is what the data says
    assert (only_a, only_b) == (story["only_a"], story["only_b"])
    return {
        "join": "id",
        "counts": {"both": len(both), "only_a": len(only_a), "only_b": len(only_b),
                   **{k: len(v) for k, v in change.items()}},
        "rollouts": {"fixed": change["fixed"], "broke": change["broke"],
                     "reasons_changed": change["reasons_changed"], "only_a": only_a, "only_b": only_b},
        "trainable": {"a": sum(not r for r in reasons_a.values()), "b": sum(not r for r in reasons_b.values())},
        "mask_reasons": {side: {r: sum(r in v for v in reasons.values()) for r in MASK_REASON_ORDER}
                         for side, reasons in (("a", reasons_a), ("b", reasons_b))},
    }


AFTER_FIX_ABOUT = ("Declared verdicts of the sample run after a harness fix (the same tasks as run/), written by "
                   "scripts/make_sample_run.py from the situation that built each rollout.")


def generate_pair(root: Path, seed: int = RUN_SEED) -> dict[str, Any]:
    """Write ``root/run``, ``root/run_after_fix`` and ``root/rollout_records``; returns the
    records' expectations (diff counts, reward and group facts)."""
    counts = {s.name: s.count for s in SITUATIONS}
    slots = list(plan_run(counts, seed=seed, calls=sample_calls))
    after, story = plan_after_fix(slots)
    runs: dict[str, list[Planned]] = {}
    for name, plan, about in ((RUN_NAME, slots, ABOUT), (AFTER_FIX_NAME, after, AFTER_FIX_ABOUT)):
        made = [make_rollout(s.rollout_id, s.situation, s.n_calls, s.seed, s.t0, s.ctx) for s in plan]
        write_run(root / name, made, seed=seed, about=about)
        runs[name] = made
    avoid = {rid for ids in story.values() for rid in ids}
    retokenized = retokenized_tasks(runs[RUN_NAME], avoid)
    story["fixed"] = sorted(story["fixed"] + [p.rollout_id for p in runs[RUN_NAME]
                                              if indices_of(p.rollout_id)[0] in retokenized])
    rewards: dict[tuple[int, int], float] = {}
    for p in sorted(runs[RUN_NAME], key=lambda p: p.rollout_id):  # the last attempt decides
        task, index, _ = indices_of(p.rollout_id)
        masked = bool(with_records(p.declared, retokenized=task in retokenized))
        rewards[(task, index)] = reward_of(task, index, masked, p.declared["metrics"].get("n_calls", 1))
    records = root / RECORDS_NAME
    records.mkdir(parents=True, exist_ok=True)
    (root / TOKENIZER_NAME).write_bytes(chat.tokenizer_bytes())  # what the runs' ids decode with
    for name, made in runs.items():
        (records / f"{name}.jsonl").write_bytes(
            records_bytes(made, rewards, retokenized if name == RUN_NAME else set()))
    doc = {
        "about": ("Declared facts of the two sample runs scanned with their rollout records (tokencap scan RUN "
                  "--final-responses rollout_records/RUN.jsonl), written by scripts/make_sample_run.py from the "
                  "situations and rewards it drew, never by running tokencap. `diff` is what `tokencap diff` of "
                  "run/ (A) and run_after_fix/ (B) must report; `rewards` what the reward and group views show "
                  "(groups are a task's rollouts; a group with fewer than 2 trainable rollouts, or whose trainable "
                  "rollouts all share one reward, gives no learning signal)."),
        "with_records": {s: {"drops": d, "adds": a, "why": w} for s, (d, a, w) in WITH_RECORDS.items()},
        "fixed_by_the_harness": list(FIXED_BY_THE_HARNESS),
        "retokenized_tasks_in_run": sorted(retokenized),
        "diff": diff_facts(runs[RUN_NAME], runs[AFTER_FIX_NAME], story, retokenized),
        "rewards": {RUN_NAME: reward_facts(runs[RUN_NAME], rewards, retokenized),
                    AFTER_FIX_NAME: reward_facts(runs[AFTER_FIX_NAME], rewards)},
    }
    facts = doc["rewards"][RUN_NAME]
    assert facts["mean_reward_masked"] > facts["mean_reward_trainable"], facts
    assert facts["groups_under_2_trainable"] and facts["groups_one_reward"], facts
    (records / RECORDS_EXPECTED).write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    diagnosis = {"about": DIAGNOSIS_ABOUT, "gym_delivery_ignores": list(GYM_DELIVERY_IGNORES),
                 "masked_by_agent_situations": list(AGENT_MASKED),
                 RUN_NAME: diagnosis_facts(runs[RUN_NAME], retokenized),
                 AFTER_FIX_NAME: diagnosis_facts(runs[AFTER_FIX_NAME])}
    shares = {name: diagnosis[name]["cause_rollouts"]["generation_dropped"] for name in (RUN_NAME, AFTER_FIX_NAME)}
    assert shares[AFTER_FIX_NAME] < shares[RUN_NAME], shares  # the fixed template: its cause falls
    (records / DIAGNOSIS_NAME).write_bytes(diagnosis_bytes(diagnosis))
    return doc


DIAGNOSIS_NAME = "diagnosis.json"
DIAGNOSIS_ABOUT = ("Declared diagnosis of the two sample runs scanned with their rollout records (tokencap scan RUN "
                   "--final-responses rollout_records/RUN.jsonl, with sample_data/tokenizer.json), written by "
                   "scripts/make_sample_run.py from the situation that built each rollout, never by running tokencap. "
                   "Per rollout with breaks: its breaks (docs/contract.md#diagnosis, with the record as harness evidence), "
                   "break_causes and first_break_call (a rollout not listed has none). What NeMo Gym delivered "
                   "(docs/contract.md#delivered): delivered_masked / delivered_trainable (delivered_mask_sample true / false), "
                   "masked_by_agent (delivered_by agent; every other rollout with a record: token_capture), "
                   "trained_on_in_doubt (delivered trainable, masked by tokencap). A rollout without a record (a "
                   "first attempt replaced by a re-run) is diagnosed without one and has no delivery.")


def diagnosis_bytes(doc: dict[str, Any]) -> bytes:
    """Indented JSON, except that each rollout's diagnosis sits on one line."""
    out = [b"{"]
    items = list(doc.items())
    for n, (key, value) in enumerate(items):
        comma = b"," if n < len(items) - 1 else b""
        if isinstance(value, dict) and "rollouts" in value:
            head = {k: v for k, v in value.items() if k != "rollouts"}
            body = orjson.dumps(head, option=orjson.OPT_INDENT_2).decode()[:-2].replace("\n", "\n  ")
            rows = ",\n".join(f"      {orjson.dumps(rid).decode()}: {orjson.dumps(d).decode()}"
                               for rid, d in value["rollouts"].items())
            out.append(f'  {orjson.dumps(key).decode()}: {body},\n    "rollouts": {{\n{rows}\n    }}\n  }}'.encode()
                       + comma)
        else:
            out.append(f"  {orjson.dumps(key).decode()}: {orjson.dumps(value).decode()}".encode() + comma)
    out.append(b"}\n")
    return b"\n".join(out)


USAGE = """usage: python scripts/make_sample_run.py                 # sample_data/run, run_after_fix, rollout_records
       python scripts/make_sample_run.py OUTPUT_DIR      # only the run, into OUTPUT_DIR
       python scripts/make_sample_run.py --pair ROOT     # all three, under ROOT"""


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip().splitlines()[0])
        print(USAGE)
        return 0
    if len(argv) > 2 or (len(argv) == 2 and argv[0] != "--pair") or argv == ["--pair"]:
        print(USAGE, file=sys.stderr)
        return 2
    if len(argv) == 1:
        summary = generate(Path(argv[0]))["summary"]
        print(f"wrote {summary['rollouts']} rollouts ({summary['trainable']} trainable, {summary['masked']} masked, "
              f"{summary['load_errors']} unloadable) to {argv[0]}")
        return 0
    root = Path(argv[1]) if argv else REPO_ROOT / "sample_data"
    doc = generate_pair(root)
    counts = doc["diff"]["counts"]
    print(f"wrote {root / RUN_NAME}, {root / AFTER_FIX_NAME} and {root / RECORDS_NAME}: "
          + ", ".join(f"{v} {k}" for k, v in counts.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
