"""Loss-mask views: the strip's paging, the overview's bins, per-link table, log-prob series.

A chain's training sequence can be 100k tokens long, far more than a browser can draw
cell by cell. The strip therefore shows one *window* (1k-4k tokens, wrapped into rows)
at a time, and the overview summarises the whole sequence in at most ``bins`` bins
(fraction of generated positions and mean log-probability per bin) with the window
outlined; both are drawn by `.mask_chart` (Vega-Lite) from the pages and bins here, and the
log-probs of the generated tokens (`logprob_series`) by `.logprob_chart`. Every
array operation is vectorised; nothing is per token in Python except the cells of the
visible window.

Colours (`..style`): prompt positions light grey, interstitial (context the harness added: tool
output, user turns) grey-blue, generated positions by log-probability in greens (dark is
unlikely, light is likely): trained and untrained never share a hue. Black ticks mark where each
link's interstitial begins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ...builder import Chain
from ...lossmask import GENERATED, INTERSTITIAL, PROMPT, LossMask
from ..formatting import count, fmt_int
from ..words import TERMS

WINDOW_SIZES = (1024, 2048, 4096)
DEFAULT_WINDOW = 2048
OVERVIEW_BINS = 600
LOGPROB_POINTS = 4000
KIND_NAMES = {PROMPT: "prompt", INTERSTITIAL: "interstitial", GENERATED: "generated"}


STRIP_LEGEND = (f"Grey: prompt · grey-blue: interstitial ({TERMS['interstitial']}) · green: generated (trained, "
                "mask 1), dark where the model found the token unlikely · black ticks: a call's context begins.")
"""What the strip's colours mean, shown under it."""

CONTEXT_HELP = ("tokens before the call's generation: the root prompt for link 0, else the interstitial "
                f"({TERMS['interstitial']})")


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
        ("mean log-prob", _fmt_lp(summary.mean_log_prob),
         f"over generated tokens; min {_fmt_lp(summary.min_log_prob)}"),
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
    return [(start + int(a), start + int(b), int(prov[a]), int(owner[a]))
            for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def load_tokenizer(data: bytes) -> tuple[Any | None, str | None]:
    """A Hugging Face `tokenizers` tokenizer from a ``tokenizer.json``'s bytes, or (None, why not)."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return None, "decoding needs the `tokenizers` package (pip install 'tokencap-rl[tokenizer]')"
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


TOKEN_CHARS = 24
"""A token's text in the strip's hover: at most this many characters."""


def token_texts(tokenizer: Any, ids: np.ndarray) -> list[str]:
    """Each token's own text, as the strip's hover shows it: whitespace made visible (a space ``␣``, a
    newline ``⏎``, a tab ``⇥``), cut to `TOKEN_CHARS`. One batch call to the tokenizer for the window."""
    values = [[int(i)] for i in ids]
    try:
        texts = tokenizer.decode_batch(values, skip_special_tokens=False)
    except Exception:  # noqa: BLE001 -- ids outside the vocabulary: one by one, by number when unknown
        texts = [decode_ids(tokenizer, np.array(v, dtype=np.int64)) for v in values]
    out = []
    for text in texts:
        shown = text.replace(" ", "␣").replace("\n", "⏎").replace("\t", "⇥")
        out.append(shown if len(shown) <= TOKEN_CHARS else shown[:TOKEN_CHARS - 1] + "…")
    return out


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


KIND_BACKGROUND = {"prompt": "#f3f4f6", "interstitial": "#e3ecf7", "generated": "#dcfce7"}
DECODED_CAPTION = ("Green rows are generated (trained) spans; grey-blue rows are interstitial context. "
                   "The whole window as text, generated spans between ⟦ and ⟧:")


def chain_label(chain: Chain) -> str:
    n = len(chain.links)
    return (f"{chain.chain_id} · {n} call{'s' if n != 1 else ''} · {fmt_int(chain.generated_tokens)} generated of "
            f"{count(chain.total_tokens, 'token')}")
