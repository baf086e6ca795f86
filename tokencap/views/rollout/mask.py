"""Loss-mask views: a paged token strip, a downsampled overview, per-link table, log-prob chart.

A chain's training sequence can be 100k tokens long, far more than a browser can draw
cell by cell. The strip therefore shows one *window* (1k-4k tokens, wrapped into rows)
at a time, and the overview summarises the whole sequence in at most ``bins`` bins
(fraction of generated positions and mean log-probability per bin) with the window
outlined. Every array operation is vectorised; nothing is per token in Python except the
hover labels of the visible window.

Colours: prompt positions light grey, interstitial (context the harness added: tool
output, user turns) amber, generated positions by log-probability (Viridis: dark is
unlikely, bright is likely). Black ticks mark where each link's interstitial begins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ...builder import Chain
from ...lossmask import GENERATED, INTERSTITIAL, PROMPT, LossMask
from .. import style
from ..figures import as_figure
from ..text import fmt_int, html_text
from ..words import TERMS

WINDOW_SIZES = (1024, 2048, 4096)
DEFAULT_WINDOW = 2048
OVERVIEW_BINS = 600
LOGPROB_POINTS = 4000
KIND_NAMES = {PROMPT: "prompt", INTERSTITIAL: "interstitial", GENERATED: "generated"}


STRIP_LEGEND = (f"Grey: prompt · amber: interstitial ({TERMS['interstitial']}) · coloured: generated (trained, "
                "mask 1), by log-probability · black ticks: a call's context begins.")
"""What the strip's colours mean, shown under it."""

CONTEXT_HELP = f"tokens before the call's generation: the root prompt for link 0, else the interstitial ({TERMS['interstitial']})"


def asked_chain(asked: tuple[str, Any] | None, rollout_key: str, chain_ids: list[str]) -> str | None:
    """The chain a URL's mask window (``(rollout key, MaskWindow)``) asks the Loss mask tab to show:
    only for this rollout, and only a chain it has."""
    if asked is not None and asked[0] == rollout_key and asked[1].chain in chain_ids:
        return asked[1].chain
    return None


def asked_page(asked: tuple[str, Any] | None, rollout_key: str, chain_id: str,
               window: int) -> tuple[int, int] | None:
    """``(window, page)`` a URL's mask window asks for on the chain shown: its window when it is one
    of `WINDOW_SIZES` (else ``window``, the one in use), and the page holding its start."""
    if asked is None or asked[0] != rollout_key or asked[1].chain != chain_id:
        return None
    size = asked[1].window if asked[1].window in WINDOW_SIZES else window
    return size, page_of(asked[1].start, size)


def columns_for(window: int) -> int:
    return 64 if window <= 2048 else 128


def page_count(mask: LossMask, window: int = DEFAULT_WINDOW) -> int:
    return max(1, math.ceil(len(mask) / window))


def page_bounds(mask: LossMask, page: int, window: int = DEFAULT_WINDOW) -> tuple[int, int]:
    """[start, end) of page ``page`` (0-based, clamped)."""
    page = min(max(page, 0), page_count(mask, window) - 1)
    start = page * window
    return start, min(len(mask), start + window)


def page_of(position: int, window: int = DEFAULT_WINDOW) -> int:
    return max(position, 0) // window


@dataclass
class MaskSummary:
    total: int
    prompt: int
    interstitial: int
    generated: int
    links: int
    mean_log_prob: float
    min_log_prob: float

    @property
    def trained_fraction(self) -> float:
        return self.generated / self.total if self.total else 0.0


def mask_summary(mask: LossMask) -> MaskSummary:
    prov = mask.provenance
    gen = mask.log_probs[prov == GENERATED]
    return MaskSummary(
        total=len(mask),
        prompt=int((prov == PROMPT).sum()),
        interstitial=int((prov == INTERSTITIAL).sum()),
        generated=int(mask.mask.sum()),
        links=len(mask.call_ids),
        mean_log_prob=float(gen.mean()) if gen.size else float("nan"),
        min_log_prob=float(gen.min()) if gen.size else float("nan"),
    )


