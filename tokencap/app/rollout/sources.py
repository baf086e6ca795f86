"""The Rollout page's sources: where its rollouts come from, how they load and how each is built.

A helper of ``tokencap/app/rollout/rollout.py`` (not a page): the sidebar's source pickers (uploads, a
rollout handed over by the Run page, the command-line path, the bundled samples), the capture
to compare with, the final responses and rollout records rollouts are built with, and loading
with a progress box. Layout and session state only; what to open and what to say come from
`tokencap.views` (`rollout.rollout_page`, `rollout.attribution`, `sources`).

How a rollout is built is per run of the page (`Builds`, made in ``main`` and passed on), never a
module global: this module is imported once and shared by every session.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import streamlit as st

from tokencap.app.state import Keys, open_request
from tokencap.bundled import SAMPLE_DATA
from tokencap.services import rollout_sources as src
from tokencap.services import run_sources as rs
from tokencap.services.arguments import app_arguments
from tokencap.services.requests import OpenRequest
from tokencap.services.uploads import Upload
from tokencap.views import links
from tokencap.views.formatting import md_escape
from tokencap.views.model import RolloutView
from tokencap.views.rollout import attribution as av
from tokencap.views.rollout import rollout_page as rp
from tokencap.views.run import rollouts as ro

APP_DIR = SAMPLE_DATA.parent  # the folder holding sample_data/: the checkout, or the installed package
SAMPLE_DIR = SAMPLE_DATA

STATE = st.session_state


# --------------------------------------------------------------------------- cached work


@st.cache_resource(show_spinner=False, max_entries=8)
def path_source(path: str, signature: Any) -> src.Source:
    """A command-line path, hashed once per (path, names/sizes/mtimes)."""
    del signature
    return src.source_from_path(path)


@st.cache_resource(show_spinner=False, max_entries=24)
def loaded_source(key: str, _source: src.Source) -> src.LoadedSource:
    return src.load_source(_source)


@st.cache_resource(show_spinner=False, max_entries=512)
def rollout_view(key: str, index: int, anchor: str | None, _loaded: src.LoadedSource,
                 finals_key: str | None = None, _final: dict | None = None,
                 _evidence: dict | None = None) -> RolloutView:
    """One rollout built once per (source content, rollout, anchor, final responses); derived views live on it.
    The record's evidence (which ``finals_key`` names with its file) is read by the diagnosis only."""
    return RolloutView(_loaded.snapshots[index], anchor=anchor, final_response=_final, evidence=_evidence)


@st.cache_resource(show_spinner=False, max_entries=8)
def parsed_final_responses(key: str, name: str, _data: bytes) -> tuple[Any, str | None]:
    return av.read_final_responses(name, _data)


@dataclass
class Builds:
    """How this run of the page builds its rollouts.

    ``finals``: the harness final responses in use (uploaded, or bundled with the sample);
    ``run_finals``: per source (cache key), the rollout records a run was scanned with, for
    rollouts the Run page hands over (without an upload here, they build with them, so a
    verdict is its row's).
    """

    finals: av.FinalResponsesChoice = field(default_factory=av.FinalResponsesChoice)
    run_finals: dict[str, av.FinalResponsesChoice] = field(default_factory=dict)

    def choice_for(self, ls: src.LoadedSource) -> av.FinalResponsesChoice:
        """The final responses a rollout of ``ls`` is built with."""
        return self.run_finals.get(ls.source.cache_key, self.finals)

    def view_of(self, ls: src.LoadedSource, index: int, anchor: str | None) -> RolloutView:
        """The cached view of one rollout, built with its harness final response when one applies
        (matched by rollout id; an unnamed response only when the file holds a single rollout)."""
        own = av.own_record(ls.snapshots[index])
        if own is not None:  # read from a rollout record's items (docs/contract.md#token-rollouts): built with that
        # record
            return rollout_view(ls.source.cache_key, index, anchor, ls, av.OWN_RECORD_KEY, *own)
        choice = self.choice_for(ls)
        rollout_id = ls.snapshots[index].rollout_id
        final, finals_key = choice.response_for(rollout_id, len(ls.snapshots))
        evidence = choice.finals.evidence_for(rollout_id, single_rollout=len(ls.snapshots) == 1) \
            if choice.finals is not None else None
        return rollout_view(ls.source.cache_key, index, anchor, ls, finals_key, final, evidence)


def default_tokenizer(sources: list[src.Source]) -> str | None:
    """The tokenizer to decode with when none is uploaded: ``tokencap app --tokenizer PATH``, else the bundled
    sample tokenizer when only sample data is shown (`rollout_sources.default_tokenizer_path`). Decided on the
    sources opened now, not on their loaded (cached) copies: those are shared by content and name, so a copy of
    a sample opened elsewhere earlier would carry its own path."""
    given = app_arguments(sys.argv[1:]).tokenizer
    path = src.default_tokenizer_path(APP_DIR, given, [s.path for s in sources])
    return str(path) if path is not None else None


