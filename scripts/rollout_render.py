"""How ``make_sample_rollouts.py`` turns a conversation into NeMo Gym output items with tokens.

A conversation is a list of `Turn`s (what each model call generated and what the harness
fed back). A `Harness` renders the history before each call through a ChatML template with
``<think>`` and ``<tool_call>`` blocks, as Qwen3's template does, in one of the ways real
harnesses do it (right, or stripping, stubbing or moving reasoning, re-dumping tool calls,
dropping old turns). Prompts and generations are encoded in Qwen3's vocabulary
(``qwen_vocab.py``). `items_of` writes the Responses output items, with the token fields on
the item that ends each call; `check` asserts a scenario's premises about its own rendering.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

import qwen_vocab
import rollout_story as story

MODEL = "Qwen/Qwen3-8B"
IM_START, IM_END = "<|im_start|>", "<|im_end|>"

_TOKENIZER: Any = None


def tokenizer() -> Any:
    global _TOKENIZER
    if _TOKENIZER is None:
        _TOKENIZER = qwen_vocab.qwen3_tokenizer()
    return _TOKENIZER


def encode(text: str) -> list[int]:
    return list(tokenizer().encode(text, add_special_tokens=False).ids)


def decode(ids: list[int]) -> str:
    return str(tokenizer().decode(ids, skip_special_tokens=False))


# ---------------------------------------------------------------- the conversation


@dataclass
class Turn:
    """One model call's output, and what the harness fed back after it."""

    reasoning: str
    content: str
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)   # one tool result per call
    user_after: str | None = None                       # a user message after the tool results
    call_texts: list[str] = field(default_factory=list)  # the JSON the model wrote per call

    def __post_init__(self) -> None:
        if not self.call_texts:
            self.call_texts = [canonical_call(name, args) for name, args in self.calls]


def canonical_call(name: str, args: dict[str, Any]) -> str:
    """A tool call as Qwen3's template writes it (``tojson``: ``", "`` and ``": "``)."""
    return json.dumps({"name": name, "arguments": args}, ensure_ascii=False)


def body(turn: Turn, call_texts: list[str]) -> str:
    """The assistant turn after its think block: content, then each ``<tool_call>``."""
    text = turn.content
    for i, call in enumerate(call_texts):
        if i > 0 or turn.content:
            text += "\n"
        text += "<tool_call>\n" + call + "\n</tool_call>"
    return text


def think(reasoning: str) -> str:
    return "<think>\n" + reasoning + "\n</think>\n\n"


def generation_text(turn: Turn) -> str:
    """What the model generated for the turn, its end-of-turn token included."""
    return think(turn.reasoning) + body(turn, turn.call_texts) + IM_END


def system_block() -> str:
    return IM_START + "system\n" + story.system_text() + IM_END + "\n"


def user_block(text: str) -> str:
    return IM_START + "user\n" + text + IM_END + "\n"


def tool_block(outputs: list[str]) -> str:
    inner = "".join("\n<tool_response>\n" + out + "\n</tool_response>" for out in outputs)
    return IM_START + "user" + inner + IM_END + "\n"


# ---------------------------------------------------------------- harnesses (history -> prompt)


@dataclass
class Harness:
    """How one harness renders the history before call ``k`` (0-based).

    ``think``: ``qwen3`` keeps the reasoning of turns after the last user message and drops
    the others (Qwen3's template); ``keep`` keeps all; ``stub`` renders every earlier turn
    with an emptied ``<think>\\n\\n</think>``; ``moved`` does that and puts each turn's
    reasoning after its tool results as an assistant message of its own.
    ``redump``: tool calls rendered from the parsed arguments (``spaced``: json.dumps'
    default separators; ``sorted``: argument keys sorted) instead of the model's own text.
    ``drop_first_exchange_at``: from that call on, turn 0 and the user message after it are
    left out (a sliding window keeping the system prompt and the task).
    """

    think: str = "qwen3"
    redump: str | None = None
    drop_first_exchange_at: int | None = None

    def call_texts(self, turn: Turn) -> list[str]:
        if self.redump is None:
            return turn.call_texts
        sort = self.redump == "sorted"
        return [json.dumps({"name": name, "arguments": dict(sorted(args.items())) if sort else args},
                           ensure_ascii=False) for name, args in turn.calls]

    def prompt_text(self, task: str, turns: list[Turn], k: int) -> str:
        last_user = max([-1] + [i for i, t in enumerate(turns[:k]) if t.user_after is not None])
        text = system_block() + user_block(task)
        for i, turn in enumerate(turns[:k]):
            if self.drop_first_exchange_at is not None and k >= self.drop_first_exchange_at and i == 0:
                continue
            text += IM_START + "assistant\n" + self.think_part(turn, i, last_user) + body(turn, self.call_texts(turn))
            text += IM_END + "\n"
            if turn.outputs:
                text += tool_block(turn.outputs)
            if self.think == "moved":
                text += IM_START + "assistant\n" + think(turn.reasoning) + IM_END + "\n"
            if turn.user_after is not None:
                text += user_block(turn.user_after)
        return text + IM_START + "assistant\n"

    def think_part(self, turn: Turn, index: int, last_user: int) -> str:
        if self.think == "keep" or (self.think == "qwen3" and index > last_user):
            return think(turn.reasoning)
        if self.think in ("stub", "moved"):
            return "<think>\n\n</think>\n\n"
        return ""


