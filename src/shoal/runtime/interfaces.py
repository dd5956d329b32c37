"""What the parts of one PE see of each other, as ``Protocol`` types.

A manager is typed by what the others use of it, never by its class: a module of the
runtime imports these protocols, not the module of the part it talks to, so no module
depends on the PE core (``pe.py``) for its types and the import graph has no cycle through
it (docs/architecture.md draws it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from shoal.runtime.collection import Collection, Slot


class Saving(Protocol):
    """A part with state that lives outside the elements (Charm++'s PUP of a manager,
    Acun14 II-E): it saves its part of its PE's shard record and restores from the records
    of every PE of the checkpoint (``infos``, indexed by old PE; a restart may run on
    another number of PEs)."""

    def saved(self) -> dict[str, Any]: ...

    def restore(self, infos: list[dict[str, Any]]) -> None: ...


class Residents(Protocol):
    """A part that keeps state about the elements of its PE, told by migration (and by a
    restart, which brings elements in the same way) when they come and go
    (:meth:`shoal.runtime.migration.Migration.subscribe`)."""

    def element_left(self, coll: Collection, slot: Slot, dest: int) -> None:
        """``slot`` is packed to leave for PE ``dest``."""

    def elements_left(self, coll: Collection) -> None:
        """The elements of ``coll`` that leave in this batch have all left."""

    def element_joined(self, coll: Collection, slot: Slot) -> None:
        """``slot`` is rebuilt here, before any of its messages runs."""

    def elements_arrived(self, coll: Collection, slots: list[Slot],
                         fetches: list[tuple] | None) -> None:
        """The elements of ``coll`` in this batch have all arrived (the broadcasts they
        lack and this PE has forgotten go into ``fetches``, when it is not None)."""
