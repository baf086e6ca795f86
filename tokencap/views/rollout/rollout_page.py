"""The Rollout page, assembled: what the page decides beyond any one page part.

The top of `tokencap.views`: it may use every page part (tree, detail, mask, verdicts,
export) and nothing imports it but the Streamlit page and its parts (`tokencap/app/rollout/*.py`),
which only lay out what this module and the page parts compute: what a link opens, which
capture a comparison pins, the URL of the view shown, and the words of the header, the
triage bar, the sidebar's picker and the progress box.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from ...services.requests import OpenRequest
from ...services.rollout_sources import RolloutRef, Scenario, Source
from .. import links
from ..formatting import fmt_bytes, md_escape
from ..model import RolloutView
from .attribution import none_anchor_label
from .culprits import Culprit, ReasonLine, first_culprit
from .tree import tree_of
from .verdicts import Banner, verdict_label

TABS = ("Call tree", "Loss mask", "Verdicts", "Export", "Compare")
"""The page's tabs, in order."""

PROGRESS_BYTES = 4 << 20
"""Loading more new bytes than this shows a progress box in place of the page."""


def needs_progress(pending_sizes: Sequence[int]) -> bool:
    """Whether loading sources of these sizes (not loaded before) gets a progress box."""
    return bool(pending_sizes) and sum(pending_sizes) >= PROGRESS_BYTES


def loading_label(files: int, size: int) -> str:
    return f"Loading {files} file{'s' if files != 1 else ''} ({fmt_bytes(size)})…"


def parsing_label(name: str, size: int) -> str:
    """The progress bar's text while a file is parsed (Markdown: the name escaped)."""
    return f"parsing {md_escape(name)} ({fmt_bytes(size)})"


def building_label(index: int, count: int, name: str) -> str:
    """The progress bar's text while rollout ``index`` (from 0) of ``count`` in file ``name`` is built."""
    return f"building rollout {index + 1} of {count} in {md_escape(name)}"


def loaded_label(size: int) -> str:
    return f"Loaded {fmt_bytes(size)}"


# --------------------------------------------------------------------------- sources


def uploads_caption(count: int) -> str:
    """What the sidebar says under the uploader while uploaded files are shown."""
    return f"Showing {count} uploaded file{'s' if count > 1 else ''}. Remove them to go back."


def rollout_path(path: str | None) -> str | None:
    """The command-line (or linked) path this page opens: None for a ``.parquet`` scan table, which
    holds no rollout (the Run page reads it)."""
    return None if path is not None and path.lower().endswith(".parquet") else path


def path_problem(path: str, exc: OSError | ValueError) -> str:
    """Why a path cannot be opened, in one line naming it (the system's words for an OS error)."""
    strerror = exc.strerror if isinstance(exc, OSError) else None
    return f"{path}: {strerror}" if strerror else str(exc)


def versus_path(vs_src: str, scenarios: Sequence[Scenario]) -> str | None:
    """The capture a link's ``vs_src`` names: a bundled sample's path, else the path itself."""
    named = links.ViewState(vs_src=vs_src)
    scenario = next((s for s in scenarios if s.name == named.vs_sample), None)
    return str(scenario.path) if scenario is not None else named.vs_path


def rollout_option_label(view: RolloutView, ref: RolloutRef, several_sources: bool) -> str:
    """A rollout in the sidebar's picker: its verdict and id, and its file when several are loaded."""
    where = f"  ({ref.source_name})" if several_sources else ""
    return f"{verdict_label(view.result)} · {ref.rollout_id}{where}"


def handed_over_records(request: OpenRequest, kept: Sequence[tuple[Any, Any] | None]) -> dict[str, str]:
    """The rollout records (path) per source (cache key) of the rollouts the Run page handed over.

    ``kept`` holds, for the request and its ``vs``, the ``(seq, source)`` the page built for it;
    a source built for an earlier opening (another ``seq``) is not this request's and gets none.
    """
    out: dict[str, str] = {}
    for handed, memo in zip((request, request.vs), kept, strict=False):
        records = handed.final_responses if handed is not None else None
        if records and memo is not None and memo[0] == request.seq:
            out[memo[1].cache_key] = str(records)
    return out


def handed_over_refs(refs: Sequence[RolloutRef], request: OpenRequest,
                     vs_key: str | None) -> tuple[RolloutRef | None, RolloutRef | None]:
    """The rollout the Run page handed over (not in the capture compared with) and, when the request
    carries a ``vs``, the capture compared with (the other run's rollout in the ``vs_key`` source)."""
    wanted = next((r for r in refs if r.rollout_id == request.rollout_id and r.source_key != vs_key), None)
    if wanted is None:
        return None, None
    vs_id = request.vs.rollout_id if request.vs is not None else None
    other = next((r for r in refs if r.source_key == vs_key and r.rollout_id == vs_id), None)
    return wanted, other


