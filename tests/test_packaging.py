"""Packaging facts a user meets at install time: one version, an SPDX license, type information,
and a Makefile that says what to run."""
from __future__ import annotations

import importlib.metadata
import importlib.resources
import shutil
import subprocess
from pathlib import Path

import pytest

import graphc as gc

ROOT = Path(__file__).resolve().parents[1]


def test_one_version_source():
    assert importlib.metadata.version("graphc") == gc.__version__
    assert 'dynamic = ["version"]' in (ROOT / "pyproject.toml").read_text()  # not written twice


def test_license_is_an_spdx_expression_with_its_file():
    meta = importlib.metadata.metadata("graphc")
    assert meta["License-Expression"] == "MIT"  # the TOML-table form printed deprecation boxes
    assert "MIT License" in (ROOT / "LICENSE").read_text()


def test_package_ships_type_information():
    assert (importlib.resources.files("graphc") / "py.typed").is_file()


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_without_target_prints_the_two_commands():
    done = subprocess.run(["make", "-s", "-C", str(ROOT)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert done.stdout.splitlines()[0].startswith("make demo") and "make test" in done.stdout


def test_every_package_folder_is_in_the_wheel():
    """A folder with an ``__init__.py`` that pyproject.toml does not list would be missing from
    a wheel (an editable install hides that): every room must be listed, under its import name.
    (Read with a pattern, not tomllib, which Python 3.10 lacks.)"""
    import re

    text = (ROOT / "pyproject.toml").read_text()
    listed = set(re.findall(r'"(graphc[\w.]*)"', re.search(r"packages = \[(.*?)\]", text, re.S).group(1)))
    folders = dict(re.findall(r'^"(graphc[\w.]*)" = "(\w+)"', text, re.M))
    assert folders == {"graphc": "graphc", "graphc.ir": "ir", "graphc.passes": "passes", "graphc.executor": "executor"}
    found = {".".join([name, *init.parent.relative_to(ROOT / folder).parts])
             for name, folder in folders.items() for init in (ROOT / folder).rglob("__init__.py")}
    assert found - listed == set(), f"package folders missing from pyproject.toml: {sorted(found - listed)}"
