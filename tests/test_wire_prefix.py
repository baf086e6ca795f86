"""A full-prompt child's prompt text matched against its parent's (`loading.wire._match_segments`).

When a child's prompt text starts with its claimed parent's prompt and generation texts,
only the new tokens are parsed and the child's prompt extends the parent's buffer. The
shortcut may decide nothing: whatever the spacing, a near miss (a token one digit longer
at the junction, a changed token, a missing comma) must give exactly the tokens a plain
parse gives, and an exact textual match must share the parent's buffer.
"""

from __future__ import annotations

import json

import numpy as np
from helpers import entry_dict
from hypothesis import given, settings
from hypothesis import strategies as st

from tokencap.loading.raw_records import decode_raw_object
from tokencap.loading.wire import RecordDecoder, _match_segments, _Text

_SEPARATORS = [",", ", ", " ,", " , ", ",\n  ", "\n,\t"]
_PADS = ["", " ", "\n ", "\t\r\n"]


def _array(tokens: list[int], sep: str, pad: str) -> str:
    return "[" + pad + sep.join(str(t) for t in tokens) + pad + "]" if tokens else "[" + pad + "]"


def _record_text(call_id: str, prompt_text: str, gen_text: str, gen_len: int, parent: str | None) -> bytes:
    record = entry_dict(call_id, [0], [0] * gen_len, resolution="resolved" if parent else "root", parent=parent)
    record.pop("cum_len", None)
    record.pop("digest", None)
    record["prompt_token_ids"] = "\x00p\x00"
    record["generation_token_ids"] = "\x00g\x00"
    text = json.dumps(record).replace('"\\u0000p\\u0000"', prompt_text).replace('"\\u0000g\\u0000"', gen_text)
    return text.encode()


_tokens = st.lists(st.integers(0, 10 ** 6), max_size=6)


@st.composite
def _family(draw: st.DrawFn) -> tuple[list[int], list[int], str, str, list[int], str, bool]:
    """A parent's prompt and generation with their texts, a child's prompt with its text, and
    whether the child's text repeats the parent's texts verbatim (so the match must hold)."""
    prompt, gen, new = draw(_tokens), draw(_tokens), draw(_tokens)
    psep, gsep, csep = (draw(st.sampled_from(_SEPARATORS)) for _ in range(3))
    ppad, gpad, cpad = (draw(st.sampled_from(_PADS)) for _ in range(3))
    prompt_text, gen_text = _array(prompt, psep, ppad), _array(gen, gsep, gpad)
    head = prompt + gen
    kind = draw(st.sampled_from(["verbatim", "respaced", "longer_junction", "changed", "shorter", "unrelated"]))
    if kind == "verbatim":
        bodies = [text[1:-1].strip(" \t\r\n") for text, toks in ((prompt_text, prompt), (gen_text, gen)) if toks]
        body = csep.join(bodies + [str(t) for t in new])
        return prompt, gen, prompt_text, gen_text, head + new, "[" + cpad + body + cpad + "]", bool(head)
    child = head + new
    if kind == "longer_junction" and head:  # the parent's last token is a prefix of the child's: 34 -> 345
        child = head[:-1] + [int(str(head[-1]) + str(draw(st.integers(0, 9))))] + new
    elif kind == "changed" and head:
        at = draw(st.integers(0, len(head) - 1))
        child = head[:at] + [head[at] + 1] + head[at + 1:] + new
    elif kind == "shorter" and head:
        child = head[:-1]
    elif kind == "unrelated":
        child = new
    return prompt, gen, prompt_text, gen_text, child, _array(child, csep, cpad), False


@settings(max_examples=500, deadline=None)
@given(family=_family(), matched_as_text=st.booleans())
def test_a_childs_prompt_is_what_its_text_says_whatever_the_parents_text(family, matched_as_text) -> None:
    # A short prompt is parsed whole and compared as tokens; a long one is matched as text
    # first: both ways are drawn here (the threshold set to 0 sends every prompt the long way).
    import tokencap.loading.wire as wire

    saved = wire._MATCH_TEXT_ABOVE
    wire._MATCH_TEXT_ABOVE = 0 if matched_as_text else saved
    try:
        _check_family(family)
    finally:
        wire._MATCH_TEXT_ABOVE = saved


