"""Finding and checking the library: the search order, the version and
storage sizes, and the struct layouts that ctypes mirrors."""

import ctypes
import os
import shutil
import subprocess
import sys

import pytest

import cronoq
from conftest import CHILD_PYTHONPATH, INSTALLED, SOURCE_DIR
from cronoq import _lib


def probe(*args):
    exe = os.environ.get("CRONOQ_PROBE")
    build = os.environ.get("CRONOQ_BUILD_DIR")
    if not exe and build:
        exe = os.path.join(build, "bindings", "python", "cronoq-py-probe")
    if not exe or not os.path.exists(exe):
        pytest.skip("no probe program: set CRONOQ_PROBE or CRONOQ_BUILD_DIR to a build")
    # The probe carries its own sanitizer runtime, if any: not the one
    # preloaded into this interpreter.
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    out = subprocess.run([exe, *args], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    return dict(line.split() for line in out.stdout.splitlines())


def python_with(env_changes, code):
    """Run `code` in a fresh interpreter importing this source tree."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("CRONOQ_LIBRARY", "CRONOQ_BUILD_DIR", "LD_LIBRARY_PATH")}
    env.update(env_changes)
    env["PYTHONPATH"] = CHILD_PYTHONPATH
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)


def test_ctypes_structs_match_the_c_layout():
    c = probe("layout")
    structs = {
        "cq_pool_config": _lib.PoolConfig, "cq_pool_stats": _lib.PoolStats,
        "cq_wait_stats": _lib.WaitStats, "cq_resource_stats": _lib.ResourceStats,
        "cq_device_stats": _lib.DeviceStats, "cq_detect_opts": _lib.DetectOpts,
        "cq_gpu_list": _lib.GpuList, "cq_task": _lib.Task, "cq_allocator": _lib.Allocator,
        "cq_fleet_opts": _lib.FleetOpts, "cq_fleet_stats": _lib.FleetStats,
        "cq_event": _lib.Event,
    }
    checked = 0
    for key, value in c.items():
        name, _, field = key.partition(".")
        if name in ("cq_req", "cq_grant"):
            continue
        cls = structs[name]
        got = getattr(cls, field).offset if field else ctypes.sizeof(cls)
        assert got == int(value), "%s: ctypes says %d, C says %s" % (key, got, value)
        checked += 1
    assert checked >= 50


def test_storage_sizes_are_those_the_library_reports():
    c = probe("layout")
    assert ctypes.sizeof(_lib.ReqStorage) == _lib.req_size == int(c["cq_req"]) == 1024
    assert ctypes.sizeof(_lib.GrantStorage) == _lib.grant_size == int(c["cq_grant"]) == 2048
    assert ctypes.alignment(_lib.GrantStorage) >= 8


def test_version_is_the_library_s_and_the_package_s():
    assert cronoq.library_version == "0.1.0"
    assert cronoq.__version__ == cronoq.library_version
    pyproject = open(os.path.join(SOURCE_DIR, "pyproject.toml")).read()
    assert 'version = "%s"' % cronoq.__version__ in pyproject


def _library_file():
    path = cronoq.library_path
    assert os.path.isabs(path) and os.path.exists(path), path
    return path


def test_library_named_by_cronoq_library_is_loaded_first(tmp_path):
    copy = tmp_path / "libcronoq-copy.so"
    shutil.copy(_library_file(), copy)
    out = python_with({"CRONOQ_LIBRARY": str(copy), "CRONOQ_BUILD_DIR": "/nonexistent"},
                      "import cronoq; print(cronoq.library_path)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(copy)


def test_missing_library_named_by_cronoq_library_is_a_clear_import_error(tmp_path):
    missing = tmp_path / "nope" / "libcronoq.so"
    out = python_with({"CRONOQ_LIBRARY": str(missing)}, "import cronoq")
    assert out.returncode != 0
    assert "ImportError" in out.stderr
    assert "CRONOQ_LIBRARY: %s" % missing in out.stderr


def test_build_dir_is_searched_when_no_library_is_named():
    build = os.path.dirname(_library_file())
    out = python_with({"CRONOQ_BUILD_DIR": build}, "import cronoq; print(cronoq.library_path)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == os.path.join(build, _lib.SONAME)


def test_build_dir_without_the_library_does_not_fall_through(tmp_path):
    out = python_with({"CRONOQ_BUILD_DIR": str(tmp_path)}, "import cronoq")
    assert out.returncode != 0
    assert "CRONOQ_BUILD_DIR: %s" % (tmp_path / _lib.SONAME) in out.stderr


def test_system_loader_finds_the_soname_on_ld_library_path(tmp_path):
    shutil.copy(_library_file(), tmp_path / _lib.SONAME)
    out = python_with({"LD_LIBRARY_PATH": str(tmp_path)},
                      "import cronoq; print(cronoq.library_path)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(tmp_path / _lib.SONAME)


def test_the_package_under_test_is_the_one_asked_for():
    inside = cronoq.__file__.startswith(SOURCE_DIR + os.sep)
    assert inside != INSTALLED


def test_library_of_another_minor_version_is_refused(tmp_path):
    # A stand-in library that reports 0.2.0: loading it must fail clearly.
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler to build the stand-in library")
    src = tmp_path / "fake.c"
    src.write_text("int cq_version_number(void) { return 2000; }\n"
                   "const char *cq_version_string(void) { return \"0.2.0\"; }\n")
    lib = tmp_path / "libfake.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True, timeout=120)
    out = python_with({"CRONOQ_LIBRARY": str(lib)}, "import cronoq")
    assert out.returncode != 0
    assert "is libcronoq 0.2.0, but this binding needs 0.1.x" in out.stderr


def _fleet_library_file():
    try:
        _lib.fleet()
    except _lib.FleetMissing as e:
        pytest.skip("no fleet library: %s" % e)
    assert os.path.isabs(_lib.fleet_path) and os.path.exists(_lib.fleet_path)
    return _lib.fleet_path


def test_fleet_library_of_the_build_dir_is_loaded(tmp_path):
    fleet = _fleet_library_file()
    (tmp_path / "src" / "fleet").mkdir(parents=True)
    shutil.copy(_library_file(), tmp_path / _lib.SONAME)
    shutil.copy(fleet, tmp_path / "src" / "fleet" / _lib.FLEET_SONAME)
    out = python_with({"CRONOQ_BUILD_DIR": str(tmp_path)},
                      "import cronoq._lib as l; l.fleet(); print(l.fleet_path)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(tmp_path / "src" / "fleet" / _lib.FLEET_SONAME)


def test_fleet_library_beside_the_loaded_libcronoq_is_found(tmp_path):
    fleet = _fleet_library_file()
    shutil.copy(_library_file(), tmp_path / _lib.SONAME)
    shutil.copy(fleet, tmp_path / _lib.FLEET_SONAME)
    out = python_with({"CRONOQ_LIBRARY": str(tmp_path / _lib.SONAME)},
                      "import cronoq._lib as l; l.fleet(); print(l.fleet_path)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(tmp_path / _lib.FLEET_SONAME)


def test_build_dir_without_the_fleet_library_does_not_fall_through(tmp_path):
    shutil.copy(_library_file(), tmp_path / _lib.SONAME)
    out = python_with({"CRONOQ_BUILD_DIR": str(tmp_path)},
                      "import cronoq\n"
                      "try:\n"
                      "    cronoq.Pool.connect('unix:///x.sock', 'ns')\n"
                      "except cronoq.NotSupported as e:\n"
                      "    print(e)\n")
    assert out.returncode == 0, out.stderr
    assert "CRONOQ_BUILD_DIR: %s" % (tmp_path / "src" / "fleet" / _lib.FLEET_SONAME) \
        in out.stdout
    assert "CRONOQ_WITH_FLEET" in out.stdout
