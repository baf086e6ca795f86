"""The call tree's charts, its tables and a call's detail are exactly what they were, byte for byte.

Each case draws a rollout's tree (with its breaks, a selection, and the variants the page draws:
whole, without labels or legend, a window of rows, a canvas for a long rollout, the overview) and
reads its tables (`TreeModel.frame`, `nodes_frame`, each node's label and hover) and every node's
detail (`call_detail`). The canonical JSON of all of it is hashed per case: moving code between
modules, renaming or splitting functions must leave every hash unchanged. A change someone means
to make (a new mark, other words) updates the hash here, in the same commit, on purpose.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from helpers_diagnosis import compaction_and_subagent
from synth_snapshots import kitchen_sink, long_linear

from tokencap import load_final_responses, load_snapshots
from tokencap.services import rollout_sources as src
from tokencap.views.model import RolloutView
from tokencap.views.rollout import breaks as bv
from tokencap.views.rollout import detail as dv
from tokencap.views.rollout import tree as tv

SAMPLES = Path(__file__).resolve().parent.parent / "sample_data"
ROLLOUTS = ("clean_multiturn_tools.json", "subagent_branch.json", "engine_refusal_ended.json",
            "engine_refusal_recovered.json", "empty_generation_parent_recovered.json", "broken_delta_chain.json",
            "corrupt_record.json", "duplicate_call_id.json", "legacy_missing_resolution.json")
WITH_FINAL_ANSWER = ("ambiguous_final_answer.json", "final_answer_by_content.json", "compaction_observed.json")
"""Rollouts read with the harness's final answer (attributed, ambiguous, after the terminal call)."""
CASES = [*ROLLOUTS, *WITH_FINAL_ANSWER, "an interrupted capture store", "a compaction and a sub-agent",
         "kitchen sink", "1,100 calls"]


