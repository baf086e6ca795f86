"""The Rollout page's Export tab: the fixed trajectory's files, sized once, downloaded or written to disk.

A helper of ``tokencap/app/rollout/rollout.py`` (not a page): layout and session state only; sizes,
routes, file names and the bytes come from `tokencap.views.rollout.export`.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import streamlit as st

from tokencap.app import assets
from tokencap.app.state import Keys
from tokencap.services import rollout_sources as src
from tokencap.views.formatting import fmt_bytes, md_escape
from tokencap.views.model import RolloutView
from tokencap.views.rollout import attribution as av
from tokencap.views.rollout import export as ev
from tokencap.views.rollout import rollout_page as rp
from tokencap.views.rollout import verdicts as vv

STATE = st.session_state


def _remember_anchor(widget_key: str, rk: str) -> None:
    STATE[Keys.ANCHORS][rk] = STATE.get(widget_key)


def show_export_tab(base: RolloutView, view: RolloutView, rk: str, ref: src.RolloutRef, source_label: str,
                    all_views: list[RolloutView], several: bool, finals_label: str | None) -> None:
    """The Export tab. ``finals_label`` names the harness final responses the page builds with (for the
    command line shown), or None."""
    st.markdown("#### Fixed trajectory")
    shown = {"export_dir": False}  # the export directory's input is drawn once, with the first disk export
    options: list[str | None] = [None] + base.anchor_options()
    widget_key = f"anchor_w:{rk}"
    if STATE.get(widget_key) != view.anchor:
        STATE[widget_key] = view.anchor

    st.selectbox("Anchor on a terminal call", options, key=widget_key,
                 format_func=lambda cid: rp.anchor_option_label(base, cid),
                 on_change=_remember_anchor, args=(widget_key, rk),
                 help="The delivered chain is cut at this call (what the harness says it ended on). "
                      "Default: none, or the harness's final answer when its final responses are loaded; a "
                      "call chosen here always overrides that.")
    banner = vv.banner_of(view)
    if banner.trainable:
        st.success(rp.export_verdict_markdown(banner), icon=":material/check_circle:")
    else:
        st.error(rp.export_verdict_markdown(banner), icon=":material/block:")
    st.caption(md_escape(av.anchor_summary(base.result, view.result, view.anchor)))

    size_exports([view] + [v for v in all_views if v is not view])
    files = ev.downloads(view)
    cols = st.columns(3)
    for col, kind in zip(cols, ev.KINDS, strict=True):
        with col:
            show_file(f"{rk}:{view.anchor}:{kind}", files[kind], ev.estimate(view, kind),
                      lambda report, kind=kind: ev.render(view, kind, report),
                      lambda handle, kind=kind: ev.write_kind(handle, view, kind),
                      ev.cli_command(source_label, ref.rollout_id, view.anchor, several, out="OUT"), shown)
    st.caption("These are the bytes `tokencap build` writes for the same input and anchor:")
    finals = finals_label if view.final_response is not None else None
    # Plain text (select it to copy): a code block loads the browser's syntax highlighter (1.5 MB) on this visit.
    st.text(ev.cli_command(source_label, ref.rollout_id, view.anchor, several, finals))

    st.markdown("#### Every loaded rollout")
    st.caption(rp.every_rollout_caption(all_views))
    results = [v.result for v in all_views]
    every = ev.Download("Build results JSONL (all rollouts)", "tokencap_results.jsonl", "application/jsonl",
                        what="every loaded rollout's build result, one per line")
    with st.columns(3)[0]:
        show_file(rp.export_key(v.rollout_id + "@" + str(v.anchor) for v in all_views), every,
                  ev.estimate_all(all_views),
                  lambda report: ev.render_all(all_views, report),
                  lambda handle: ev.write_results_to(handle, results),
                  ev.cli_command(source_label, None, None, False, out="OUT"), shown)


def size_exports(views: list[RolloutView]) -> None:
    """Size every export once per rollout and anchor (`ev.sizes`, kept on the view), with a progress
    bar while that runs; later visits and reruns reuse the sizes."""
    todo = [v for v in views if not ev.sized(v)]
    if not todo:
        return
    bar = st.progress(0.0, text="sizing the exports")
    for n, v in enumerate(todo):
        def report(done: int, total: int, n: int = n, name: str = md_escape(v.rollout_id)) -> None:
            bar.progress(min((n + done / max(total, 1)) / len(todo), 0.99),
                         text=f"sizing the exports: {done:,} of {total:,} calls of {name}")
        ev.sizes(v, report)
    bar.empty()


def _progress(bar: Any, verb: str) -> Any:
    def report(done: int, total: int) -> None:
        bar.progress(min(done / total, 0.99), text=f"{verb} {fmt_bytes(done)} of about {fmt_bytes(total)}")
    return report


def show_file(pkey: str, d: ev.Download, size: int, render: Any, write: Any, command: str,
              shown: dict[str, bool]) -> None:
    """One export: a download (rendered now, or when asked with a progress bar) or, when too big for
    the browser, a file written to disk with a progress bar. See `tokencap.views.rollout.export.route`."""
    if not d.available:
        st.button(d.label, key=Keys.export_unavailable(pkey), disabled=True, icon=":material/download:",
                  width="stretch")
        st.caption(d.why_not)
        return
    how = ev.route(size)
    dl_key = f"dl:{pkey}"
    if how == "now":
        # Rendered when clicked (a deferred download), not on every rerun of the page.
        st.download_button(d.label, lambda: render(None), file_name=d.file_name, mime=d.mime, key=dl_key,
                           icon=":material/download:", on_click="ignore", width="stretch")
        st.caption(d.what)
        return
    if how == "prepare":
        prepared = STATE.get(Keys.PREPARED)
        if STATE.get(Keys.PREPARE) == pkey:
            # Asked for: render it now, with progress, and hand that one bytes object to Streamlit.
            STATE.pop(Keys.PREPARE)
            bar = st.progress(0.0, text=f"preparing about {fmt_bytes(size)}")
            data = render(_progress(bar, "prepared"))
            bar.empty()
            STATE[Keys.PREPARED] = prepared = (pkey, data)  # one prepared file at a time
            STATE[Keys.AUTOCLICK] = pkey
        if prepared is not None and prepared[0] == pkey:
            show_prepared(pkey, d, prepared[1], autoclick=STATE.pop(Keys.AUTOCLICK, None) == pkey)
            st.caption(f"{d.what}. Ready: it downloads by itself; the link gives another copy.")
        else:
            st.button(d.label, key=Keys.export_prepare(pkey), icon=":material/download:", width="stretch",
                      on_click=lambda: STATE.__setitem__(Keys.PREPARE, pkey), help=f"about {fmt_bytes(size)}")
            st.caption(f"About {fmt_bytes(size)}: {d.what}. Prepared when you click (with a progress bar), "
                       "then it downloads.")
        return
    # Too big for a browser download: write it to disk.
    st.button(f"{d.label} → disk", key=Keys.export_disk(pkey), icon=":material/save:", width="stretch",
              on_click=lambda: STATE.__setitem__(Keys.WRITE, pkey), help=f"about {fmt_bytes(size)}")
    st.caption(f"About {fmt_bytes(size)}: {d.what}. More than {fmt_bytes(ev.download_limit())} is too big to pass "
               "through the browser, so it is written to the export directory below, with a progress bar.")
    if Keys.EXPORT_DIR not in STATE:
        STATE[Keys.EXPORT_DIR] = ev.default_export_dir()
    if not shown["export_dir"]:
        shown["export_dir"] = True
        st.text_input("Export directory (created if missing)", key=Keys.EXPORT_DIR)
    folder = STATE[Keys.EXPORT_DIR]
    if STATE.get(Keys.WRITE) == pkey:
        STATE.pop(Keys.WRITE)
        target = str(Path(folder) / d.file_name)
        bar = st.progress(0.0, text=f"writing about {fmt_bytes(size)} to {md_escape(target)}")
        try:
            n = ev.write_file(target, write, size, _progress(bar, "wrote"))
        except OSError as exc:
            bar.empty()
            st.error(f"**Could not write {md_escape(target)}:** {md_escape(exc.strerror or exc)}. Choose another "
                     "export directory.", icon=":material/error:")
            return
        bar.progress(1.0, text=f"wrote {fmt_bytes(n)}")
        STATE.setdefault(Keys.WRITTEN, {})[pkey] = (target, n)
    written = STATE.get(Keys.WRITTEN, {}).get(pkey)
    if written is not None:
        st.success(f"Wrote {fmt_bytes(written[1])} to", icon=":material/check:")
        st.code(written[0], language=None, wrap_lines=True)
        st.caption("The same file from the command line:")
        st.code(command.replace("OUT", written[0]) if "OUT" in command else command, language="bash",
                wrap_lines=True)


def media_url(pkey: str, data: bytes, d: ev.Download) -> str | None:
    """Serve ``data`` (that very object: no copy) from Streamlit's media store while this page shows it.

    It is served as an attachment under its own file name, with the content type `ev.PASS_THROUGH_MIME`:
    Streamlit's gzip middleware compresses every other type of download in one piece before
    sending the first byte (4.5 s for an 85 MB result, and CPU the page needs).
    """
    from streamlit import runtime

    if not runtime.exists():
        return None
    return runtime.get_instance().media_file_mgr.add(data, ev.PASS_THROUGH_MIME, f"export:{pkey}",
                                                     file_name=d.file_name, is_for_static_download=True)


def show_prepared(pkey: str, d: ev.Download, data: bytes, autoclick: bool) -> None:
    """A prepared file as a plain download link, clicked once by the page when it was just prepared.

    Not `st.download_button`: its frontend fetches the file's URL in the background whenever it
    renders, and Chromium then holds a second request for the same URL (the click) behind that
    unread fetch for many seconds. A link of our own, with its own query string, starts at once.
    """
    url = media_url(pkey, data, d)
    if url is None:  # no Streamlit runtime (bare mode): the plain button still works
        st.download_button(d.label, data, file_name=d.file_name, mime=d.mime, key=Keys.export_download(pkey),
                           icon=":material/download:", on_click="ignore", width="stretch")
        return
    STATE[Keys.LINK_NONCE] = STATE.get(Keys.LINK_NONCE, 0) + (1 if autoclick else 0)
    href = html.escape(f"{url}?copy={STATE[Keys.LINK_NONCE]}", quote=True)
    label = html.escape(f"{d.label} ({fmt_bytes(len(data))})")
    st.html(f'<a class="tc-download" href="{href}" download="{html.escape(d.file_name, quote=True)}">'
            f'&#x2913;&nbsp; {label}</a>')
    if autoclick:
        st.html(assets.script("download_click.js", NONCE=str(STATE[Keys.LINK_NONCE]), HREF=href),
                unsafe_allow_javascript=True)
