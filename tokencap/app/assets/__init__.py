"""The app's CSS and page scripts, as files of the package (a wheel carries them: pyproject's package-data).

The CSS is aimed at Streamlit's internal test ids (``data-testid``) and at the keys the pages give their
containers (``st-key-…``); the scripts are constant (no data from a capture or a run ever goes in them,
only numbers and column names the views compute, a nonce, and the URL the page serves a download
from). Colours come from `tokencap.views.style`, which the chart specs share: a file names one as
``$NAME``, filled in here.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from tokencap.views import style


@cache
def text(name: str) -> str:
    """The text of the asset ``name`` (a file beside this module)."""
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def page_css(name: str) -> str:
    """A page's CSS (``rollout_page.css``, ``run_page.css``) with the captions' rule both pages share."""
    return text(name) + _filled(text("captions.css"), {"CAPTION": style.CAPTION})


def _filled(template: str, values: dict[str, str]) -> str:
    """``template`` with each ``$NAME`` of ``values`` replaced (any other ``$``, a script's regex, stays);
    raises ValueError naming a value the template does not hold."""
    for name, value in values.items():
        if f"${name}" not in template:
            raise ValueError(f"the asset has no ${name} to fill")
        template = template.replace(f"${name}", value)
    return template


def style_tag(name: str) -> str:
    """A page's CSS as the ``<style>`` element the page draws."""
    return f"<style>{page_css(name)}</style>"


def script(name: str, **settings: str) -> str:
    """A page script as the ``<script>`` element the page draws, its ``$NAME`` placeholders filled with
    ``settings`` (JSON the views compute, a number, a URL of the page's own)."""
    return f"<script>{_filled(text(name), settings)}</script>"


__all__ = ["page_css", "script", "style_tag", "text"]
