"""Small factories for wire-format records, used by the per-layer tests.

Everything here follows the wire format of docs/contract.md#records: plain dicts with the table's
field names, full cumulative lengths and digests stamped with `tokencap.compute_digest`
exactly as the model server stamps them. Token ids come from a per-conversation counter,
so two calls only share tokens when a test says so (no accidental prefix matches).
"""

from __future__ import annotations

import copy
import io
import json
import math
import zipfile
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


def zip_bytes(members: dict[str, bytes]) -> bytes:
    """A deflated zip of ``members`` (name -> content), as an upload would hold it."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buffer.getvalue()


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


# --------------------------------------------------------------------------- a naive reading of docs/contract.md#builder

# A deliberately naive, independent reading of docs/contract.md#builder (delta records included). Quadratic
# on purpose: every rule written out as literally as possible, so `test_builder.py` can
# compare `prefix_merging` with it on random call trees.

BOUNDARY_NOTES = {"parent_unresolved", "parent_digest_mismatch", "parent_call_id_missing", "missing_resolution"}


def _canonical(d: dict) -> bytes:
    return json.dumps(TokenEntry.from_dict(d).to_dict(), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=True).encode()


def _tok(d: dict) -> tuple:
    return (bool(d.get("prompt_is_delta", False)), tuple(d["prompt_token_ids"]), tuple(d["generation_token_ids"]),
            tuple(float(x) for x in d["generation_log_probs"]))


def reference_build(records: list[dict], terminal: str | None) -> dict[str, Any]:
    failures: dict[str, int] = {}
    unresolved: set[str] = set()

    def note(reason: str, cid: str | None = None) -> None:
        failures[reason] = failures.get(reason, 0) + 1
        if cid is not None and reason in BOUNDARY_NOTES | {"duplicate_call_id_conflict", "entry_digest_mismatch",
                                                           "delta_chain_unreconstructable"}:
            unresolved.add(cid)

    # 1. dedupe
    copies: dict[str, list[dict]] = {}
    for r in records:
        copies.setdefault(r["model_call_id"], []).append(r)
    kept: dict[str, dict] = {}
    for cid, group in copies.items():
        kept[cid] = min(group, key=_canonical)
        if len({_tok(g) for g in group}) > 1:
            note("duplicate_call_id_conflict", cid)

    # 2. stamps of full records first, then delta records replayed from their parents
    calls: dict[str, dict] = {}
    for cid, r in kept.items():
        if r.get("prompt_is_delta"):
            continue
        full = list(r["prompt_token_ids"]) + list(r["generation_token_ids"])
        if (r.get("cum_len") is not None and r["cum_len"] != len(full)) or \
                (r.get("digest") is not None and r["digest"] != compute_digest(full)):
            note("entry_digest_mismatch", cid)
            continue
        calls[cid] = r
    bad: set[str] = set()
    for cid in sorted(c for c, r in kept.items() if r.get("prompt_is_delta")):
        if cid in calls or cid in bad:
            continue
        path, cur = [], cid
        while cur in kept and kept[cur].get("prompt_is_delta") and cur not in calls and cur not in bad \
                and cur not in path:
            path.append(cur)
            cur = kept[cur]["parent_call_id"]
        if cur in calls:
            ok = True
            for c in reversed(path):
                r = kept[c]
                base = calls[cur] if ok else None
                if ok:
                    prompt_full = list(base["prompt_token_ids"]) + list(base["generation_token_ids"]) + \
                        list(r["prompt_token_ids"])
                    seq = prompt_full + list(r["generation_token_ids"])
                    ok = r.get("cum_len") is not None and r.get("digest") is not None and \
                        r["cum_len"] == len(seq) and r["digest"] == compute_digest(seq)
                if ok:
                    calls[c] = dict(r, prompt_token_ids=prompt_full, prompt_is_delta=False)
                    cur = c
                else:
                    bad.add(c)
        else:  # missing, excluded, or a loop
            bad.update(path)
    for c in sorted(bad):
        note("delta_chain_unreconstructable", c)
    entries = sorted(calls)

    # 3. empty generations
    empty = sorted(cid for cid, r in calls.items() if not r["generation_token_ids"])
    chained = {cid: r for cid, r in calls.items() if r["generation_token_ids"]}

    def prompt(cid: str) -> list[int]:
        return list(chained[cid]["prompt_token_ids"])

    def full(cid: str) -> list[int]:
        return prompt(cid) + list(chained[cid]["generation_token_ids"])

    # 4-5. parents
    order = sorted(chained, key=lambda c: (len(prompt(c)), c))
    parent: dict[str, str | None] = {}
    placed: list[str] = []
    for cid in order:
        r = chained[cid]
        res = r.get("parent_resolution")
        p = None
        if res == "root":
            pass
        elif res == "unresolved":
            note("parent_unresolved", cid)
        elif res is None:
            note("missing_resolution", cid)
        else:
            claimed = r["parent_call_id"]
            if claimed in chained:
                pf = full(claimed)
                if prompt(cid)[: len(pf)] == pf and len(prompt(cid)) >= len(pf):
                    p = claimed
                else:
                    note("parent_digest_mismatch", cid)
            else:
                cands = [q for q in placed
                         if len(prompt(cid)) >= len(full(q)) and prompt(cid)[: len(full(q))] == full(q)]
                if cands:
                    longest = max(len(full(q)) for q in cands)
                    best = [q for q in cands if len(full(q)) == longest]
                else:
                    best = []
                if len(best) == 1:
                    p = best[0]
                    note("parent_call_id_missing_recovered")
                else:
                    note("parent_call_id_missing", cid)
        parent[cid] = p
        placed.append(cid)

    children: dict[str, list[str]] = {c: [] for c in chained}
    for c, p in parent.items():
        if p is not None:
            children[p].append(c)

    def descendants(c: str) -> set[str]:
        out, stack = set(), list(children[c])
        while stack:
            x = stack.pop()
            out.add(x)
            stack.extend(children[x])
        return out

    # 6. retries
    groups: dict[tuple, list[str]] = {}
    for c in chained:
        groups.setdefault((parent[c], tuple(prompt(c))), []).append(c)
    quarantined: set[str] = set()
    pending_d: list[tuple[str | None, list[str]]] = []
    terminal_lost_to: list[str] | None = None
    for (p, _), members in groups.items():
        if len(members) < 2:
            continue
        members = sorted(members)
        extended = [m for m in members if children[m]]
        if extended:
            quarantined.update(m for m in members if m not in extended)
            if terminal in members and terminal not in extended:
                terminal_lost_to = extended
        elif terminal in members:
            quarantined.update(m for m in members if m != terminal)
        elif len({tuple(full(m)) for m in members}) == 1:
            quarantined.update(members[1:])
        else:
            quarantined.update(members[1:])
            pending_d.append((p, members))

    anchor = None
    terminal_chain = ""
    noted_terminal = terminal
    if terminal is not None:
        if terminal not in chained:
            terminal_chain = "missing"
        elif terminal in quarantined:
            twins = [m for m in (terminal_lost_to or []) if full(m) == full(terminal)]
            if twins:
                anchor = min(twins)
                terminal_chain = "main"
                noted_terminal = anchor
            else:
                terminal_chain = "quarantined"
        else:
            anchor = terminal
            terminal_chain = "main"

    below_anchor = ({anchor} | descendants(anchor)) if anchor is not None else set()
    unresolved_retries: set[str] = set()
    for p, members in pending_d:
        if p is not None and p in below_anchor:
            continue
        unresolved_retries.update(members)

    # 7-8. chains
    after = sorted(descendants(anchor)) if anchor is not None else []
    roots = sorted(c for c in chained if parent[c] is None and c not in quarantined)
    paths: list[list[str]] = []
    for root in roots:
        stack = [[root]]
        while stack:
            path = stack.pop()
            last = path[-1]
            if anchor is not None and last == anchor:
                continue  # paths through the anchor are not branches
            kids = [k for k in children[last] if k not in quarantined]
            if not kids:
                paths.append(path)
            for k in kids:
                stack.append(path + [k])

    def key(c: str) -> tuple:
        return (float(chained[c].get("created_at", 0.0)), c)

    main = None
    if anchor is not None:
        path = [anchor]
        while parent[path[0]] is not None:
            path.insert(0, parent[path[0]])
        main = path
    elif paths:
        first_root = min((p[0] for p in paths), key=key)
        mine = [p for p in paths if p[0] == first_root]
        main = min(mine, key=lambda p: (-float(chained[p[-1]].get("created_at", 0.0)), p[-1]))
        paths.remove(main)
    branches = sorted(paths, key=lambda p: (key(p[0]), key(p[-1])))
    chains = ([("main", main)] if main else []) + [(f"branch-{i}", b) for i, b in enumerate(branches)]

    captured = sum(len(chained[c]["generation_token_ids"]) for c in chained)
    delivered = sum(len(chained[c]["generation_token_ids"]) for c in (main or []))
    return {
        "chains": chains,
        "quarantined": sorted(quarantined),
        "entries": entries,
        "notes": {
            "roots": len(roots),
            "chains": len(chains),
            "generated_tokens_captured": captured,
            "generated_tokens_delivered": delivered,
            "delivered_fraction": round(delivered / captured, 4) if captured else 0.0,
            "unresolved_retries": sorted(unresolved_retries),
            "terminal_call_id": noted_terminal,
            "terminal_chain": terminal_chain,
            "after_terminal_calls": after,
            "empty_generation_calls": empty,
            "parent_link_failures": failures,
            "unresolved_parent_calls": sorted(unresolved),
        },
    }
