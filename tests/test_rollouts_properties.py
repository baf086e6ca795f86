"""Properties of rollouts read from output items (docs/contract.md#token-rollouts-rest): any contiguous rollout is trainable
and its export gives back its output items with their token fields; any cut (a later prompt
that does not continue the tokens before it) is the break, at the cut item."""

from __future__ import annotations

import io
import json

from helpers import logprobs_for
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rollouts_data import jsonl

from tokencap import build_rollout, load_snapshots
from tokencap.export import write_summary
from tokencap.run.rows import contiguous, tokens_from

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def rollouts(draw, *, cut: bool = False):
    """(record, the output index of the cut call or None). Calls are assistant messages or
    tool calls; between them come items without tokens (tool outputs, reasoning, messages)."""
    n = draw(st.integers(1 if not cut else 2, 6))
    cut_at = draw(st.integers(1, n - 1)) if cut else None
    output: list[dict] = []
    context: list[int] = []
    token = 1
    calls: list[int] = []
    for k in range(n):
        for _ in range(draw(st.integers(0, 2))):
            kind = draw(st.sampled_from(["function_call_output", "reasoning", "message"]))
            item = {"type": kind, "id": f"x{len(output)}"}
            if kind == "message":
                item.update(role="user", content=[{"type": "input_text", "text": "more"}])
            output.append(item)
        added = list(range(token, token + draw(st.integers(0 if k else 1, 4))))
        token += len(added)
        gen = list(range(token, token + draw(st.integers(1, 4))))
        token += len(gen)
        prompt = context + added
        if k == cut_at:
            prompt = prompt[1:] if len(prompt) > 1 else [token + 100]  # no longer starts with what came before
        kind = draw(st.sampled_from(["message", "function_call"]))
        item = {"type": kind, "id": f"c{len(output)}"}
        if kind == "message":
            item.update(role="assistant", content=[{"type": "output_text", "text": f"t{k}"}])
        else:
            item.update(call_id=f"fc{k}", name="tool", arguments="{}")
        item.update(prompt_token_ids=prompt, generation_token_ids=gen, generation_log_probs=logprobs_for(len(gen)))
        calls.append(len(output))
        output.append(item)
        context = prompt + gen
    for _ in range(draw(st.integers(0, 2))):  # after the last call: items without tokens
        output.append({"type": "function_call_output", "id": f"x{len(output)}", "call_id": "late", "output": "."})
    record = {"rollout_id": "p", "response": {"id": "resp_p", "object": "response", "model": "m",
                                              "status": "completed", "output": output}}
    return record, calls[cut_at] if cut else None


def exported(result) -> dict:
    out = io.BytesIO()
    write_summary(out, result)
    return json.loads(out.getvalue())


@SETTINGS
@given(rollouts())
def test_a_contiguous_rollout_is_trainable_and_its_export_gives_back_its_items(case) -> None:
    record, _ = case
    (snap,) = load_snapshots(jsonl([record]), name="p.jsonl")
    result = build_rollout(snap)
    assert not result.mask_sample, result.mask_reasons
    assert result.metrics["terminal_attribution"]["outcome"] == "attributed"
    assert exported(result)["rebuilt_response"]["output"] == record["response"]["output"]
    assert (tokens_from(snap), contiguous(result, snap)) == ("output_items", True)


@SETTINGS
@given(rollouts(cut=True))
def test_a_cut_is_the_break_at_the_cut_item(case) -> None:
    record, cut = case
    (snap,) = load_snapshots(jsonl([record]), name="p.jsonl")
    result = build_rollout(snap)
    assert result.mask_sample and "unresolved_parent_calls" in result.mask_reasons
    assert result.build.notes.unresolved_parent_calls == [f"item-{cut:04d}"]
    assert contiguous(result, snap) is False
    # The export is the chain that ends on the final call: nothing joined across the cut.
    items = exported(result)["rebuilt_response"]["output"]
    assert items == record["response"]["output"][cut - _leading(record, cut):]


def _leading(record: dict, cut: int) -> int:
    """How many items before the cut call belong to it (those after the call before it)."""
    output = record["response"]["output"]
    before = [i for i, item in enumerate(output[:cut]) if item.get("generation_token_ids")]
    return cut - (before[-1] + 1)
