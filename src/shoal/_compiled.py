"""The runtime's compiled core: which modules mypyc compiles at install, and the switch that
runs their pure-Python source instead (docs/compiled.md).

``setup.py`` compiles :data:`MODULES` into C extensions (mypyc) beside their ``.py`` files;
Python then imports the extension. With ``SHOAL_PURE=1`` in the environment a build installs
no extension, and an import of shoal loads the ``.py`` source of these modules even where an
extension is installed: for a traceback with source lines and locals, or to compare the two
builds. This module imports nothing of shoal: ``setup.py`` reads it before shoal is
installed.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import sys
from collections.abc import Sequence
from types import ModuleType

PURE_ENV = "SHOAL_PURE"
# the hot path of a message (docs/compiled.md says what each gains); compiled as one group
MODULES = (
    "shoal.runtime.queue",
    "shoal.runtime.slot",
    "shoal.runtime.collection",
    "shoal.runtime.protocol",
    "shoal.runtime.wire.codec",
    "shoal.runtime.wire.transport",
    "shoal.runtime.pe",
)
# C of shoal's own, no Python source: small envelopes by the MPI library's calls (its .c file)
DIRECT = "shoal.runtime.wire._direct"


def pure_requested() -> bool:
    """Does the environment ask for the pure-Python core (``SHOAL_PURE=1``)? Another value
    than 0 or 1 is said on stderr and read as 0: which core runs changes no result."""
    value = os.environ.get(PURE_ENV, "")
    if value not in ("", "0", "1"):
        print(f"shoal: {PURE_ENV}={value!r} is neither 1 (the pure-Python core) nor 0 (the "
              f"compiled core where one is installed): running as with 0", file=sys.stderr)
    return value == "1"


class _Source:
    """Finds the ``.py`` file of a compiled module, ahead of its extension (a finder of
    ``sys.meta_path`` by its ``find_spec``: ``importlib.abc``, whose base class it needs
    not, costs every process that imports shoal 8-13 ms to import)."""

    def find_spec(self, name: str, path: Sequence[str] | None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        if name not in MODULES:
            return None
        leaf = name.rpartition(".")[2] + ".py"
        for entry in path or sys.path:
            source = os.path.join(entry, leaf)
            if os.path.isfile(source):
                from importlib.util import spec_from_file_location

                return spec_from_file_location(name, source)
        return None


def _sourced() -> bool:
    """Were the compiled modules' sources preferred (:func:`prefer_source`, which ``import
    shoal`` calls under ``SHOAL_PURE=1``)?"""
    return any(isinstance(f, _Source) for f in sys.meta_path)


def prefer_source() -> None:
    """From now on, import the compiled modules from their source (once)."""
    if not _sourced():
        sys.meta_path.insert(0, _Source())


def direct() -> ModuleType | None:
    """The module of :data:`DIRECT`, or None where it is not built or the pure core was
    asked for (then the transport sends by mpi4py alone). (What ``import shoal`` decided
    from ``SHOAL_PURE``: the environment is not read again, nor a bad value said twice.)"""
    if _sourced():
        return None
    try:
        return importlib.import_module(DIRECT)
    except ImportError:
        return None


def core() -> str:
    """Which core this process runs: ``"compiled"`` (mypyc) or ``"pure"`` (Python)."""
    from shoal.runtime import pe

    return "pure" if pe.__file__ is None or pe.__file__.endswith(".py") else "compiled"
