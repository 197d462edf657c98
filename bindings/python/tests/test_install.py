"""The package installs offline, with the documented command, into a default
virtual environment (no system site packages: pip and, before Python 3.12,
setuptools, never `wheel`), and the installed copy loads the library and
works; so does an editable install. The in-tree build backend
(build_backend/cronoq_build.py) reads pyproject.toml as tomllib does and
writes a wheel whose RECORD matches its files."""

import base64
import csv
import hashlib
import io
import os
import shlex
import subprocess
import sys
import tarfile
import textwrap
import zipfile

import pytest

import cronoq
from conftest import SOURCE_DIR as SOURCE


@pytest.fixture
def cronoq_build():
    """The build backend, imported from the source tree as pip does."""
    sys.path.insert(0, os.path.join(SOURCE, "build_backend"))
    try:
        import cronoq_build
    finally:
        sys.path.pop(0)
    return cronoq_build


def _tree(root):
    """Every path under `root`, for a check that nothing was written there."""
    found = set()
    for d, dirs, files in os.walk(root):
        found.update(os.path.relpath(os.path.join(d, f), root) for f in dirs + files)
    return found


def _user_env():
    """The environment of a user with no pip configuration: no index, no
    find-links (CI machines may set PIP_FIND_LINKS), no PYTHONPATH."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PIP_") and k != "PYTHONPATH"}
    env["PIP_CONFIG_FILE"] = os.devnull
    return env


def _where():
    """(cwd, path) to name the package's directory as the documentation
    does: bindings/python from the repository's root, or the copy's own
    directory where the tests run on a copy of bindings/python (CI)."""
    parent, base = os.path.split(SOURCE)
    if os.path.basename(parent) == "bindings":
        return os.path.dirname(parent), "bindings/" + base
    return parent, "./" + base


def _install(tmp_path, *pip_args):
    """Run the documented command, `python3 -m venv v && v/bin/pip install
    --no-build-isolation --no-index bindings/python`, with this test's
    interpreter for python3, the venv in tmp_path and `pip_args` before
    the path; returns the venv's python."""
    cwd, path = _where()
    venv = str(tmp_path / "v")
    command = "%s -m venv %s && %s/bin/pip install --no-build-isolation --no-index %s" % (
        shlex.quote(sys.executable), shlex.quote(venv), shlex.quote(venv),
        " ".join([shlex.quote(a) for a in pip_args] + [path]))
    before = _tree(SOURCE)
    out = subprocess.run(["sh", "-c", command], cwd=cwd, env=_user_env(),
                         capture_output=True, text=True, timeout=600)
    if out.returncode != 0 and "ensurepip" in out.stdout + out.stderr:
        pytest.skip("cannot make a venv with pip here: ensurepip is not available "
                    "(Debian: apt-get install python3-venv): %s" % out.stdout.strip())
    assert out.returncode == 0, "%s\n%s%s" % (command, out.stdout, out.stderr)
    with open(os.path.join(venv, "pyvenv.cfg")) as f:
        assert "include-system-site-packages = false" in f.read()
    assert _tree(SOURCE) == before, "the install wrote into the source tree"
    return os.path.join(venv, "bin", "python")


def _run_in(python, tmp_path):
    check = textwrap.dedent("""
        import cronoq, sys
        pool = cronoq.Pool(budgets={"db": 2})
        with pool.acquire({"db": 2}, timeout=5.0) as grant:
            assert grant.units("db") == 2
        print(cronoq.__file__)
        print("installed", cronoq.__version__, cronoq.library_version)
    """)
    env = _user_env()
    env["CRONOQ_LIBRARY"] = cronoq.library_path
    out = subprocess.run([python, "-c", check], capture_output=True, text=True, timeout=120,
                         cwd=str(tmp_path), env=env)
    assert out.returncode == 0, out.stderr
    where, said = out.stdout.splitlines()
    assert said == "installed 0.1.0 0.1.0"
    return where


