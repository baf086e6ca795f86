"""Issue 37, item 15: the app's grey text reads at WCAG AA (a contrast ratio of at least 4.5:1).

Captions are drawn at Streamlit's 60% opacity unless the page's CSS (tokencap/app/assets/, its colours from `tokencap.views.style`) gives them a
colour of their own; the grid draws a pinned column (the Run table's rollout ids) at 60% alpha of the
theme's text colour (`.streamlit/config.toml`), a fixed rule of Streamlit's. Both measured ~3.9:1 before.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from helpers_colour import blend, ratio

from tokencap.app import assets
from tokencap.views import style, vega

REPO = Path(__file__).resolve().parent.parent
AA = 4.5


def test_the_ratio_is_wcag_s():
    assert ratio("#000000", "#ffffff") == pytest.approx(21.0)
    assert ratio("#777777", "#ffffff") == pytest.approx(4.48, abs=0.01)
    assert blend("#000000", 0.6, "#ffffff") == "#666666"


def _theme() -> dict:
    return tomllib.loads((REPO / ".streamlit" / "config.toml").read_text())["theme"]


@pytest.mark.parametrize("css", ["rollout_page.css", "run_page.css"])
def test_captions_have_a_colour_of_their_own_at_aa_on_every_background(css):
    text = assets.page_css(css)
    rule = re.search(r'\[data-testid="stCaptionContainer"\][^{]*\{([^}]*)\}', text)
    assert rule, f"{css} gives captions no colour: Streamlit draws them at 60% opacity (~3.9:1)"
    assert f"color: {style.CAPTION}" in rule.group(1) and "opacity: 1" in rule.group(1)
    for bg in (style.BACKGROUND, style.SIDEBAR_BACKGROUND):
        assert ratio(style.CAPTION, bg) >= AA, (style.CAPTION, bg)


def test_the_pinned_rollout_id_column_reads_at_aa():
    theme = _theme()
    assert theme.get("textColor") == style.TEXT and theme.get("backgroundColor") == style.BACKGROUND
    assert theme.get("secondaryBackgroundColor") == style.SIDEBAR_BACKGROUND
    pinned = blend(style.TEXT, style.GRID_FADED_ALPHA, style.BACKGROUND)
    assert ratio(pinned, style.BACKGROUND) >= AA, pinned
    header = blend(style.TEXT, style.GRID_HEADER_ALPHA, style.SIDEBAR_BACKGROUND)  # the grid's header row
    assert ratio(header, style.SIDEBAR_BACKGROUND) >= AA, header


def test_the_charts_grey_words_read_at_aa():
    for colour in (vega.MUTED, vega.INK):
        assert ratio(colour, style.BACKGROUND) >= AA, colour
