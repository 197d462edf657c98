"""The type hints hold: mypy (Debian's python3-mypy) finds no error in the
package, the examples, the bench and the build backend."""

import importlib.util
import os
import subprocess
import sys

import pytest

from conftest import SOURCE_DIR


def test_mypy_finds_no_error_in_the_package_and_examples():
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (Debian: python3-mypy)")
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", os.devnull,
         "--ignore-missing-imports", "cronoq", "examples", "bench.py",
         "build_backend"],
        cwd=SOURCE_DIR, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
