"""Builds the runtime's hot modules with mypyc (pyproject.toml has everything else).

The modules of ``shoal._compiled.MODULES`` become C extensions, compiled by the machine's C
compiler at install; their ``.py`` files are installed too. ``shoal._compiled.DIRECT`` is C
of shoal's own (the small envelope's way by MPI's calls), built beside them. Without a working compiler or
mypyc, with ``SHOAL_PURE=1``, or when the build fails, shoal installs as pure Python and says
so: the install never fails for the sake of speed. See docs/compiled.md.
"""

import runpy
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

compiled = runpy.run_path("src/shoal/_compiled.py")


def _say(what: str) -> None:
    print(f"shoal: {what}; installing the pure-Python core (slower messaging, same "
          f"behaviour)", file=sys.stderr)


class _OptionalBuildExt(build_ext):
    """A failed compile installs the pure-Python modules instead of failing the install."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # (CompileError, LinkError, a missing compiler...)
            _say(f"the compiled core did not build ({exc})")

    def build_extension(self, ext) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:
            if ext.name == compiled["DIRECT"]:
                print(f"shoal: {ext.name} did not build ({exc}); small envelopes go by "
                      f"mpi4py (slower messaging, same behaviour)", file=sys.stderr)
            else:
                _say(f"{ext.name} did not build ({exc})")


def _extensions() -> list:
    if compiled["pure_requested"]():
        _say(f"{compiled['PURE_ENV']}=1")
        return []
    # the small envelope's way by MPI's own calls (plain C, no MPI header: it finds the MPI
    # library mpi4py loaded at run time)
    direct = compiled["DIRECT"]
    return [Extension(direct, ["src/" + direct.replace(".", "/") + ".c"]), *_mypyc()]


def _mypyc() -> list:
    try:
        from mypyc.build import mypycify
    except ImportError:
        _say("mypyc is not installed")
        return []
    paths = ["src/" + m.replace(".", "/") + ".py" for m in compiled["MODULES"]]
    try:
        # the build's own type check, the same in every environment: no configuration file
        # (make lint checks the code), only the compiled modules' errors, no installed
        # package's types (numpy's, mpi4py's are Any: mypyc checks nothing of them)
        return mypycify(["--config-file=", "--follow-imports=silent", "--ignore-missing-imports",
                         "--no-site-packages", *paths],
                        opt_level="3", group_name="shoal_core")
    except BaseException as exc:  # (mypy exits by SystemExit on a type error)
        _say(f"mypyc could not compile the core ({exc!r})")
        return []


# what pip asks before it builds (the build's requirements, the metadata): no extension is
# built by these, and listing them runs mypy over the core and writes its C (4 s of the
# install, twice)
METADATA_ONLY = {"egg_info", "dist_info"}


def _command(argv: list[str]) -> str | None:
    """The setuptools command of a setup.py command line (its first word that is not an
    option)."""
    return next((arg for arg in argv[1:] if not arg.startswith("-")), None)


if __name__ == "__main__":  # (as the build backend runs it; tests import it to call _extensions)
    setup(ext_modules=[] if _command(sys.argv) in METADATA_ONLY else _extensions(),
          cmdclass={"build_ext": _OptionalBuildExt})
