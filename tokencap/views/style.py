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
REFUSAL_SOFT = "#f9a8d4"
BOUNDARY = "#dc2626"
RECOVERED = "#16a34a"
TERMINAL = "#111827"
SELECTED = "#111827"
FINAL_ANSWER = "#db2777"  # the harness's own final answer (terminal attribution)
OTHER = "#475569"

EDGE_VERIFIED = "#64748b"
EDGE_RECOVERED = "#16a34a"
EDGE_REJECTED = "#dc2626"
EDGE_NOT_CHAINED = "#9ca3af"
EDGE_REFUSAL = "#be123c"

# Loss-mask strip
PROMPT_COLOR = "#e5e7eb"
INTERSTITIAL_COLOR = "#fde68a"
LOGPROB_SCALE = "Viridis"  # generated tokens: dark = unlikely, bright = likely
LINK_MARK = "#111827"

FONT = "Inter, system-ui, -apple-system, Segoe UI, Roboto, sans-serif"

BASE_LAYOUT = {
    "font": {"family": FONT, "size": 12, "color": "#1f2937"},
    "paper_bgcolor": "rgba(0,0,0,0)",
    "plot_bgcolor": "#ffffff",
    "hoverlabel": {"font": {"family": "ui-monospace, SFMono-Regular, Menlo, monospace", "size": 12},
                   "bgcolor": "#ffffff", "bordercolor": "#cbd5e1"},
}
