"""What the wheel is made of: every folder of ptxdsl/ is a listed package, the grammar and the docs ride along
as package data, the license is the SPDX string with its file, and the package says it is typed. (.ci/run builds
the wheel, installs it into a clean environment and uses it from outside the checkout.)"""
import subprocess
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]


def test_every_folder_of_the_package_is_in_the_wheel():
    """Each folder of ptxdsl/ with a tracked .py file is a listed package (a folder not yet committed is not: the
    wheel is built from a clone)."""
    try:
        tracked = subprocess.run(["git", "ls-files", "ptxdsl"], cwd=ROOT, capture_output=True, text=True,
                                 check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files are unknown")
    folders = {".".join(Path(f).parent.parts) for f in tracked if f.endswith(".py")}
    assert "ptxdsl.isa" in folders
    missing = folders - set(SETUPTOOLS["packages"])
    assert not missing, f"add {sorted(missing)} to [tool.setuptools] packages in pyproject.toml"


def test_the_grammar_and_the_docs_ship_as_package_data():
    assert SETUPTOOLS["package-dir"] == {"ptxdsl.grammar": "grammar", "ptxdsl.docs": "docs",
                                         "ptxdsl.examples": "examples"}
    data = SETUPTOOLS["package-data"]
    assert data["ptxdsl.grammar"] == ["*.lark"] and data["ptxdsl.docs"] == ["*.md"]
    assert data["ptxdsl.examples"] == ["*.py", "*.ptxd"]
    assert data["ptxdsl"] == ["py.typed", "*.pyi"] and (ROOT / "ptxdsl" / "py.typed").is_file()
    assert (ROOT / "ptxdsl" / "builder.pyi").is_file()        # the builder's type stub (ptxdsl.stubgen)
    assert {"ptxdsl.grammar", "ptxdsl.docs", "ptxdsl.examples"} <= set(SETUPTOOLS["packages"])


def test_the_license_is_apache_2():
    project = PYPROJECT["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    # PEP 639's license string needs setuptools 77 or later to build
    assert any(r.replace(" ", "") == "setuptools>=77" for r in PYPROJECT["build-system"]["requires"])


def test_the_command_line_is_an_entry_point_and_a_module():
    assert PYPROJECT["project"]["scripts"] == {"ptxdsl": "ptxdsl.cli:main"}
    assert (ROOT / "ptxdsl" / "__main__.py").is_file()


def test_the_version_is_one_number():
    import ptxdsl

    assert ptxdsl.__version__ == PYPROJECT["project"]["version"]
