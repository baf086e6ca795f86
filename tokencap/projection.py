"""Projecting a chain into a Responses payload (docs/contract.md#projection).

Each call's captured output items are copied as they are (text stays text, tool calls stay
tool calls) and the item that carried the call's tokens gets the token fields, with the
*running* prompt: everything the policy had seen before this generation.

Two forms of the same payload:

* the public one (`project_chain_to_output_items`, `project_main_chain_response`,
  `RolloutResult.rebuilt_response`) is JSON-native -- dicts, lists, str, int, float, bool,
  None -- exactly like the upstream payload, so ``json.dumps`` works and token fields
  compare equal to lists;
* the internal one (`chain_output_items`, `main_chain_payload`) keeps token fields as
  numpy views: the running prompts of one chain are prefixes of one sequence, so the CLI's
  writer renders that sequence once and streams every prompt as a slice of its text (see
  `tokencap.export`). `json_native` turns the second into the first.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from .builder import BuildOutput, Chain
from .records import EngineRefusalRecord
from .tokens import SequenceArena, joined

TOKEN_FIELDS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs", "routed_experts")


def chain_sequence(chain: Chain) -> np.ndarray:
    """The chain's whole training sequence: root prompt, then per link interstitial + generation.

    Built once, in one buffer; every running prompt of the chain is a prefix view of it.
    The builder linked each call to its parent only on proof that the call's prompt starts
    with the parent's prompt and generation, so this is the last call's prompt and
    generation: when the loader left those side by side in one buffer (as it does for a
    lane of full prompts) that view is the sequence, and nothing is copied.
    """
    if chain.links:
        last = chain.links[-1].entry
        whole = joined(last.prompt_token_ids, last.generation_token_ids)
        if whole is not None and whole.size == _chain_len(chain):
            return whole
    arena = SequenceArena()
    seq = arena.fresh(chain.root_prompt)
    for link in chain.links:
        seq = arena.extend(seq, link.interstitial, link.entry.generation_token_ids)
    return seq


def _chain_len(chain: Chain) -> int:
    total = chain.root_prompt.size
    for link in chain.links:
        total += link.interstitial.size + link.entry.generation_token_ids.size
    return int(total)


def project_chain_to_output_items(chain: Chain) -> list[dict[str, Any]]:
    """Responses output items for a chain, with contiguous token fields on one item per call.

    JSON-native: token fields are plain lists of ints (log-probabilities: floats).
    """
    return json_native(chain_output_items(chain))


_IMMUTABLE = frozenset((str, int, float, bool, type(None)))
"""Values a deep copy would return as they are (so the copy is skipped)."""


def chain_output_items(chain: Chain) -> list[dict[str, Any]]:
    """`project_chain_to_output_items` with token fields as read-only numpy views (internal:
    the streaming writer's input; callers get `json_native` of it)."""
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
            out = {k: v if type(v) in _IMMUTABLE else copy.deepcopy(v)
                   for k, v in item.items() if k not in TOKEN_FIELDS}
            if index == carrier:
                out.update(token_fields)
            items.append(out)
    return items


def _token_items(output: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [item for item in output if "generation_token_ids" in item]


def incomplete_status(chain: Chain, finish_reason_resolved: bool, refusal_ended: bool) -> tuple[str, str | None]:
    """(status, incomplete reason) for a delivered chain, in the order of docs/contract.md#projection."""
    if refusal_ended:
        return "incomplete", "max_output_tokens"
    if finish_reason_resolved and chain.links:
        reason = chain.links[-1].entry.finish_reason
        if reason == "length":
            return "incomplete", "max_output_tokens"
        if reason == "content_filter":
            return "incomplete", "content_filter"
    return "completed", None


def main_chain_status(out: BuildOutput, finish_reason_resolved: bool = True,
                      engine_refusals: Iterable[EngineRefusalRecord] = ()) -> tuple[str, str | None]:
    """(status, incomplete reason) of the delivered chain's payload, without projecting it
    (what a scan row reads). ``out.main`` must be a chain with links."""
    from .verdicts import refusal_ended_chain  # verdicts reads projection helpers too

    main = out.main
    assert main is not None and main.links
    ended = any(refusal_ended_chain(r, main.links[-1].entry, out) for r in engine_refusals)
    return incomplete_status(main, finish_reason_resolved, ended)


def project_main_chain_response(rollout_id: str, out: BuildOutput, model: str = "",
                                finish_reason_resolved: bool = True,
                                engine_refusals: Iterable[EngineRefusalRecord] = ()) -> dict[str, Any]:
    """The delivered chain as a Responses object (``object: "response"``) with contiguous
    token fields, JSON-native."""
    return json_native(main_chain_payload(rollout_id, out, model=model, finish_reason_resolved=finish_reason_resolved,
                                          engine_refusals=engine_refusals))


def main_chain_payload(rollout_id: str, out: BuildOutput, model: str = "", finish_reason_resolved: bool = True,
                       engine_refusals: Iterable[EngineRefusalRecord] = ()) -> dict[str, Any]:
    """`project_main_chain_response` with token fields as numpy views (internal, for the writer)."""
    main = out.main
    if main is None:
        raise ValueError(f"rollout {rollout_id!r}: there is no delivered chain to project")
    output = chain_output_items(main)
    token_items = _token_items(output)
    generated = sum(int(item["generation_token_ids"].size) for item in token_items)
    if not generated:
        raise ValueError(f"rollout {rollout_id!r}: the delivered chain has no generated token")
    status, reason = main_chain_status(out, finish_reason_resolved, engine_refusals)
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


def _prefix_base(arr: np.ndarray) -> np.ndarray | None:
    """The 1-D buffer ``arr`` is a prefix view of (same start, same dtype), else None."""
    base = arr.base
    if not isinstance(base, np.ndarray) or base.dtype != arr.dtype or base.ndim != 1 or \
            base.__array_interface__["data"][0] != arr.__array_interface__["data"][0]:
        return None
    return base


def json_native(value: Any) -> Any:
    """A deep copy of ``value`` made of dicts, lists, str, int, float, bool and None only.

    numpy arrays become lists (``tolist``: plain ints and floats), numpy scalars their
    Python value, tuples lists. The running prompts of a chain are prefix views of one
    buffer, so that buffer is converted once and each prompt is a slice of the one list:
    the ints are shared, only the list slots are per prompt.
    """
    prefix_lists: dict[int, list[Any]] = {}
    if isinstance(value, Mapping) and isinstance(value.get("output"), list):
        items = value["output"]
    elif isinstance(value, list):
        items = value
    else:
        items = []
    longest: dict[int, tuple[np.ndarray, int]] = {}
    for item in items:
        prompt = item.get("prompt_token_ids") if isinstance(item, Mapping) else None
        if isinstance(prompt, np.ndarray) and prompt.ndim == 1:
            base = _prefix_base(prompt)
            if base is not None and prompt.size > longest.get(id(base), (base, -1))[1]:
                longest[id(base)] = (base, int(prompt.size))
    for key, (base, length) in longest.items():
        prefix_lists[key] = base[:length].tolist()
    return _native(value, prefix_lists)


def _native(value: Any, prefix_lists: dict[int, list[Any]]) -> Any:
    kind = type(value)
    if kind in (str, int, float, bool) or value is None:
        return value
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):  # a str subclass (an enum member, say) becomes a plain str
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, Mapping):
        return {str(k) if not isinstance(k, str) else k: _native(v, prefix_lists) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        base = _prefix_base(value) if value.ndim == 1 else None
        shared = prefix_lists.get(id(base)) if base is not None else None
        if shared is not None and value.size <= len(shared):
            return shared[: value.size]
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [_native(v, prefix_lists) for v in value]
    return copy.deepcopy(value)


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