# ---------------------------------------------------------------- calls and items


@dataclass
class Call:
    prompt: list[int] | None
    generation: list[int]
    turn: Turn
    cut: bool = False   # generation stopped at max_output_tokens


def render_calls(task: str, turns: list[Turn], harness: Harness) -> list[Call]:
    return [Call(encode(harness.prompt_text(task, turns, k)), encode(generation_text(turn)), turn)
            for k, turn in enumerate(turns)]


def non_canonical(calls: list[Call], k: int, word: str) -> None:
    """Call ``k`` generated ``word`` as two tokens where BPE makes one (the model's own split)."""
    ids = calls[k].generation
    (single,) = encode(word)
    at = ids.index(single)
    left, right = split_token(word)
    calls[k].generation = ids[:at] + [left, right] + ids[at + 1:]


def split_token(word: str) -> tuple[int, int]:
    for cut in range(len(word) - 1, 0, -1):
        left, right = encode(word[:cut]), encode(word[cut:])
        if len(left) == 1 and len(right) == 1:
            return left[0], right[0]
    raise ValueError(f"no two-token split of {word!r}")


def log_probs(rng: random.Random, n: int) -> list[float]:
    return [round(-rng.expovariate(4.0) if rng.random() < 0.8 else -rng.uniform(0.5, 6.0), 5) for _ in range(n)]


def items_of(calls: list[Call], rng: random.Random, blank_prompt: tuple[int, str] | None) -> list[dict[str, Any]]:
    """The response's output items, token fields on the item that ends each call."""
    items: list[dict[str, Any]] = []
    previous: Turn | None = None
    previous_ids: list[str] = []
    for k, call in enumerate(calls):
        if previous is not None:
            for call_id, out in zip(previous_ids, previous.outputs):
                items.append({"type": "function_call_output", "call_id": call_id, "output": out,
                              "id": "fco_" + hex_id(rng)})
            if previous.user_after is not None:
                items.append({"type": "message", "role": "user", "id": "msg_" + hex_id(rng),
                              "content": [{"type": "input_text", "text": previous.user_after}]})
        turn = call.turn
        items.append({"type": "reasoning", "id": "rs_" + hex_id(rng),
                      "summary": [{"type": "summary_text", "text": turn.reasoning}]})
        content = message_text(call) if call.cut else turn.content
        if content:
            items.append({"type": "message", "role": "assistant", "id": "msg_" + hex_id(rng),
                          "status": "incomplete" if call.cut else "completed",
                          "content": [{"type": "output_text", "text": content, "annotations": []}]})
        previous_ids = []
        for (name, args), text in zip(turn.calls, turn.call_texts):
            call_id = "call_" + hex_id(rng)[:24]
            previous_ids.append(call_id)
            items.append({"type": "function_call", "id": "fc_" + hex_id(rng), "call_id": call_id, "name": name,
                          "arguments": arguments_text(args, text), "status": "completed"})
        last = items[-1]
        last["prompt_token_ids"] = call.prompt
        last["generation_token_ids"] = call.generation
        last["generation_log_probs"] = log_probs(rng, len(call.generation))
        if blank_prompt is not None and blank_prompt[0] == k:
            if blank_prompt[1] == "missing":
                del last["prompt_token_ids"]
            else:
                last["prompt_token_ids"] = [] if blank_prompt[1] == "empty" else None
        previous = turn
    return items


def arguments_text(args: dict[str, Any], call_text: str) -> str:
    """The arguments as the model wrote them (compact when its whole call was compact)."""
    compact = '"name":"' in call_text
    return json.dumps(args, ensure_ascii=False, separators=(",", ":") if compact else None)


def message_text(call: Call) -> str:
    text = decode(call.generation)
    return text.split("</think>\n\n", 1)[1]


def hex_id(rng: random.Random) -> str:
    return f"{rng.getrandbits(128):032x}"


