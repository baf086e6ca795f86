"""Projecting a chain into a Responses payload (SPEC 5).

Each call's captured output items are copied as they are (text stays text, tool calls stay
tool calls) and the item that carried the call's tokens gets the token fields, with the
*running* prompt: everything the policy had seen before this generation. The running
prompts of one chain are prefixes of one sequence, so they are views of it rather than
copies, and a writer can stream them (see `tokencap.export`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from .builder import BuildOutput, Chain
from .records import EngineRefusalRecord
from .tokens import SequenceArena

TOKEN_FIELDS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs", "routed_experts")


def chain_sequence(chain: Chain) -> np.ndarray:
    """The chain's whole training sequence: root prompt, then per link interstitial + generation.

    Built once, in one buffer; every running prompt of the chain is a prefix view of it.
    """
    arena = SequenceArena()
    seq = arena.fresh(chain.root_prompt)
    for link in chain.links:
        seq = arena.extend(seq, link.interstitial, link.entry.generation_token_ids)
    return seq


def project_chain_to_output_items(chain: Chain) -> list[dict[str, Any]]:
    """Responses output items for a chain, with contiguous token fields on one item per call.

    Token arrays in the result are read-only numpy views; ``list(...)`` or ``.tolist()``
    gives plain ints, and `tokencap.export` writes them as JSON arrays.
    """
    sequence = chain_sequence(chain)
    items: list[dict[str, Any]] = []
    pos = int(chain.root_prompt.size)
    for link in chain.links:
        entry = link.entry
        pos += int(link.interstitial.size)
        token_fields: dict[str, Any] = {
            "prompt_token_ids": sequence[:pos],
            "generation_token_ids": entry.generation_token_ids,
            "generation_log_probs": entry.generation_log_probs,
        }
        if entry.routed_experts is not None:
            token_fields["routed_experts"] = entry.routed_experts
        pos += int(entry.generation_token_ids.size)
        if not entry.output_items:
            items.append({"type": "message", "role": "assistant", "content": [], **token_fields})
            continue
        carrier = entry.token_item_index if entry.token_item_index is not None else len(entry.output_items) - 1
        for index, item in enumerate(entry.output_items):
            # Deep copy: the projection must never alias (and let a caller mutate) a record.
            out = {k: copy.deepcopy(v) for k, v in item.items() if k not in TOKEN_FIELDS}
            if index == carrier:
                out.update(token_fields)
            items.append(out)
    return items


def _token_items(output: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [item for item in output if "generation_token_ids" in item]


def incomplete_status(chain: Chain, finish_reason_resolved: bool, refusal_ended: bool) -> tuple[str, str | None]:
    """(status, incomplete reason) for a delivered chain, in the order of SPEC 5."""
    if refusal_ended:
        return "incomplete", "max_output_tokens"
    if finish_reason_resolved and chain.links:
        reason = chain.links[-1].entry.finish_reason
        if reason == "length":
            return "incomplete", "max_output_tokens"
        if reason == "content_filter":
            return "incomplete", "content_filter"
    return "completed", None


def project_main_chain_response(rollout_id: str, out: BuildOutput, model: str = "",
                                finish_reason_resolved: bool = True,
                                engine_refusals: Iterable[EngineRefusalRecord] = ()) -> dict[str, Any]:
    """The delivered chain as a Responses object (``object: "response"``) with contiguous token fields."""
    from .verdicts import refusal_ended_chain  # verdicts reads projection helpers too

    main = out.main
    if main is None:
        raise ValueError(f"rollout {rollout_id!r}: there is no delivered chain to project")
    output = project_chain_to_output_items(main)
    token_items = _token_items(output)
    generated = sum(int(item["generation_token_ids"].size) for item in token_items)
    if not generated:
        raise ValueError(f"rollout {rollout_id!r}: the delivered chain has no generated token")
    ended = any(refusal_ended_chain(r, main.links[-1].entry, out) for r in engine_refusals)
    status, reason = incomplete_status(main, finish_reason_resolved, ended)
    response: dict[str, Any] = {
        "id": f"proj-{rollout_id}",
        "object": "response",
        "model": model,
        "output": output,
        "usage": {"input_tokens": int(token_items[0]["prompt_token_ids"].size), "output_tokens": generated},
        "status": status,
    }
    if reason is not None:
        response["incomplete_details"] = {"reason": reason}
    return response


def assert_prefix_contiguity(response: Mapping[str, Any]) -> None:
    """Raise AssertionError unless each token-bearing item's prompt extends every token seen so far."""
    seen = np.zeros(0, dtype=np.uint64)
    for index, item in enumerate(_token_items(response.get("output", []))):
        prompt = np.asarray(item["prompt_token_ids"], dtype=np.uint64)
        generation = np.asarray(item["generation_token_ids"], dtype=np.uint64)
        if prompt.size < seen.size or not np.array_equal(prompt[: seen.size], seen):
            mismatch = _first_mismatch(prompt, seen)
            raise AssertionError(f"output item {index}: its prompt does not extend the tokens before it "
                                 f"(first difference at position {mismatch})")
        seen = np.concatenate((prompt, generation))


def _first_mismatch(prompt: np.ndarray, seen: np.ndarray) -> int:
    n = min(prompt.size, seen.size)
    diff = np.nonzero(prompt[:n] != seen[:n])[0]
    return int(diff[0]) if diff.size else n
