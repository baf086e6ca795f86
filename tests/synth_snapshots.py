"""Small synthetic snapshots for the views and app tests, built record by record.

`Capture` keeps every call's full token sequence, so a child's prompt is its parent's
sequence plus new tokens, and stamps `cum_len` and `digest` the way the model server
does. Helpers then bend the rules on purpose (stale links, corrupt records, missing
parents, retries, refusals) to produce every situation the inspector must draw.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from tokencap import EngineRefusalRecord, TokenCaptureSnapshot, TokenEntry, compute_digest


class Capture:
    def __init__(self, rollout_id: str = "synth", seed: int = 0) -> None:
        self.rollout_id = rollout_id
        self.rng = np.random.default_rng(seed)
        self.full: dict[str, list[int]] = {}
        self.records: list[dict[str, Any]] = []
        self.refusals: list[dict[str, Any]] = []
        self.clock = 1000.0

    def _tokens(self, n: int) -> list[int]:
        return [int(t) for t in self.rng.integers(0, 50_000, n)]

    def _tick(self, created_at: float | None) -> float:
        if created_at is None:
            self.clock += 1.0
            return self.clock
        return created_at

    def call(self, call_id: str, parent: str | None = None, *, new: int = 12, gen: int = 6,
             resolution: str | None = "auto", prompt: list[int] | None = None, generation: list[int] | None = None,
             finish_reason: str | None = "stop", created_at: float | None = None, claimed: str | None = None,
             text: str | None = None, items: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
        """A call whose prompt extends ``parent``'s full sequence by ``new`` tokens (or ``prompt``)."""
        base = self.full[parent] if parent is not None else []
        prompt = list(prompt) if prompt is not None else base + self._tokens(new)
        generation = list(generation) if generation is not None else self._tokens(gen)
        if resolution == "auto":
            resolution = "resolved" if (claimed or parent) else "root"
        parent_id = claimed if claimed is not None else parent
        full = prompt + generation
        record = {
            "schema_version": 5, "rollout_id": self.rollout_id, "model_call_id": call_id, "model": "policy",
            "prompt_token_ids": prompt, "generation_token_ids": generation,
            "generation_log_probs": [round(-float(x), 4) for x in self.rng.random(len(generation)) * 3],
            "output_items": items if items is not None else [
                {"type": "message", "role": "assistant",
                 "content": [{"type": "output_text", "text": text if text is not None else f"answer of {call_id}"}]}],
            "token_item_index": 0 if items is None else None,
            "created_at": self._tick(created_at),
            "parent_resolution": resolution,
            "parent_call_id": parent_id if resolution == "resolved" else None,
            "cum_len": len(full), "digest": compute_digest(full), "finish_reason": finish_reason,
        }
        record.update(extra)
        self.full[call_id] = full
        self.records.append(record)
        return record

    def refusal(self, call_id: str, parent: str | None, *, code: str | None = "context_length_exceeded",
                recorded_at: float | None = None, message: str = "prompt too long") -> dict[str, Any]:
        rec = {"schema_version": 1, "rollout_id": self.rollout_id, "model_call_id": call_id,
               "parent_resolution": "resolved" if parent else "unresolved", "parent_call_id": parent,
               "code": code, "message": message, "recorded_at": self._tick(recorded_at)}
        self.refusals.append(rec)
        return rec

    def snapshot(self, **kwargs: Any) -> TokenCaptureSnapshot:
        return TokenCaptureSnapshot(
            rollout_id=self.rollout_id,
            entries=[TokenEntry.from_dict(r) for r in self.records],
            engine_refusals=[EngineRefusalRecord.from_dict(r) for r in self.refusals],
            snapshot_id=kwargs.pop("snapshot_id", "snap-1"), version=kwargs.pop("version", 1), **kwargs)

    def json_bytes(self) -> bytes:
        return json.dumps({"rollout_id": self.rollout_id, "snapshot_id": "snap-1", "version": 1,
                           "entries": self.records, "engine_refusals": self.refusals}).encode()

    def jsonl_lines(self) -> list[str]:
        lines = [json.dumps(r) for r in self.records]
        lines += [json.dumps({**r, "record_type": "engine_refusal"}) for r in self.refusals]
        return lines


