"""What the parts of one PE see of each other, as ``Protocol`` types.

A manager is typed by what the others use of it, never by its class: a module of the
runtime imports these protocols, not the module of the part it talks to, so no module
depends on the PE core (``pe.py``) for its types and the import graph has no cycle through
it (docs/architecture.md draws it).
"""

from __future__ import annotations

from typing import Any, Protocol


class Saving(Protocol):
    """A part with state that lives outside the elements (Charm++'s PUP of a manager,
    Acun14 II-E): it saves its part of its PE's shard record and restores from the records
    of every PE of the checkpoint (``infos``, indexed by old PE; a restart may run on
    another number of PEs)."""

    def saved(self) -> dict[str, Any]: ...

    def restore(self, infos: list[dict[str, Any]]) -> None: ...