def summary_tiles(summary: MaskSummary) -> list[tuple[str, str, str]]:
    """The loss mask's numbers as (label, value, help) tiles for the compact header of the tab."""
    return [
        ("tokens", fmt_int(summary.total), "positions in this chain's training sequence"),
        ("trained (mask 1)", fmt_int(summary.generated), "generated positions: the only ones the loss sees"),
        ("context (mask 0)", fmt_int(summary.prompt + summary.interstitial),
         f"{fmt_int(summary.prompt)} root prompt + {fmt_int(summary.interstitial)} interstitial "
         f"(interstitial: {TERMS['interstitial']})"),
        ("links", fmt_int(summary.links), "calls on this chain"),
        ("mean log-prob", _fmt_lp(summary.mean_log_prob), f"over generated tokens; min {_fmt_lp(summary.min_log_prob)}"),
    ]


def _fmt_lp(x: float) -> str:
    return "–" if math.isnan(x) else f"{x:.3f}"


def logprob_range(mask: LossMask) -> tuple[float, float]:
    """Colour range for log-probabilities: the 1st percentile (not below -20) up to 0."""
    gen = mask.log_probs[mask.provenance == GENERATED]
    if not gen.size:
        return -5.0, 0.0
    low = float(np.percentile(gen, 1))
    low = max(min(low, -0.5), -20.0)
    return low, 0.0


def link_frame(mask: LossMask, chain: Chain) -> pd.DataFrame:
    """One row per link: where it starts, its context tokens (root prompt for the first link, else the
    interstitial), its generated tokens and their mean and minimum log-probability (lp)."""
    rows = []
    starts = mask.link_starts
    for i, link in enumerate(chain.links):
        gen = link.entry.generation_log_probs
        start = int(starts[i])
        inter = int(link.interstitial.size)
        if i == 0:
            inter_label = int(chain.root_prompt.size)
        rows.append({
            "link": i,
            "call": link.call_id,
            "starts at": start if i else 0,
            "context": inter_label if i == 0 else inter,
            "generated": int(gen.size),
            "mean lp": float(gen.mean()) if gen.size else float("nan"),
            "min lp": float(gen.min()) if gen.size else float("nan"),
            "finish_reason": link.entry.finish_reason if link.entry.finish_reason is not None else "null",
        })
    frame = pd.DataFrame(rows, columns=["link", "call", "starts at", "context", "generated", "mean lp", "min lp",
                                        "finish_reason"])
    return frame


# --------------------------------------------------------------------------- strip


_LOGPROB_COLORSCALE = [list(step) for step in go.Heatmap(colorscale=style.LOGPROB_SCALE).colorscale]
"""The log-prob scale by value, as plotly's validation spells a named scale (the figure is not validated)."""


def _owner_names(mask: LossMask, start: int, end: int) -> np.ndarray:
    owners = np.searchsorted(mask.link_starts, np.arange(start, end), side="right") - 1
    root = f"{html_text(mask.call_ids[0], 60)} (root prompt)" if mask.call_ids else "(root prompt)"
    names = np.array([root] + [html_text(c, 60) for c in mask.call_ids], dtype=object)
    return names[owners + 1]


STRIP_PROMPT, STRIP_INTERSTITIAL, STRIP_GENERATED_FROM = 0.05, 0.15, 0.2
"""Where the strip's one colour scale (0..1) puts each kind of cell: a prompt cell at 0.05 and an
interstitial one at 0.15 (flat bands of their colours, [0, 0.1) and [0.1, 0.2)), a generated one in
[0.2, 1] by its log-probability, from the low end of the range to its top."""


def _on_generated_band(log_probs: np.ndarray, lp_range: tuple[float, float]) -> np.ndarray:
    """Log-probabilities placed on the strip scale's generated band, clipped into ``lp_range``."""
    low, high = lp_range
    share = np.clip((log_probs - low) / ((high - low) or 1.0), 0.0, 1.0)
    return STRIP_GENERATED_FROM + (1.0 - STRIP_GENERATED_FROM) * share


def strip_values(provenance: np.ndarray, log_probs: np.ndarray, lp_range: tuple[float, float]) -> np.ndarray:
    """Each position's value on the strip's colour scale (see `STRIP_PROMPT`), by its provenance and,
    for a generated one, its log-probability clipped into ``lp_range``."""
    generated = _on_generated_band(np.nan_to_num(log_probs, nan=lp_range[0]), lp_range)
    return np.where(provenance == GENERATED, generated,
                    np.where(provenance == INTERSTITIAL, STRIP_INTERSTITIAL, STRIP_PROMPT)).astype(float)


