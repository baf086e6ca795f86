"""`OpenRequest`: the typed request to open one rollout (tokencap/services/requests.py)."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from tokencap.services.requests import OpenRequest, is_open_request


def test_a_request_names_its_rollout_and_defaults_to_no_place_in_a_run():
    request = OpenRequest(path="/runs/7", source="a/R.tokens.*", rollout_id="R")
    assert (request.seq, dict(request.back_params), request.final_responses, request.vs) == (0, {}, None, None)
    assert (request.name, request.data, request.run, request.side, request.row) == (None, None, None, None, None)
    assert not request.uploaded and not request.placed and is_open_request(request)
    assert not is_open_request({"path": "/runs/7", "source": "a/R.tokens.*", "rollout_id": "R"})
    uploaded = OpenRequest(path=None, source="u.jsonl", rollout_id="R", name="u.jsonl", data=b"{}")
    assert uploaded.uploaded and "b'{}'" not in repr(uploaded)  # an upload's bytes stay out of its repr


def test_a_request_is_frozen_and_keeps_its_own_copy_of_the_filters():
    params = {"run_q": "R"}
    request = OpenRequest(path="/runs/7", source="s", rollout_id="R", back_params=params)
    params["run_q"] = "changed"
    assert request.back_params == {"run_q": "R"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.seq = 2  # type: ignore[misc]


def test_requests_are_equal_by_what_they_open_not_by_the_run_objects_they_carry():
    one = OpenRequest(path="/runs/7", source="s", rollout_id="R", seq=3, back_params={"run_q": "R"},
                      vs=OpenRequest(path="/runs/8", source="s", rollout_id="R", side="A"))
    two = OpenRequest(path="/runs/7", source="s", rollout_id="R", seq=3, back_params={"run_q": "R"},
                      vs=OpenRequest(path="/runs/8", source="s", rollout_id="R", side="A"))
    assert one == two and hash(one) == hash(two)
    placed = dataclasses.replace(one, frame=pd.DataFrame({"source": ["s"]}), row=0)
    assert placed.placed and placed == dataclasses.replace(two, frame=pd.DataFrame({"source": ["t"]}), row=0)
    assert one != dataclasses.replace(two, seq=4)
    assert one != dataclasses.replace(two, vs=dataclasses.replace(two.vs, side="B"))
