"""The Rollout page, assembled: what the page decides beyond any one page part.

The top of `tokencap.views`: it may use every page part (tree, detail, mask, verdicts,
export) and nothing imports it but the Streamlit page (`app_pages/rollout.py`), which
only lays out what this module and the page parts compute.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import links
from .culprits import first_culprit
from ..model import RolloutView
from ..sources import RolloutRef
from ..text import fmt_bytes
from .tree import tree_of

TABS = ("Call tree", "Loss mask", "Verdicts", "Export", "Compare")
"""The page's tabs, in order."""

PROGRESS_BYTES = 4 << 20
"""Loading more new bytes than this shows a progress box in place of the page."""


def needs_progress(pending_sizes: Sequence[int]) -> bool:
    """Whether loading sources of these sizes (not loaded before) gets a progress box."""
    return bool(pending_sizes) and sum(pending_sizes) >= PROGRESS_BYTES


def loading_label(files: int, size: int) -> str:
    return f"Loading {files} file{'s' if files != 1 else ''} ({fmt_bytes(size)})…"


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


def run_link(request: Mapping[str, Any], sample_dir: str | os.PathLike[str]) -> tuple[str | None, str | None]:
    """``(src, part)`` naming a rollout opened from the Run page (the ``open_rollout`` request) in a URL:
    the run (``sample:NAME`` for a run bundled in ``sample_dir``, else its absolute path) and the
    row's source in it. ``(None, None)`` for a rollout in an uploaded file, which no URL can name."""
    path, source = request.get("path"), request.get("source")
    if request.get("data") is not None or not path or not source:
        return None, None
    root = Path(str(path)).resolve()
    if root.parent == Path(sample_dir).resolve():
        return links.sample_src(root.name), str(source)
    return str(root), str(source)


def run_request_of_link(state: links.ViewState, sample_dir: str | os.PathLike[str], seq: int) -> dict[str, Any]:
    """The ``open_rollout`` request a URL with ``part`` stands for (a reload, a shared link).

    Raises `ValueError` with plain words when the URL names a sample run this app does not
    bundle; the files themselves are checked when the rollout is opened
    (`run.source.source_for_run_rollout`, which never leaves the run's directory).
    """
    if state.sample is not None:
        name = state.sample
        root = Path(sample_dir) / name
        if not name or "/" in name or "\\" in name or name in (".", "..") or not root.is_dir():
            raise ValueError(f"the link names the sample run {name!r}, which this app does not bundle")
        path = str(root)
    else:
        path = str(state.path)
    return {"path": path, "source": state.part, "rollout_id": state.rollout, "seq": seq}


def same_run_rollout(request: Mapping[str, Any] | None, state: links.ViewState,
                     sample_dir: str | os.PathLike[str]) -> bool:
    """Whether ``request`` already opens the rollout the URL names (the page's own URL, after a switch)."""
    if request is None or request.get("rollout_id") != state.rollout:
        return False
    src = state.src if state.sample is not None else str(Path(str(state.path)).resolve())
    return run_link(request, sample_dir) == (src, state.part)
