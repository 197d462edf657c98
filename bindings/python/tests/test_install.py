"""The package installs offline with pip into a fresh virtual environment,
and the installed copy loads the library and works."""

import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import cronoq
from conftest import SOURCE_DIR as SOURCE


def test_pip_installs_the_package_into_a_fresh_venv(tmp_path):
    missing = [m for m in ("ensurepip", "setuptools") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip("cannot make a venv with pip here: no %s (Debian: python3-venv, "
                    "python3-setuptools)" % ", ".join(missing))
    venv = tmp_path / "venv"
    # System site packages give the venv Debian's setuptools to build with;
    # --no-index keeps pip off the network.
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True, timeout=300)
    # Build from a copy: setuptools writes build/ and *.egg-info next to the
    # sources, and the checkout stays clean.
    src = tmp_path / "src"
    shutil.copytree(SOURCE, src, ignore=shutil.ignore_patterns("tests", "__pycache__", "build",
                                                               "*.egg-info"))
    python = str(venv / "bin" / "python")
    out = subprocess.run([python, "-m", "pip", "install", "--no-build-isolation", "--no-index",
                          "--disable-pip-version-check", str(src)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    check = textwrap.dedent("""
        import cronoq, sys
        assert cronoq.__file__.startswith(sys.prefix), cronoq.__file__
        pool = cronoq.Pool(budgets={"db": 2})
        with pool.acquire({"db": 2}, timeout=5.0) as grant:
            assert grant.units("db") == 2
        print("installed", cronoq.__version__, cronoq.library_version)
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["CRONOQ_LIBRARY"] = cronoq.library_path
    out = subprocess.run([python, "-c", check], capture_output=True, text=True, timeout=120,
                         cwd=str(tmp_path), env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "installed 0.1.0 0.1.0"
    listing = subprocess.run([python, "-m", "pip", "show", "-f", "cronoq"],
                             capture_output=True, text=True, timeout=120).stdout
    assert "cronoq/py.typed" in listing
