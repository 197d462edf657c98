"""The package's build backend (PEP 517, with PEP 660's editable hooks),
in the standard library alone.

Why one of our own: ``pip install --no-build-isolation --no-index
bindings/python``, the offline install the documentation gives, runs the
backend inside the target environment, where only what is installed there
can be imported. A default virtual environment has pip and, before Python
3.12, setuptools (ensurepip's: Debian's python3-venv bundles pip 23.0.1
and setuptools 66.1.1), but never ``wheel``, without which setuptools
before 70.1 cannot build a wheel ("invalid command 'bdist_wheel'"); from
3.12 on it has no setuptools at all. The package is pure Python, so a
wheel is a zip of its files and three of metadata, which this module
writes; pyproject.toml names it with ``backend-path``, so pip imports it
from the source tree and needs nothing else, online or not.

The project's metadata is pyproject.toml's ``[project]`` table, read by
``project()`` with a parser for the part of TOML that table uses (strings,
arrays of strings, inline tables of strings, comments), since tomllib
exists only from Python 3.11: anything else there is refused with its line
number, never guessed. tests/test_install.py holds the parser to tomllib,
the wheel's RECORD to its files, and the documented commands to a default
virtual environment.

What goes into a wheel: every file of the package directory (the
project's name), ``__pycache__`` and compiled files left out, and
``<name>-<version>.dist-info/`` with METADATA (version 2.1, the README as
its description), WHEEL (py3-none-any, purelib) and RECORD. Nothing is
written into the source tree. Timestamps are SOURCE_DATE_EPOCH's, or
1980-01-01, so that two builds of the same files are the same bytes.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
import tarfile
import time
import zipfile
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

Value = Union[str, List[str], Dict[str, str]]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BACKEND_DIR = os.path.basename(os.path.dirname(os.path.abspath(__file__)))
GENERATOR = "cronoq_build (bindings/python/build_backend)"


# ---------------------------------------------------------------------------
# pyproject.toml's [project] table
# ---------------------------------------------------------------------------


class TomlSubsetError(ValueError):
    """pyproject.toml holds what this parser does not read."""


_KEY = re.compile(r"[A-Za-z0-9_-]+")
_ESCAPES = {'"': '"', "\\": "\\", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class _Reader:
    """A cursor over the text of one table, for values of the subset."""

    def __init__(self, text: str, line: int) -> None:
        self.text = text
        self.pos = 0
        self.first_line = line

    def fail(self, what: str) -> TomlSubsetError:
        line = self.first_line + self.text.count("\n", 0, self.pos)
        return TomlSubsetError("pyproject.toml line %d: %s" % (line, what))

    def blank(self, newlines: bool) -> None:
        """Skip blanks and comments (and line ends where `newlines`)."""
        while self.pos < len(self.text):
            c = self.text[self.pos]
            if c in " \t" or (newlines and c in "\r\n"):
                self.pos += 1
            elif c == "#":
                end = self.text.find("\n", self.pos)
                self.pos = len(self.text) if end < 0 else end
            else:
                return

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, c: str) -> None:
        if self.peek() != c:
            raise self.fail("expected %r, found %r" % (c, self.peek() or "the end"))
        self.pos += 1

    def key(self) -> str:
        m = _KEY.match(self.text, self.pos)
        if m is None:
            raise self.fail("expected a bare key")
        self.pos = m.end()
        return m.group()

    def string(self) -> str:
        if self.text.startswith('"""', self.pos) or self.text.startswith("'''", self.pos):
            raise self.fail("multi-line strings are not read here")
        if self.peek() == "'":  # a literal string: no escapes
            end = self.text.find("'", self.pos + 1)
            if end < 0 or "\n" in self.text[self.pos:end]:
                raise self.fail("unterminated string")
            s = self.text[self.pos + 1:end]
            self.pos = end + 1
            return s
        self.expect('"')
        out: List[str] = []
        while True:
            c = self.peek()
            if c in ("", "\n"):
                raise self.fail("unterminated string")
            self.pos += 1
            if c == '"':
                return "".join(out)
            if c != "\\":
                out.append(c)
                continue
            e = self.peek()
            self.pos += 1
            if e in _ESCAPES:
                out.append(_ESCAPES[e])
            elif e in ("u", "U"):
                n = 4 if e == "u" else 8
                digits = self.text[self.pos:self.pos + n]
                if len(digits) != n or not all(d in "0123456789abcdefABCDEF" for d in digits):
                    raise self.fail("bad \\%s escape" % e)
                out.append(chr(int(digits, 16)))
                self.pos += n
            else:
                raise self.fail("bad escape \\%s" % e)

    def value(self) -> Value:
        c = self.peek()
        if c in ('"', "'"):
            return self.string()
        if c == "[":  # an array of strings, over lines, a trailing comma allowed
            self.pos += 1
            items: List[str] = []
            while True:
                self.blank(newlines=True)
                if self.peek() == "]":
                    self.pos += 1
                    return items
                items.append(self.string())
                self.blank(newlines=True)
                if self.peek() == ",":
                    self.pos += 1
                elif self.peek() != "]":
                    raise self.fail("expected ',' or ']' in an array")
        if c == "{":  # an inline table of strings, on one line
            self.pos += 1
            table: Dict[str, str] = {}
            self.blank(newlines=False)
            if self.peek() == "}":
                self.pos += 1
                return table
            while True:
                self.blank(newlines=False)
                k = self.key()
                self.blank(newlines=False)
                self.expect("=")
                self.blank(newlines=False)
                table[k] = self.string()
                self.blank(newlines=False)
                if self.peek() == "}":
                    self.pos += 1
                    return table
                self.expect(",")
        raise self.fail("only strings, arrays of strings and inline tables are read here")


