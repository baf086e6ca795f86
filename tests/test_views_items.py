"""The Rollout page's views of a rollout read from output items (docs/contract.md#token-rollouts): calls named by their items, each
with its item's text, in the call tree's labels, hovers and detail."""

from __future__ import annotations

from helpers_rollouts import ROLLOUTS, items_view_of
from rollouts_data import jsonl, rollout_record, turns_of

from tokencap.loading import load_snapshots
from tokencap.views.model import RolloutView, node_key
from tokencap.views.rollout import detail as dv
from tokencap.views.rollout import items as iv
from tokencap.views.rollout.tree_model import tree_of

view_of = items_view_of


def three_calls() -> RolloutView:
    return view_of(jsonl([rollout_record(turns_of(3), rollout_id="r1")]))


def test_item_text_says_what_each_kind_of_item_holds():
    assert iv.item_text({"type": "function_call", "name": "run_tests", "arguments": '{"n": 1}'}) == 'run_tests({"n": 1})'
    assert iv.item_text({"type": "message", "content": [{"type": "output_text", "text": "done"}]}) == "done"
    assert iv.item_text({"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}]}) == "think"
    assert iv.item_text({"type": "function_call_output", "output": "3 passed"}) == "3 passed"
    assert iv.item_text({"type": "web_search_call"}) == "web_search_call"


def test_calls_are_named_by_their_items_with_each_item_s_text():
    view = three_calls()
    assert iv.from_items(view)
    # Output: call 0, its tool output 1, call 2, output 3, final message 4.
    assert list(view.records_by_id) == ["item-0000", "item-0002", "item-0004"]
    assert iv.item_names(view.entry("item-0002")) == ["item-0001", "item-0002"]
    texts = iv.call_texts(view)
    assert texts == {"item-0000": 'function_call: run_tests({"n": 0})', "item-0002": 'function_call: run_tests({"n": 2})',
                     "item-0004": "message: answer 4"}
    tree = tree_of(view)
    assert tree.label(node_key("call", "item-0004")).endswith(" · message: answer 4")
    assert "item message: answer 4" in tree.node(node_key("call", "item-0004")).hover
    detail = dv.call_detail(view, node_key("call", "item-0002"))
    assert [p.title for p in detail.items] == ["item-0001 · function_call_output", "item-0002 · function_call · run_tests"]
    assert detail.items[1].carries_tokens
    assert detail.facts[0].startswith('Read from the rollout record\'s output item item-0002 (function_call: run_tests(')


def test_a_capture_s_calls_keep_their_names_and_labels():
    from pathlib import Path

    sample = Path(__file__).resolve().parent.parent / "sample_data" / "clean_multiturn_tools.json"
    view = RolloutView(load_snapshots(sample)[0])
    assert not iv.from_items(view) and iv.call_texts(view) == {}
    key = next(iter(tree_of(view).index))
    assert " · " not in tree_of(view).label(key).split(" — ", 1)[1]
    detail = dv.call_detail(view, key)
    assert all(p.title.startswith("item ") for p in detail.items)
    assert not any(f.startswith("Read from the rollout record") for f in detail.facts)


def test_the_bundled_rollouts_name_each_call_s_tool_call():
    view = view_of(ROLLOUTS.read_bytes(), 5)
    texts = iv.call_texts(view)
    assert texts and all(t.startswith(("function_call: ", "message: ")) for t in texts.values())
    assert any(t.startswith("function_call: search_code(") for t in texts.values())
    assert all(len(t) <= iv.TEXT_LIMIT for t in texts.values())