def kitchen_sink() -> Capture:
    """One rollout holding every mark the call tree can draw."""
    c = Capture("kitchen-sink", seed=7)
    c.call("c01", new=20, gen=8, finish_reason="tool_calls")
    c.call("c02", "c01", finish_reason="tool_calls",
           items=[{"type": "function_call", "name": "search", "arguments": "{\"q\": \"<b>x</b>\"}", "call_id": "t1"}])
    # A branch (sub-agent) off c02 with a different prompt, finished before the main line.
    c.call("b01", "c02", new=30, finish_reason="tool_calls")
    c.call("b02", "b01", finish_reason="length")
    # A retry of c03's request that was abandoned (c03 was extended): quarantined.
    c03 = c.call("c03", "c02", finish_reason="tool_calls")
    c.call("c03r", prompt=c03["prompt_token_ids"], claimed="c02", finish_reason="tool_calls")
    # An empty generation; its child is recovered by longest prefix onto c03.
    c.call("c04e", "c03", gen=0, finish_reason="stop")
    c.full["c04e"] = c.full["c03"]  # the empty call adds nothing; its child extends c03's sequence
    c.call("c05", "c04e", finish_reason="tool_calls")
    c.call("c06", "c05", finish_reason="stop")
    # A stale link: claims c05 but its prompt does not start with c05's tokens.
    c.call("s01", prompt=c.full["c01"] + c._tokens(40), claimed="c05", finish_reason="stop")
    # A parent that was never captured.
    c.call("g01", prompt=c._tokens(25), claimed="ghost-parent", finish_reason="stop")
    # A corrupt record: its tokens were altered after stamping.
    bad = c.call("x01", "c06", finish_reason="stop")
    bad["generation_token_ids"] = list(bad["generation_token_ids"])
    bad["generation_token_ids"][0] += 1
    # Refusals: one continuing the last call (ends the chain), one continuing an earlier call.
    c.refusal("r-end", "c06")
    c.refusal("r-early", "c01", code=None, message="max_tokens too large")
    return c


def long_linear(n_calls: int, *, retry_every: int = 25, branch_every: int = 60, seed: int = 1,
                new: int = 8, gen: int = 4) -> Capture:
    """A long agent run: a main chain with abandoned retries and short side branches."""
    c = Capture(f"linear-{n_calls}", seed=seed)
    prev = None
    made = 0
    i = 0
    while made < n_calls:
        cid = f"m{i:05d}"
        rec = c.call(cid, prev, new=new, gen=gen, finish_reason="tool_calls")
        made += 1
        if prev is not None and i % retry_every == 0 and made < n_calls:
            c.call(f"{cid}-retry", prompt=rec["prompt_token_ids"], claimed=prev, gen=gen, finish_reason="tool_calls")
            made += 1
        if prev is not None and i % branch_every == 0 and made + 2 <= n_calls:
            c.call(f"{cid}-b1", prev, new=new + 3, gen=gen, finish_reason="tool_calls")
            c.call(f"{cid}-b2", f"{cid}-b1", new=new, gen=gen, finish_reason="stop")
            made += 2
        prev = cid
        i += 1
    return c


def cli_build(source: Path, *extra: str, tmp_path: Path) -> bytes:
    """The bytes `python -m tokencap build SOURCE ... -o OUT` writes: the reference for every export."""
    out = tmp_path / f"cli-{len(list(tmp_path.iterdir()))}.json"
    proc = subprocess.run([sys.executable, "-m", "tokencap", "build", str(source), *extra, "-o", str(out)],
                          capture_output=True, cwd=Path(__file__).resolve().parent.parent)
    assert proc.returncode == 0, proc.stderr
    return out.read_bytes()