def _plain(value: Any) -> Any:
    """``value`` as JSON-able data: frames as their records, dataclasses as their fields."""
    if isinstance(value, pd.DataFrame):
        return json.loads(value.to_json(orient="split", date_format="iso"))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _digest(value: Any) -> str:
    text = json.dumps(_plain(value), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _view(name: str) -> RolloutView:
    if name == "kitchen sink":
        return RolloutView(kitchen_sink().snapshot())
    if name == "1,100 calls":
        return RolloutView(long_linear(1100, retry_every=7, branch_every=40).snapshot())
    if name == "a compaction and a sub-agent":
        return compaction_and_subagent()
    if name == "an interrupted capture store":
        store = SAMPLES / "capture_store" / "store-interrupted.tokens.jsonl"
        return RolloutView(src.load_source(src.source_from_path(str(store))).snapshots[0])
    if name in WITH_FINAL_ANSWER:
        snapshot = load_snapshots(SAMPLES / name)[0]
        final = load_final_responses(SAMPLES / "final_responses" / name).for_rollout(snapshot.rollout_id,
                                                                                   single_rollout=True)
        return RolloutView(snapshot, final_response=final)
    return RolloutView(src.load_source(src.source_from_path(str(SAMPLES / name))).snapshots[0])


def _parts(view: RolloutView) -> dict[str, Any]:
    """Everything the Call tree tab draws and lists for ``view``, by part."""
    model = tv.tree_of(view, bv.breaks_of(view, None, "k"), "k")
    selected = model.default_key
    last = max(len(model), 1)
    parts: dict[str, Any] = {
        "tree": tv.tree_chart(model, selected),
        "no labels": tv.tree_chart(model, selected, labels=False, height=400),
        "window": tv.tree_chart(model, selected, window=(max(1, last // 3), max(1, last // 3) + 12), legend=False),
        "plain": tv.tree_chart(tv.build_tree(view), None),
        "model": model.frame(),
        "nodes": tv.nodes_frame(model, view),
        "labels": [model.label(k) for k in model.keys()],
        "hovers": [n.hover for n in model.nodes],
        "runs": [dataclasses.asdict(r) for r in model.runs],
        "edges": {k: v.tolist() for k, v in model.edge_table().items()},
    }
    if len(model):
        parts["overview"] = tv.overview_chart(model, tv.window_around(model, selected))
    if len(model) <= 200:
        parts["detail"] = [dv.call_detail(view, k) for k in model.keys()]
    return parts


def fingerprints(name: str) -> dict[str, str]:
    return {part: _digest(value) for part, value in _parts(_view(name)).items()}


PINNED: dict[str, dict[str, str]] = {
    "clean_multiturn_tools.json": {
        "tree": "3cde5c1cdc798b95", "no labels": "6c6eb39625f0e2dc", "window": "33cd9d48f6f3b845",
        "plain": "ae75c751f3fcc3a3", "model": "ee1b120039c01a54", "nodes": "4141ff7e89a2c2aa",
        "labels": "7bee9262a0e0dbe2", "hovers": "a15bb7657a2501a8", "runs": "f1d9d032d19dfcc1",
        "edges": "9b731668c8aac9a2", "overview": "199942e7a90a9985", "detail": "bf232a44417efe5b"},
    "subagent_branch.json": {
        "tree": "3e62d7d159724e42", "no labels": "1db5dfd48d43f8a3", "window": "0c4ca804e16b1ccd",
        "plain": "0de77db869e37d26", "model": "99c7ce15f989ef25", "nodes": "4dbabecbd2a3b9b0",
        "labels": "0e051b25ffe1f1ca", "hovers": "138b276f24d249da", "runs": "df7ab86dc474d461",
        "edges": "ecf7388fd3b34f9b", "overview": "21ea37c6771bdd3f", "detail": "2cdd96cfbcd976cf"},
    "engine_refusal_ended.json": {
        "tree": "833e9d44031600a8", "no labels": "107cc78759534489", "window": "1fa78a3465ad30ad",
        "plain": "9caa23fe6d514242", "model": "d61bbbafbc8e67fa", "nodes": "7692ebb9b0598ecc",
        "labels": "bd112606ba506b91", "hovers": "71e6e8507597ecdf", "runs": "d9cdb7686b1d2af6",
        "edges": "561612870f8b0457", "overview": "c09d771b8d90490c", "detail": "3278b4da751b38f1"},
    "engine_refusal_recovered.json": {
        "tree": "0eca19d3f4ce25ee", "no labels": "3b8fcf9d6be0dcee", "window": "a6f57017b01d6f29",
        "plain": "2b58bfb525d9744d", "model": "d9cacd861a41a715", "nodes": "73d1316d745a11db",
        "labels": "324460effb8f8826", "hovers": "7531f0c625f0ebf2", "runs": "891364eff5cf3002",
        "edges": "629cb28acc985a22", "overview": "21f5b0f59cf07593", "detail": "765338a38913a864"},
    "empty_generation_parent_recovered.json": {
        "tree": "1e9d233b39cd729f", "no labels": "cf7be768eb61b118", "window": "5bd987a9d58f24d8",
        "plain": "f7c4d19d7a99495b", "model": "f70ecefbadac9cd0", "nodes": "fcc222eb38bba0b9",
        "labels": "2b261de06fc26063", "hovers": "ff7d30c7d143aae0", "runs": "7df774baf65a424f",
        "edges": "48b69bd78d460085", "overview": "5248a67e22b9fefa", "detail": "29239dfe966f1edd"},
    "broken_delta_chain.json": {
        "tree": "e5c6a4222a811fae", "no labels": "95b4601110c559ae", "window": "2cbc666858c2aa76",
        "plain": "29544ffc65438465", "model": "57f127c6dadeb318", "nodes": "97b9d965d85ae8af",
        "labels": "464b3fe043c38126", "hovers": "d43801ec511fef47", "runs": "a334f6df0c3ac90a",
        "edges": "b622868f870a90a0", "overview": "ed902fb9b19d2853", "detail": "a799c5d5cfdc5fb2"},
    "corrupt_record.json": {
        "tree": "7d6857d1eda94065", "no labels": "5dd37fea260faa84", "window": "a3dfb235ebd3b925",
        "plain": "f291b36e03910b63", "model": "3654db1aa439a733", "nodes": "dd1c657f41227da2",
        "labels": "9e35321838ad2369", "hovers": "80d02c270e0c4b1e", "runs": "4bcbe2f81d0bf8e4",
        "edges": "7909e46b99e09f25", "overview": "2a547cfb392fa034", "detail": "e1b327ced65a3937"},
    "duplicate_call_id.json": {
        "tree": "5302d54e7d183db8", "no labels": "6601001f197627e9", "window": "528c664830174242",
        "plain": "eacbcad8118ca5e7", "model": "a1aa58fe98a91b90", "nodes": "a697271cec2e1958",
        "labels": "7029d3f9494f816e", "hovers": "5b6eeff260eb9d18", "runs": "4dff1c3660aab518",
        "edges": "c2d1312e0bd83e56", "overview": "e7fc0674a676a979", "detail": "0dd66dfbdf905156"},
    "legacy_missing_resolution.json": {
        "tree": "0776e0d0c727ebcd", "no labels": "df6d9ed45f350a59", "window": "ba025f4dba0e0407",
        "plain": "6d32d35dd64287ec", "model": "8c909b170e3a8697", "nodes": "c47e9fec1adace76",
        "labels": "03137ca2c21a5949", "hovers": "af4f09a220201007", "runs": "3437da354fcda4d6",
        "edges": "3d25f5f00ecdecaa", "overview": "b606c8b274c27db3", "detail": "a775beb0d28a10f8"},
    "ambiguous_final_answer.json": {
        "tree": "8afd7f6e4688f873", "no labels": "f7f84f1c32195f31", "window": "6bae6725c82b4874",
        "plain": "ecbb3e7b8a2d3962", "model": "44f2c1f1dac73580", "nodes": "90134c7a60f9c18e",
        "labels": "647fa595b9bf6578", "hovers": "b4f627e66e391128", "runs": "f1d9d032d19dfcc1",
        "edges": "9b731668c8aac9a2", "overview": "199942e7a90a9985", "detail": "6bf71a7e4ee48ef9"},
    "final_answer_by_content.json": {
        "tree": "219f52a27fa936e9", "no labels": "263d1e2fb36b578b", "window": "201edc7873e47332",
        "plain": "7e25f1d79b408ce5", "model": "7810e62d52a7096f", "nodes": "c880bdf6d4f72e92",
        "labels": "65b18022eeedb0df", "hovers": "5807b54f28007fac", "runs": "9baf1d9696620edf",
        "edges": "3db8bd9240328705", "overview": "4331d7244f731c40", "detail": "c61dbbbecebd0886"},
    "compaction_observed.json": {
        "tree": "adf10ca1fb82d426", "no labels": "3b577863b17d3a66", "window": "f74364ccfa92fa79",
        "plain": "5e2ed88ec31cd217", "model": "1495b840e0cd6ff6", "nodes": "0b8cd30b83bfc164",
        "labels": "8c5130b77235f0e6", "hovers": "0451b059d777536e", "runs": "31223a63a0ffef9d",
        "edges": "ec30eb7d23f0814f", "overview": "8f276c2d6a392d7b", "detail": "556e12e3cdf6decf"},
    "an interrupted capture store": {
        "tree": "45c6f712cc6c2dbe", "no labels": "7ec01e057120bfd7", "window": "5ef319d83d510ebd",
        "plain": "82eb9c65bdca7f9f", "model": "df4df4504a606a2b", "nodes": "f9195737fca4eea9",
        "labels": "a5388296bd44f5c3", "hovers": "f8e9e15f1212f0e1", "runs": "25b1790a8de6c373",
        "edges": "c2d1312e0bd83e56", "overview": "2accd7f506c2d664", "detail": "803f29065ad46a38"},
    "a compaction and a sub-agent": {
        "tree": "d2825919260e348c", "no labels": "0e580476b4ea1431", "window": "15a042811a04e635",
        "plain": "d125f8f3ab810a8a", "model": "f0f155f1ff43645a", "nodes": "960e4610dbc2f743",
        "labels": "8273e617820ed743", "hovers": "965c79870929e479", "runs": "0e81bd9ec4cb1ec6",
        "edges": "6d8def8a6d4aeee1", "overview": "9cbcadc5088ffa78", "detail": "577644c793fe031a"},
    "kitchen sink": {
        "tree": "0ff7318a244c97f7", "no labels": "169945b60f472fe8", "window": "d7bed0c763792a09",
        "plain": "5a646e952771c925", "model": "1ed2659969cc9853", "nodes": "54897dc0c1131ada",
        "labels": "7b0b4f7aa5148080", "hovers": "692fca91cfcc3348", "runs": "5a09bf285b90b640",
        "edges": "d54376ee3916602d", "overview": "2d72626c5bb9f37c", "detail": "f0a4848fb3abcca6"},
    "1,100 calls": {
        "tree": "c050c0884328ce6a", "no labels": "c050c0884328ce6a", "window": "e991649f22c578a2",
        "plain": "04ce95e999f14982", "model": "23aa76c9c5885d45", "nodes": "b7d3483390f1cecf",
        "labels": "038e3e4078e7566c", "hovers": "6fec6426e60bce7d", "runs": "fb5366ba59f23898",
        "edges": "40a99508d6ad6ce5", "overview": "cb2605e036df413b"},
}


@pytest.mark.parametrize("name", CASES)
def test_the_tree_and_its_tables_are_unchanged(name: str) -> None:
    assert fingerprints(name) == PINNED[name]
