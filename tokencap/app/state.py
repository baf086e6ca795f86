"""The app's session state, by name: every ``st.session_state`` key and widget key of the pages.

A key is a name here (`Keys`), never a string literal in a page (``tests/test_app_state_keys.py``
checks it). Widget keys are session keys too (Streamlit keeps a widget's value under its key),
and container keys name their elements for the page's CSS (``.st-key-NAME``). Keys built from a
value (one per rollout, per button of a list) are methods of `Keys`. URL parameter names are not
here: they are public (links must keep working) and live with the views that read them
(`tokencap.views.links`, `tokencap.views.run.data`).

`open_request` and `next_open_seq` are the typed accessors of the hand-over from the Run page
to the Rollout page (an `OpenRequest`, ``tokencap/services/requests.py``).
"""

from __future__ import annotations

import streamlit as st

from tokencap.services.requests import OpenRequest


class Keys:
    """The session keys of the app (values as the pages have always used them)."""

    # -- shared by the pages
    ROLLOUT_FIRST_DONE = "_rollout_first_done"
    OPEN_ROLLOUT = "open_rollout"
    OPEN_ROLLOUT_SEQ = "open_rollout_seq"
    RUN_DEFAULT_OPEN = "run_default_open"
    RUN_UPLOADS = "run_uploads"

    # -- the Run page (tokencap/app/run/)
    RUN_BACK_HOLD = "run_back_hold"
    RUN_BACK_SCROLL = "run_back_scroll"
    RUN_BACK_SEEN = "run_back_seen"
    RUN_CHART_NONCE = "run_chart_nonce"
    RUN_CLEAR = "run_clear"  # widget
    RUN_CLOSE_UPLOAD = "run_close_upload"  # widget
    RUN_FILTER = "run_filter"
    RUN_FILTERS = "run_filters"  # widget
    RUN_FINGERPRINTS = "run_fingerprints"
    RUN_FIRST_ROW = "run_first_row"
    RUN_GROUPS_DRAWN = "run_groups_drawn"
    RUN_MORE_CHARTS = "run_more_charts"
    RUN_PAIR_OPEN = "run_pair_open"  # widget
    RUN_PATH = "run_path"
    RUN_RECORDS_PATH = "run_records_path"
    RUN_RECORDS_UPLOAD = "run_records_upload"
    RUN_RECORDS_UPLOADS_MADE = "run_records_uploads_made"
    RUN_RESCAN = "run_rescan"  # widget
    RUN_REWARD_SLICES_OPEN = "run_reward_slices_open"  # widget
    RUN_ROOT = "run_root"
    RUN_ROW_CLICKED = "run_row_clicked"
    RUN_TABLE_BOX = "run_table_box"  # widget
    RUN_TABLE_EPOCH = "run_table_epoch"
    RUN_TABLE_HEADING = "run_table_heading"  # widget
    RUN_TABLE_LAST = "run_table_last"
    RUN_TILES = "run_tiles"  # widget
    RUN_UPLOADER = "run_uploader"  # widget
    RUN_VS = "run_vs"
    RUN_VS_CLOSE = "run_vs_close"  # widget
    RUN_VS_UPLOADER = "run_vs_uploader"  # widget
    RUN_W_CHANGE = "run_w_change"  # widget
    RUN_W_CONTIGUOUS = "run_w_contiguous"  # widget
    RUN_W_DESC = "run_w_desc"  # widget
    RUN_W_GROUPS = "run_w_groups"  # widget
    RUN_W_MORE = "run_w_more"  # widget
    RUN_W_PATH = "run_w_path"  # widget
    RUN_W_QUERY = "run_w_query"  # widget
    RUN_W_REASONS = "run_w_reasons"  # widget
    RUN_W_RECORDS_PATH = "run_w_records_path"  # widget
    RUN_W_ROOT = "run_w_root"  # widget
    RUN_W_SORT = "run_w_sort"  # widget
    RUN_W_SOURCE = "run_w_source"  # widget
    RUN_W_STATUSES = "run_w_statuses"  # widget
    RUN_W_VERDICT = "run_w_verdict"  # widget
    RUN_W_VS_PATH = "run_w_vs_path"  # widget
    RUN_W_VS_RECORDS = "run_w_vs_records"  # widget
    RUN_W_VS_SAMPLE = "run_w_vs_sample"  # widget

    # -- the Rollout page (tokencap/app/rollout/)
    ROLLOUT = "rollout"  # widget
    ANCHORS = "anchors"
    AUTOCLICK = "autoclick"
    BUNDLED_FINAL_RESPONSES = "bundled_final_responses"
    CLOSE_RUN_ROLLOUT = "close_run_rollout"  # widget
    CLOSE_SRC = "close_src"  # widget
    CMP_SEQ = "cmp_seq"  # widget
    COMMAND_LINE_FINAL_RESPONSES = "command_line_final_responses"
    COMPARE_PREFETCHED = "compare_prefetched"
    DEFAULT_TOKENIZER = "default_tokenizer"
    DETAIL = "detail"  # widget
    DETAIL_OF = "detail_of"
    DETAIL_OPEN = "detail_open"
    EXPORT_DIR = "export_dir"  # widget
    FIGURES = "figures"
    FINAL_RESPONSES_UPLOADER = "final_responses_uploader"  # widget
    FIND_MATCHES = "find_matches"
    LINK_ERROR = "link_error"
    LINK_NONCE = "link_nonce"
    LOADED_KEYS = "loaded_keys"
    MASK_DECODED_OPEN = "mask_decoded_open"  # widget
    MASK_LINKS_OPEN = "mask_links_open"  # widget
    MASK_LOGPROBS_OPEN = "mask_logprobs_open"  # widget
    MASK_LP = "mask_lp"  # widget
    MASK_OVERVIEW = "mask_overview"  # widget
    MASK_OVERVIEW_OPEN = "mask_overview_open"  # widget
    MASK_PAGE = "mask_page"
    MASK_STRIP = "mask_strip"  # widget
    MASK_URL = "mask_url"
    MASK_VIEW = "mask_view"
    MASK_WINDOW_TEXT = "mask_window_text"  # widget
    OPEN_ROLLOUT_SELECTED = "open_rollout_selected"
    OPEN_ROLLOUT_SOURCE = "open_rollout_source"
    OPEN_ROLLOUT_VS_SOURCE = "open_rollout_vs_source"
    OPEN_UPLOAD_AS_RUN = "open_upload_as_run"  # widget
    PART_PARAM = "part_param"
    PREPARE = "prepare"
    PREPARED = "prepared"
    RECORDS_PARAM = "records_param"
    ROLLOUT_MISSING = "rollout_missing"
    RUN_DEFAULT_DONE = "run_default_done"
    RUN_RECORDS_ERROR = "run_records_error"
    SCENARIO = "scenario"  # widget
    SCROLL_DETAIL = "scroll_detail"
    SCROLL_NONCE = "scroll_nonce"
    SELECTED = "selected"
    SHARE = "share"  # widget
    SHOW_OTHER_ROLLOUTS = "show_other_rollouts"  # widget
    SRC_PARAM = "src_param"
    SRC_PATH = "src_path"
    TAB = "tab"  # widget
    TOKENIZER = "tokenizer"  # widget
    TREE_NONCE = "tree_nonce"
    TRIAGE = "triage"  # widget
    TRIAGE_NEXT = "triage_next"  # widget
    TRIAGE_ORDER = "triage_order"
    TRIAGE_PLACED = "triage_placed"
    TRIAGE_PREV = "triage_prev"  # widget
    TRIAGE_PROBLEM = "triage_problem"
    UPLOAD_IS_RUN = "upload_is_run"
    UPLOADER = "uploader"  # widget
    UPLOADS = "uploads"
    URL_HISTORY = "url_history"
    URL_PENDING = "url_pending"
    VERDICT_MASKED = "verdict_masked"  # widget
    VERDICT_OK = "verdict_ok"  # widget
    VS_ROLLOUT = "vs_rollout"
    VS_SOURCE_KEY = "vs_source_key"
    VS_SRC = "vs_src"
    WRITE = "write"
    WRITTEN = "written"

    # -- keys built from a value
    @staticmethod
    def finding(i: int) -> str:
        return f"finding_{i}"

    @staticmethod
    def culprits(i: int) -> str:
        return f"culprits_{i}"

    @staticmethod
    def more(rk: str, i: int) -> str:
        return f"more:{rk}:{i}"

    @staticmethod
    def export_disk(pkey: str) -> str:
        return f"disk:{pkey}"

    @staticmethod
    def export_unavailable(pkey: str) -> str:
        return f"na:{pkey}"

    @staticmethod
    def export_download(pkey: str) -> str:
        return f"dl:{pkey}"

    @staticmethod
    def export_prepare(pkey: str) -> str:
        return f"prep:{pkey}"

    @staticmethod
    def marks_open(rk: str) -> str:
        return f"marks_open:{rk}"

    @staticmethod
    def nodes_open(rk: str) -> str:
        return f"nodes_open:{rk}"

    @staticmethod
    def detail_show(rk: str) -> str:
        return f"detail_show:{rk}"

    @staticmethod
    def detail_section_open(name: str) -> str:
        return f"detail_{name}_open"

    @staticmethod
    def break_expander(break_key: str) -> str:
        return f"break_{break_key.replace(':', '_')}"

    @staticmethod
    def proof_chart(break_key: str) -> str:
        return f"proof_chart_{break_key.replace(':', '_')}"

    @staticmethod
    def break_proof_chart(break_key: str) -> str:
        return f"break_proof_chart_{break_key.replace(':', '_')}"

    @staticmethod
    def cmp_pinned(rk: str) -> str:
        return f"cmp_pinned:{rk}"

    @staticmethod
    def cmp_mode(rk: str) -> str:
        return f"cmp_mode:{rk}"

    @staticmethod
    def cmp_other(rk: str) -> str:
        return f"cmp_other:{rk}"

    @staticmethod
    def run_open(side: str) -> str:
        return f"run_open_{side}"

    @staticmethod
    def run_reward_slices(i: int) -> str:
        return f"run_reward_slices_{i}"

    @staticmethod
    def run_missing_upload(row: int) -> str:
        return f"run_missing_upload:{row}"

    @staticmethod
    def run_box(dimension: str) -> str:
        return f"run_box_{dimension}"


def open_request() -> OpenRequest | None:
    """The rollout the Run page (or a link to a run's rollout) asks the Rollout page to open, if any."""
    request = st.session_state.get(Keys.OPEN_ROLLOUT)
    return request if isinstance(request, OpenRequest) else None


def next_open_seq() -> int:
    """A number new at every opening of a rollout (`OpenRequest.seq`): the Rollout page selects it once per seq."""
    seq = int(st.session_state.get(Keys.OPEN_ROLLOUT_SEQ, 0)) + 1
    st.session_state[Keys.OPEN_ROLLOUT_SEQ] = seq
    return seq


__all__ = ["Keys", "next_open_seq", "open_request"]
