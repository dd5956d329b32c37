"""The runtime of this process (one PE per process), for the objects that need it: proxies,
futures, channels and chares hold no reference to it, so they pickle small."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shoal.errors import ShoalError

if TYPE_CHECKING:
    from shoal.runtime.interfaces import Core


class _Process:
    runtime: Core | None = None


def current() -> Core:
    """The running :class:`~shoal.runtime.pe.Runtime` of this process."""
    rt = _Process.runtime
    if rt is None:
        raise ShoalError("the shoal runtime is not running here: call shoal.start(main) on "
                         "every rank (or Runtime(comm).run(main) in library mode)")
    return rt


def set_current(rt: Core | None) -> None:
    if rt is not None and _Process.runtime is not None:
        raise ShoalError("a shoal runtime is already running in this process")
    _Process.runtime = rt
