"""Small factories for wire-format records, used by the per-layer tests.

Everything here follows the SPEC's wire format (SPEC 2): plain dicts with the table's
field names, full cumulative lengths and digests stamped with `tokencap.compute_digest`
exactly as the model server stamps them. Token ids come from a per-conversation counter,
so two calls only share tokens when a test says so (no accidental prefix matches).
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import asdict, is_dataclass
from typing import Any, Iterable, Sequence

from tokencap import EngineRefusalRecord, TokenEntry, compute_digest

CLE = "context_length_exceeded"


def logprobs_for(n: int, offset: float = 0.0) -> list[float]:
    """Deterministic, distinct, finite log-probabilities."""
    return [-(0.25 + offset + 0.01 * i) for i in range(n)]


def entry_dict(
    call_id: str,
    prompt: Sequence[int],
    gen: Sequence[int],
    *,
    rollout_id: str = "r1",
    logprobs: Sequence[float] | None = None,
    resolution: str | None = "root",
    parent: str | None = None,
    delta_suffix: Sequence[int] | None = None,
    stamp: bool = True,
    **fields: Any,
) -> dict[str, Any]:
    """One TokenEntry in wire format.

    ``prompt`` is always the FULL prompt; with ``delta_suffix`` the record stores only that
    suffix (``prompt_is_delta``) while ``cum_len``/``digest`` still describe the full
    cumulative sequence. Extra keyword fields are written as given (they override).
    """
    prompt = [int(t) for t in prompt]
    gen = [int(t) for t in gen]
    d: dict[str, Any] = {
        "schema_version": 5,
        "rollout_id": rollout_id,
        "model_call_id": call_id,
        "prompt_token_ids": prompt if delta_suffix is None else [int(t) for t in delta_suffix],
        "generation_token_ids": gen,
        "generation_log_probs": list(logprobs) if logprobs is not None else logprobs_for(len(gen)),
        "parent_resolution": resolution,
        "parent_call_id": parent,
    }
    if delta_suffix is not None:
        assert list(delta_suffix) == prompt[len(prompt) - len(delta_suffix):]
        d["prompt_is_delta"] = True
    if stamp:
        d["cum_len"] = len(prompt) + len(gen)
        d["digest"] = compute_digest(prompt + gen)
    d.update(fields)
    return d


def make_entry(call_id: str, prompt: Sequence[int], gen: Sequence[int], **kw: Any) -> TokenEntry:
    return TokenEntry.from_dict(entry_dict(call_id, prompt, gen, **kw))


def minimal_entry_dict(call_id: str = "call-x", **over: Any) -> dict[str, Any]:
    """The required fields only (plus overrides)."""
    d = {
        "rollout_id": "r1",
        "model_call_id": call_id,
        "prompt_token_ids": [1, 2, 3],
        "generation_token_ids": [4, 5],
        "generation_log_probs": [-0.5, -1.5],
    }
    d.update(over)
    return d


def refusal_dict(
    call_id: str,
    *,
    parent: str | None = None,
    code: str | None = CLE,
    recorded_at: float = 100.0,
    rollout_id: str = "r1",
    resolution: str | None = None,
    **fields: Any,
) -> dict[str, Any]:
    d: dict[str, Any] = {
        "schema_version": 1,
        "rollout_id": rollout_id,
        "model_call_id": call_id,
        "parent_resolution": resolution or ("resolved" if parent is not None else "unresolved"),
        "parent_call_id": parent,
        "code": code,
        "message": "too long" if code else "",
        "recorded_at": recorded_at,
    }
    d.update(fields)
    return d


def make_refusal(call_id: str, **kw: Any) -> EngineRefusalRecord:
    return EngineRefusalRecord.from_dict(refusal_dict(call_id, **kw))


class Conv:
    """A conversation tree in wire format.

    Every call's full prompt is its parent's full cumulative sequence (prompt +
    generation) followed by fresh interstitial tokens, exactly as a harness builds it.
    ``records`` keeps every dict made, in creation order.
    """

    def __init__(self, rollout_id: str = "r1", start: int = 1000) -> None:
        self.rollout_id = rollout_id
        self._next = start
        self.full: dict[str, list[int]] = {}     # call id -> prompt + generation
        self.prompt: dict[str, list[int]] = {}   # call id -> full prompt
        self.gen: dict[str, list[int]] = {}
        self.records: list[dict[str, Any]] = []
        self._clock = 0.0

    def fresh(self, n: int) -> list[int]:
        out = list(range(self._next, self._next + n))
        self._next += n
        return out

    def _tick(self, fields: dict[str, Any]) -> None:
        if "created_at" not in fields:
            self._clock += 1.0
            fields["created_at"] = self._clock

    def _add(self, call_id: str, prompt: list[int], gen: list[int], **kw: Any) -> dict[str, Any]:
        self._tick(kw)
        kw.setdefault("rollout_id", self.rollout_id)
        d = entry_dict(call_id, prompt, gen, **kw)
        self.prompt[call_id] = prompt
        self.gen[call_id] = gen
        self.full[call_id] = prompt + gen
        self.records.append(d)
        return d

    def root(self, call_id: str, *, prompt: Sequence[int] | None = None, prompt_len: int = 4,
             gen: Sequence[int] | None = None, gen_len: int = 3, resolution: str | None = "root",
             **kw: Any) -> dict[str, Any]:
        p = list(prompt) if prompt is not None else self.fresh(prompt_len)
        g = list(gen) if gen is not None else self.fresh(gen_len)
        return self._add(call_id, p, g, resolution=resolution, **kw)

    def child(self, call_id: str, of: str, *, inter: Sequence[int] | None = None, inter_len: int = 2,
              gen: Sequence[int] | None = None, gen_len: int = 3, resolution: str | None = "resolved",
              parent: str | None = "__of__", delta: bool = False, **kw: Any) -> dict[str, Any]:
        """A call continuing ``of``: prompt = full(of) + interstitial.

        ``parent`` defaults to ``of`` when resolved (pass another id to claim a different
        parent, or None). ``delta=True`` stores only the interstitial as the prompt.
        """
        i = list(inter) if inter is not None else self.fresh(inter_len)
        p = self.full[of] + i
        g = list(gen) if gen is not None else self.fresh(gen_len)
        if parent == "__of__":
            parent = of if resolution == "resolved" else None
        if delta:
            kw["delta_suffix"] = i
        return self._add(call_id, p, g, resolution=resolution, parent=parent, **kw)

    def retry(self, call_id: str, of: str, *, twin: bool = False, gen: Sequence[int] | None = None,
              gen_len: int | None = None, **kw: Any) -> dict[str, Any]:
        """Another serving of ``of``'s request: same full prompt, same lineage."""
        src = next(r for r in self.records if r["model_call_id"] == of)
        if twin:
            g = list(self.gen[of])
        elif gen is not None:
            g = list(gen)
        else:
            g = self.fresh(gen_len if gen_len is not None else len(self.gen[of]))
        fields = {k: kw.pop(k) for k in list(kw)}
        fields.setdefault("resolution", src["parent_resolution"])
        fields.setdefault("parent", src["parent_call_id"])
        if src.get("prompt_is_delta") and "delta_suffix" not in fields:
            fields["delta_suffix"] = src["prompt_token_ids"]
        return self._add(call_id, list(self.prompt[of]), g, **fields)

    def entries(self, ids: Iterable[str] | None = None) -> list[TokenEntry]:
        recs = self.records if ids is None else [r for r in self.records if r["model_call_id"] in set(ids)]
        return [TokenEntry.from_dict(copy.deepcopy(r)) for r in recs]

    def record(self, call_id: str) -> dict[str, Any]:
        return next(r for r in self.records if r["model_call_id"] == call_id)