def cli_argument() -> str | None:
    return app_arguments(sys.argv[1:]).path  # the path; --final-responses is the Run page's


def source_path() -> str | None:
    """The path to open: one a link named (``src``), else the command line's."""
    return STATE.get(Keys.SRC_PATH) or cli_argument()


def load_sources(sources: list[src.Source], builds: Builds, page: Any, progress: Any) -> list[src.LoadedSource]:
    """Load (cached) every source, building each rollout once.

    For big new inputs the ``page`` placeholder is emptied first, so the previous rollout's
    verdict is gone the moment loading starts and can never be read as the new file's, and
    a progress box shows in the ``progress`` placeholder above it until the load is done.
    (Two placeholders, not one: replacing a block with another block at the same place in
    one run lets Streamlit's message queue merge their children's updates out of order.)
    """
    seen: set[str] = STATE[Keys.LOADED_KEYS]
    pending = [s for s in sources if s.cache_key not in seen]
    if not rp.needs_progress([s.size for s in pending]):
        out = [loaded_source(s.cache_key, s) for s in sources]
        for ls in out:
            for i in range(len(ls.snapshots)):
                builds.view_of(ls, i, None)
        seen.update(s.cache_key for s in sources)
        return out
    by_key: dict[str, src.LoadedSource] = {}
    size = sum(s.size for s in pending)
    page.empty()
    with progress.status(rp.loading_label(len(pending), size), expanded=True) as status:
        bar = st.progress(0.0, text="reading")
        for n, s in enumerate(pending):
            bar.progress(n / len(pending), text=rp.parsing_label(s.name, s.size))
            ls = loaded_source(s.cache_key, s)
            by_key[s.cache_key] = ls
            for i in range(len(ls.snapshots)):
                bar.progress((n + (i + 1) / (len(ls.snapshots) + 1)) / len(pending),
                             text=rp.building_label(i, len(ls.snapshots), s.name))
                builds.view_of(ls, i, None)
        bar.progress(1.0, text="done")
        status.update(label=rp.loaded_label(size), state="complete", expanded=False)
    progress.empty()
    seen.update(s.cache_key for s in sources)
    return [by_key.get(s.cache_key) or loaded_source(s.cache_key, s) for s in sources]


# --------------------------------------------------------------------------- sidebar: sources and rollout


def run_request() -> OpenRequest | None:
    """The Run page's request to open a rollout (the page's docstring), if any."""
    return open_request()


def _close_run_rollout() -> None:
    STATE.pop(Keys.OPEN_ROLLOUT, None)


def source_once(request: OpenRequest, seq: int, memo: str) -> src.Source:
    """The source of a rollout handed over by the Run page, built once per opening (``seq``)."""
    kept = STATE.get(memo)
    if kept is not None and kept[0] == seq:
        return kept[1]
    source = rs.source_for_run_rollout(request)
    STATE[memo] = (seq, source)
    return source


def opened_from_run(request: OpenRequest) -> tuple[list[src.Source], str, str | None]:
    """The source of a rollout opened from the Run page, built once per opening (``seq``)."""
    st.sidebar.markdown("**Opened from the run**")
    st.sidebar.text(request.source)  # not st.code: see tokencap/app/run/sources.py
    st.sidebar.button("Close it", icon=":material/close:", on_click=_close_run_rollout, key=Keys.CLOSE_RUN_ROLLOUT,
                      help="Back to the samples (or the command-line file) on this page.")
    try:
        source = source_once(request, request.seq, Keys.OPEN_ROLLOUT_SOURCE)
    except (OSError, ValueError) as exc:
        return [], request.source, str(exc)
    label = source.path or source.name  # a store rollout's directory, a file, or an upload's name
    return [source], label, None


def sidebar_sources() -> tuple[list[src.Source], str, str | None]:
    """The sources to show, a label of where they came from, and an error about the CLI path."""
    st.sidebar.title(":material/account_tree: tokencap")
    st.sidebar.caption("Rollout inspector: how captured model calls became (or did not become) a training sample.")
    uploads = st.sidebar.file_uploader(
        "Open files", type=list(src.UPLOAD_TYPES), accept_multiple_files=True, key=Keys.UPLOADER,
        help="Snapshot `.json`, entries `.jsonl`, or a `.zip` of a capture-store directory. Several at once are fine.")
    st.sidebar.file_uploader(
        "Harness final responses (optional)", type=list(av.FINAL_RESPONSE_TYPES), key=Keys.FINAL_RESPONSES_UPLOADER,
        help="The Responses object the harness returned per rollout: a rollout record `{rollout_id, response}`, JSON "
             "lines of them, or a bare Responses object. Each rollout it names is anchored on the call its final "
             "answer came from (terminal attribution).")
    STATE[Keys.BUNDLED_FINAL_RESPONSES] = STATE[Keys.COMMAND_LINE_FINAL_RESPONSES] = None
    uploaded = src.sources_from_uploads(uploads, STATE[Keys.UPLOADS])
    # What follows the uploader depends on the source; one placeholder holds it, so switching
    # from a sample to an upload replaces the sample's description at once (not after loading).
    below = st.sidebar.empty()
    if uploaded:
        with below.container():
            st.caption(rp.uploads_caption(len(uploaded)))
            _offer_run(uploaded)
        STATE[Keys.SRC_PARAM] = STATE[Keys.PART_PARAM] = None  # an upload cannot be named in a URL
        return uploaded, "uploaded files", None
    with below.container():
        return _sidebar_path_or_sample()


