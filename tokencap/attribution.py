"""Terminal attribution: which captured call the harness's final answer came from (docs/contract.md#attribution).

A harness knows where it ended; the capture does not. Without help the builder delivers
the chain that ends latest, so a title or summary request sent *after* the final answer
(it carries the whole history, so it looks exactly like a next turn) becomes the last
step of the trajectory. The harness's own final response says where it really ended:
`attribute_terminal` finds the call that produced it, and `build_rollout` anchors the
delivered chain there.

The rules are fail-closed, in the spirit of the builder (see DESIGN.md, "Terminal
attribution"):

* Tokens first. When the final response carries token ids, a call matches only when it
  holds exactly those tokens -- the strongest proof there is.
* Content only when there are no tokens, and then the whole final turn must match, item
  by item (text, tool-call names and arguments, reasoning summaries).
* Several matching calls with the *same* tokens are twins: training on either is exact,
  so the smallest id anchors -- but if they recorded different finish reasons, the finish
  reason is withheld, exactly as for any twins (docs/contract.md#rollout).
* Matching calls with *different* tokens: nothing is chosen (`ambiguous`). No match:
  `unattributed`. Both mask the sample, because the harness's answer is then not provably
  the delivered chain's end.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .builder import BuildOutput
from .digest import checked_token_ids
from .records import TokenEntry
from .tokens import prefix_equals
from .verdicts import _same_full_sequence

ATTRIBUTED = "attributed"
AMBIGUOUS = "ambiguous"
UNATTRIBUTED = "unattributed"
GIVEN = "given"
"""Not an outcome of `attribute_terminal`: the metric's outcome when an explicit terminal id won."""

BY_TOKENS = "tokens"
BY_CONTENT = "content"


@dataclass(frozen=True)
class TerminalAttribution:
    """The call the harness's final response came from, and how sure that is.

    ``method`` is the match that was tried: ``"tokens"`` when the final response carried
    generated token ids, else ``"content"``. ``candidates`` are the sorted ids of every
    call that matched; ``call_id`` is set only for ``outcome == "attributed"`` (the
    smallest of the token-identical candidates). ``finish_reason_resolved`` is false when
    the candidates, or the twin group they belong to, disagree on the finish reason.
    """

    call_id: str | None
    method: str | None
    outcome: str
    candidates: list[str] = field(default_factory=list)
    finish_reason_resolved: bool = True

    @property
    def attributed(self) -> bool:
        return self.outcome == ATTRIBUTED

    def metric(self) -> dict[str, Any]:
        """``metrics["terminal_attribution"]`` (docs/contract.md#attribution)."""
        return {"outcome": self.outcome, "method": self.method, "call_id": self.call_id,
                "candidates": list(self.candidates)}

    def describe(self) -> str:
        """The outcome in plain words, for reports and the app."""
        how = ("its generated tokens" if self.method == BY_TOKENS else
               "the content of its final turn (text, tool calls and reasoning summaries)")
        names = ", ".join(self.candidates)
        if self.outcome == ATTRIBUTED:
            text = f"the harness's final answer came from {self.call_id}, matched by {how}"
            if len(self.candidates) > 1:
                text += (f"; token-identical twins {names} all match, so the smallest id anchors "
                         "(training on either is exact)")
            if not self.finish_reason_resolved:
                text += "; the twins disagree on the finish reason, so it is withheld"
            return text
        if self.outcome == AMBIGUOUS:
            return (f"ambiguous: the final answer matches {names} by {how}, but they hold different token "
                    "sequences; nothing is chosen between them, so the sample is masked")
        return (f"unattributed: no captured call matches the final answer by {how} (it was never captured, "
                "or came from elsewhere), so the sample is masked")


# --------------------------------------------------------------------------- final-turn signatures


def _canon(value: Any) -> Any:
    """A hashable, order-insensitive form of parsed JSON (``true`` is never ``1``)."""
    if isinstance(value, bool) or value is None:
        return ("lit", value)
    if isinstance(value, (int, float)):
        if isinstance(value, float) and math.isnan(value):
            return ("nan", id(value))  # equal to nothing, like NaN itself
        return ("num", value)
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, Mapping):
        return ("obj", tuple(sorted((str(k), _canon(v)) for k, v in value.items())))
    if isinstance(value, (list, tuple)):
        return ("arr", tuple(_canon(v) for v in value))
    return ("other", repr(value))


