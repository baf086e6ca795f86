"""The app's CSS and page scripts are files of the package (tokencap/app/assets/), read and filled in."""

from __future__ import annotations

import json

import pytest

from tokencap.app import assets
from tokencap.views import style
from tokencap.views.run import table as rt


@pytest.mark.parametrize("name", ["rollout_page.css", "run_page.css"])
def test_a_page_s_css_ends_with_the_captions_rule_in_the_views_colour(name):
    css = assets.page_css(name)
    assert "$" not in css and f"color: {style.CAPTION} !important" in css
    assert "transition: none !important" in css  # the rule that keeps a rerun from repainting at every frame
    assert assets.style_tag(name) == f"<style>{css}</style>"


def test_the_cell_titles_script_carries_the_views_settings_as_json():
    settings = rt.cell_titles_settings()
    script = assets.script("cell_titles.js", SETTINGS=settings)
    assert script.startswith("<script>(function () {") and script.endswith("})();\n</script>")
    assert "$SETTINGS" not in script and settings in script
    assert [c["w"] for c in json.loads(settings)["COLUMNS"]] == list(rt.WIDTHS[c] for c in rt.TABLE_COLUMNS)


def test_the_history_script_keeps_its_regex_and_a_value_the_asset_lacks_is_an_error():
    script = assets.script("history.js")
    assert "replace(/\\/+$/, '')" in script and "popstate" in script
    with pytest.raises(ValueError, match=r"no \$SETTINGS"):
        assets.script("history.js", SETTINGS="{}")


@pytest.mark.parametrize(("name", "values"), [
    ("scroll_to_top.js", {}),
    ("scroll_to_row.js", {"TOP": "1234"}),
    ("scroll_to_detail.js", {"NONCE": "17"}),
    ("download_click.js", {"NONCE": "3", "HREF": "/media/a.json?copy=3"}),
])
def test_the_scroll_and_download_scripts_are_filled_with_their_numbers_and_url(name, values):
    script = assets.script(name, **values)
    assert script.startswith("<script>") and script.endswith("\n</script>") and "$" not in script
    assert all(v in script for v in values.values())
    if "NONCE" in values:  # the nonce leads the script: each new one is a new element, so the script runs again
        assert script.startswith(f"<script>/* {values['NONCE']} */")
