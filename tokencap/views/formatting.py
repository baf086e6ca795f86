"""Turning values into text for the page: escaping, numbers, times.

Everything a capture holds is untrusted text: call ids, rollout ids, model names, output
items, error messages quoting a record. The app shows such strings through plain-text
elements (``st.text``, ``st.code``, ``st.json``, data frames). Where one must sit inside
text that Streamlit renders as Markdown (an error box, a heading), it goes through the escape
here first, so it always reads as the literal characters it holds. Charts are Vega-Lite: their
texts are SVG text and their tooltips are escaped by vega-tooltip, so a chart's text is only
made one line (`one_line`), never read as HTML.
"""

from __future__ import annotations

import datetime
import json
import math
import string
from typing import Any

_MD_SPECIAL = frozenset(string.punctuation)


def md_escape(value: object) -> str:
    """``value`` as Markdown that renders as exactly its characters.

    CommonMark allows a backslash before any ASCII punctuation character and then renders
    that character literally, so escaping all of them disables every construct that
    could turn data into markup: links, images, emphasis, HTML, code spans, tables, math
    (``$``) and Streamlit's ``:color[...]`` directives. Line breaks become spaces, so a
    value never opens a block (heading, list, quote).
    """
    text = " ".join(str(value).split()) if value is not None else ""
    return "".join("\\" + ch if ch in _MD_SPECIAL else ch for ch in text)


def one_line(value: object, limit: int | None = None) -> str:
    """``value`` for a chart's text or tooltip (Vega-Lite draws SVG text and vega-tooltip escapes it, so it
    is never read as HTML): one line, optionally cut with an ellipsis."""
    text = " ".join(str(value).split()) if value is not None else ""
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def shorten(value: object, limit: int = 80) -> str:
    text = " ".join(str(value).split()) if value is not None else ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def count(n: int, word: str, plural: str | None = None) -> str:
    """``n`` things, the word in the plural unless there is one: "1 token", "2 tokens", "1,024 rollouts"."""
    return f"{n:,} {word if n == 1 else plural or word + 's'}"


def fmt_int(n: int | float | None) -> str:
    if n is None:
        return "–"
    return f"{int(n):,}"


def fmt_fraction(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:.0%}" if x in (0, 1) else f"{x:.1%}"


def fmt_bytes(n: int) -> str:
    """Decimal units, as browsers and Streamlit's uploader show file sizes."""
    value = float(n)
    for unit in ("B", "KB", "MB"):
        if value < 1000:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"


def fmt_time(created_at: float, origin: float | None = None) -> str:
    """A capture time (Unix seconds) as a readable UTC time, with its offset from the rollout's first call
    when known; a value that is no time (not finite, out of range) is shown as the number it is."""
    try:
        moment = datetime.datetime.fromtimestamp(float(created_at), tz=datetime.UTC)
        when = moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d} UTC"
    except (OverflowError, OSError, ValueError, TypeError):
        when = str(created_at)
    if origin is None:
        return when
    return f"{when} (t+{created_at - origin:.3f} s)"


def json_text(value: Any, digits: int | None = None) -> str:
    """A value as JSON shows it (``false``, ``null``, ``{"parent_unresolved": 2}``), as `tokencap build`
    writes it: never Python's ``False``, ``None`` or ``{'a': 1}``; floats to ``digits`` significant
    digits when given. An empty object or list reads as "none"."""
    if digits is not None and isinstance(value, float) and math.isfinite(value):
        return f"{value:.{digits}g}"
    if isinstance(value, (dict, list, tuple)) and not value:
        return "none"
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)


def safe_file_stem(value: str, fallback: str = "rollout") -> str:
    """A file-name stem from a rollout id: letters, digits, ``-_.`` only, never empty or hidden."""
    stem = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in value).strip("._")
    return stem[:120] or fallback


def md_frame(frame: Any) -> Any:
    """A copy of a pandas frame for a Markdown-rendering table (``st.table``): every cell and column name
    as `md_escape`d text, so capture strings show as their characters. Missing values show as "–"."""
    import pandas as pd

    out = frame.map(lambda v: "–" if v is None or (isinstance(v, float) and math.isnan(v)) else md_escape(v))
    out.columns = [md_escape(c) for c in frame.columns]
    return pd.DataFrame(out)