def _text_of(parts: Any) -> Any:
    """The concatenated text of a content list's text parts (a plain string stands for itself)."""
    if isinstance(parts, str):
        return parts
    if isinstance(parts, list):
        return "".join(p["text"] for p in parts if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    if parts is None:
        return ""
    return _canon(parts)  # not text at all: equal only to the very same value


def _arguments(value: Any) -> Any:
    """Tool-call arguments, compared as parsed JSON when they parse (key order and spacing
    are formatting, not content)."""
    if isinstance(value, str):
        try:
            return ("json", _canon(json.loads(value)))
        except ValueError:
            return ("raw", value)
    return ("json", _canon(value))


def item_signature(item: Mapping[str, Any]) -> tuple[Any, ...]:
    """What an output item says, without ids, status or token fields (docs/contract.md#attribution-by-content)."""
    kind = item.get("type")
    if kind == "message":
        return ("message", item.get("role"), _text_of(item.get("content")))
    if kind == "function_call":
        return ("function_call", item.get("name"), _arguments(item.get("arguments")))
    if kind == "reasoning":
        return ("reasoning", _text_of(item.get("summary")))
    return (kind,)


def is_assistant_output(item: Mapping[str, Any]) -> bool:
    """False for what the harness fed the model: a tool output, or a message not from the assistant."""
    kind = item.get("type")
    if kind == "function_call_output":
        return False
    if kind == "message" and item.get("role") != "assistant":
        return False
    return True


def final_turn(output: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The output items after the last item that is not assistant output."""
    start = 0
    for index, item in enumerate(output):
        if not is_assistant_output(item):
            start = index + 1
    return list(output[start:])


# --------------------------------------------------------------------------- matching


def _output_of(final_response: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    if not isinstance(final_response, Mapping):
        raise ValueError("the final response must be a Responses object (a mapping), "
                         f"got {type(final_response).__name__}")
    output = final_response.get("output")
    if output is None:
        return []
    if not isinstance(output, (list, tuple)):
        raise ValueError(f"the final response's 'output' must be a list of items, got {type(output).__name__}")
    for index, item in enumerate(output):
        if not isinstance(item, Mapping):
            raise ValueError(f"the final response's output item {index} is not an object")
    return list(output)


def _has_tokens(item: Mapping[str, Any]) -> bool:
    gen = item.get("generation_token_ids")
    return gen is not None and len(gen) > 0


def token_item(output: Sequence[Mapping[str, Any]]) -> tuple[int, Mapping[str, Any]] | None:
    """(index, item) of the last output item carrying a non-empty ``generation_token_ids``."""
    for index in range(len(output) - 1, -1, -1):
        if _has_tokens(output[index]):
            return index, output[index]
    return None


def _by_tokens(calls: list[TokenEntry], item: Mapping[str, Any]) -> list[TokenEntry]:
    where = "the final response's token item"
    try:
        gen = checked_token_ids(item["generation_token_ids"])
        prompt_ids = item.get("prompt_token_ids")
        prompt = checked_token_ids(prompt_ids if prompt_ids is not None else [])
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    gen = gen.astype(np.uint64, copy=False)
    prompt = prompt.astype(np.uint64, copy=False)
    total = int(prompt.size + gen.size)
    whole: np.ndarray | None = None
    matched = []
    for entry in calls:
        p, g = entry.prompt_token_ids, entry.generation_token_ids
        if entry.full_len == total:
            # The whole sequence, wherever the split between prompt and generation falls.
            if p.size == prompt.size:
                if np.array_equal(p, prompt) and np.array_equal(g, gen):
                    matched.append(entry)
                continue
            if whole is None:
                whole = np.concatenate((prompt, gen))
            if prefix_equals(whole, p, g):
                matched.append(entry)
        elif g.size == gen.size and p.size > prompt.size:
            # The harness kept only the last turn's prompt: same generation, and the call's
            # full prompt ends with what the harness kept.
            if np.array_equal(g, gen) and (not prompt.size or np.array_equal(p[p.size - prompt.size:], prompt)):
                matched.append(entry)
    return matched


def _by_content(calls: list[TokenEntry], turn: list[Mapping[str, Any]]) -> list[TokenEntry]:
    if not turn:
        return []  # an empty final turn says nothing, so it matches nothing
    wanted = tuple(item_signature(item) for item in turn)
    matched = []
    for entry in calls:
        items = entry.output_items
        if len(items) == len(wanted) and tuple(item_signature(item) for item in items) == wanted:
            matched.append(entry)
    return matched


def attribute_terminal(build: BuildOutput, final_response: Mapping[str, Any]) -> TerminalAttribution:
    """The call of ``build`` the harness's final response came from (docs/contract.md#attribution).

    Candidates are the calls of ``build.entries`` with a non-empty generation. Raises
    `ValueError` when ``final_response`` is not a Responses-shaped mapping or carries token
    ids that are not integers in [0, 2^64).
    """
    output = _output_of(final_response)
    calls = sorted((e for e in build.entries.values() if e.generation_token_ids.size),
                   key=lambda e: e.model_call_id)
    found = token_item(output)
    if found is not None:
        method, matched = BY_TOKENS, _by_tokens(calls, found[1])
    else:
        method, matched = BY_CONTENT, _by_content(calls, final_turn(output))
    candidates = sorted(e.model_call_id for e in matched)
    if not matched:
        return TerminalAttribution(None, method, UNATTRIBUTED, [], True)
    first = matched[0]
    if any(not _same_full_sequence(first, other) for other in matched[1:]):
        # Different sequences: choosing one would be a guess about what the harness kept.
        return TerminalAttribution(None, method, AMBIGUOUS, candidates, True)
    # Token-identical: the twin group is every call with this full sequence; the finish
    # reason only stands when all of them (candidates included) recorded the same one.
    group = [e for e in calls if e is first or _same_full_sequence(first, e)]
    reasons = {e.finish_reason for e in group} | {e.finish_reason for e in matched}
    return TerminalAttribution(candidates[0], method, ATTRIBUTED, candidates, len(reasons) <= 1)


def given_metric(terminal_call_id: str) -> dict[str, Any]:
    """The metric when an explicit terminal id overrode attribution."""
    return {"outcome": GIVEN, "method": None, "call_id": terminal_call_id, "candidates": []}


__all__ = ["TerminalAttribution", "attribute_terminal", "final_turn", "item_signature", "is_assistant_output",
           "token_item", "ATTRIBUTED", "AMBIGUOUS", "UNATTRIBUTED", "GIVEN", "BY_TOKENS", "BY_CONTENT"]
