"""A break of a rollout read from output items, in the trainer's language (views.rollout.trainer): NeMo RL
would stop on the first item whose prompt does not continue the tokens before it, and the cause is said in
words of what happened to the history."""

from __future__ import annotations

import dataclasses

import pytest
from helpers_app import SAMPLES
from helpers_rollouts import ROLLOUTS
from helpers_rollouts import items_view_of as view_of
from rollouts_data import jsonl, rollout_record, turns_of
from tokenizers import Tokenizer

from tokencap.loading import load_snapshots
from tokencap.views.model import RolloutView
from tokencap.views.rollout import trainer as tw
from tokencap.views.rollout.breaks import breaks_of
from tokencap.views.rollout.culprits import culprits_of
from tokencap.views.rollout.verdicts import banner_of

QWEN3 = SAMPLES / "qwen3" / "tokenizer.json"


@pytest.fixture(scope="module")
def qwen3():
    return Tokenizer.from_file(str(QWEN3))


@pytest.fixture(scope="module")
def sample_views():
    data = ROLLOUTS.read_bytes()
    ids = [s.rollout_id for s in load_snapshots(ROLLOUTS)]
    return {rid: view_of(data, i) for i, rid in enumerate(ids)}


def culprit_words(view: RolloutView, tokenizer=None) -> list[str]:
    lines = {line.code: line for line in culprits_of(view, tokenizer, "qwen3" if tokenizer else "")}
    return [c.words for c in lines["unresolved_parent_calls"].culprits]


def test_a_cut_item_is_where_nemo_rl_stops_and_only_the_first_says_so():
    view = view_of(jsonl([rollout_record(turns_of(4), rollout_id="r1", cuts=(1, 3))]))
    words = culprit_words(view)
    assert words[0].startswith("item-0002 is not contiguous — NeMo RL would stop on this rollout: item-0002's "
                               "prompt does not continue item-0000; ")
    assert words[1].startswith("item-0006 is not contiguous — item-0006's prompt does not continue item-0004; ")
    assert tw.STOPS not in words[1]


def test_a_capture_s_breaks_keep_the_diagnosis_s_words():
    view = RolloutView(load_snapshots(SAMPLES / "reasoning_stripped_by_template.json")[0])
    words = " ".join(w for line in culprits_of(view) for w in (c.words for c in line.culprits))
    assert tw.STOPS not in words and "not contiguous" not in words
    assert "the chat template likely strips earlier reasoning" in words


@pytest.mark.parametrize("rollout, call, pred, cause", [
    ("task0-rollout2", "item-0021", "item-0017", tw.REASONING_STRIPPED),
    ("task2-rollout4", "item-0006", "item-0002", tw.CAUSE_WORDS["retokenized"]),
    ("task4-rollout4", "item-0010", "item-0006", tw.PROMPT_MISSING),
    ("task5-rollout5", "item-0013", "item-0009", tw.CAUSE_WORDS["history_dropped"]),
])
def test_the_bundled_rollouts_banner_says_where_nemo_rl_stops_and_why(sample_views, qwen3, rollout, call, pred,
                                                                        cause):
    view = sample_views[rollout]
    banner = banner_of(view, qwen3, "qwen3")
    assert not banner.trainable
    first = next(c for line in banner.lines for c in line.culprits if c.reason == "unresolved_parent_calls")
    assert first.words == (f"{call} is not contiguous — NeMo RL would stop on this rollout: {call}'s prompt does not "
                           f"continue {pred}; {cause}")


def test_causes_in_words_for_reordered_reasoning_and_an_emptied_think_block(sample_views, qwen3):
    view = sample_views["task0-rollout2"]
    brk = next(b for b in breaks_of(view, qwen3, "qwen3") if tw.is_item_break(view, b))
    assert brk.cause == "generation_dropped" and brk.reasoning
    first = brk.first_divergence
    reordered = dataclasses.replace(first, kind="history_reordered")
    moved = dataclasses.replace(brk, cause="history_reordered", reasoning=False,
                                divergences=(reordered,) + brk.divergences[1:])
    assert tw.cause_words(view, moved) == tw.REASONING_MOVED  # its text opens with <think>
    other = dataclasses.replace(moved, parent_text="the tool said 3")
    assert tw.cause_words(view, other) == tw.CAUSE_WORDS["history_reordered"]
    # A reordered span after a first divergence of its own (its text not decoded): moved reasoning when it lies
    # in what the predecessor generated and the predecessor has a reasoning item.
    inserted = dataclasses.replace(first, kind="tokens_inserted", parent_end=first.parent_start)
    prompt = int(view.entry(brk.predecessor).prompt_token_ids.size)
    later = dataclasses.replace(first, kind="history_reordered", parent_start=prompt + 2, parent_end=prompt + 40)
    split = dataclasses.replace(brk, cause="history_reordered", reasoning=False, parent_text="",
                                divergences=(inserted, later))
    assert tw.cause_words(view, split) == tw.REASONING_MOVED
    in_history = dataclasses.replace(split, divergences=(inserted, dataclasses.replace(later, parent_start=3)))
    assert tw.cause_words(view, in_history) == tw.CAUSE_WORDS["history_reordered"]
    stub = dataclasses.replace(brk, divergences=(dataclasses.replace(first, prompt_end=first.prompt_start + 3),)
                               + brk.divergences[1:], prompt_text="<think>\n\n</think>")
    assert tw.cause_words(view, stub) == tw.REASONING_STUB
    assert tw.item_break_words(view, stub, first=True) == (
        f"NeMo RL would stop on this rollout: {brk.call_id}'s prompt does not continue {brk.predecessor}; "
        f"{tw.REASONING_STUB}")


def test_a_contiguous_rollout_has_no_such_words(sample_views, qwen3):
    view = sample_views["task0-rollout0"]
    assert banner_of(view, qwen3, "qwen3").trainable
    assert tw.words_for(view, breaks_of(view, qwen3, "qwen3")) == {}