def strip_colorscale() -> list[list]:
    """Grey and amber bands for the context, then the log-prob scale over the generated band."""
    band = STRIP_GENERATED_FROM
    scale = [[0.0, style.PROMPT_COLOR], [0.1, style.PROMPT_COLOR], [0.1, style.INTERSTITIAL_COLOR],
             [band, style.INTERSTITIAL_COLOR]]
    return scale + [[band + (1.0 - band) * float(at), colour] for at, colour in _LOGPROB_COLORSCALE]


def strip_scale_ticks(lp_range: tuple[float, float], count: int = 4) -> tuple[list[float], list[str]]:
    """The colour bar's ticks: the two context bands by name, then ``count`` log-probs of the range."""
    values = np.linspace(*lp_range, count)
    return ([STRIP_PROMPT, STRIP_INTERSTITIAL] + _on_generated_band(values, lp_range).tolist(),
            ["prompt", "interstitial"] + [f"{v:.1f}" if round(v, 1) else "0" for v in values])


def strip_figure(mask: LossMask, start: int = 0, end: int | None = None, *, columns: int | None = None,
                 lp_range: tuple[float, float] | None = None) -> go.Figure:
    """Positions [start, end) as a wrapped grid of cells, one per token."""
    end = len(mask) if end is None else min(end, len(mask))
    start = max(0, min(start, end))
    n = end - start
    cols = columns or columns_for(max(n, 1))
    rows = max(1, math.ceil(n / cols))
    cells = rows * cols
    pad = cells - n

    tokens = mask.token_ids[start:end]
    owners = _owner_names(mask, start, end)
    kinds = np.array(["prompt", "interstitial", "generated"], dtype=object)[mask.provenance[start:end]]
    lp_text = np.where(np.isnan(mask.log_probs[start:end]), "–",
                       np.char.mod("%.4f", np.nan_to_num(mask.log_probs[start:end])))
    # Plain Python values first: formatting a numpy scalar costs ten times a Python one.
    hover = [f"pos {pos:,} · token {token}<br>{kind} · mask {bit} · log-prob {lp}<br>{owner}"
             for pos, token, kind, bit, lp, owner in zip(range(start, end), tokens.tolist(), kinds.tolist(),
                                                         mask.mask[start:end].tolist(), lp_text.tolist(),
                                                         owners.tolist())] + [""] * pad
    hover_grid = np.array(hover, dtype=object).reshape(rows, cols)
    lp_range = lp_range or logprob_range(mask)
    z = np.concatenate((strip_values(mask.provenance[start:end], mask.log_probs[start:end], lp_range),
                        np.full(pad, np.nan)))

    row_labels = [f"{start + r * cols:,}" for r in range(rows)]
    y = list(range(rows))
    # One layer: a second one (the generated cells drawn over the context) cost plotly a second
    # heatmap on each of the strip's plots (~7 of ~54 ms a plot, alone in Chromium) for the same picture.
    tickvals, ticktext = strip_scale_ticks(lp_range)
    traces = [dict(
        type="heatmap", z=z.reshape(rows, cols), x=list(range(cols)), y=y, zmin=0.0, zmax=1.0,
        colorscale=strip_colorscale(),
        colorbar={"title": {"text": "log-prob", "side": "right"}, "thickness": 12, "len": 0.9,
                  "tickmode": "array", "tickvals": tickvals, "ticktext": ticktext},
        hovertext=hover_grid, hovertemplate="%{hovertext}<extra></extra>", hoverongaps=False, xgap=1, ygap=1,
        name="tokens",
    )]
    # Link boundaries: a tick at the left edge of the cell where each link's interstitial begins.
    starts = mask.link_starts
    inside = np.flatnonzero((starts >= start) & (starts < end) & (starts > 0))
    if inside.size:
        offs = starts[inside] - start
        traces.append(dict(
            type="scatter", x=(offs % cols) - 0.5, y=offs // cols, mode="markers",
            marker={"symbol": "line-ns", "size": 16, "line": {"width": 3, "color": style.LINK_MARK}},
            hovertext=[f"link {int(i)} begins: {html_text(mask.call_ids[int(i)], 60)}" for i in inside],
            hovertemplate="%{hovertext}<extra></extra>", showlegend=False, name="link starts",
        ))
    cell = 15 if cols <= 64 else 11
    layout = dict(
        **style.BASE_LAYOUT,
        height=int(max(170, 60 + rows * cell)),
        margin={"l": 70, "r": 10, "t": 10, "b": 30},
        xaxis={"showgrid": False, "zeroline": False, "tickmode": "array", "tickvals": list(range(0, cols, 8)),
               "title": {"text": "offset in row", "font": {"size": 11}}, "range": [-0.6, cols - 0.4]},
        yaxis={"range": [rows - 0.5, -0.5], "autorange": False, "tickmode": "array", "tickvals": y[:: max(1, rows // 16)],
               "ticktext": row_labels[:: max(1, rows // 16)], "showgrid": False, "zeroline": False,
               "title": {"text": "position", "font": {"size": 11}}},
    )
    return as_figure({"data": traces, "layout": layout})


# --------------------------------------------------------------------------- overview


def binned(mask: LossMask, bins: int = OVERVIEW_BINS) -> pd.DataFrame:
    """The whole sequence in at most ``bins`` bins: start, end, generated fraction, mean log-prob."""
    n = len(mask)
    if n == 0:
        return pd.DataFrame(columns=["start", "end", "generated", "interstitial", "mean_log_prob"])
    bins = max(1, min(bins, n))
    edges = np.linspace(0, n, bins + 1).astype(np.int64)
    edges = np.unique(edges)
    lefts = edges[:-1]
    widths = np.diff(edges)
    gen = mask.provenance == GENERATED
    gen_count = np.add.reduceat(gen.astype(np.int64), lefts)
    inter_count = np.add.reduceat((mask.provenance == INTERSTITIAL).astype(np.int64), lefts)
    lp_sum = np.add.reduceat(np.where(gen, mask.log_probs, 0.0), lefts)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_lp = np.where(gen_count > 0, lp_sum / np.maximum(gen_count, 1), np.nan)
    return pd.DataFrame({"start": lefts, "end": edges[1:], "generated": gen_count / widths,
                         "interstitial": inter_count / widths, "mean_log_prob": mean_lp})


def overview_figure(mask: LossMask, window: tuple[int, int] | None = None, bins: int = OVERVIEW_BINS,
                    max_link_lines: int = 300) -> go.Figure:
    """Generated share and mean log-prob along the whole sequence, the current window outlined."""
    frame = binned(mask, bins)
    mid = ((frame["start"] + frame["end"]) / 2).to_numpy()
    traces: list[dict[str, Any]] = []
    # The shares as two stacked step areas, one path each (bars would be a path per bin, up to
    # 2 x `OVERVIEW_BINS` elements for the browser to draw and lay out at every visit of the tab).
    # A point per bin at its middle, stepping half-way to the next ("hvh"), and the first and last
    # bins repeated at the sequence's two ends, so the areas span it whole and a hover names its bin.
    edge = [0, len(frame) - 1] if len(frame) else []
    xs = np.concatenate(([0.0], mid, [float(len(mask))])) if len(frame) else mid
    order = np.concatenate(([edge[0]], np.arange(len(frame)), [edge[1]])).astype(int) if len(frame) else \
        np.arange(0)
    ends = np.column_stack((frame["start"].to_numpy(), frame["end"].to_numpy() - 1))[order]
    for column, name, colour, what in (("interstitial", "interstitial share", style.INTERSTITIAL_COLOR, "interstitial"),
                                       ("generated", "generated share (trained)", style.MAIN, "generated")):
        traces.append(dict(type="scatter", x=xs, y=frame[column].to_numpy()[order], name=name, mode="lines",
                           stackgroup="share", line={"width": 0, "shape": "hvh", "color": colour}, fillcolor=colour,
                           opacity=1.0 if column == "interstitial" else 0.75, customdata=ends,
                           hovertemplate=f"positions %{{customdata[0]:,}}–%{{customdata[1]:,}}<br>{what} "
                                         "%{y:.0%}<extra></extra>"))
    traces.append(dict(type="scatter", x=mid, y=frame["mean_log_prob"].to_numpy(), name="mean log-prob", yaxis="y2",
                       mode="lines", line={"color": "#111827", "width": 1.2}, connectgaps=False,
                       hovertemplate="mean log-prob %{y:.3f}<extra></extra>"))
    shapes: list[dict[str, Any]] = []
    if window is not None and len(mask) and (window[0] > 0 or window[1] < len(mask)):
        shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": window[0], "x1": window[1],
                       "y0": 0, "y1": 1, "line": {"color": "#dc2626", "width": 2}, "fillcolor": "rgba(220,38,38,0.06)"})
    starts = mask.link_starts
    if 1 < starts.size <= max_link_lines:
        # The link boundaries as one trace of vertical segments (gaps between them), not a shape each:
        # plotly draws and re-lays out every shape on its own, a few hundred cost a tenth of a second.
        xs = np.repeat(starts[1:].astype(float), 3)
        xs[2::3] = np.nan
        ys = np.tile([0.0, 1.0, np.nan], starts.size - 1)
        traces.append(dict(type="scatter", x=xs, y=ys, mode="lines", name="link starts", showlegend=False,
                           hoverinfo="skip", line={"color": "rgba(17,24,39,0.25)", "width": 1}, connectgaps=False))
    layout = dict(
        **style.BASE_LAYOUT,
        height=210, shapes=shapes,
        margin={"l": 50, "r": 50, "t": 34, "b": 35},
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0, "font": {"size": 11}},
        xaxis={"title": {"text": "position in the training sequence", "font": {"size": 11}},
               "range": [0, max(len(mask), 1)], "showgrid": False},
        yaxis={"title": {"text": "share", "font": {"size": 11}}, "range": [0, 1], "tickformat": ".0%",
               "showgrid": False},
        yaxis2={"overlaying": "y", "side": "right", "title": {"text": "log-prob", "font": {"size": 11}},
                "showgrid": False},
        hovermode="x",
    )
    return as_figure({"data": traces, "layout": layout})


# --------------------------------------------------------------------------- log-prob chart


def logprob_series(mask: LossMask, max_points: int = LOGPROB_POINTS) -> pd.DataFrame:
    """Log-probs of generated positions; above ``max_points``, per-bin mean and min (min keeps dips visible)."""
    pos = np.flatnonzero(mask.provenance == GENERATED)
    lps = mask.log_probs[pos]
    if pos.size <= max_points:
        # A gap (NaN row) wherever context interrupts the generated positions, so the line
        # does not join one call's generation to the next across the interstitial.
        breaks = np.flatnonzero(np.diff(pos) > 1) + 1
        pos_f = np.insert(pos.astype(float), breaks, np.nan)
        lps_f = np.insert(lps, breaks, np.nan)
        return pd.DataFrame({"position": pos_f, "log_prob": lps_f, "min_log_prob": lps_f})
    bins = max_points // 2
    edges = np.unique(np.linspace(0, pos.size, bins + 1).astype(np.int64))
    lefts = edges[:-1]
    counts = np.diff(edges)
    mean = np.add.reduceat(lps, lefts) / counts
    low = np.minimum.reduceat(lps, lefts)
    return pd.DataFrame({"position": pos[lefts], "log_prob": mean, "min_log_prob": low})


def logprob_figure(mask: LossMask, window: tuple[int, int] | None = None,
                   max_points: int = LOGPROB_POINTS) -> go.Figure:
    series = logprob_series(mask, max_points)
    downsampled = int(series["log_prob"].notna().sum()) < int(mask.mask.sum())
    traces: list[dict[str, Any]] = []
    if downsampled:
        traces.append(dict(type="scatter", x=series["position"].to_numpy(), y=series["min_log_prob"].to_numpy(),
                           mode="lines", name="min per bin", line={"color": "rgba(220,38,38,0.45)", "width": 1},
                           hovertemplate="pos %{x:,}<br>min log-prob %{y:.3f}<extra></extra>"))
    traces.append(dict(type="scatter", x=series["position"].to_numpy(), y=series["log_prob"].to_numpy(),
                       mode="lines+markers" if len(series) < 400 else "lines",
                       name="mean per bin" if downsampled else "log-prob",
                       line={"color": style.MAIN, "width": 1.3}, marker={"size": 3}, connectgaps=False,
                       hovertemplate="pos %{x:,}<br>log-prob %{y:.4f}<extra></extra>"))
    shapes = []
    if window is not None and (window[0] > 0 or window[1] < len(mask)):
        shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": window[0], "x1": window[1], "y0": 0,
                       "y1": 1, "line": {"width": 0}, "fillcolor": "rgba(220,38,38,0.07)"})
    layout = dict(
        **style.BASE_LAYOUT,
        height=240, shapes=shapes, margin={"l": 55, "r": 10, "t": 10, "b": 35},
        showlegend=downsampled, legend={"orientation": "h", "y": 1.15, "x": 0},
        xaxis={"title": {"text": "position (generated tokens only)", "font": {"size": 11}}, "range": [0, max(len(mask), 1)],
               "gridcolor": "#f1f5f9"},
        yaxis={"title": {"text": "log-prob", "font": {"size": 11}}, "gridcolor": "#f1f5f9"},
        hovermode="closest",
    )
    return as_figure({"data": traces, "layout": layout})