RUN_PAGE = str(Path(__file__).resolve().parents[1] / "run" / "run.py")  # absolute: found from any entry script


def _offer_run(uploaded: list[src.Source]) -> None:
    """Uploaded rollouts files of several records are runs by themselves: a button opens them on the Run page
    (its upload, as if uploaded there). Each upload is looked at once (only its first line is decoded)."""
    memo = STATE.setdefault(Keys.UPLOAD_IS_RUN, {})
    for s in uploaded:
        if s.key not in memo:
            memo[s.key] = s.data is not None and bool(ro.run_uploads([(s.name, s.data)]))
    runs = [s for s in uploaded if memo[s.key]]
    if runs and st.button("Open as a run", icon=":material/table_chart:", key=Keys.OPEN_UPLOAD_AS_RUN,
                          help="Rollouts whose output items carry token ids: see every rollout on the Run page, "
                               "with NeMo RL's contiguity check in its tiles and filter."):
        STATE[Keys.RUN_UPLOADS] = tuple(Upload(s.name, s.data) for s in runs if s.data is not None)
        st.switch_page(RUN_PAGE)


def _sidebar_path_or_sample() -> tuple[list[src.Source], str, str | None]:
    """A rollout opened from the Run page, the command-line path or the bundled samples
    (written into the sidebar container in use)."""
    request = run_request()
    if request is not None:
        # The run and the row's source, so a reload or a shared link opens this very rollout (not an upload's).
        STATE[Keys.SRC_PARAM], STATE[Keys.PART_PARAM] = rp.run_link(request, SAMPLE_DIR)
        STATE[Keys.RECORDS_PARAM] = rp.run_link_records(request, SAMPLE_DIR)
        return opened_from_run(request)
    path = rp.rollout_path(source_path())
    STATE[Keys.SRC_PARAM] = STATE[Keys.PART_PARAM] = None
    if path is not None and not src.is_same_directory(path, SAMPLE_DIR):
        STATE[Keys.SRC_PARAM] = rp.path_src(path)
        st.markdown("**Source**")
        st.text(path)  # not st.code: see tokencap/app/run/sources.py
        if STATE.get(Keys.SRC_PATH):
            st.button("Close (back to the default source)", key=Keys.CLOSE_SRC, type="tertiary",
                      on_click=lambda: STATE.pop(Keys.SRC_PATH, None))
        cli = app_arguments(sys.argv[1:])
        if cli.records and src.is_same_directory(path, cli.path):  # as tokencap inspect builds it
            STATE[Keys.COMMAND_LINE_FINAL_RESPONSES] = cli.records
        try:
            source = path_source(path, src.path_signature(path))
        except (OSError, ValueError) as exc:
            return [], path, rp.path_problem(path, exc)
        return [source], path, None

    scenarios = src.sample_scenarios(SAMPLE_DIR)
    if not scenarios:
        st.info("No bundled samples here. Upload a file above.")
        return [], "samples", None
    names = [s.name for s in scenarios]
    by_name = {s.name: s for s in scenarios}
    if Keys.SCENARIO not in STATE or STATE[Keys.SCENARIO] not in by_name:
        STATE[Keys.SCENARIO] = names[src.default_scenario_index(scenarios)]
    st.selectbox("Sample scenario", names, key=Keys.SCENARIO, format_func=lambda n: by_name[n].label,
                 help="Small synthetic captures, one per situation you meet in real data.")
    scenario = by_name[STATE[Keys.SCENARIO]]
    STATE[Keys.SRC_PARAM] = links.sample_src(scenario.name)
    if scenario.situation:
        st.caption(scenario.situation)
    if scenario.expectation:
        st.caption(f"Expected: {scenario.expectation}")
    STATE[Keys.BUNDLED_FINAL_RESPONSES] = str(scenario.final_responses) if scenario.final_responses else None
    try:
        source = path_source(str(scenario.path), src.path_signature(scenario.path))
    except OSError as exc:
        return [], scenario.name, str(exc)
    return [source], f"sample_data/{scenario.name}", None