def in_table_order(refs: Sequence[RolloutRef]) -> list[RolloutRef]:
    """The rollouts as the sidebar's picker lists them: each source's in rollout-id order (sources in the order
    opened), as the Run page's table and `tokencap scan` list a file's rollouts; the page opens on the first."""
    first: dict[str, int] = {}
    for r in refs:
        first.setdefault(r.source_key, len(first))
    return sorted(refs, key=lambda r: (first[r.source_key], r.rollout_id, r.index))


def distinct_capture(source: Source, taken: Iterable[str], run: str | None) -> Source:
    """The capture compared with, as a source of its own even when its files are byte-identical to the
    rollout's (the same rollout in two runs): each is then built with its own run's records, and both
    sides of the Compare tab exist."""
    if source.cache_key not in set(taken):
        return source
    return dataclasses.replace(source, copy=run or "compared with")


def capture_runs(request: OpenRequest | None, keys: Sequence[str | None]) -> dict[str, tuple[str, str]]:
    """Per source (cache key) of the rollout a comparison handed over and of its ``vs``: (side, run name)
    as the Run page names them ("A", "A (run)"). ``keys`` are the two sources' cache keys."""
    out: dict[str, tuple[str, str]] = {}
    for handed, key in zip((request, request.vs if request is not None else None), keys, strict=False):
        if handed is not None and key and handed.side in ("A", "B"):
            out[key] = (str(handed.side), str(handed.run or handed.side))
    return out


def capture_columns(ref: RolloutRef, other: RolloutRef, runs: Mapping[str, tuple[str, str]]) -> bool:
    """Whether the Compare tab shows ``other`` on the left: it is run A's capture and ``ref`` run B's
    (a joined rollout opened on its B side), so A stays A whichever side was opened."""
    return runs.get(ref.source_key, ("A",))[0] == "B" and runs.get(other.source_key, ("B",))[0] == "A"


def capture_column_name(side: str, source_name: str, version: Any, run: str | None) -> str:
    """A Compare-tab column of two captures: the run it comes from (when a comparison of runs handed it
    over), its file and snapshot version."""
    return f"{run} · {source_name} v{version}" if run else f"{side} ({source_name} v{version})"


def identical_files_note(a: Source, b: Source) -> str | None:
    """What the Compare tab says when the two captures' files are byte-identical (None otherwise)."""
    if a.key != b.key:
        return None
    return ("The two captures' files are byte-identical: nothing changed in the files. Any difference below "
            "comes from the rollout records each run was scanned with (the final answer a build is anchored on).")


def export_several(refs: Sequence[RolloutRef], ref: RolloutRef, has_names: bool) -> bool:
    """Whether the Export tab offers "every rollout of this source": the source holds more than this one
    (or is a directory of named files)."""
    return sum(1 for r in refs if r.source_key == ref.source_key) > 1 or has_names


def valid_anchor(base: RolloutView, anchor: str | None) -> str | None:
    """``anchor`` when the unanchored build offers it as a terminal call, else None."""
    return anchor if anchor is not None and anchor in base.anchor_options() else None


def opening_node(view: RolloutView) -> str | None:
    """The node a rollout opens on: a masked rollout's first culprit, else the delivered chain's last call."""
    model = tree_of(view)
    if view.result.mask_sample:
        culprit = first_culprit(view)
        if culprit is not None and culprit in model.index:
            return culprit
    return model.default_key


def selected_node(view: RolloutView, remembered: str | None) -> str | None:
    """The node the tree and the detail panel show: the remembered one while it exists, else the opening one."""
    model = tree_of(view)
    return remembered if remembered in model.index else opening_node(view)


def export_source_label(source_name: str, source_label: str, uploaded: bool) -> str:
    """The SOURCE of the `tokencap build` command shown beside the downloads."""
    return source_name if uploaded else source_label


def ref_for(refs: Sequence[RolloutRef], rollout_id: str | None) -> RolloutRef | None:
    """The first loaded rollout with this id (a link names rollouts by id), or None."""
    if rollout_id is None:
        return None
    return next((r for r in refs if r.rollout_id == rollout_id), None)


def path_src(path: str) -> str:
    """A path as a link's ``src``: absolute, so the link works from any working directory."""
    return os.path.abspath(path)


def export_key(parts: Iterable[str]) -> str:
    """A short stable key for an export of several rollouts (their ids and anchors)."""
    digest = hashlib.sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return f"all:{digest}"