# --------------------------------------------------------------------------- decoded text


def segments(mask: LossMask, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """Runs of one provenance within one link in [start, end): (start, end, provenance, owner index)."""
    end = min(end, len(mask))
    if end <= start:
        return []
    prov = mask.provenance[start:end]
    owner = np.searchsorted(mask.link_starts, np.arange(start, end), side="right") - 1
    change = np.flatnonzero((np.diff(prov.astype(np.int64)) != 0) | (np.diff(owner) != 0)) + 1
    bounds = np.concatenate(([0], change, [end - start]))
    return [(start + int(a), start + int(b), int(prov[a]), int(owner[a])) for a, b in zip(bounds[:-1], bounds[1:])]


def load_tokenizer(data: bytes) -> tuple[Any | None, str | None]:
    """A Hugging Face `tokenizers` tokenizer from a ``tokenizer.json``'s bytes, or (None, why not)."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return None, "decoding needs the `tokenizers` package (pip install 'tokencap[tokenizer]')"
    try:
        return Tokenizer.from_str(data.decode("utf-8")), None
    except UnicodeDecodeError:
        return None, "the tokenizer file is not UTF-8 JSON"
    except Exception as exc:  # noqa: BLE001 -- the tokenizers library raises plain Exceptions
        return None, f"not a tokenizer.json the tokenizers library can read ({' '.join(str(exc).split())[:200]})"


def decode_ids(tokenizer: Any, ids: np.ndarray) -> str:
    values = [int(i) for i in ids]
    try:
        return tokenizer.decode(values, skip_special_tokens=False)
    except Exception:  # noqa: BLE001 -- ids outside the vocabulary: show them by number
        parts = []
        for v in values:
            tok = tokenizer.id_to_token(v) if v < 2**32 else None
            parts.append(tok if tok is not None else f"⟨{v}⟩")
        return "".join(parts)


def token_decoder(tokenizer: Any) -> Any:
    """A function from one token id to its text, for the link-proof cells."""
    def decode(token: int) -> str:
        return decode_ids(tokenizer, np.array([token], dtype=np.int64))
    return decode


def decoded_segments(mask: LossMask, tokenizer: Any, start: int, end: int) -> pd.DataFrame:
    """The window [start, end) decoded run by run, with what each run is and which call owns it."""
    rows = []
    for a, b, prov, owner in segments(mask, start, end):
        rows.append({
            "positions": f"{a:,}–{b - 1:,}",
            "kind": KIND_NAMES[prov],
            "call": mask.call_ids[owner] if owner >= 0 else
            (f"{mask.call_ids[0]} (root prompt)" if mask.call_ids else "(root prompt)"),
            "tokens": b - a,
            "text": decode_ids(tokenizer, mask.token_ids[a:b]),
        })
    return pd.DataFrame(rows, columns=["positions", "kind", "call", "tokens", "text"])


def window_text(frame: pd.DataFrame) -> str:
    """The decoded window as one text, generated (trained) spans between ⟦ and ⟧."""
    return "".join(f"⟦{row.text}⟧" if row.kind == "generated" else row.text for row in frame.itertuples(index=False))


KIND_BACKGROUND = {"prompt": "#f3f4f6", "interstitial": "#fef3c7", "generated": "#dbeafe"}


def chain_label(chain: Chain) -> str:
    n = len(chain.links)
    return (f"{chain.chain_id} · {n} call{'s' if n != 1 else ''} · {fmt_int(chain.generated_tokens)} generated of "
            f"{fmt_int(chain.total_tokens)} tokens")
