"""The causes amended for real tokens (docs/contract.md#causes, #breaks), each on hand-built token sequences:
`history_reordered`, a stub in place of generated tokens (`generation_dropped`), `prompt_missing`,
the `reasoning` flag read off an open ``<think>``, and an extra root that is every root but the
earliest (so a compaction delivered from the later root breaks there)."""

from __future__ import annotations

import numpy as np
import pytest
from diagnosis_cases import GEN1, OPENING, Case, tiny_tokenizer
from helpers_diagnosis import compaction, observations, ref
from synth_snapshots import Capture

from tokencap import build_rollout, diagnose
from tokencap.diagnosis import HINTS
from tokencap.diagnosis.alignment import PromptRuns
from tokencap.diagnosis.causes import divergence_kind


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


def _reordered_case(tool_len: int) -> tuple[Capture, dict[str, list[int]]]:
    """a generates reasoning R (20 tokens) then a tool call T; b's prompt renders T first, then the
    tool result Y, then R as a message of its own, then new tokens Z (R split from its tool call)."""
    c = Capture("reordered", seed=1)
    parts = {"o": list(range(100, 120)), "r": list(range(200, 220)), "t": list(range(300, 300 + tool_len)),
             "y": list(range(400, 405)), "z": [500, 501, 502]}
    c.call("a", prompt=parts["o"], generation=parts["r"] + parts["t"])
    c.call("b", prompt=parts["o"] + parts["t"] + parts["y"] + parts["r"] + parts["z"], generation=[9],
           resolution="unresolved")
    return c, parts


def test_a_dropped_span_of_16_tokens_found_elsewhere_in_the_prompt_is_history_reordered():
    c, _ = _reordered_case(16)
    (b,) = diagnose(build_rollout(c.snapshot()))
    # The walk: T and Y inserted before R (R resynchronises), then T runs to the end: found whole at 20.
    kinds = [(d.parent_start, d.parent_end, d.prompt_start, d.prompt_end, d.kind) for d in b.divergences]
    assert kinds == [(20, 20, 20, 41, "tokens_inserted"), (40, 56, 61, 64, "history_reordered")]
    assert (b.cause, b.token_cause, b.hint) == ("history_reordered", "history_reordered", HINTS["history_reordered"])


def test_reasoning_moved_after_the_tool_results_behind_an_emptied_think_is_history_reordered():
    """The issue's rollout in ids: the template renders the turn with an emptied <think> block and
    puts the turn's reasoning after the tool results, as a message of its own."""
    think, end_think, nl, im_end, im_start, assistant = 1, 2, 3, 4, 5, 6
    opening, reasoning = list(range(100, 130)), list(range(200, 230))
    tool_call, tool_result = list(range(300, 320)), list(range(400, 410))
    c = Capture("moved", seed=1)
    c.call("a", prompt=opening, generation=[think, *reasoning, end_think, *tool_call, im_end])
    c.call("b", prompt=[*opening, think, nl, nl, end_think, *tool_call, im_end, *tool_result, im_start, assistant,
                        *reasoning, im_end, im_start, assistant], generation=[9], resolution="unresolved")
    (b,) = diagnose(build_rollout(c.snapshot()))
    assert [d.kind for d in b.divergences] == ["tokens_inserted", "history_reordered"]
    moved = b.divergences[1]
    assert (moved.parent_start, moved.parent_end) == (61, 83)  # </think>, the tool call and <|im_end|>
    assert (b.cause, b.token_cause) == ("history_reordered", "history_reordered")


def test_a_dropped_span_of_15_tokens_is_not_reordered():
    c, _ = _reordered_case(15)
    (b,) = diagnose(build_rollout(c.snapshot()))
    assert [d.kind for d in b.divergences] == ["tokens_inserted", "history_replaced"]
    assert b.cause == "tokens_inserted"  # the first divergence's kind, as before