def test_a_short_childs_prompt_extends_its_parents_lane_whatever_its_text() -> None:
    # Issue 19.20: a short prompt is compared as tokens, so a child written with other
    # spacing than its parent still shares the parent's lane (the text match could not see it).
    parent_line = _record_text("call-1", "[1,2,3]", "[4, 5]", 2, None)
    child_line = _record_text("call-2", "[ 1 , 2 , 3 , 4 , 5 , 6 ]", "[7]", 1, "call-1")
    parent, kid = RecordDecoder().entries([decode_raw_object(parent_line), decode_raw_object(child_line)])
    assert kid.prompt_token_ids.tolist() == [1, 2, 3, 4, 5, 6]
    assert np.shares_memory(kid.prompt_token_ids, parent.prompt_token_ids)


def _check_family(family) -> None:
    prompt, gen, prompt_text, gen_text, child, child_text, verbatim = family
    parent_line = _record_text("call-1", prompt_text, gen_text, len(gen), None)
    child_line = _record_text("call-2", child_text, "[7]", 1, "call-1")
    parent, kid = RecordDecoder().entries([decode_raw_object(parent_line), decode_raw_object(child_line)])
    assert parent.prompt_token_ids.tolist() == prompt and parent.generation_token_ids.tolist() == gen
    assert kid.prompt_token_ids.tolist() == child
    assert kid.generation_token_ids.tolist() == [7]
    if verbatim and len(child_text) >= len(prompt_text):  # (texts are parsed shortest first)
        # The text matched: the child's prompt extends the parent's buffer, nothing re-parsed.
        assert np.shares_memory(kid.prompt_token_ids, parent.prompt_token_ids if prompt else
                                parent.generation_token_ids)


def _match(child: str, *parents: str) -> int | None:
    found = _match_segments(_Text(child.encode()), [_Text(p.encode()) for p in parents])
    return None if found is None else found[1]


def test_segments_match_only_on_token_boundaries_and_in_order() -> None:
    assert _match("[12,34,5]", "[12]", "[34]") == 6
    assert _match("[12,345]", "[12]", "[34]") is None  # one digit longer at the junction
    assert _match("[123,4]", "[12]", "[3,4]") is None  # the junction needs its comma
    assert _match("[12,34]", "[12]", "[34]") == 6  # nothing beyond the parent
    assert _match("[ 12 ,\n 34 ]", "[12]", "[34]") == 10  # spacing around the bodies and the comma
    assert _match("[34,12]", "[12]", "[34]") is None  # in order
    assert _match("[12,34]", "[]", "[12]") == 3  # an empty segment asks for nothing
    assert _match("[12]", "[ ]", "[]") is None  # nothing to match: the caller parses it whole
    assert _match("[1, 2, 3]", "[1,2]", "[3]") is None  # a different spacing inside a body is no match
    assert _match("[1,2]", "[1,2]", "[3]") is None  # the child is shorter than the parent
    assert _match("[1,2,3", "[1,2]", "[3]") is None  # no closing bracket or comma after the match


def test_a_match_compares_every_byte_of_a_long_segment() -> None:
    """A long parent text differing from the child's in one byte anywhere is no match."""
    body = ",".join(str(i) for i in range(50_000))
    parent, gen = f"[{body}]", "[9]"
    assert _match(f"[{body},9,1]", parent, gen) == len(body) + 3
    for at in (1, len(body) // 2, len(body) - 1):
        changed = body[:at] + ("1" if body[at] == "0" else "0") + body[at + 1:] if body[at].isdigit() else None
        if changed is None:
            continue
        assert _match(f"[{changed},9,1]", parent, gen) is None
