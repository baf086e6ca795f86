"""One palette and one set of marks, shared by every figure and legend of the app.

Colours say what a call is to the delivered trajectory (main chain blue, branch teal,
quarantined orange, after the terminal call violet, excluded grey); shapes and outlines
add what happened at its link (fragment root, recovered link, empty generation, engine
refusal, terminal call).
"""

from __future__ import annotations

MAIN = "#2563eb"
BRANCH = "#0d9488"
QUARANTINED = "#f59e0b"
AFTER_TERMINAL = "#8b5cf6"
EXCLUDED = "#9ca3af"
EMPTY = "#64748b"
GHOST = "#cbd5e1"
REFUSAL = "#dc2626"
RUN_COLORS = ("#94a3b8", MAIN)
"""Run A (grey) and run B (blue) when two runs are compared: every chart, every legend."""
REFUSAL_SOFT = "#f9a8d4"
BOUNDARY = "#dc2626"
RECOVERED = "#16a34a"
SELECTED = "#111827"
FINAL_ANSWER = "#db2777"  # the harness's own final answer (terminal attribution)
BREAK = "#b45309"  # a break in the lineage (diagnosis): amber, apart from the boundary's red
COMPACTION = "#7c3aed"
OTHER = "#475569"

EDGE_VERIFIED = "#64748b"
EDGE_RECOVERED = "#16a34a"
EDGE_REJECTED = "#dc2626"
EDGE_NOT_CHAINED = "#9ca3af"
EDGE_REFUSAL = "#be123c"

# Loss-mask strip: context (not trained) in neutral grey and grey-blue, generated (trained) in greens from
# dark (unlikely) to light (likely). The greens never reach the context's hues, nor amber or yellow: a
# confident generated token never looks like context (Viridis ends in #fde725, beside an amber interstitial).
PROMPT_COLOR = "#e5e7eb"
INTERSTITIAL_COLOR = "#b3c8e3"
GENERATED_COLOR = "#16a34a"  # generated (trained) shares and rows, where no log-prob is shown
LOGPROB_RANGE = ("#052e16", "#166534", "#22c55e", "#86efac")  # generated tokens: dark = unlikely, light = likely
LINK_MARK = "#111827"

# Text and backgrounds (the theme's, `.streamlit/config.toml`, which must agree): every grey word at WCAG AA
# (4.5:1). Streamlit draws captions at 60% opacity and a grid's pinned column (the Run table's rollout ids)
# at 60% alpha of the text colour, its header row at 70%: at the default text colour both read ~3.9:1, so
# the text is near black and captions get a colour of their own (tokencap/app/assets/captions.css).
TEXT = "#111111"
BACKGROUND = "#ffffff"
SIDEBAR_BACKGROUND = "#f0f2f6"
CAPTION = "#57534e"
GRID_FADED_ALPHA = 0.6
GRID_HEADER_ALPHA = 0.7
FONT = "Inter, system-ui, -apple-system, Segoe UI, Roboto, sans-serif"