def linear_chain(n: int, *, rollout_id: str = "r1", delta: bool = False, inter_len: int = 2,
                 gen_len: int = 3, prefix: str = "call-") -> Conv:
    """call-1 (root) -> call-2 -> ... -> call-n, each resolved to the previous one."""
    conv = Conv(rollout_id)
    width = max(4, len(str(n)))
    ids = [f"{prefix}{i:0{width}d}" for i in range(1, n + 1)]
    conv.root(ids[0])
    for prev, cid in zip(ids, ids[1:]):
        conv.child(cid, prev, delta=delta, inter_len=inter_len, gen_len=gen_len)
    return conv


def snapshot_dict(entries: Sequence[dict], refusals: Sequence[dict] = (), **fields: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"entries": list(entries)}
    if refusals:
        d["engine_refusals"] = list(refusals)
    d.update(fields)
    return d


def jsonl_bytes(records: Iterable[dict], *, final_newline: bool = True) -> bytes:
    text = "\n".join(json.dumps(r) for r in records)
    return (text + ("\n" if final_newline else "")).encode()


def as_refusal_line(d: dict) -> dict:
    out = dict(d)
    out["record_type"] = "engine_refusal"
    return out


# --------------------------------------------------------------------------- build summaries


def ids_of(chain: Any) -> list[str]:
    return [link.entry.model_call_id for link in chain.links]


def notes_dict(notes: Any) -> dict[str, Any]:
    if is_dataclass(notes):
        return asdict(notes)
    return dict(vars(notes))


def summarize(out: Any) -> dict[str, Any]:
    """A plain, order-sensitive summary of a BuildOutput (for equality across inputs)."""
    return {
        "chains": [
            (c.chain_id, ids_of(c), [int(t) for t in c.root_prompt],
             [[int(t) for t in link.interstitial] for link in c.links])
            for c in out.chains
        ],
        "quarantined": list(out.quarantined),
        "notes": notes_dict(out.notes),
        "entries": {
            cid: ([int(t) for t in e.prompt_token_ids], [int(t) for t in e.generation_token_ids])
            for cid, e in sorted(out.entries.items())
        },
    }


def chain_by_id(out: Any, chain_id: str) -> Any:
    for c in out.chains:
        if c.chain_id == chain_id:
            return c
    raise AssertionError(f"no chain {chain_id!r} in {[c.chain_id for c in out.chains]}")


def is_nan(x: float) -> bool:
    return isinstance(x, float) and math.isnan(x)