def test_the_documented_pip_install_works_offline_in_a_default_venv(tmp_path):
    # The trap: in a default venv this failed with "invalid command
    # 'bdist_wheel'" (setuptools without `wheel`), and worked only with
    # --system-site-packages, which nobody mentioned.
    python = _install(tmp_path)
    where = _run_in(python, tmp_path)
    assert where.startswith(str(tmp_path / "v")), where
    listing = subprocess.run([python, "-m", "pip", "show", "-f", "cronoq"], env=_user_env(),
                             capture_output=True, text=True, timeout=120).stdout
    assert "cronoq/py.typed" in listing and "Version: 0.1.0" in listing, listing


def test_an_editable_install_works_offline_in_a_default_venv(tmp_path):
    python = _install(tmp_path, "-e")
    where = _run_in(python, tmp_path)
    assert where == os.path.join(SOURCE, "cronoq", "__init__.py"), where


def test_the_backend_reads_pyproject_as_tomllib_does(cronoq_build):
    tomllib = pytest.importorskip("tomllib", reason="tomllib is Python 3.11's")
    with open(os.path.join(SOURCE, "pyproject.toml"), "rb") as f:
        assert cronoq_build.project(SOURCE) == tomllib.load(f)["project"]
    text = textwrap.dedent("""
        [other]
        x = 1
        [project]  # a comment
        name = 'lit\\\\eral'
        s = "tab\\there \\u00e9 \\"q\\" # not a comment"
        a = [ "x",  # one
              "y", ]
        t = { text = "MIT" , b = "c" }
        e = []
        [tool.x]
        y = 2
    """)
    assert cronoq_build.parse_table(text, "project") == tomllib.loads(text)["project"]
    for bad, what in [("v = 1", "line 3: only strings"), ('v = """x"""', "multi-line"),
                      ('v = "x" y', "text after"), ('v = "x"\nv = "y"', "given twice"),
                      ('v = ["x" "y"]', "expected ','")]:
        with pytest.raises(cronoq_build.TomlSubsetError, match=what):
            cronoq_build.parse_table("# c\n[project]\n" + bad + "\n", "project")


def test_the_wheel_holds_the_package_and_a_record_that_matches_it(tmp_path, cronoq_build):
    name = cronoq_build.build_wheel(str(tmp_path))
    assert name == "cronoq-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(str(tmp_path / name)) as z:
        names = z.namelist()
        record = list(csv.reader(io.StringIO(z.read("cronoq-0.1.0.dist-info/RECORD").decode())))
        for path, digest, size in record:
            if path.endswith("/RECORD"):
                assert (digest, size) == ("", "")
                continue
            data = z.read(path)
            want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert (digest, int(size)) == ("sha256=" + want, len(data)), path
        meta = z.read("cronoq-0.1.0.dist-info/METADATA").decode()
        wheel = z.read("cronoq-0.1.0.dist-info/WHEEL").decode()
    assert sorted(p for p, _, _ in record) == sorted(names)
    package = sorted(n for n in names if n.startswith("cronoq/"))
    assert package == sorted("cronoq/" + f for f in os.listdir(os.path.join(SOURCE, "cronoq"))
                             if f.endswith(".py") or f == "py.typed")
    for line in ("Metadata-Version: 2.1", "Name: cronoq", "Version: 0.1.0",
                 "Requires-Python: >=3.9", "License: MIT", "Classifier: Typing :: Typed",
                 "Description-Content-Type: text/markdown"):
        assert line + "\n" in meta, meta
    assert "Tag: py3-none-any\n" in wheel and "Root-Is-Purelib: true\n" in wheel
    # The same files make the same bytes.
    again = tmp_path / "again"
    again.mkdir()
    cronoq_build.build_wheel(str(again))
    assert (again / name).read_bytes() == (tmp_path / name).read_bytes()
    sdist = cronoq_build.build_sdist(str(tmp_path))
    with tarfile.open(str(tmp_path / sdist)) as t:
        members = set(t.getnames())
    for member in ("pyproject.toml", "README.md", "PKG-INFO", "cronoq/_pool.py",
                   "build_backend/cronoq_build.py"):
        assert "cronoq-0.1.0/" + member in members, members