# ---------------------------------------------------------------- the record


def record(spec: dict[str, Any], calls: list[Call], items: list[dict[str, Any]], rng: random.Random,
           task: str, max_output_tokens: int) -> dict[str, Any]:
    cut = calls[-1].cut
    generated = sum(len(c.generation) for c in calls)
    reasoning_tokens = sum(len(encode(think(c.turn.reasoning))) for c in calls)
    last_prompt = calls[-1].prompt or []
    response = {
        "id": "resp_" + hex_id(rng),
        "object": "response",
        "created_at": 1_767_000_000 + spec["task"] * 1000 + spec["rollout"] * 10,
        "model": MODEL,
        "status": "incomplete" if cut else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
        "error": None,
        "output": items,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": story.response_tools(),
        "temperature": 1.0,
        "top_p": 1.0,
        "max_output_tokens": max_output_tokens,
        "usage": {"input_tokens": len(last_prompt), "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": generated, "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
                  "total_tokens": len(last_prompt) + generated},
    }
    return {
        "responses_create_params": {
            "input": [{"role": "system", "content": story.SYSTEM_PROMPT}, {"role": "user", "content": task}],
            "tools": story.response_tools(), "max_output_tokens": max_output_tokens, "temperature": 1.0,
        },
        "response": response,
        "reward": spec["reward"],
        "_ng_task_index": spec["task"],
        "_ng_rollout_index": spec["rollout"],
    }


# ---------------------------------------------------------------- self-checks of the construction


def contiguity(items: list[dict[str, Any]]) -> list[str]:
    """Items whose prompt does not start with the previous call's prompt + generation (docs/contract.md#token-rollouts-calls)."""
    broken, before = [], None
    for index, item in enumerate(items):
        if not item.get("generation_token_ids"):
            continue
        prompt = item.get("prompt_token_ids") or []
        if before is not None and prompt[:len(before)] != before:
            broken.append(f"item-{index:04d}")
        before = prompt + item["generation_token_ids"]
    return broken


def first_divergence(before: list[int], prompt: list[int]) -> tuple[int, int, int, int] | None:
    """(i0, i1, j0, j1) of the first divergence as docs/contract.md#alignment walks it (windows of 8)."""
    agree = 0
    while agree < min(len(before), len(prompt)) and before[agree] == prompt[agree]:
        agree += 1
    if agree == len(before):
        return None
    first_at: dict[tuple[int, ...], int] = {}
    for j in range(len(prompt) - 1, agree - 1, -1):
        for k in range(4, 9):
            if j + k <= len(prompt):
                first_at[tuple(prompt[j:j + k])] = j
    for i in range(agree, len(before) - 3):
        j = first_at.get(tuple(before[i:i + 8]))
        if j is not None:
            return agree, i, agree, j
    return agree, len(before), agree, len(prompt)


def check(spec: dict[str, Any], calls: list[Call], items: list[dict[str, Any]]) -> None:
    """The rendering is what the scenario declares; raises when a premise does not hold."""
    declared = spec["expected"]
    token_items = [f"item-{i:04d}" for i, item in enumerate(items) if item.get("generation_token_ids")]
    broken = contiguity(items)
    want = [token_items[k] for k in spec["breaks_at_calls"]]
    assert broken == want, f"{spec['name']}: non-contiguous {broken}, declared {want}"
    assert declared["contiguous"] is (not broken)
    if not broken or spec.get("shape") is None:
        return
    k = spec["breaks_at_calls"][0]
    before = (calls[k - 1].prompt or []) + calls[k - 1].generation
    i0, i1, j0, j1 = first_divergence(before, calls[k].prompt or [])
    d, inserted = before[i0:i1], (calls[k].prompt or [])[j0:j1]
    shape = spec["shape"]
    if shape == "dropped":
        assert not inserted and d, f"{spec['name']}: first divergence inserts {len(inserted)} tokens"
    elif shape == "stub":
        assert inserted == encode("\n\n") and len(d) >= 4, f"{spec['name']}: not a stub ({len(d)}, {len(inserted)})"
    elif shape == "reordered":
        assert not d and inserted, f"{spec['name']}: first divergence drops {len(d)} tokens"
    elif shape == "replaced":
        assert 0 < len(d) <= 32 and 0 < len(inserted) <= 32 and decode(d) != decode(inserted), spec["name"]
        assert not (1 <= len(inserted) <= 4 and len(d) >= 4 * len(inserted)), f"{spec['name']}: reads as a stub"
    elif shape == "retokenized":
        assert len(d) == 2 and len(inserted) == 1 and decode(d) == decode(inserted), spec["name"]