def test_reordered_overrides_every_other_rule_and_needs_the_whole_run():
    kw = dict(predecessor_len=100, opening_len=20, all_generated=True)
    # a span that would be generation_dropped (I empty) or a seam-free run to the end
    assert divergence_kind(parent_start=30, parent_end=46, prompt_start=30, prompt_end=30, to_end=False,
                           reordered=True, **kw) == "history_reordered"
    assert divergence_kind(parent_start=30, parent_end=100, prompt_start=30, prompt_end=40, to_end=True,
                           reordered=True, **kw) == "history_reordered"
    assert divergence_kind(parent_start=30, parent_end=45, prompt_start=30, prompt_end=30, to_end=False,
                           reordered=True, **kw) == "generation_dropped"  # 15 tokens: too short to say
    p = np.array([7, 1, 2, 3, 4, 9, 1, 2, 3, 5], dtype=np.uint64)
    runs = PromptRuns(p)
    assert runs.find(np.array([1, 2, 3, 5], dtype=np.uint64)) == 6
    assert runs.find(np.array([1, 2, 3, 4], dtype=np.uint64)) == 1
    assert runs.find(np.array([2, 3, 4, 9, 2], dtype=np.uint64)) is None
    assert runs.find(np.array([], dtype=np.uint64)) is None
    assert runs.find(np.arange(20, dtype=np.uint64)) is None  # longer than P


def test_finding_a_run_confirms_on_the_ids_and_scales_to_long_prompts():
    rng = np.random.default_rng(5)
    p = rng.integers(0, 50, size=200_000).astype(np.uint64)
    run = p[150_000:150_040].copy()
    assert PromptRuns(p).find(run) == 150_000
    zeros = np.zeros(50_000, dtype=np.uint64)  # every window of a constant run hashes alike: the first confirms
    assert PromptRuns(zeros).find(np.zeros(30, dtype=np.uint64)) == 0
    assert PromptRuns(zeros).find(np.ones(30, dtype=np.uint64)) is None


# --------------------------------------------------------------------------- a stub in place of generated tokens


@pytest.mark.parametrize(("stub", "kind"), [(1, "generation_dropped"), (2, "generation_dropped"),
                                             (3, "tokens_replaced")])  # |D| = 10 >= 4 |I| for |I| <= 2
def test_a_short_stub_in_place_of_generated_tokens_is_generation_dropped(stub, kind):
    case = Case()
    case.brk(case.opening + case.fresh(stub) + case.x + case.g2 + case.fresh(3))  # G1 replaced by a stub
    b = case.only()
    d = b.divergences[0]
    assert (d.parent_start, d.parent_end, d.prompt_end - d.prompt_start) == (OPENING, OPENING + GEN1, stub)
    assert d.kind == b.cause == kind


def test_a_stub_over_prompt_tokens_is_no_dropped_generation():
    case = Case()
    case.brk(case.opening + case.g1 + case.fresh(1) + case.g2 + case.fresh(3))  # X (prompt tokens) replaced
    assert case.only().cause == "tokens_replaced"


def _spelled(tokenizer):
    """A word the tiny tokenizer has as one token, and the same word one character per token."""
    word = next(t for t, i in sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])
                if len(t) >= 4 and t.isalpha())
    return [tokenizer.token_to_id(word)], [tokenizer.token_to_id(ch) for ch in word]


def test_a_stub_that_reads_the_same_text_is_retokenized_with_a_tokenizer(tokenizer):
    whole, pieces = _spelled(tokenizer)
    assert len(pieces) >= 4 * len(whole) and None not in pieces
    c = Capture("spelled", seed=1)
    c.call("a", prompt=list(range(300, 320)), generation=pieces + list(range(330, 340)))  # sampled char by char
    c.call("b", prompt=list(range(300, 320)) + whole + list(range(330, 340)) + [1], generation=[2],
           resolution="unresolved")
    (plain,) = diagnose(build_rollout(c.snapshot()))
    assert plain.cause == "generation_dropped"  # without text, a short span for many generated tokens is a stub
    (b,) = diagnose(build_rollout(c.snapshot()), tokenizer=tokenizer)
    assert (b.cause, b.same_text) == ("retokenized", True)


# --------------------------------------------------------------------------- reasoning: an open <think>


