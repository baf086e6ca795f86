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
``part``    a rollout of a run: the run's row ``source`` inside the run ``src`` names
            (a file, or a store rollout ``sub/R.tokens.*``). Only those files are opened,
            as the Run page opens the row; ``src`` is then the run's directory (or file),
            or ``sample:run`` for the bundled sample run.
``records`` with ``part``: the rollout records (a path) the run was scanned with, so a reload
            or a link builds the rollout as its row did (a final answer off the delivered
            chain masks it); left out for the bundled sample run's own records.
``vs_part``, ``vs_records`` the same for the capture ``vs_src`` names (another run's rollout: a
            comparison's joined row opened on the Rollout page)
``side``    with ``part`` and a ``vs_src``: which run of the comparison ``src`` is (``A`` or
            ``B``), so the Compare tab keeps run A on the left
==========  =====================================================================

Other pages own other keys (the Run page uses ``run_*``); this module only ever reads or
writes its own (`KEYS`). Parsing never raises: a value that does not parse is dropped.

`UrlHistory` tells a URL from outside (a first load, a reload, a shared link, another
page's `st.switch_page`) from a late echo of the page's own earlier URL. The browser's
query string reaches the server with every rerun, and a rerun can leave the browser
before the page's last URL update arrived there (a busy machine makes this common).
Such a query string is not a request: applying it would undo what the user just did
(a tab switched back, a selection lost). `with_ours` gives the whole new query string,
so the page writes it in one update and the browser never holds a half-written one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from urllib.parse import urlencode

from .model import CALL, GHOST, REFUSAL, node_key, split_key

KEYS = ("src", "part", "records", "rollout", "call", "tab", "anchor", "mask", "vs_src", "vs_rollout", "vs_part",
        "vs_records", "side")
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
    part: str | None = None        # a run's row source inside the run ``src`` names
    records: str | None = None     # with ``part``: the rollout records the run was scanned with (a path)
    vs_part: str | None = None     # a run's row source inside the run ``vs_src`` names
    vs_records: str | None = None  # with ``vs_part``: that run's rollout records
    side: str | None = None        # "A" / "B": which run of a comparison ``src`` is

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
        part=_value(params, "part"),
        records=_value(params, "records"),
        vs_part=_value(params, "vs_part"),
        vs_records=_value(params, "vs_records"),
        side=_value(params, "side") if _value(params, "side") in ("A", "B") else None,
    )


def to_params(state: ViewState) -> dict[str, str]:
    """The query parameters for ``state`` (only this page's keys, only the ones that are set)."""
    out: dict[str, str] = {}
    if state.src:
        out["src"] = state.src
    if state.part:
        out["part"] = state.part
        if state.records:
            out["records"] = state.records
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
    if state.vs_src and state.vs_part:
        out["vs_part"] = state.vs_part
        if state.vs_records:
            out["vs_records"] = state.vs_records
    if state.part and state.vs_src and state.side in ("A", "B"):
        out["side"] = state.side
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


def share_url(base: str | None, state: ViewState, others: Mapping[str, str] | None = None) -> str:
    """The link to ``state``: the page's URL with its query parameters, and ``others`` (another page's keys
    the view depends on: the Run page's filters, which place a run's rollout in its table)."""
    query = urlencode({**{k: v for k, v in (others or {}).items() if k not in KEYS}, **to_params(state)})
    root = (base or "").split("?", 1)[0]
    return f"{root}?{query}" if query else root


def open_rollout_params(src: str, rollout: str | None = None, call: str | None = None, tab: str | None = None,
                        anchor: str | None = None, vs_src: str | None = None,
                        vs_rollout: str | None = None, part: str | None = None) -> dict[str, str]:
    """Query parameters that open rollout ``rollout`` of source ``src`` on the Rollout page.

    ``src`` is a path (file or capture-store directory) or ``sample:NAME``; ``call`` a call
    id; ``tab`` a tab name or slug. For another page: ``st.switch_page(ROLLOUT_PAGE,
    query_params=open_rollout_params(path, rollout_id))``. With ``vs_src`` (and
    ``vs_rollout``), the page loads that capture too and opens the Compare tab on the two
    (unless ``tab`` says otherwise). ``part`` is a run row's ``source`` when ``src`` is a run.
    """
    name = TAB_NAMES.get(tab, tab) if tab else ("Compare" if vs_src else None)
    return to_params(ViewState(src=src, rollout=rollout, call=node_key(CALL, call) if call else None,
                               tab=name, anchor=anchor, vs_src=vs_src, vs_rollout=vs_rollout,
                               part=part))


Query = tuple[tuple[str, str], ...]
"""This page's query parameters in a comparable, hashable form."""


def query_of(params: Mapping[str, str]) -> Query:
    return tuple(sorted(params.items()))


@dataclass
class UrlHistory:
    """The query strings (this page's keys) the page has applied or written in one session.

    A rerun's query string that is one of them is the browser echoing an earlier state of
    the page, never a request; anything else came from outside and is applied. Only the
    last ``limit`` are kept: an echo is at most a few reruns old.
    """

    limit: int = 64
    known: list[Query] = field(default_factory=list)

    def is_new(self, params: Mapping[str, str]) -> bool:
        """Whether these parameters (this page's keys) ask for a view the page has not had."""
        return query_of(params) not in self.known

    def remember(self, params: Mapping[str, str]) -> None:
        query = query_of(params)
        if query in self.known:
            self.known.remove(query)
        self.known.append(query)
        del self.known[:-self.limit]


def with_ours(current: Mapping[str, list[str]], params: Mapping[str, str]) -> dict[str, list[str]]:
    """The whole query string with this page's keys replaced by ``params`` (other pages' keys kept,
    in their order); ``current`` maps every key to all its values."""
    out = {key: list(values) for key, values in current.items() if key not in KEYS}
    out.update({key: [value] for key, value in params.items()})
    return out


