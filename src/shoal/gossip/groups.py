"""Hierarchical gossip in the node daemon (seed 001's outlook; issue 28, item 4): the layer
of group summaries, as :mod:`shoal.gossip.hier` simulates it.

A grouped daemon (``--group NAME``: a topology key such as the rack; or ``--groups G``: a
hash of the node's name) keeps the full records of its own group's nodes, spread by Fig. 1
within the group (the daemon's vector; other groups' records are not merged), and one
summary per group: what a group's live members hold (count, cores, min/mean/max busy cores,
free memory in all and at least, the oldest member record's age) and a contact address (the
member that made it). Once per interval the daemon makes its own group's summary afresh and
sends the window of its youngest summaries to a contact of another group; a receiver keeps
each summary younger than its copy (the merge of Fig. 1, entries named by group id). A node
holds S + G entries instead of N.

Membership needs no extra message. A daemon that knows no member of its own group sends its
window to a seed, which may be in another group: that daemon passes the datagram on, as it
came, to another node it heard of in the sender's group (a window names its sender's group
in every entry), whose daemon then knows the sender; and a daemon that finds in a summary of
its own group a contact it does not know sends that contact its window. The members of a
group find each other from there. A daemon that knows no node of another group sends its
summaries to a member of its own group, which answers with its own summaries if they hold
another group's (so the answer is never answered).
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from shoal.gossip import packet
from shoal.gossip.analysis import window_entries
from shoal.gossip.packet import Address, parse_ip_addr
from shoal.gossip.vector import OpenVector

HEARD = 8  # addresses kept per other group, heard from its windows


def group_name(group: str | None, groups: int | None, node: str) -> str | None:
    """The group of node ``node``: ``group`` as given, else one of ``groups`` by a hash of
    the node's name, else None (flat gossip)."""
    if group is not None:
        return group
    if groups is not None:
        return f"hash-{packet.node_id(node) % groups}-of-{groups}"
    return None


class GroupLayer:
    """The summaries a grouped daemon holds (slot 0: its own group's) and the contacts it
    heard of other groups."""

    def __init__(self, name: str, window: float | int):
        self.name = name
        self.id = packet.group_of(name)
        self.window = window
        self.summaries = OpenVector(self.id, packet.SUMMARY)
        self.heard_of: dict[int, list[str]] = {}  # group id -> addresses heard, latest last
        self._own = np.zeros((), packet.SUMMARY)

    def renew(self, now: float, members: list[dict[str, Any]], me: str) -> None:
        """Make the own group's summary afresh from its live ``members`` (record fields and
        ``age``, this node's included); ``me``: this node's address, the contact."""
        own = self._own
        busy = [m["busy"] for m in members]
        own["nodes"], own["cores"] = len(members), sum(m["cores"] for m in members)
        own["busy_min"], own["busy_max"] = min(busy), max(busy)
        own["busy_mean"] = sum(busy) / len(busy)
        own["free_mem"] = sum(m["free_mem"] for m in members)
        own["free_min"] = min(m["free_mem"] for m in members)
        own["oldest"] = max(m["age"] for m in members)
        own["contact"], own["group"] = me.encode(), self.name.encode()
        self.summaries.vector.update_own(own, now)

    def heard(self, group: int, addr: str) -> None:
        """A node of ``group`` is at ``addr`` (a window from another group named it)."""
        if group in (0, self.id):
            return
        seen = self.heard_of.setdefault(group, [])
        if addr in seen:
            seen.remove(addr)
        seen.append(addr)
        del seen[:-HEARD]

    def relay_to(self, group: int, sender: str, rng: random.Random) -> Address | None:
        """Where to pass on a window of ``group`` from ``sender``: another node heard of in
        that group, at random (None if none)."""
        others = [a for a in self.heard_of.get(group, []) if a != sender]
        return parse_ip_addr(rng.choice(others)) if others else None

    def target(self, rng: random.Random) -> tuple[Address, int] | None:
        """A node of another group, and its group, at random: a group known by its summary
        or heard of, then a node heard of in it (summaries' contacts included)."""
        vec = self.summaries.vector
        addrs = {g: list(a) for g, a in self.heard_of.items()}
        for slot in (np.flatnonzero(vec.known[1:len(self.summaries)]) + 1).tolist():
            contact = vec.records["contact"][slot].decode()
            known = addrs.setdefault(int(self.summaries.ids[slot]), [])
            if contact not in known:
                known.append(contact)
        if not addrs:
            return None
        group = rng.choice(sorted(addrs))
        addr = parse_ip_addr(rng.choice(addrs[group]))
        return None if addr is None else (addr, group)

    def window_slots(self, skip: int = 0) -> np.ndarray:
        """The slots of the youngest summaries to send: ``window`` of those known, at least
        the own one and one other; not group ``skip``'s (the receiver's: it makes its own)."""
        known = int(self.summaries.vector.known.sum())
        win = self.window
        size = (window_entries(known, win if isinstance(win, float) else min(win, known))
                if known >= 2 else 1)
        size = max(min(2, known), size)
        slots = self.summaries.window(min(known, size + 1))
        slots = slots[np.argsort(-self.summaries.vector.born[slots], kind="stable")]
        return slots[self.summaries.ids[slots] != skip][:size]

    def merge(self, entries: np.ndarray, now: float) -> tuple[int, str | None]:
        """Keep the arriving summaries younger than ours (never the own group's, which this
        node makes); returns how many were kept, and the contact the own group's summary
        named (a member this node may not know yet)."""
        own = entries["node"] == self.id
        member = entries["state"]["contact"][own]
        others = entries[~own]
        for group, contact in zip(others["node"].tolist(), others["state"]["contact"],
                                  strict=True):
            self.heard(group, contact.decode())  # (more nodes to send to than one a group)
        kept = self.summaries.merge(others["node"], others["age"], others["state"], now)
        return kept, member[0].decode() if len(member) else None

    def status(self, now: float) -> list[dict[str, Any]]:
        """Every group known, the own first, then by name (summary fields and age)."""
        vec = self.summaries.vector
        out = []
        for slot in np.flatnonzero(vec.known).tolist():
            entry = packet.summary_fields(vec.records[slot])
            entry.update(id=int(self.summaries.ids[slot]), own=slot == 0,
                         age=round(float(now - vec.born[slot]), 4))
            out.append(entry)
        return sorted(out, key=lambda e: (not e["own"], e["group"]))
