"""The package as users get it: a wheel with the licence and without the
repository's tests and benchmarks, installable into a fresh virtual
environment, whose ``pina_ntk`` and ``pina-ntk`` come from that wheel."""

import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: What the build copies: everything but version control and build output.
IGNORED = shutil.ignore_patterns(
    ".git",
    "__pycache__",
    "*.egg-info",
    "build",
    "dist",
    "_build",
    ".pytest_cache",
    ".hypothesis",
    "pina-ntk-runs",
    "lightning_logs",
    "checkpoints",
)
#: Prints an interpreter's site-packages.
PURELIB = "import sysconfig; print(sysconfig.get_paths()['purelib'])"


def run(command, cwd, timeout=120):
    result = subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    # the build backend, as pyproject.toml requires it (the test extra
    # installs it)
    pytest.importorskip("setuptools", minversion="77")
    # built from a copy, so the build's own folders never land in the tree
    source = tmp_path_factory.mktemp("source") / "pina-ntk"
    shutil.copytree(ROOT, source, ignore=IGNORED)
    out = tmp_path_factory.mktemp("wheel")
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            str(source),
            "-w",
            str(out),
        ],
        cwd=source,
    )
    [built] = out.glob("pina_ntk-*.whl")
    return built


def test_wheel_ships_the_licence_and_no_tests_or_benchmarks(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    licences = [n for n in names if n.endswith("/LICENSE")]
    assert licences and all(".dist-info/" in n for n in licences)
    assert "MIT License" in zipfile.ZipFile(wheel).read(licences[0]).decode()
    tops = {name.split("/")[0] for name in names}
    assert "pina_ntk" in tops
    assert not [n for n in names if n.split("/")[0] in ("tests", "benchmarks")]
    assert not [n for n in names if "/tests/" in n or "/benchmarks/" in n]
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(metadata).decode()
    assert "License-Expression: MIT" in text


def test_wheel_installs_and_runs_in_a_fresh_environment(wheel, tmp_path):
    # system site packages: torch and PINA come from this interpreter's
    # environment, pina_ntk only from the wheel
    env_dir = tmp_path / "venv"
    venv.create(env_dir, system_site_packages=True, with_pip=False)
    bin_dir = env_dir / ("Scripts" if sys.platform == "win32" else "bin")
    python = bin_dir / "python"
    if sys.prefix != sys.base_prefix:
        # run from a virtual environment (CI's): torch and PINA live in its
        # site-packages, which the new one's system site does not include
        site = run([str(python), "-c", PURELIB], cwd=tmp_path).strip()
        outer = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
        (Path(site) / "_outer_environment.pth").write_text(
            "\n".join(sorted(outer)) + "\n"
        )
    # this interpreter's pip installs into the new environment
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            # the outer environment (seen through the .pth above) may hold
            # pina-ntk already: install into the new one all the same
            "--ignore-installed",
            "--quiet",
            "--no-warn-script-location",
            str(wheel),
        ],
        cwd=tmp_path,
    )
    outside = tmp_path / "elsewhere"  # not the repository: no source on path
    outside.mkdir()
    found = run(
        [str(python), "-c", "import pina_ntk; print(pina_ntk.__file__)"],
        cwd=outside,
    ).strip()
    assert Path(found).resolve().is_relative_to(env_dir.resolve()), found
    help_text = run([str(bin_dir / "pina-ntk"), "--help"], cwd=outside)
    assert "wave" in help_text and "qtensor" in help_text


def test_the_version_is_the_latest_released_section_of_the_changelog():
    # Keep a Changelog: "## [Unreleased]" first, then "## [X.Y.Z] - date"
    import re
    import tomllib

    root = Path(__file__).resolve().parents[1]
    text = (root / "CHANGELOG.md").read_text(encoding="utf-8")
    sections = re.findall(
        r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?", text, re.M
    )
    assert sections[0] == ("Unreleased", "")
    released = [(v, d) for v, d in sections[1:] if d]
    assert released, "no dated release section"
    with open(root / "pyproject.toml", "rb") as handle:
        version = tomllib.load(handle)["project"]["version"]
    assert released[0][0] == version
    import pina_ntk

    assert pina_ntk.__version__ == version