def test_reasoning_when_the_call_s_text_before_the_dropped_span_left_a_think_open(tokenizer):
    enc = lambda text: tokenizer.encode(text).ids
    opening = enc("<|im_start|>the model reads the question<|im_end|>")
    think, close = enc("<think>"), enc("</think>")
    body = enc("the model reads the question and thinks about the answer")
    answer = enc("hello world, this is the answer")
    stub = enc("\n")
    assert len(think) == len(close) == 1 and len(body) >= 4 * len(stub)
    c = Capture("stub", seed=1)
    c.call("a", prompt=opening, generation=think + body + close + answer)
    c.call("b", prompt=opening + think + stub + close + answer + enc("<|im_end|>the tool returned"), generation=[5],
           resolution="unresolved")
    (b,) = diagnose(build_rollout(c.snapshot()), tokenizer=tokenizer)
    d = b.divergences[0]
    assert (d.parent_start, d.parent_end) == (len(opening) + 1, len(opening) + 1 + len(body))
    assert b.cause == "generation_dropped" and not b.parent_text.lstrip().startswith("<think>")
    assert b.reasoning is True  # "<think>" was generated before D and not closed
    (plain,) = diagnose(build_rollout(c.snapshot()))
    assert (plain.cause, plain.reasoning) == ("generation_dropped", False)


def test_no_reasoning_when_the_think_before_the_span_was_closed(tokenizer):
    enc = lambda text: tokenizer.encode(text).ids
    opening = enc("<|im_start|>the model reads the question<|im_end|>")
    thought = enc("<think>the model thinks</think>")
    body = enc("hello world, this is a small corpus for a tiny tokenizer")
    tail = enc("the tool returned three results")
    c = Capture("closed", seed=1)
    c.call("a", prompt=opening, generation=thought + body + tail)
    c.call("b", prompt=opening + thought + tail + enc("<|im_end|>"), generation=[5], resolution="unresolved")
    (b,) = diagnose(build_rollout(c.snapshot()), tokenizer=tokenizer)
    assert (b.cause, b.reasoning) == ("generation_dropped", False)


# --------------------------------------------------------------------------- an empty prompt


def test_an_empty_prompt_is_prompt_missing_with_no_divergences():
    case = Case()
    case.brk([])
    b = case.only()
    assert (b.cause, b.token_cause, b.divergences, b.agree, b.prompt_len) == ("prompt_missing", "prompt_missing", (),
                                                                             0, 0)
    assert b.predecessor == "a2" and b.predecessor_len == 45 and b.hint == HINTS["prompt_missing"]
    assert b.to_dict()["cause"] == "prompt_missing"


def test_an_empty_prompt_with_no_earlier_call_is_still_prompt_missing():
    c = Capture("empty", seed=1)
    c.call("a", prompt=[1, 2, 3], generation=[4, 5], created_at=10.0)
    c.call("b", prompt=[], generation=[6], resolution="unresolved", created_at=5.0)
    found = {b.call_id: b for b in diagnose(build_rollout(c.snapshot()))}
    b = found["b"]
    assert (b.predecessor, b.agree, b.prompt_len, b.cause) == (None, None, 0, "prompt_missing")


# --------------------------------------------------------------------------- every root but the earliest


def _compacted() -> Case:
    """a -> a2, then the harness compacts: c starts over from the opening and a summary (a root),
    c2 continues c; the harness's answer is c2's, so the delivered chain is c -> c2."""
    case = Case()
    case.brk(case.opening + case.fresh(30), call_id="c", resolution="root")
    case.c.call("c2", "c", gen=4)
    return case


def test_the_later_root_is_the_extra_root_whichever_fragment_was_delivered():
    case = _compacted()
    result = case.result(terminal_call_id="c2")
    assert result.build.main.call_ids == ["c", "c2"]
    (b,) = diagnose(result)
    assert (b.call_id, b.kind, b.predecessor, b.relation, b.cause) == ("c", "extra_root", "a2", "nearest",
                                                                       "new_context")
    assert [x.call_id for x in diagnose(case.result())] == ["c"]  # the same break with the other fragment


def test_a_compaction_delivered_from_the_later_root_says_compaction_there():
    case = _compacted()
    (b,) = diagnose(case.result(terminal_call_id="c2"), evidence=observations(compaction(ref("c"))))
    assert (b.call_id, b.cause, b.token_cause) == ("c", "compaction", "new_context")
