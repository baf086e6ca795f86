"""Rollout records whose output items carry token ids (docs/contract.md#token-rollouts), as NeMo Gym's vLLM model
server writes them with ``return_token_id_information``: the item that ends a call carries
the call's whole prompt, its generation and log-probabilities.

A rollout is given as turns: each turn is the tokens the harness adds before a call (the
user message, tool results) and the tokens the model generates. Its prompts continue one
another (contiguous) unless a turn says otherwise (``cut``: that call's prompt drops the
tokens before it and starts afresh, as a stripped or re-rendered history does).
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from helpers import logprobs_for


def call_item(prompt: Sequence[int], gen: Sequence[int], index: int, *, kind: str = "message") -> dict[str, Any]:
    """An output item that ends a call: assistant text or a tool call, with the call's tokens."""
    item: dict[str, Any] = {"id": f"it_{index}", "type": kind}
    if kind == "function_call":
        item.update(call_id=f"fc_{index}", name="run_tests", arguments=json.dumps({"n": index}))
    else:
        item.update(role="assistant", content=[{"type": "output_text", "text": f"answer {index}"}])
    item.update(prompt_token_ids=list(prompt), generation_token_ids=list(gen),
                generation_log_probs=logprobs_for(len(gen)))
    return item


def tool_output(index: int) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": f"fc_{index}", "output": f"result {index}"}


def rollout_output(turns: Sequence[tuple[Sequence[int], Sequence[int]]], *, cuts: Sequence[int] = ()) -> list[dict]:
    """The output items of a rollout of ``turns`` (added tokens, generated tokens): a tool
    call then its output for every call but the last, which is the final message. A call
    whose index is in ``cuts`` gets a prompt that does not continue the calls before it."""
    output: list[dict] = []
    context: list[int] = []
    for k, (added, gen) in enumerate(turns):
        prompt = (list(added) if k in cuts else context + list(added))
        last = k == len(turns) - 1
        output.append(call_item(prompt, gen, len(output), kind="message" if last else "function_call"))
        if not last:
            output.append(tool_output(len(output) - 1))
        context = prompt + list(gen)
    return output


def rollout_record(turns: Sequence[tuple[Sequence[int], Sequence[int]]], *, rollout_id: str | None = "r1",
                   cuts: Sequence[int] = (), response_id: str = "resp_1", model: str = "policy",
                   status: str = "completed", reason: str | None = None, **fields: Any) -> dict[str, Any]:
    """A rollout record: ``rollout_id`` (left out when None), the final ``response``, and any
    other top-level ``fields`` (reward, indices, evidence) as given."""
    response: dict[str, Any] = {"id": response_id, "object": "response", "model": model, "status": status,
                                "output": rollout_output(turns, cuts=cuts)}
    if reason is not None:
        response["incomplete_details"] = {"reason": reason}
    record: dict[str, Any] = {} if rollout_id is None else {"rollout_id": rollout_id}
    record.update(fields)
    record["response"] = response
    return record


def turns_of(n: int, *, start: int = 1, added: int = 3, generated: int = 2) -> list[tuple[list[int], list[int]]]:
    """``n`` turns with distinct token ids (no accidental prefix)."""
    out = []
    token = start
    for _ in range(n):
        a = list(range(token, token + added))
        token += added
        g = list(range(token, token + generated))
        token += generated
        out.append((a, g))
    return out


def jsonl(records: Sequence[dict]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


STRIPPED = ("prompt_token_ids", "generation_token_ids", "generation_log_probs", "routed_experts")


def without_tokens(item: dict) -> dict:
    return {k: v for k, v in item.items() if k not in STRIPPED}
