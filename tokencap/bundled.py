"""Where the files that come with tokencap are: the bundled samples and the app's Streamlit settings.

The repository holds one copy of each, at its top level (``sample_data/``, ``.streamlit/``).
A wheel carries the same folders inside the package (``pyproject.toml`` maps them there:
``tokencap/sample_data/``, ``tokencap/app/streamlit_config/``). Every reader asks this module, so the
same code finds them in a checkout (with or without an editable install) and in an installed
wheel.

On the command line a bundled sample is named with the prefix ``sample:``
(``tokencap build sample:clean_multiturn_tools.json``, ``tokencap app sample:run``): from any
directory, and never by guessing -- a relative path missing from the working directory is an
error, not a sample.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
SAMPLE_PREFIX = "sample:"


def _installed_or_checkout(installed: Path, checkout: Path) -> Path:
    """``installed`` (inside the package, as a wheel lays it out) when it exists, else ``checkout``."""
    return installed if installed.exists() else checkout


SAMPLE_DATA = _installed_or_checkout(PACKAGE / "sample_data", PACKAGE.parent / "sample_data")
"""The bundled samples: scenario files, the sample run, its rollout records and tokenizer."""

STREAMLIT_CONFIG = _installed_or_checkout(PACKAGE / "app" / "streamlit_config" / "config.toml",
                                          PACKAGE.parent / ".streamlit" / "config.toml")
"""The app's Streamlit settings (``tokencap app`` passes them as flags, see `streamlit_flags`)."""


class UnknownSample(ValueError):
    """A ``sample:NAME`` that names no bundled sample."""


def is_sample_name(text: str) -> bool:
    return text.startswith(SAMPLE_PREFIX)


def sample_path(text: str) -> str:
    """The file or folder that ``sample:NAME`` names inside `SAMPLE_DATA`, as an absolute path.

    `UnknownSample` (one line: what was asked, where the samples are) for a name that is not
    there or that leads out of the folder (``sample:../x``)."""
    name = text[len(SAMPLE_PREFIX):]
    root = SAMPLE_DATA.resolve()
    path = (root / name).resolve()
    if not name or not path.is_relative_to(root) or path == root or not path.exists():
        raise UnknownSample(f"{text}: no bundled sample of that name; the samples are the files and folders "
                            f"in {root} (sample:NAME names one, e.g. sample:clean_multiturn_tools.json)")
    return str(path)


def sample_hint(missing: str) -> str:
    """For a relative path that is not there but names a bundled sample (``x.json``, or
    ``sample_data/x.json`` as the README writes it in a checkout): ``"; the bundled sample is
    sample:x.json"``, to end the error's line. Else ``""``: nothing is ever opened in its place."""
    relative = Path(missing)
    if not missing or relative.is_absolute() or ".." in relative.parts:
        return ""
    parts = relative.parts[1:] if relative.parts[:1] == ("sample_data",) else relative.parts
    if parts and (SAMPLE_DATA / Path(*parts)).exists():
        return f"; the bundled sample of that name is {SAMPLE_PREFIX}{Path(*parts).as_posix()}"
    return ""


def streamlit_flags(config: Path = STREAMLIT_CONFIG) -> list[str]:
    """The app's Streamlit settings as ``--section.option value`` flags for ``streamlit run``.

    Streamlit reads ``.streamlit/config.toml`` only from its working directory, and `tokencap app`
    runs in the user's: without the flags the upload limit, the file watcher and the theme would
    be Streamlit's defaults. A missing file means no flags."""
    import tomllib

    try:
        with open(config, "rb") as handle:
            settings = tomllib.load(handle)
    except FileNotFoundError:
        return []
    flags: list[str] = []
    for section, options in settings.items():
        for name, value in options.items():
            flags += [f"--{section}.{name}", str(value).lower() if isinstance(value, bool) else str(value)]
    return flags
