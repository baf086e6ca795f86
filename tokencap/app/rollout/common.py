"""Shared pieces of the Rollout page's parts: plain-text outcomes and tables, number tiles, the tokenizer.

A helper of ``tokencap/app/rollout/rollout.py`` (not a page): layout and session state only.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import streamlit as st

from tokencap.app.state import Keys
from tokencap.bundled import SAMPLE_DATA
from tokencap.services import rollout_sources as src
from tokencap.views.formatting import md_escape, md_frame
from tokencap.views.rollout import mask as mv

STATE = st.session_state
APP_DIR = str(SAMPLE_DATA.parent)  # the folder holding sample_data/: the checkout, or the installed package
T = TypeVar("T")
FIGURES_KEPT = 12
"""How many built figures a session keeps (`figure_of`): those of the views a reader goes back and forth between."""


def outcome(text: str, ok: bool | None, warn: bool = False) -> None:
    body = md_escape(text)
    if warn:
        st.warning(body, icon=":material/warning:")
    elif ok is True:
        st.success(body, icon=":material/check:")
    elif ok is False:
        st.error(body, icon=":material/close:")
    elif text:
        st.info(body)


def show_table(frame: Any) -> None:
    """A small table that wraps instead of clipping (capture strings escaped: st.table renders Markdown)."""
    st.table(md_frame(frame), hide_index=True, border="horizontal")


def sidebar_tokenizer() -> None:
    """The optional tokenizer (decodes the loss-mask window and the link-proof cells)."""
    st.sidebar.file_uploader("Tokenizer (optional)", type=["json"], key=Keys.TOKENIZER,
                             help="A Hugging Face `tokenizers` file (tokenizer.json); token ids are then shown as "
                                  "text in the loss mask window and the parent-link proof.")
    upload = STATE.get(Keys.TOKENIZER)
    st.sidebar.caption(md_escape(src.tokenizer_words(upload.name if upload is not None else None,
                                                     STATE.get(Keys.DEFAULT_TOKENIZER), APP_DIR)))


def sidebar_tokenizer_state() -> tuple[Any | None, str | None]:
    """(tokenizer, problem): the sidebar's upload, else the page's default (`tokencap app --tokenizer PATH`,
    or the bundled sample tokenizer for the sample data: ``STATE["default_tokenizer"]``); (None, None)
    when there is none."""
    tokenizer, problem, _ = tokenizer_in_use()
    return tokenizer, problem


def tokenizer_in_use() -> tuple[Any | None, str | None, str]:
    """(tokenizer, problem, key): ``key`` names the tokenizer's content (empty without one)."""
    upload = STATE.get(Keys.TOKENIZER)
    if upload is not None:
        key = src.content_key(upload.getvalue())
        return (*cached_tokenizer(key, upload.getvalue()), key)
    path = STATE.get(Keys.DEFAULT_TOKENIZER)
    if not path:
        return None, None, ""
    try:
        data = open(path, "rb").read()
    except OSError as exc:
        return None, f"{path}: cannot be read ({exc.strerror or exc})", ""
    key = src.content_key(data)
    return (*cached_tokenizer(key, data), key)


@st.cache_resource(show_spinner=False, max_entries=4)
def cached_tokenizer(key: str, _data: bytes) -> tuple[Any | None, str | None]:
    return mv.load_tokenizer(_data)


def pick_call(rk: str, key: str) -> None:
    """The reader picked call ``key`` of rollout ``rk`` (a node, a culprit, the picker, the search, a link's
    ``call=``): it is selected, and its detail shows (a rollout opens with a call selected, not picked)."""
    STATE[Keys.SELECTED][rk] = key
    STATE[Keys.DETAIL_OF][rk] = key


def show_tiles(tiles: list[tuple[str, str, str, bool]], key: str) -> None:
    """Numbers as one line of small tiles that size to their content (a number is never cut)."""
    with st.container(horizontal=True, gap="small", key=key):
        for label, value, help_text, alert in tiles:
            shown = f":red[**{md_escape(value)}**]" if alert else f"**{md_escape(value)}**"
            st.markdown(f"{md_escape(label)} {shown}", help=help_text or None, width="content")


def figure_of(kind: str, view: Any, key: Hashable, build: Callable[[], T]) -> T:
    """The figure ``kind`` of ``view`` (a rollout under an anchor, as built for this page) and ``key``
    (whatever else it is drawn from: the selected call, the window, the tokenizer), built once and kept
    for the session's last `FIGURES_KEPT` figures: a rerun that draws the same figure (a click elsewhere
    in the tab, a tab visited again, Previous back to a rollout) does not build it again.
    An entry keeps a weak reference to its view: it never holds a view alive (a big rollout's memory goes
    with the view's cache entry), and an id that a dead view left to another finds no figure."""
    kept = STATE.get(Keys.FIGURES)
    if kept is None:
        kept = STATE[Keys.FIGURES] = OrderedDict()
    name = (kind, id(view), key)
    entry = kept.get(name)
    if entry is not None and entry[0]() is view:
        kept.move_to_end(name)
        return entry[1]
    figure = build()
    kept[name] = (weakref.ref(view), figure)
    kept.move_to_end(name)
    while len(kept) > FIGURES_KEPT:
        kept.popitem(last=False)
    return figure
