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
TERMINAL = "#111827"
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
# the text is near black and captions get a colour of their own (`CAPTION_CSS`).
TEXT = "#111111"
BACKGROUND = "#ffffff"
SIDEBAR_BACKGROUND = "#f0f2f6"
CAPTION = "#57534e"
GRID_FADED_ALPHA = 0.6
GRID_HEADER_ALPHA = 0.7
CAPTION_CSS = f'''
[data-testid="stCaptionContainer"] {{ opacity: 1 !important; color: {CAPTION} !important; }}
'''

FONT = "Inter, system-ui, -apple-system, Segoe UI, Roboto, sans-serif"

# The page's own CSS (no capture text ever goes in here): a compact header so the tree or
# the mask starts above the fold at 1280x800, tiles that size to their numbers instead of
# truncating them, and culprit buttons that read as links. No transitions, as on the Run page
# (`RUN_PAGE_CSS`): Streamlit fades the elements a rerun replaces over a second, and a browser
# drawing without a GPU repaints the call tree at every frame of that fade.
PAGE_CSS = """
*, *::before, *::after { transition: none !important; }
#vg-tooltip-element { white-space: pre-line; max-width: 560px; }
[data-testid="stMainBlockContainer"] { padding: 2.6rem 1.6rem 2rem 1.6rem; }
[data-testid="stMainBlockContainer"] h3 { padding: 0 0 0.1rem 0; }
.st-key-verdict_masked { background: #fef2f2; border-color: #fecaca !important; padding: 0.55rem 0.8rem !important;
                         gap: 0.4rem !important; }
.st-key-verdict_ok { background: #f0fdf4; border-color: #bbf7d0 !important; padding: 0.55rem 0.8rem !important; }
.st-key-verdict_masked p, .st-key-verdict_ok p { margin-bottom: 0; }
.st-key-verdict_masked [data-testid="stMarkdownContainer"], .st-key-verdict_ok [data-testid="stMarkdownContainer"] {
  margin-bottom: 0 !important; }
div[class*="st-key-culprits_"] { gap: 0.15rem 0.5rem !important; }
div[class*="st-key-culprit-"] button, div[class*="st-key-more-"] button { min-height: 0; padding: 0 0.15rem;
                                                                        line-height: 1.4; }
div[class*="st-key-culprit-"] button p { color: #1d4ed8; text-decoration: underline; text-underline-offset: 2px; }
.st-key-tiles, .st-key-mask_tiles { gap: 0.35rem !important; }
.st-key-tiles [data-testid="stElementContainer"], .st-key-mask_tiles [data-testid="stElementContainer"] { border: 1px solid #e5e7eb; border-radius: 0.5rem;
                                                   padding: 0 0.35rem; background: #ffffff; }
.st-key-tiles p, .st-key-mask_tiles p { font-size: 0.8rem; white-space: nowrap; }
.st-key-tiles [data-testid="stTooltipIcon"], .st-key-mask_tiles [data-testid="stTooltipIcon"] { margin-left: 0.1rem; }
div[class*="st-key-culprits_"] { margin-top: 0.15rem; }
[data-testid="stTable"] td, [data-testid="stTable"] th { white-space: normal !important; overflow-wrap: anywhere;
                                                       padding: 0.25rem 0.5rem; font-size: 0.85rem; }
[data-testid="stTable"] td > div, [data-testid="stTable"] th > div { max-width: none !important; }
[data-testid="stTable"] td * { overflow-wrap: anywhere !important; white-space: normal !important; }
[data-testid="stTable"] th * { white-space: nowrap !important; }
[data-testid="stTableStyledTable"] { width: 100% !important; }
a.tc-download { display: block; text-align: center; padding: 0.35rem 0.75rem; border: 1px solid #2563eb;
                border-radius: 0.5rem; color: #ffffff !important; background: #2563eb; text-decoration: none;
                font-size: 0.9rem; }
a.tc-download:hover { background: #1d4ed8; }
""" + CAPTION_CSS

# The Run page's own CSS: no transitions. While a run is scanned the page reruns, and
# Streamlit fades the old page's elements (opacity over 1 s, after 0.5 s), the sidebar's
# too; a browser drawing without a GPU repainted six charts and a 2,000-row grid at every
# frame of that fade, a third of a core taken from a scan that runs on both. The old page
# is still dimmed, at once.
# The first screen at 1280x800 holds the table's first eight rows: the page starts higher and wider than
# Streamlit's default, with half its gaps; the title is smaller; the tiles are one compact row (the value
# and its share on one line; a label wraps instead of being cut to "not c…"); the filters are one row whose
# widgets share it; the table's heading row keeps its right end free for the table's hover toolbar.
RUN_PAGE_CSS = """
*, *::before, *::after { transition: none !important; }
[data-testid="stMainBlockContainer"] { padding: 0.5rem 1.6rem 2rem 1.6rem; }
[data-testid="stMainBlockContainer"] [data-testid="stVerticalBlock"] { gap: 0.5rem; }
div[class*="st-key-run_box_"] { padding: 0.45rem 0.6rem !important; }
[data-testid="stMainBlockContainer"] h2 { padding: 0; font-size: 1.5rem; }
.st-key-run_tiles [data-testid="stMetric"] { min-width: 0; }
.st-key-run_tiles > div { flex: 1 1 0; min-width: 0; }
[data-testid="stMetricValue"] { font-size: 1.3rem; }
[data-testid="stMetric"] > div { padding: 0.3rem 0.45rem 0.3rem 0.55rem !important; }
.st-key-run_tiles [data-testid="stMetric"] > div { display: flex; flex-wrap: wrap; align-items: baseline;
  column-gap: 0.35rem; row-gap: 0; }
.st-key-run_tiles [data-testid="stMetricLabel"] { flex: 0 0 100%; }
.st-key-run_tiles [data-testid="stMetricValue"], .st-key-run_tiles [data-testid="stMetricDelta"] { flex: 0 0 auto; }
[data-testid="stMetricLabel"] { width: 100% !important; grid-template-columns: minmax(0, 1fr) auto !important; column-gap: 0.2rem; }
[data-testid="stMetricLabel"] .stMarkdownEllipsis, [data-testid="stMetricLabel"] p {
  white-space: normal !important; overflow: visible !important; text-overflow: clip !important; line-height: 1.15;
  word-break: normal !important; overflow-wrap: normal !important; font-size: 0.78rem; }
.st-key-run_filters > div { flex: 1 1 0; min-width: 0; }
.st-key-run_filters > div:first-child { flex: 0 0 auto; }
.st-key-run_filters > div:last-child { flex: 0 0 auto; padding-bottom: 0.45rem; }
.st-key-run_filters [data-testid="stWidgetLabel"] p { white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.st-key-run_table_heading { padding-right: 7.5rem; min-height: 2rem; flex-wrap: nowrap !important; }
.st-key-run_table_heading > div:first-child { flex: 1 1 auto; min-width: 0; }
.st-key-run_table_heading p { margin-bottom: 0; }
""" + CAPTION_CSS
