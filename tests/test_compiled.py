"""The runtime's two cores (shoal._compiled, setup.py): the compiled one where it was built,
the pure-Python one on request, and an install that never fails for want of a compiler."""

import glob
import os
import runpy
import subprocess
import sys
from pathlib import Path

import shoal
from shoal import _compiled

ROOT = Path(__file__).resolve().parent.parent
WHICH = ("import shoal, shoal._compiled as c; from shoal.runtime import pe; "
         "print(c.core(), pe.__file__)")


def core_in_child(**env):
    out = subprocess.run([sys.executable, "-c", WHICH], capture_output=True, text=True,
                         env={**os.environ, **env}, timeout=120, check=True)
    return out.stdout.split(), out.stderr


def built_extensions():
    package = Path(shoal.__file__).parent
    return [m for m in _compiled.MODULES
            if glob.glob(str(package.parent / (m.replace(".", "/") + ".*.so")))]


def test_each_compiled_module_was_built_and_is_what_runs():
    # make's editable install builds every module of MODULES (or, with no compiler, none)
    built = built_extensions()
    assert built in ([], list(_compiled.MODULES)), built
    (which, where), _ = core_in_child(SHOAL_PURE="0")
    assert which == ("compiled" if built else "pure")
    assert where.endswith(".so") == bool(built)


def test_the_direct_way_is_built_with_the_core_and_off_in_the_pure_one():
    code = "import shoal._compiled as c; print(c.direct())"
    runs = {pure: subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 env={**os.environ, "SHOAL_PURE": pure}, timeout=120,
                                 check=True).stdout for pure in ("0", "1")}
    assert runs["1"].strip() == "None"
    assert ("_direct" in runs["0"]) == bool(built_extensions()), runs["0"]


def test_shoal_pure_runs_the_source_of_every_compiled_module():
    code = ("import shoal, importlib, shoal._compiled as c; "
            "print(*[importlib.import_module(m).__file__ for m in c.MODULES])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "SHOAL_PURE": "1"}, timeout=120, check=True)
    files = out.stdout.split()
    assert len(files) == len(_compiled.MODULES)
    assert all(f.endswith(".py") for f in files), files
    (which, _), _ = core_in_child(SHOAL_PURE="1")
    assert which == "pure"


def test_a_bad_shoal_pure_is_said_and_read_as_zero():
    (which, _), err = core_in_child(SHOAL_PURE="yes")
    assert "SHOAL_PURE='yes' is neither 1" in err
    assert which == ("compiled" if built_extensions() else "pure")


def test_the_build_compiles_nothing_with_shoal_pure_and_says_so(monkeypatch, capsys):
    monkeypatch.setenv("SHOAL_PURE", "1")
    monkeypatch.chdir(ROOT)
    setup = runpy.run_path(str(ROOT / "setup.py"), run_name="setup")
    assert setup["_extensions"]() == []
    assert "SHOAL_PURE=1; installing the pure-Python core" in capsys.readouterr().err


def test_a_core_that_does_not_type_check_installs_pure(monkeypatch, capsys, tmp_path):
    # the build's type check fails (a module mypyc cannot accept): no extension, one line
    bad = tmp_path / "src" / "bad.py"
    bad.parent.mkdir()
    bad.write_text("x: int = 'not an int'\n")
    monkeypatch.delenv("SHOAL_PURE", raising=False)
    monkeypatch.chdir(ROOT)  # (setup.py reads src/shoal/_compiled.py)
    setup = runpy.run_path(str(ROOT / "setup.py"), run_name="setup")
    monkeypatch.chdir(tmp_path)
    setup["_extensions"].__globals__["compiled"] = {**setup["compiled"], "MODULES": ("bad",)}
    # (the direct way's C, no mypyc in it, is still built)
    assert [ext.name for ext in setup["_extensions"]()] == [_compiled.DIRECT]
    assert "mypyc could not compile the core" in capsys.readouterr().err


def test_pips_metadata_steps_list_no_extension_and_its_build_step_does(monkeypatch):
    # (what setuptools' build backend puts in sys.argv for each of pip's steps)
    monkeypatch.chdir(ROOT)
    setup = runpy.run_path(str(ROOT / "setup.py"), run_name="setup")
    command = setup["_command"]
    assert command(["setup.py", "egg_info"]) in setup["METADATA_ONLY"]
    assert command(["setup.py", "--quiet", "dist_info", "--output-dir", "/tmp/m"]) \
        in setup["METADATA_ONLY"]
    for build in (["setup.py", "editable_wheel", "--dist-info-dir", "/tmp/m"],
                  ["setup.py", "-q", "bdist_wheel", "--dist-dir", "/tmp/w"],
                  ["setup.py", "build_ext", "--inplace"]):
        assert command(build) not in setup["METADATA_ONLY"], build