def other_captures(refs: Sequence[RolloutRef], ref: RolloutRef, also: str | None = None) -> list[RolloutRef]:
    """Other loaded captures of the same rollout (another upload, another snapshot version), and the
    capture keyed ``also`` whatever its id (another run's rollout of the same task, handed over by
    the Run page's comparison or a ``vs_rollout`` link)."""
    return [r for r in refs if r.key != ref.key and (r.rollout_id == ref.rollout_id or r.key == also)]


def default_anchor_pair(base: RolloutView, anchor: str | None) -> tuple[str | None, str | None]:
    """What the anchor comparison opens on: no anchor against the page's anchor, else against the
    delivered chain's second-to-last call (the question "what if the harness had stopped one call
    earlier?")."""
    if anchor is not None:
        return None, anchor
    main = base.chain("main")
    calls = main.call_ids if main is not None else []
    return None, (calls[-2] if len(calls) >= 2 else (calls[-1] if calls else None))


# --------------------------------------------------------------------------- a run's rollout in a URL


def run_link(request: OpenRequest, sample_dir: str | os.PathLike[str]) -> tuple[str | None, str | None]:
    """``(src, part)`` naming a rollout opened from the Run page (an `OpenRequest`) in a URL:
    the run (``sample:NAME`` for a run bundled in ``sample_dir``, else its absolute path) and the
    row's source in it. ``(None, None)`` for a rollout in an uploaded file, which no URL can name."""
    path, source = request.path, request.source
    if request.data is not None or not path or not source:
        return None, None
    root = Path(str(path)).resolve()
    if root.parent == Path(sample_dir).resolve():
        return links.sample_src(root.name), str(source)
    return str(root), str(source)


def _bundled_records(sample_dir: str | os.PathLike[str], run: str | os.PathLike[str]) -> Path | None:
    """The bundled run's own rollout records (``sample_data/rollout_records/NAME.jsonl``), as the Run page
    scans it with (`services.run_sources.sample_records`)."""
    records = Path(sample_dir) / "rollout_records" / f"{Path(run).name}.jsonl"
    return records if records.is_file() else None


def run_link_records(request: OpenRequest, sample_dir: str | os.PathLike[str]) -> str | None:
    """The ``records`` a link to a run's rollout names: the rollout records its run was scanned with (an
    absolute path), so a reload or a link builds it as its row did; None when there are none, for the
    bundled sample run's own (a link to ``sample:NAME`` uses them anyway) and for an uploaded rollout."""
    records = request.final_responses
    src, _ = run_link(request, sample_dir)
    if not records or src is None:
        return None
    path = Path(str(records)).resolve()
    bundled = _bundled_records(sample_dir, src[len(links.SAMPLE_PREFIX):]) if src.startswith(links.SAMPLE_PREFIX) \
        else None
    if bundled is not None and path == bundled.resolve():
        return None
    return str(path)


def uploaded_finals_link_note(name: str) -> str:
    """What Copy link says while final responses are uploaded (Markdown): the link cannot carry them."""
    return (f"The uploaded final responses ({md_escape(name)}) can't be in a URL: the link builds this rollout "
            "without them, so its verdict there can differ (a final answer they place off the delivered chain "
            "masks it here). A link to a path builds with them only in an app started as `tokencap app PATH "
            "--final-responses FILE`.")


def run_records_problem(error: str) -> str:
    """The error shown instead of a run's rollout whose rollout records cannot be read (Markdown): its row's
    verdict rests on them (a final answer off the delivered chain masks it), so none is shown without them."""
    return (f"**Could not read the rollout records this rollout's run was scanned with.** {md_escape(error)}. "
            "Its verdict rests on them (a final answer off the delivered chain masks it), so the rollout is not "
            "shown without them: open it from the Run page with records this machine can read, or open its "
            "files by path to inspect the capture alone.")


