"""Shareable views: the Rollout page's state as URL query parameters, and back.

The page keeps what a reader needs to see the same thing again in the URL:

==========  =====================================================================
``src``     where the rollouts came from: ``sample:NAME`` for a bundled sample, or
            a path (a file or a capture-store directory) on the app's machine.
            Uploaded files have no place in a URL: the key is left out.
``rollout`` the rollout id
``call``    the selected node: a call id, or ``refusal:ID`` / ``ghost:ID``
``tab``     ``tree``, ``mask``, ``verdicts``, ``export`` or ``compare``
``anchor``  the terminal call the build is anchored on
``mask``    the loss-mask window: ``CHAIN:START:WINDOW`` (chain id, first position, tokens)
``vs_src``  another capture to compare with (a path or ``sample:NAME``, as ``src``):
            the page loads it beside ``src`` and opens the Compare tab on the two
``vs_rollout`` that capture's rollout id (another run's id for the same task, say)
==========  =====================================================================

Other pages own other keys (the Run page uses ``run_*``); this module only ever reads or
writes its own (`KEYS`). Parsing never raises: a value that does not parse is dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from urllib.parse import urlencode

from .model import CALL, GHOST, REFUSAL, node_key, split_key

KEYS = ("src", "rollout", "call", "tab", "anchor", "mask", "vs_src", "vs_rollout")
"""The query parameters the Rollout page owns."""

SAMPLE_PREFIX = "sample:"

TAB_SLUGS = {"Call tree": "tree", "Loss mask": "mask", "Verdicts": "verdicts", "Export": "export",
             "Compare": "compare"}
TAB_NAMES = {slug: name for name, slug in TAB_SLUGS.items()}


@dataclass(frozen=True)
class MaskWindow:
    chain: str
    start: int
    window: int

    def encode(self) -> str:
        return f"{self.chain}:{self.start}:{self.window}"

    @classmethod
    def decode(cls, text: str) -> MaskWindow | None:
        parts = text.rsplit(":", 2)
        if len(parts) != 3 or not parts[0]:
            return None
        try:
            start, window = int(parts[1]), int(parts[2])
        except ValueError:
            return None
        if start < 0 or window <= 0:
            return None
        return cls(parts[0], start, window)


def _sample_name(src: str | None) -> str | None:
    return src[len(SAMPLE_PREFIX):] if src and src.startswith(SAMPLE_PREFIX) else None


def _path(src: str | None) -> str | None:
    return src if src and not src.startswith(SAMPLE_PREFIX) else None


@dataclass(frozen=True)
class ViewState:
    """What the Rollout page shows, as far as a URL can say it."""

    src: str | None = None
    rollout: str | None = None
    call: str | None = None        # a node key (call:ID, refusal:ID, ghost:ID)
    tab: str | None = None         # a tab name ("Call tree", ...)
    anchor: str | None = None
    mask: MaskWindow | None = None
    vs_src: str | None = None      # the other capture of a comparison (a path or sample:NAME)
    vs_rollout: str | None = None

    @property
    def vs_sample(self) -> str | None:
        """The bundled sample's name when ``vs_src`` names one."""
        return _sample_name(self.vs_src)

    @property
    def vs_path(self) -> str | None:
        """The path ``vs_src`` names, when it is not a sample."""
        return _path(self.vs_src)

    @property
    def sample(self) -> str | None:
        """The bundled sample's name when ``src`` names one."""
        return _sample_name(self.src)

    @property
    def path(self) -> str | None:
        """The path ``src`` names, when it is not a sample."""
        return _path(self.src)

    def with_(self, **changes: object) -> ViewState:
        return replace(self, **changes)  # type: ignore[arg-type]


def encode_call(key: str) -> str:
    """A node key as the ``call`` parameter: a call's bare id, else ``kind:ID``."""
    kind, ident = split_key(key)
    return ident if kind == CALL else key


def decode_call(text: str, known: Mapping[str, object] | None = None) -> str:
    """The node key a ``call`` parameter names. ``refusal:X``/``ghost:X`` name those nodes unless
    ``known`` (the tree's keys) has no such node but a call with that very id."""
    kind, ident = split_key(text)
    if kind in (REFUSAL, GHOST) and ident:
        key = node_key(kind, ident)
        if known is None or key in known or node_key(CALL, text) not in known:
            return key
    return node_key(CALL, text)


def _value(params: Mapping[str, object], key: str) -> str | None:
    value = params.get(key)
    if isinstance(value, (list, tuple)):
        value = value[-1] if value else None
    if not isinstance(value, str) or not value or len(value) > 4096:
        return None
    return value


def parse(params: Mapping[str, object]) -> ViewState:
    """The view a URL's query parameters describe (unknown or malformed values are dropped)."""
    tab = _value(params, "tab")
    mask = _value(params, "mask")
    call = _value(params, "call")
    return ViewState(
        src=_value(params, "src"),
        rollout=_value(params, "rollout"),
        call=decode_call(call) if call else None,
        tab=TAB_NAMES.get(tab) if tab else None,
        anchor=_value(params, "anchor"),
        mask=MaskWindow.decode(mask) if mask else None,
        vs_src=_value(params, "vs_src"),
        vs_rollout=_value(params, "vs_rollout"),
    )


def to_params(state: ViewState) -> dict[str, str]:
    """The query parameters for ``state`` (only this page's keys, only the ones that are set)."""
    out: dict[str, str] = {}
    if state.src:
        out["src"] = state.src
    if state.rollout:
        out["rollout"] = state.rollout
    if state.call:
        out["call"] = encode_call(state.call)
    if state.tab and state.tab in TAB_SLUGS:
        out["tab"] = TAB_SLUGS[state.tab]
    if state.anchor:
        out["anchor"] = state.anchor
    if state.mask is not None:
        out["mask"] = state.mask.encode()
    if state.vs_src:
        out["vs_src"] = state.vs_src
    if state.vs_rollout:
        out["vs_rollout"] = state.vs_rollout
    return out


def ours(params: Mapping[str, object]) -> dict[str, str]:
    """This page's keys of a query-parameter mapping, as plain strings."""
    out = {}
    for key in KEYS:
        value = _value(params, key)
        if value is not None:
            out[key] = value
    return out


def sample_src(name: str) -> str:
    return f"{SAMPLE_PREFIX}{name}"


def share_url(base: str | None, state: ViewState) -> str:
    """The link to ``state``: the page's URL with its query parameters."""
    query = urlencode(to_params(state))
    root = (base or "").split("?", 1)[0]
    return f"{root}?{query}" if query else root


def open_rollout_params(src: str, rollout: str | None = None, call: str | None = None, tab: str | None = None,
                        anchor: str | None = None, vs_src: str | None = None,
                        vs_rollout: str | None = None) -> dict[str, str]:
    """Query parameters that open rollout ``rollout`` of source ``src`` on the Rollout page.

    ``src`` is a path (file or capture-store directory) or ``sample:NAME``; ``call`` a call
    id; ``tab`` a tab name or slug. For another page: ``st.switch_page(ROLLOUT_PAGE,
    query_params=open_rollout_params(path, rollout_id))``. With ``vs_src`` (and
    ``vs_rollout``), the page loads that capture too and opens the Compare tab on the two
    (unless ``tab`` says otherwise).
    """
    name = TAB_NAMES.get(tab, tab) if tab else ("Compare" if vs_src else None)
    return to_params(ViewState(src=src, rollout=rollout, call=node_key(CALL, call) if call else None,
                               tab=name, anchor=anchor, vs_src=vs_src, vs_rollout=vs_rollout))
