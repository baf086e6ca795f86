"""The wheel as a user installs it: built from this tree, installed in a fresh virtual environment,
and run from an empty directory -- no checkout in sight.

Built once per session (the module's fixture), without fetching anything: ``--no-build-isolation``
with the setuptools the test extras install, and ``--no-index`` everywhere. The venv sees this
environment's packages (``--system-site-packages``: numpy, Streamlit, ...), but its own tokencap is
the wheel's, never the checkout's editable install nor a ``PYTHONPATH`` (both are checked).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
from app_server import CHROMIUM, AppDidNotStart, free_port, launch_chromium, wait_until_serving  # noqa: E402

pytestmark = pytest.mark.wheel
START_TIMEOUT = 180.0
# What the build reads from the tree; the rest (git, tests, docs, caches) stays behind.
NOT_BUILT_FROM = shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__", ".venv",
                                        ".pytest_cache", ".hypothesis", "tests", "docs", "benchmarks",
                                        "tokencap-exports")


class Installed:
    """A venv with the wheel installed, and an empty directory to run its commands in."""

    def __init__(self, wheel: Path, venv: Path, empty: Path) -> None:
        self.wheel, self.venv, self.empty = wheel, venv, empty
        self.bin = venv / "bin"
        # Nothing of the checkout: no PYTHONPATH, no working directory holding tokencap/.
        self.env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
        self.env["TOKENCAP_CACHE_DIR"] = str(venv.parent / "scan-cache")

    def run(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run(args, cwd=self.empty, env=self.env, capture_output=True, text=True, timeout=timeout)


def _setuptools_version() -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in importlib.metadata.version("setuptools").split(".")[:1])
    except importlib.metadata.PackageNotFoundError:
        return (0,)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    assert _setuptools_version() >= (77,), ("building the wheel offline needs setuptools>=77 here: "
                                            "pip install -e '.[test]' installs it")
    root = tmp_path_factory.mktemp("wheel")
    source, out = root / "source", root / "dist"
    shutil.copytree(REPO, source, ignore=NOT_BUILT_FROM)  # the tree stays clean of build/ and *.egg-info
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation",
                            "--no-index", "-q", "-w", str(out)], capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = out.glob("tokencap_rl-*.whl")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True,
                   timeout=300)
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                              "--no-deps", "--no-index", str(wheel)], capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stderr[-3000:]
    empty = root / "empty"
    empty.mkdir()
    return Installed(wheel, venv, empty)


def test_the_wheel_carries_the_app_the_samples_the_settings_and_the_license(installed: Installed) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    assert {"tokencap/app/main.py", "tokencap/app/run/run.py", "tokencap/app/rollout/rollout.py",
            "tokencap/app/streamlit_config/config.toml", "tokencap/sample_data/clean_multiturn_tools.json",
            "tokencap/sample_data/rollout_records/run.jsonl", "tokencap/app/assets/run_page.css",
            "tokencap/app/assets/rollout_page.css", "tokencap/app/assets/captions.css",
            "tokencap/app/assets/history.js", "tokencap/app/assets/cell_titles.js"} <= names
    assets = {f"tokencap/app/assets/{p.name}" for p in (REPO / "tokencap" / "app" / "assets").iterdir()
              if p.suffix in (".css", ".js")}
    assert len(assets) >= 5 and assets <= names  # every CSS and page script the pages draw
    samples = {n for n in names if n.startswith("tokencap/sample_data/")}
    in_repo = [p for p in (REPO / "sample_data").rglob("*") if p.is_file()]
    assert len(samples) == len(in_repo)  # every file, from the one copy in the repository
    assert any(re.fullmatch(r"tokencap_rl-[^/]+\.dist-info/licenses/LICENSE", n) for n in names)
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(installed.wheel).read(metadata).decode()
    assert "Name: tokencap-rl" in text and "License-Expression: Apache-2.0" in text


def test_the_venv_s_tokencap_is_the_wheel_s(installed: Installed) -> None:
    probe = installed.run(str(installed.bin / "python"), "-c",
                          "import tokencap, tokencap.bundled as b; print(tokencap.__file__); print(b.SAMPLE_DATA); "
                          "print(b.STREAMLIT_CONFIG)")
    assert probe.returncode == 0, probe.stderr
    package, samples, config = (Path(line) for line in probe.stdout.splitlines())
    assert package.is_relative_to(installed.venv), package  # not the checkout's editable install
    assert samples == package.parent / "sample_data" and config == package.parent / "app" / "streamlit_config" / \
        "config.toml"


def test_the_app_extra_brings_what_the_sample_run_needs(installed: Installed) -> None:
    """`pip install "tokencap-rl[app]"` alone must open the bundled sample run: the app decodes the samples
    with their bundled tokenizers, so the extra brings `tokenizers` (this venv sees the test environment's
    packages, so an import would pass here either way: the wheel's own metadata is what is checked)."""
    code = ("import importlib.metadata as m; print('\\n'.join(r for r in m.requires('tokencap-rl') or () "
            "if 'extra == \"app\"' in r))")
    app_extra = installed.run(str(installed.bin / "python"), "-c", code)
    assert app_extra.returncode == 0, app_extra.stderr
    names = {line.split(">")[0].split("=")[0].split(";")[0].strip() for line in app_extra.stdout.splitlines()}
    assert {"streamlit", "tokenizers"} <= names, app_extra.stdout


def test_build_names_a_bundled_sample_from_an_empty_directory(installed: Installed) -> None:
    built = installed.run(str(installed.bin / "tokencap"), "build", "sample:clean_multiturn_tools.json")
    assert built.returncode == 0, built.stderr
    result = json.loads(built.stdout)
    assert result["rollout_id"] == "clean-multiturn-tools" and result["mask_sample"] is False
    assert list(installed.empty.iterdir()) == []


def test_check_names_bundled_samples_from_an_empty_directory(installed: Installed) -> None:
    tokencap = str(installed.bin / "tokencap")
    clean = installed.run(tokencap, "check", "sample:clean_multiturn_tools.json")
    assert clean.returncode == 0, clean.stderr
    assert clean.stdout.strip().startswith("check: 1 rollout, 1 trainable, 0 masked"), clean.stdout
    rollouts = installed.run(tokencap, "check", "sample:rollouts/qwen3_rollouts.jsonl", "--tokenizer", "sample:qwen3")
    assert rollouts.returncode == 1, rollouts.stderr  # masked rollouts: a training job would stop here
    lines = rollouts.stdout.splitlines()
    assert "NeMo RL would stop on this rollout" in lines[0] and lines[-1].startswith("check: 36 rollouts"), lines
    assert list(installed.empty.iterdir()) == []


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to `tokencap app` (it passes it on to its server and waits); the group killed if it hangs."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@pytest.fixture
def app_url(installed: Installed) -> Iterator[str]:
    """`tokencap app` from the venv, in the empty directory, on a free port; yields its URL once it is healthy."""
    port = free_port()
    log = open(installed.venv.parent / "app.log", "wb")  # noqa: SIM115 -- closed below
    proc = subprocess.Popen([str(installed.bin / "tokencap"), "app", "--port", str(port)], cwd=installed.empty,
                            env=installed.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://localhost:{port}"
    try:
        _wait_healthy(proc, url, log)
        yield url
    finally:
        _stop(proc)
        log.close()


def _wait_healthy(proc: subprocess.Popen, url: str, log) -> None:
    """Once the app answers its health check; the server's log in the failure when it never does."""
    try:
        wait_until_serving(proc, url, log)
    except AppDidNotStart:
        raise AssertionError(f"tokencap app did not start on {url}: "
                             f"{Path(log.name).read_text(errors='replace')[-2000:]}") from None


@pytest.mark.browser
def test_app_serves_the_sample_run_from_an_empty_directory(app_url: str) -> None:
    with urllib.request.urlopen(app_url, timeout=30) as resp:
        assert resp.status == 200
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is not installed (scripts/test.sh installs it): the page was not drawn")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            page = browser.new_page()
            page.goto(app_url)
            heading = page.get_by_role("heading", name="Run · sample run (sample_data/run)")
            sync_api.expect(heading).to_be_visible(timeout=START_TIMEOUT * 1000)
            # The run's table, scanned with its bundled rollout records, as in a checkout.
            sync_api.expect(page.get_by_test_id("stDataFrame")).to_be_visible(timeout=START_TIMEOUT * 1000)
            sync_api.expect(page.get_by_text(re.compile(r"^306 rollouts · scanned .* with the bundled rollout records"))
                            ).to_be_visible(timeout=START_TIMEOUT * 1000)
            assert page.title() == "tokencap"
        finally:
            browser.close()