def versus_link(request: OpenRequest, sample_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The URL's ``vs_*`` (and ``side``) of a rollout handed over with the other run's capture (``vs``), so a
    reload or a shared link opens the same comparison; {} when there is none or it cannot be named."""
    vs = request.vs
    if vs is None:
        return {}
    src, part = run_link(vs, sample_dir)
    if src is None:
        return {}
    return {"vs_src": src, "vs_part": part, "vs_records": run_link_records(vs, sample_dir),
            "vs_rollout": vs.rollout_id, "side": request.side}


def _linked_path(sample: str | None, path: str | None, sample_dir: str | os.PathLike[str]) -> str:
    """The capture a link's ``vs_src`` names: a bundled sample (checked to be one), else the path."""
    if sample is not None:
        root = Path(sample_dir) / sample
        if not sample or "/" in sample or "\\" in sample or sample in (".", "..") or not root.exists():
            raise ValueError(f"the link names the sample run {sample!r}, which this app does not bundle")
        return str(root)
    return str(path)


def run_request_of_link(state: links.ViewState, sample_dir: str | os.PathLike[str], seq: int) -> OpenRequest:
    """The `OpenRequest` a URL with ``part`` stands for (a reload, a shared link).

    Raises `ValueError` with plain words when the URL names a sample run this app does not
    bundle; the files themselves are checked when the rollout is opened
    (`services.run_sources.source_for_run_rollout`, which never leaves the run's directory).
    """
    if state.sample is not None:
        name = state.sample
        root = Path(sample_dir) / name
        if not name or "/" in name or "\\" in name or name in (".", "..") or not root.is_dir():
            raise ValueError(f"the link names the sample run {name!r}, which this app does not bundle")
        path = str(root)
    else:
        path = str(state.path)
    records = state.records or (_bundled_records(sample_dir, path) if state.sample is not None else None)
    # built as its row was: with its run's rollout records
    request = OpenRequest(path=path, source=str(state.part or ""), rollout_id=str(state.rollout or ""), seq=seq,
                          final_responses=str(records) if records else None)
    if state.vs_src:  # the other run's capture of a comparison (or any capture named to compare with)
        vs_path = _linked_path(state.vs_sample, state.vs_path, sample_dir)
        vs_records = state.vs_records or (_bundled_records(sample_dir, vs_path)
                                          if state.vs_sample is not None and state.vs_part else None)
        vs = OpenRequest(path=vs_path, source=state.vs_part or "", rollout_id=str(state.vs_rollout or state.rollout),
                         final_responses=str(vs_records) if vs_records else None)
        if state.side in ("A", "B"):
            other = "B" if state.side == "A" else "A"
            request = dataclasses.replace(request, side=state.side, run=f"{state.side} ({Path(path).name})")
            vs = dataclasses.replace(vs, side=other, run=f"{other} ({Path(vs_path).name})")
        request = dataclasses.replace(request, vs=vs)
    return request


def same_run_rollout(request: OpenRequest | None, state: links.ViewState,
                     sample_dir: str | os.PathLike[str]) -> bool:
    """Whether ``request`` already opens the rollout the URL names (the page's own URL, after a switch)."""
    if request is None or request.rollout_id != state.rollout:
        return False
    src = state.src if state.sample is not None else str(Path(str(state.path)).resolve())
    return run_link(request, sample_dir) == (src, state.part) and run_link_records(request, sample_dir) == (
        str(Path(state.records).resolve()) if state.records else None)


# --------------------------------------------------------------------------- what a link means


LinkTarget = Literal["run rollout", "same run rollout", "sample", "path", "same source"]


def link_target(state: links.ViewState, request: OpenRequest | None,
                sample_dir: str | os.PathLike[str]) -> LinkTarget:
    """What a URL from outside asks the page to open.

    ``"run rollout"``: a rollout of a run (``src`` and ``part``), not the one ``request`` already
    opens (`run_request_of_link` makes its request); ``"same run rollout"``: the one already open;
    ``"sample"`` / ``"path"``: another source (a bundled sample, a path), which closes a run's
    rollout; ``"same source"``: the URL names no source, only a view of the one shown.
    """
    if state.part is not None and state.src is not None:
        return "same run rollout" if same_run_rollout(request, state, sample_dir) else "run rollout"
    if state.sample is not None:
        return "sample"
    if state.path is not None:
        return "path"
    return "same source"


def missing_where(state: links.ViewState) -> str:
    """Where a link said its rollout was: the run's part, else its source."""
    return state.part or state.src or "the source shown"


def missing_rollout_message(rollout_id: str, where: str) -> str:
    """The error shown instead of any rollout when a link names one its source does not hold (Markdown)."""
    return (f"**{md_escape(rollout_id)} is not in {md_escape(where)}.** The link names a rollout this source does "
            "not hold (moved, renamed, or another run), so no rollout is shown in its place.")


def linked_comparison(refs: Sequence[RolloutRef], ref: RolloutRef, vs_rollout: str | None,
                      vs_key: str | None) -> RolloutRef | None:
    """The capture a link's ``vs_src`` compares ``ref`` with: its ``vs_rollout`` (else the same rollout
    id) in the source loaded for ``vs_src``; never ``ref`` itself."""
    wanted = vs_rollout or ref.rollout_id
    return next((r for r in refs if r.source_key == vs_key and r.rollout_id == wanted and r.key != ref.key), None)


def page_view_state(view: RolloutView, rollout_id: str, *, selected: str | None, tab: str | None,
                    mask: links.MaskWindow | None, src: str | None, part: str | None, vs_src: str | None,
                    vs_rollout: str | None, from_run: bool, records: str | None = None,
                    versus: Mapping[str, Any] | None = None) -> links.ViewState:
    """What the page shows, as its URL says it: the node shown (`selected_node`), and a mask window
    only on a chain of this view. A rollout handed over by the Run page names its comparison by the
    request's ``vs`` (``versus``: `versus_link`), never by a ``vs_src`` left from an earlier link."""
    if from_run:
        versus = dict(versus or {})
        vs_src, vs_rollout = versus.pop("vs_src", None), versus.pop("vs_rollout", None)
    else:
        versus = {}
    return links.ViewState(
        **versus, vs_src=vs_src, vs_rollout=vs_rollout if vs_src else None,
        src=src, part=part, records=records if part else None, rollout=rollout_id, call=selected_node(view, selected),
        tab=tab, anchor=view.anchor,
        mask=mask if mask is not None and mask.chain in {c.chain_id for c in view.chains} else None)


# --------------------------------------------------------------------------- the header and the triage bar


CULPRITS_INLINE = 8
"""Culprits shown per mask reason before "+N more"."""


def banner_caption(view: RolloutView, banner: Banner, source_name: str) -> str:
    """The line under the rollout's title (Markdown): its file, snapshot, version and anchor."""
    snap = view.snapshot
    bits = [f"from {md_escape(source_name)}"]
    if snap.snapshot_id:
        bits.append(f"snapshot {md_escape(snap.snapshot_id)}")
    if snap.version:
        bits.append(f"version {snap.version}")
    if banner.anchor is not None and view.anchor is None:
        bits.append(f"anchored on the harness's final answer, {md_escape(banner.anchor)} (override it under Export)")
    elif banner.anchor is not None:
        bits.append(f"anchored on {md_escape(banner.anchor)} (change it under Export)")
    return " · ".join(bits)


def status_markdown(banner: Banner) -> str:
    """The response status beside the verdict's headline (Markdown)."""
    return f"response status **{md_escape(banner.status_line)}**" + (
        f" — {md_escape(banner.status_text)}" if banner.status_text else "")


def reason_markdown(line: ReasonLine) -> str:
    """One mask reason of the banner, its code and words, with a colon when culprits follow (Markdown)."""
    return f"**{md_escape(line.code)}** ({md_escape(line.words)})" + (":" if line.culprits else "")


def split_culprits(culprits: Sequence[Culprit]) -> tuple[list[Culprit], list[Culprit]]:
    """(shown inline, behind "+N more") of one reason's culprits."""
    return list(culprits[:CULPRITS_INLINE]), list(culprits[CULPRITS_INLINE:])


def triage_position(where: str, filtered: bool) -> str:
    """Where the rollout sits in the Run page's table it was opened from (Markdown; ``where`` is
    `RunOrder.where`'s numbers and words, never capture text)."""
    return f"Rollout **{where}** {'in this filter' if filtered else 'in the run'}"


# --------------------------------------------------------------------------- the Export tab


def anchor_option_label(base: RolloutView, call_id: str | None) -> str:
    """An entry of the Export tab's anchor picker: the call and its place in the unanchored build
    (main, branch, quarantined, after terminal; an empty generation; else not chained), or what
    "no manual anchor" means for this rollout."""
    if call_id is None:
        return none_anchor_label(base.result)
    empty = base.build is not None and call_id in base.build.notes.empty_generation_calls
    role = base.roles.get(call_id) or ("empty generation" if empty else "not chained")
    return f"{call_id} · {role.replace('_', ' ')}"


def export_verdict_markdown(banner: Banner) -> str:
    """The verdict the Export tab repeats above the downloads (Markdown), with each mask reason."""
    head = f"**{banner.headline}** · status {md_escape(banner.status_line)}"
    if banner.trainable:
        return head
    reasons = "\n".join(f"- **{code}** — {text}" for code, text in banner.reasons)
    return f"{head}\n\n{reasons}"


def every_rollout_caption(views: Sequence[RolloutView]) -> str:
    """What the "every loaded rollout" download holds."""
    anchored = sum(1 for v in views if v.anchor is not None)
    return (f"{len(views)} rollout{'s' if len(views) != 1 else ''}, one build result per line"
            + (f"; {anchored} with the anchor chosen here" if anchored else "") + ".")