def parse_table(text: str, name: str) -> Dict[str, Value]:
    """Table `name` of a TOML document, for the subset described above."""
    header = re.compile(r"^[ \t]*\[([^\]\n]*)\][ \t]*(#.*)?$", re.M)
    headers = list(header.finditer(text))
    for i, m in enumerate(headers):
        if m.group(1).strip() == name:
            start = m.end()
            end = headers[i + 1].start() if i + 1 < len(headers) else len(text)
            break
    else:
        raise TomlSubsetError("pyproject.toml has no [%s] table" % name)
    body = text[start:end]
    r = _Reader(body, text.count("\n", 0, start) + 1)
    table: Dict[str, Value] = {}
    while True:
        r.blank(newlines=True)
        if r.peek() == "":
            return table
        k = r.key()
        if k in table:
            raise r.fail("%s is given twice" % k)
        r.blank(newlines=False)
        r.expect("=")
        r.blank(newlines=False)
        table[k] = r.value()
        r.blank(newlines=False)
        if r.peek() not in ("\n", "\r", ""):
            raise r.fail("text after the value of %s" % k)


def project(root: str = ROOT) -> Dict[str, Value]:
    """pyproject.toml's [project] table, checked for what a wheel needs."""
    with open(os.path.join(root, "pyproject.toml"), encoding="utf-8") as f:
        table = parse_table(f.read(), "project")
    for key in ("name", "version"):
        if not isinstance(table.get(key), str):
            raise TomlSubsetError("pyproject.toml: [project] needs a string %s" % key)
    if table.get("dependencies", []):
        raise TomlSubsetError("pyproject.toml: this backend writes no Requires-Dist")
    return table


def _text(table: Mapping[str, Value], key: str) -> str:
    v = table.get(key, "")
    if not isinstance(v, str):
        raise TomlSubsetError("pyproject.toml: [project] %s must be a string" % key)
    return v


# ---------------------------------------------------------------------------
# What goes into a wheel
# ---------------------------------------------------------------------------


def _normal(name: str) -> str:
    """The name as wheel and dist-info file names write it."""
    return re.sub(r"[-_.]+", "_", name).lower()


def metadata(root: str = ROOT) -> bytes:
    """METADATA (core metadata 2.1) from [project] and its readme."""
    p = project(root)
    lines = ["Metadata-Version: 2.1", "Name: " + _text(p, "name"),
             "Version: " + _text(p, "version")]
    if p.get("description"):
        lines.append("Summary: " + _text(p, "description"))
    if p.get("requires-python"):
        lines.append("Requires-Python: " + _text(p, "requires-python"))
    lic = p.get("license")
    if isinstance(lic, dict) and "text" in lic:
        lines.append("License: " + lic["text"])
    classifiers = p.get("classifiers", [])
    if not isinstance(classifiers, list):
        raise TomlSubsetError("pyproject.toml: [project] classifiers must be an array")
    lines += ["Classifier: " + c for c in classifiers]
    body = ""
    readme = _text(p, "readme")
    if readme:
        if not readme.endswith(".md"):
            raise TomlSubsetError("pyproject.toml: the readme must be a .md file")
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(root, readme), encoding="utf-8") as f:
            body = "\n" + f.read()
    return ("\n".join(lines) + "\n" + body).encode()


