"""Rollouts whose output items carry token ids, in a real browser (Streamlit + Chromium via Playwright; see
tests/test_browser.py).

The bundled rollouts file is uploaded on the Run page: it is scanned as a run, its tiles count the rollouts
NeMo RL's contiguity check passes and stops on, and that filter keeps the broken ones. A broken rollout's row
opens the Rollout page, whose banner says where NeMo RL would stop and why; its culprit opens the break's
detail, with the divergence decoded in Qwen3's vocabulary (the tokenizer given on the command line). Every
wait is on a condition, never a fixed time.
"""

from __future__ import annotations

import pytest
from helpers_browser import REPO, chromium_page, select_grid_row, settled, streamlit_server

pytestmark = pytest.mark.browser

ROLLOUTS = REPO / "sample_data" / "rollouts" / "qwen3_rollouts.jsonl"
QWEN3 = REPO / "sample_data" / "qwen3" / "tokenizer.json"


def _first_broken():
    """The first not-contiguous rollout in the Run page's order, and its first break decoded with Qwen3's vocabulary."""
    from tokencap.diagnosis import diagnose
    from tokencap.loading import load_snapshots
    from tokencap.run import scan_table
    from tokencap.views.model import RolloutView
    from tokencap.views.rollout.attribution import own_record

    table = scan_table(ROLLOUTS, workers=1).sort_by([("source", "ascending"), ("rollout_id", "ascending")])
    rows = table.to_pylist()
    broken = [r["rollout_id"] for r in rows if r["contiguous"] is False]
    snapshot = next(s for s in load_snapshots(ROLLOUTS) if s.rollout_id == broken[0])
    final, evidence = own_record(snapshot)
    view = RolloutView(snapshot, final_response=final, evidence=evidence)
    brk = next(b for b in diagnose(view.result, tokenizer=str(QWEN3), evidence=evidence) if b.kind == "boundary")
    return len(rows), broken, brk


def test_an_uploaded_rollouts_file_is_a_run_and_a_broken_rollout_reads_its_decoded_divergence(tmp_path):
    from playwright.sync_api import expect

    total, broken, brk = _first_broken()
    decoded = brk.parent_text.strip().splitlines()[1]  # a line of the reasoning the prompt left out
    with streamlit_server(tmp_path, "--tokenizer", str(QWEN3)) as url, chromium_page(
            viewport={"width": 1280, "height": 1100}) as page:
        page.goto(f"{url}/?run_contig=not_contiguous")  # the contiguity filter, as a link names it
        expect(page.get_by_text("Sample run", exact=True)).to_be_visible()
        page.locator("section[data-testid='stSidebar'] input[type=file]").first.set_input_files(str(ROLLOUTS))
        expect(page.get_by_text(f"{len(broken)} of {total} rollouts", exact=True)).to_be_visible()
        expect(page.get_by_text("NeMo RL contiguity: not contiguous")).to_be_visible()
        tile = page.locator("[data-testid='stMetric']", has_text="not contiguous")
        expect(tile).to_contain_text(str(len(broken)))
        page.screenshot(path=str(tmp_path / "rollouts-run.png"))
        select_grid_row(page, 0, len(broken))
        expect(page.get_by_role("heading", name=broken[0], exact=True)).to_be_visible()

        # The banner: the cause first, then where NeMo RL stops and why; the culprit is a link to its call.
        banner = page.locator(".st-key-verdict_masked")
        expect(banner).to_contain_text(f"NeMo RL would stop on this rollout: {brk.call_id}'s prompt does not "
                                       f"continue {brk.predecessor}")
        banner.get_by_role("button", name=brk.call_id, exact=True).first.click()
        expect(page.get_by_text("Why the lineage breaks here").first).to_be_visible()
        expect(page.get_by_text(f"{brk.predecessor} had (decoded)").first).to_be_visible()
        expect(page.locator("[data-testid='stText']", has_text=decoded).first).to_be_visible()
        settled(page)
        page.screenshot(path=str(tmp_path / "rollouts-break.png"))
    print(f"screenshots: {tmp_path / 'rollouts-run.png'} {tmp_path / 'rollouts-break.png'}")