def versus_sources(request: OpenRequest | None, taken: set[str] = frozenset()) -> list[src.Source]:  # type: ignore[assignment]
    """The capture to compare with: the Run page's request's ``vs``, or the URL's ``vs_src``. One
    byte-identical to a source shown (``taken``: cache keys) is a source of its own all the same."""
    STATE[Keys.VS_SOURCE_KEY] = None
    vs = request.vs if request is not None else None
    if request is not None and vs is not None:
        try:
            source = rp.distinct_capture(source_once(vs, request.seq, Keys.OPEN_ROLLOUT_VS_SOURCE), taken, vs.run)
        except (OSError, ValueError) as exc:
            st.sidebar.warning(f"Cannot open the capture to compare with: {md_escape(str(exc))}")
            return []
        STATE[Keys.OPEN_ROLLOUT_VS_SOURCE] = (request.seq, source)  # built with its own run's records
        st.sidebar.caption(f"Compared with {md_escape(vs.rollout_id)} ({md_escape(vs.source)})")
    elif request is None and STATE.get(Keys.VS_SRC):
        path = rp.versus_path(STATE[Keys.VS_SRC], src.sample_scenarios(SAMPLE_DIR))
        if not path:
            return []
        try:
            source = path_source(path, src.path_signature(path))
        except (OSError, ValueError) as exc:
            st.sidebar.warning(f"Cannot open {md_escape(path)} to compare with: {md_escape(str(exc))}")
            return []
        st.sidebar.caption(f"Compared with {md_escape(path)}")
    else:
        return []
    STATE[Keys.VS_SOURCE_KEY] = source.cache_key
    return [source]


def sidebar_rollout(refs: list[src.RolloutRef], loaded: dict[str, src.LoadedSource], several_sources: bool,
                    builds: Builds) -> src.RolloutRef:
    by_key = {r.key: r for r in refs}
    if len(refs) == 1:
        return refs[0]
    if STATE.get(Keys.ROLLOUT) not in by_key:
        STATE[Keys.ROLLOUT] = refs[0].key

    def label(key: str) -> str:
        ref = by_key[key]
        return rp.rollout_option_label(builds.view_of(loaded[ref.source_key], ref.index, None), ref, several_sources)

    st.sidebar.selectbox(f"Rollout ({len(refs)} loaded)", list(by_key), key=Keys.ROLLOUT, format_func=label,
                         help="Each rollout's verdict is shown next to its id.")
    return by_key[STATE[Keys.ROLLOUT]]


# --------------------------------------------------------------------------- final responses and rollout records


def run_records() -> dict[str, av.FinalResponsesChoice]:
    """The rollout records of the rollouts handed over by the Run page, per source (none under an upload)."""
    request = run_request()
    STATE[Keys.RUN_RECORDS_ERROR] = None
    if request is None or STATE.get(Keys.FINAL_RESPONSES_UPLOADER) is not None:
        return {}
    kept = [STATE.get(Keys.OPEN_ROLLOUT_SOURCE), STATE.get(Keys.OPEN_ROLLOUT_VS_SOURCE)]
    out = {key: av.final_responses_choice(None, Path(records), _parse_final_responses)
           for key, records in rp.handed_over_records(request, kept).items()}
    STATE[Keys.RUN_RECORDS_ERROR] = next((choice.error for choice in out.values() if choice.error), None)
    for choice in out.values():
        if not choice.error:
            st.sidebar.caption(av.run_records_caption(choice))
    return {key: choice for key, choice in out.items() if not choice.error}


def _parse_final_responses(name: str, data: bytes) -> tuple[Any, str | None]:
    return parsed_final_responses(av.content_key(name, data), name, data)


def final_responses_choice() -> av.FinalResponsesChoice:
    """The uploaded final responses, else the file bundled with the sample scenario, else the command
    line's ``--final-responses`` while its path is shown, else none."""
    upload = STATE.get(Keys.FINAL_RESPONSES_UPLOADER)
    bundled = STATE.get(Keys.BUNDLED_FINAL_RESPONSES)
    given = STATE.get(Keys.COMMAND_LINE_FINAL_RESPONSES)
    return av.final_responses_choice((upload.name, upload.getvalue()) if upload is not None else None,
                                     Path(bundled) if bundled else None, _parse_final_responses,
                                     Path(given) if given else None)


def sidebar_final_responses(choice: av.FinalResponsesChoice) -> None:
    if choice.error:
        st.sidebar.error(f"**Final responses not used.** {md_escape(choice.error)}", icon=":material/error:")
    elif choice.finals is not None:
        st.sidebar.caption(av.choice_caption(choice))
        for note in choice.notes:
            st.sidebar.caption(f"Note: {md_escape(note)}")