def _wheel_file(tag: str = "py3-none-any") -> bytes:
    return ("Wheel-Version: 1.0\nGenerator: %s\nRoot-Is-Purelib: true\nTag: %s\n"
            % (GENERATOR, tag)).encode()


def package_files(root: str = ROOT) -> List[str]:
    """The package's files, relative to `root`, in a stable order."""
    name = _text(project(root), "name")
    found = []
    for d, dirs, files in os.walk(os.path.join(root, name)):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for f in sorted(files):
            if not f.endswith((".pyc", ".pyo")):
                found.append(os.path.relpath(os.path.join(d, f), root).replace(os.sep, "/"))
    if name + "/__init__.py" not in found:
        raise TomlSubsetError("no package directory %s/ beside pyproject.toml" % name)
    return found


def _date() -> Tuple[int, int, int, int, int, int]:
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if not epoch:
        return (1980, 1, 1, 0, 0, 0)
    t = time.gmtime(max(int(epoch), 315532800))  # a zip cannot say before 1980
    return (t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec)


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (path, digest, len(data))


def _write_wheel(directory: str, contents: List[Tuple[str, bytes]], root: str) -> str:
    """A wheel of `contents` (archive path, bytes) plus its dist-info."""
    p = project(root)
    dist = "%s-%s" % (_normal(_text(p, "name")), _text(p, "version"))
    info = dist + ".dist-info"
    contents = contents + [(info + "/METADATA", metadata(root)),
                           (info + "/WHEEL", _wheel_file())]
    record = "".join(_record_line(path, data) + "\n" for path, data in contents)
    record += info + "/RECORD,,\n"
    contents.append((info + "/RECORD", record.encode()))
    name = dist + "-py3-none-any.whl"
    date = _date()
    with zipfile.ZipFile(os.path.join(directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in contents:
            entry = zipfile.ZipInfo(path, date)
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(entry, data)
    return name


def _read(root: str, path: str) -> bytes:
    with open(os.path.join(root, path), "rb") as f:
        return f.read()


# ---------------------------------------------------------------------------
# The hooks (PEP 517, PEP 660)
# ---------------------------------------------------------------------------


def get_requires_for_build_wheel(config_settings: Optional[Mapping[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[Mapping[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_editable(
        config_settings: Optional[Mapping[str, Any]] = None) -> List[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str,
                                     config_settings: Optional[Mapping[str, Any]] = None) -> str:
    p = project(ROOT)
    info = "%s-%s.dist-info" % (_normal(_text(p, "name")), _text(p, "version"))
    os.makedirs(os.path.join(metadata_directory, info), exist_ok=True)
    for name, data in (("METADATA", metadata(ROOT)), ("WHEEL", _wheel_file())):
        with open(os.path.join(metadata_directory, info, name), "wb") as f:
            f.write(data)
    return info


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory: str, config_settings: Optional[Mapping[str, Any]] = None,
                metadata_directory: Optional[str] = None) -> str:
    files = [(path, _read(ROOT, path)) for path in package_files(ROOT)]
    return _write_wheel(wheel_directory, files, ROOT)


def build_editable(wheel_directory: str, config_settings: Optional[Mapping[str, Any]] = None,
                   metadata_directory: Optional[str] = None) -> str:
    """A wheel whose .pth file puts this source tree on sys.path, so that
    the package is imported from here (its edits seen at once)."""
    name = _normal(_text(project(ROOT), "name"))
    pth = ("__editable__.%s.pth" % name, (ROOT + "\n").encode())
    return _write_wheel(wheel_directory, [pth], ROOT)


def build_sdist(sdist_directory: str, config_settings: Optional[Mapping[str, Any]] = None) -> str:
    """A .tar.gz of what builds the wheel: pyproject.toml, the readme, the
    package and this backend, with PKG-INFO."""
    p = project(ROOT)
    base = "%s-%s" % (_normal(_text(p, "name")), _text(p, "version"))
    paths = ["pyproject.toml"] + ([_text(p, "readme")] if p.get("readme") else [])
    paths += package_files(ROOT)
    paths += [BACKEND_DIR + "/" + os.path.basename(__file__)]
    mtime = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for path, data in [(p_, _read(ROOT, p_)) for p_ in paths] + [("PKG-INFO", metadata(ROOT))]:
            entry = tarfile.TarInfo("%s/%s" % (base, path))
            entry.size, entry.mtime, entry.mode = len(data), mtime, 0o644
            t.addfile(entry, io.BytesIO(data))
    return name


if __name__ == "__main__":  # for a look at what the backend reads
    print(json.dumps(project(ROOT), indent=2))
