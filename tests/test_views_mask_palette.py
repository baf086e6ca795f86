"""Issue 37, item 10: the loss-mask strip tells trained from untrained at a glance.

Context cells (prompt, interstitial) are neutral grey and grey-blue; generated cells a sequence of greens,
never near the context's colours nor amber or yellow (Viridis's likely end, #fde725, read as the amber
interstitial #fde68a). Both legends stand above the strip, whole, their labels distinct however short the
sequence; a cell's hover shows its token's text when a tokenizer is at hand.
"""

from __future__ import annotations

import colorsys
import json
from pathlib import Path

import numpy as np
import pytest

from tokencap import load_snapshots
from tokencap.views import RolloutView, style
from tokencap.views.rollout import mask as mv
from tokencap.views.rollout import mask_chart as mc

REPO = Path(__file__).resolve().parent.parent


def _rgb(colour: str) -> tuple[float, float, float]:
    c = colour.lstrip("#")
    return tuple(int(c[i:i + 2], 16) / 255 for i in (0, 2, 4))  # type: ignore[return-value]


def _lab(colour: str) -> tuple[float, float, float]:
    """CIE L*a*b* (D65) of an sRGB colour."""
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in _rgb(colour)]
    x = (0.4124 * lin[0] + 0.3576 * lin[1] + 0.1805 * lin[2]) / 0.95047
    y = 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    z = (0.0193 * lin[0] + 0.1192 * lin[1] + 0.9505 * lin[2]) / 1.08883
    f = [t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116 for t in (x, y, z)]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def delta_e(a: str, b: str) -> float:
    return float(np.linalg.norm(np.subtract(_lab(a), _lab(b))))


def _between(a: str, b: str, t: float) -> str:
    return "#" + "".join(f"{round(255 * (x + (y - x) * t)):02x}" for x, y in zip(_rgb(a), _rgb(b)))


def _generated_colours() -> list[str]:
    """The generated scale sampled along its whole length (Vega interpolates between the range's stops)."""
    stops = list(style.LOGPROB_RANGE)
    return [_between(a, b, t / 8) for a, b in zip(stops, stops[1:]) for t in range(9)]


def _hue_gap(a: str, b: str) -> float:
    """How far apart two colours' hues are, in turns (0 to 0.5)."""
    d = abs(colorsys.rgb_to_hls(*_rgb(a))[0] - colorsys.rgb_to_hls(*_rgb(b))[0])
    return min(d, 1 - d)


def context_ok(colour: str) -> bool:
    """Neutral grey, or a quiet grey-blue: no warm hue."""
    hue, _, saturation = colorsys.rgb_to_hls(*_rgb(colour))
    return saturation < 0.55 and (saturation < 0.1 or 0.5 <= hue <= 0.7)


def generated_ok(colour: str, context: list[str]) -> bool:
    """Far from every context colour (in hue and in CIE76 distance), and not amber, orange or yellow."""
    hue, _, saturation = colorsys.rgb_to_hls(*_rgb(colour))
    warm = 0.08 <= hue <= 0.2 and saturation >= 0.15
    apart = all(delta_e(colour, c) >= 25 and (_hue_gap(colour, c) >= 0.15 or colorsys.rgb_to_hls(*_rgb(c))[2] < 0.1)
                for c in context)
    return apart and not warm


def test_the_old_palette_fails_the_check():
    old_context = ["#e5e7eb", "#fde68a"]  # prompt grey, interstitial amber
    assert not context_ok("#fde68a")
    assert not generated_ok("#fde725", old_context)  # Viridis's likely end: yellow, beside the amber


def test_trained_and_untrained_cells_never_look_alike():
    context = [style.PROMPT_COLOR, style.INTERSTITIAL_COLOR]
    assert all(context_ok(c) for c in context), context
    for colour in _generated_colours():
        assert generated_ok(colour, context), colour
    assert delta_e(style.PROMPT_COLOR, style.INTERSTITIAL_COLOR) >= 10  # the two kinds of context apart
    assert delta_e(style.LOGPROB_RANGE[0], style.LOGPROB_RANGE[-1]) >= 40  # unlikely and likely apart
    assert style.GENERATED_COLOR not in context and generated_ok(style.GENERATED_COLOR, context)


@pytest.mark.parametrize("low,high", [(-0.5, 0.0), (-0.04, 0.0), (-3.0, 0.0), (-20.0, 0.0)])
def test_the_log_prob_legend_is_whole_with_distinct_labels(low, high):
    legend = mc.logprob_legend(low, high)
    assert legend["orient"] == "top" and legend["direction"] == "horizontal"
    assert legend["values"] == [low, (low + high) / 2, high]
    digits = int(legend["format"][1])
    labels = [f"{v:.{digits}f}" for v in legend["values"]]
    assert len(set(labels)) == 3, labels


def _mask(name: str = "clean_multiturn_tools.json"):
    return RolloutView(load_snapshots(REPO / "sample_data" / name)[0]).mask()


def test_a_short_strip_puts_both_legends_above_it_and_colours_generated_cells_in_greens():
    mask = _mask()
    assert len(mask) < 1024  # a short sequence: a few rows of cells
    spec = mc.strip_chart(mask, 0, len(mask), columns=64)
    context, generated = spec["layer"][:2]
    assert context["encoding"]["color"]["legend"]["orient"] == "top"
    fill = generated["encoding"]["fill"]
    assert fill["legend"]["orient"] == "top" and fill["scale"]["range"] == list(style.LOGPROB_RANGE)
    assert "scheme" not in fill["scale"]
    assert json.dumps(spec).count("#fde") == 0  # nothing amber or Viridis-yellow left in the strip


def test_a_cell_s_hover_shows_its_token_s_text_with_a_tokenizer():
    mask = _mask()
    tokenizer, problem = mv.load_tokenizer((REPO / "sample_data" / "tokenizer.json").read_bytes())
    assert problem is None
    ids = mask.token_ids[:200]
    texts = mv.token_texts(tokenizer, ids)
    assert len(texts) == len(ids) and all(len(t) <= mv.TOKEN_CHARS for t in texts)
    for token, text in zip(ids.tolist(), texts):
        plain = tokenizer.decode([token], skip_special_tokens=False)
        assert text.replace("␣", " ").replace("⏎", "\n").replace("⇥", "\t").rstrip("…") == plain[:len(text.rstrip("…"))]
    assert any("␣" in t for t in texts)  # spaces shown, not swallowed
    spec = mc.strip_chart(mask, 0, 200, columns=64, texts=texts)
    cells = sorted(spec["layer"][0]["data"]["values"] + spec["layer"][1]["data"]["values"], key=lambda c: c["pos"])
    assert [c["text"] for c in cells] == texts
    assert {"field": "text", "title": "text", "type": "nominal"} in spec["layer"][0]["encoding"]["tooltip"]
    # Without a tokenizer, no text field (the hover names the token id only).
    bare = mc.strip_chart(mask, 0, 200, columns=64)
    assert "text" not in bare["layer"][0]["data"]["values"][0]
