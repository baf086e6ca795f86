"""A synthetic run scan table (docs/contract.md#scan-table) of any size, for the Run page's tests and benchmark.

Values are drawn so every column is consistent with the others (``mask_reasons`` equals
the ``reason_*`` columns in the order of docs/contract.md#rollout, ``mask_sample`` is true exactly when there is a
reason, a status is null only without a response) and every chart has something to
count: most rollouts are trainable and completed, a few percent carry each failure.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from tokencap.rollout import MASK_REASON_ORDER
from tokencap.run import COLUMNS, LINK_NOTES, REASON_COLUMNS, SCHEMA

REASON_RATE = {"load_error": 0.004, "capture_incomplete": 0.02, "no_records": 0.002, "build_error": 0.0,
               "unresolved_retries": 0.03, "unresolved_parent_calls": 0.05, "multiple_roots": 0.03,
               "multiple_chains": 0.06, "no_generated_tokens": 0.005, "terminal_call_not_delivered": 0.0}


def synthetic_scan_table(n: int, seed: int = 0, shards: int = 64) -> pa.Table:
    rng = np.random.default_rng(seed)
    idx = np.arange(n)
    shard = idx % shards
    rollout_id = [f"rollout-{i:06d}" for i in range(n)]
    source = [f"shard-{s:03d}/{r}.tokens.*" for s, r in zip(shard.tolist(), rollout_id)]
    reasons = {r: rng.random(n) < REASON_RATE[r] for r in MASK_REASON_ORDER}
    failed = reasons["load_error"] | reasons["no_records"]
    for r in MASK_REASON_ORDER:  # a rollout not built has no build-time reason (docs/contract.md#rollout)
        if r not in ("load_error", "no_records", "capture_incomplete"):
            reasons[r] &= ~failed
    masked = np.zeros(n, dtype=bool)
    for r in MASK_REASON_ORDER:
        masked |= reasons[r]
    bits = np.zeros(n, dtype=np.int64)
    for i, r in enumerate(MASK_REASON_ORDER):
        bits |= reasons[r].astype(np.int64) << i
    combos, inverse = np.unique(bits, return_inverse=True)
    lists = [[r for i, r in enumerate(MASK_REASON_ORDER) if (int(c) >> i) & 1] for c in combos]
    mask_reasons = [lists[k] for k in inverse.reshape(-1)]

    n_calls = np.where(rng.random(n) < 0.03, 1, rng.integers(2, 120, n))
    n_calls[failed] = 0
    chains = np.where(reasons["multiple_chains"], rng.integers(2, 5, n), 1)
    chains[failed] = 0
    roots = np.where(reasons["multiple_roots"], rng.integers(2, 4, n), np.minimum(chains, 1))
    quarantined = np.where(rng.random(n) < 0.1, rng.integers(1, 4, n), 0)
    quarantined = np.minimum(quarantined, np.maximum(n_calls - 1, 0))
    delivered_fraction = np.where(n_calls > 0, np.round(1 - quarantined / np.maximum(n_calls, 1)
                                                        - 0.3 * (chains > 1) * rng.random(n), 4), 0.0)
    generated = n_calls * rng.integers(20, 400, n)
    draw = rng.random(n)
    status = np.where(draw < 0.9, "completed", "incomplete").astype(object)
    incomplete_reason = np.where(draw < 0.9, None, np.where(draw < 0.97, "max_output_tokens", "content_filter"))
    status[failed | reasons["no_generated_tokens"]] = None
    incomplete_reason[failed | reasons["no_generated_tokens"]] = None
    links = {}
    for k, note in enumerate(LINK_NOTES):
        links[note] = np.where(rng.random(n) < 0.01 + 0.01 * (k == 0), rng.integers(1, 4, n), 0)
        links[note][failed] = 0
    engine_refusals = np.where(rng.random(n) < 0.05, rng.integers(1, 3, n), 0)
    context_refusals = np.where(rng.random(n) < 0.5, engine_refusals, 0)
    ended = (context_refusals > 0) & (rng.random(n) < 0.4) & (status == "incomplete") & \
        (incomplete_reason == "max_output_tokens")
    error = np.where(failed, "rollout.tokens.jsonl, line 3: not valid JSON", None)

    columns = {
        "rollout_id": rollout_id, "source": source,
        "snapshot_id": [f"{i:032x}" for i in idx.tolist()], "mask_sample": masked, "mask_reasons": mask_reasons,
        **{c: reasons[r] for c, r in zip(REASON_COLUMNS, MASK_REASON_ORDER)},
        "status": status.tolist(), "incomplete_reason": incomplete_reason.tolist(), "n_calls": n_calls,
        "chains": chains, "roots": roots, "quarantined_calls": quarantined,
        "quarantined_fraction": np.where(n_calls > 0, np.round(quarantined / np.maximum(n_calls, 1), 4), 0.0),
        "delivered_fraction": np.clip(delivered_fraction, 0, 1), "generated_tokens_captured": generated,
        "generated_tokens_delivered": (generated * np.clip(delivered_fraction, 0, 1)).astype(np.int64),
        **{f"link_{note}": links[note] for note in LINK_NOTES},
        "unresolved_parent_calls": np.where(reasons["unresolved_parent_calls"], 1, 0),
        "empty_generation_calls": np.zeros(n, dtype=np.int64), "after_terminal_calls": np.zeros(n, dtype=np.int64),
        "engine_refusals": engine_refusals, "context_refusals": context_refusals, "refusal_ended_chain": ended,
        "capture_incomplete": reasons["capture_incomplete"], "terminal_call_id": [None] * n,
        "terminal_attribution": [None] * n, "error": error.tolist(), "source_notes": [[] for _ in range(n)],
        "source_bytes": rng.integers(1_000, 2_000_000, n), "source_mtime": np.full(n, 1.7e9),
        # docs/contract.md#scan-rollout-records: groups of 4 rollouts per task; pass/fail rewards, passing more often when masked
        "reward": (rng.random(n) < np.where(masked, 0.7, 0.4)).astype(np.float64),
        "task_index": idx // 4, "rollout_index": idx % 4,
    }
    columns.update(_diagnosis_columns(rng, reasons, n))  # drawn last: the earlier columns are as before
    columns.update(tokens_from=["capture"] * n, contiguous=[None] * n)  # docs/contract.md#scan-token-source: captured calls
    assert list(columns) == list(COLUMNS)
    return pa.table({c: pa.array(v, type=SCHEMA.field(c).type) for c, v in columns.items()}, schema=SCHEMA)


SYNTH_CAUSES = ("generation_dropped", "retokenized", "tokens_replaced", "history_dropped", "new_context", "branch",
                "link_intact", "record_fault")


def _diagnosis_columns(rng: np.random.Generator, reasons: dict[str, np.ndarray], n: int) -> dict[str, object]:
    """docs/contract.md#scan-diagnosis-columns: a break (one or two causes) on every rollout masked for its lineage; what Gym delivered
    for nine in ten rollouts (token capture: trainable; a few masked by the harness itself)."""
    broken = reasons["unresolved_parent_calls"] | reasons["multiple_roots"] | reasons["multiple_chains"]
    first = rng.integers(0, len(SYNTH_CAUSES), n)
    second = rng.integers(0, len(SYNTH_CAUSES), n)
    two = rng.random(n) < 0.3
    causes = [sorted({SYNTH_CAUSES[f], *([SYNTH_CAUSES[s]] if t else [])}, key=SYNTH_CAUSES.index) if b else []
              for b, f, s, t in zip(broken.tolist(), first.tolist(), second.tolist(), two.tolist())]
    breaks = np.where(broken, np.array([len(c) for c in causes]) + rng.integers(0, 2, n), 0)
    draw = rng.random(n)
    by = np.where(draw < 0.87, "token_capture", np.where(draw < 0.9, "agent", None)).astype(object)
    delivered = np.where(by == "token_capture", False, np.where(by == "agent", True, None)).astype(object)
    return {"breaks": breaks, "break_causes": causes,
            "first_break_call": [f"call-{k:04d}" if b else None for k, b in zip(rng.integers(2, 60, n).tolist(),
                                                                             broken.tolist())],
            "delivered_mask_sample": delivered.tolist(), "delivered_by": by.tolist()}


def _set_column(table: pa.Table, name: str, values) -> pa.Table:
    return table.set_column(table.column_names.index(name), name, pa.array(values, table.schema.field(name).type))


def after_a_fix(a: pa.Table, seed: int = 1) -> pa.Table:
    """Run B: some masked rollouts of A trainable now (every reason cleared), some trainable ones masked,
    a few rollouts gone and a few new ones."""
    rng = np.random.default_rng(seed)
    n = a.num_rows
    masked = a.column("mask_sample").to_numpy(zero_copy_only=False).copy()
    fix = masked & (rng.random(n) < 0.3)
    broke = ~masked & (rng.random(n) < 0.02)
    b = a
    reasons = {r: a.column(f"reason_{r}").to_numpy(zero_copy_only=False).copy() for r in MASK_REASON_ORDER}
    for r in MASK_REASON_ORDER:
        reasons[r][fix] = False
    reasons["unresolved_retries"][broke] = True
    moved = masked & ~fix & (rng.random(n) < 0.2)
    reasons["multiple_chains"][moved] = ~reasons["multiple_chains"][moved]
    still = np.zeros(n, dtype=bool)
    for r in MASK_REASON_ORDER:
        still |= reasons[r]
    new_masked = (masked & ~fix & still) | broke
    b = _set_column(b, "mask_sample", new_masked)
    for r in MASK_REASON_ORDER:
        b = _set_column(b, f"reason_{r}", reasons[r])
    b = _set_column(b, "mask_reasons", [[r for r in MASK_REASON_ORDER if reasons[r][i]] for i in range(n)])
    causes = a.column("break_causes").to_pylist()  # a fixed rollout's lineage no longer breaks
    b = _set_column(b, "break_causes", [[] if fix[i] else causes[i] for i in range(n)])
    b = _set_column(b, "breaks", np.where(fix, 0, a.column("breaks").to_numpy()))
    b = _set_column(b, "first_break_call", [None if fix[i] else c for i, c in
                                            enumerate(a.column("first_break_call").to_pylist())])
    keep = rng.random(n) > 0.01
    b = b.filter(pa.array(keep))
    extra = synthetic_scan_table(25, seed=seed + 100)
    extra = _set_column(extra, "rollout_id", [f"new-{i:04d}" for i in range(extra.num_rows)])
    return pa.concat_tables([b, extra]).sort_by([("source", "ascending"), ("rollout_id", "ascending")])
