"""Checkpoint to disk and restart on any number of PEs (Acun14, Section III-B: "Split
execution is trivially enabled by migrating the work/data units to disk. Since the
checkpoints are unit-based, restarting from them does not depend on the core counts").

**Taking one** (``await shoal.checkpoint(path, state={...})`` on PE 0, normally in
``main``): checkpoints run one after another (a second call waits for the first).

1. The consistent point: the runtime waits for quiescence (no application message in
   flight or queued anywhere; the caller is suspended in the call) and holds the load
   balancer's trigger, so nothing moves while the shards are written. This is Charm++'s
   rule of checkpoints taken between iterations. At that point every message sent has run
   or waits in its receiver's channel buffer, so the elements (with their buffers,
   sequence numbers and reduction and broadcast counters) are the whole state. An element
   with a suspended coroutine cannot be saved (a coroutine's frame cannot be pickled): the
   checkpoint is refused, naming the element and its method.
2. PE 0 sends ``CKPT_WRITE`` to every PE; each writes its shard in parallel (its PE's
   counters, then every local element packed as migration packs it,
   :func:`~shoal.runtime.migration.packed`) and answers ``CKPT_DONE`` with its files'
   sizes and sha256, or its error. PE 0 also writes the collections and ``state``.
3. PE 0 commits the generation (:mod:`shoal.runtime.shards`) or, on any error, removes it
   and raises :class:`~shoal.errors.CheckpointError` in the caller: the previous
   checkpoint stays as it was. Under ``shoal run`` (``SHOAL_JOBDIR`` set) PE 0 then writes
   the checkpoint's path to ``$SHOAL_JOBDIR/checkpoint`` for the supervisor.

**Restarting** (``shoal.start(main, restart=path)``, ``shoal run --restart path``), on
any number of PEs P (the checkpoint was taken on Q): before its scheduler runs, each PE
rebuilds every collection and reads the elements whose new place is here, straight from
the shards: where they were if P = Q, else at their home under the new P (then the load
balancer, when one is configured, runs a step). Pending reductions continue: the partial
results saved on every PE are handed to the new root. Sections are rebuilt on the new
number of PEs by their roots (:mod:`shoal.runtime.collectives.section`). ``main`` then
runs again on PE 0 and ``shoal.restored()`` gives it the saved ``state`` with live proxies.

Groups get one member per new PE: member p keeps saved member p's state when p < Q; a
member on a new PE (p >= Q) starts as a copy of saved member 0 (fresh sequence numbers,
empty channel buffers); the members of PEs beyond P are dropped with their state. A group
on some PEs (``Group(cls, pes=...)``) keeps its members, each on its PE, on any P that
still has all of those PEs, and is refused (a CheckpointError naming the PEs it needs) on
fewer: a member is named by its PE, so it has nowhere else to go. Non-migratable array
elements (``self.migratable = False``) go back to their PE when P = Q, like every element;
on another P, to their homes. A group
with a reduction in progress can restart on Q PEs only. Identities that do not survive
(PEs and group members numbered min(P, Q) and above) are forgotten by every sequence
number that named them. The futures pending on each PE are saved as numbers (a
``shoal.future(n)`` with the values it has) and live again on the PE of the same number
(a future PE p >= P owned is gone).

**Automatic checkpoints** (``checkpoint_every``): at an AtSync point (the balancer's hook,
:meth:`Checkpoints.at_sync_point`) or at ``shoal.iteration(state)`` in main, whichever comes
first once the interval has passed; ``state`` is the last one main gave to
``shoal.iteration``. A resize (``shoal ctl``, :mod:`shoal.runtime.resize`) is served at
the same points. **In memory** (``memory=True``): see :mod:`shoal.runtime.buddy`.
Load-balancing history and statistics of PEs start afresh (those of elements
travel with them).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shoal._version import __version__
from shoal.errors import CheckpointError, UsageError
from shoal.jobdir import JobDir
from shoal.runtime import shards
from shoal.runtime.buddy import STORE, buddies
from shoal.runtime.collection import Collection, Slot
from shoal.runtime.control import young
from shoal.runtime.futures import Future, Task
from shoal.runtime.migration import packed
from shoal.runtime.protocol import CKPT_COMMIT, CKPT_COPY, CKPT_DONE, CKPT_WRITE
from shoal.runtime.recovery import InMemory, mark, restored
from shoal.runtime.resize import Resize

if TYPE_CHECKING:
    from collections.abc import Generator

    from shoal.options import Checkpointing
    from shoal.runtime.interfaces import Core, Saving


class Pending:
    """``await``-able result of :func:`shoal.checkpoint`: a summary of the checkpoint
    (``path``, ``generation``, ``bytes``, ``elements``, ``seconds``), or the
    :class:`~shoal.errors.CheckpointError` that refused it."""

    __slots__ = ("fut",)

    def __init__(self, fut: Future):
        self.fut = fut

    def __await__(self) -> Generator[Future, Any, dict[str, Any]]:
        ok, value = yield from self.fut.__await__()
        if not ok:
            raise CheckpointError(value)
        return value


class Checkpoints:
    """The checkpoint manager of one PE (the decisions are PE 0's)."""

    def __init__(self, rt: Core, options: Checkpointing):
        restart, every, auto_dir = (options.restart, options.checkpoint_every,
                                    options.checkpoint_dir)
        self.rt = rt
        self.restart = restart
        self.every = every  # automatic checkpoints: at most one per so many seconds
        self.mtbf = options.mtbf  # given: ``every`` follows Young's rule (runtime.control)
        self.costs: list[float] = []  # seconds of the checkpoints written so far (PE 0)
        self.auto_dir = None if auto_dir is None else Path(auto_dir)
        self.kept: dict[str, Any] | None = None  # main's state for automatic checkpoints
        self.mark = 0.0  # when the interval of the next automatic one began
        self.waiting = 0  # checkpoints waiting for their consistent point
        self.sync_held = False  # the balancer holds an AtSync step for the next of them
        self.state: Any = None  # what restored() gives main
        self.last: Future | None = None  # the latest checkpoint's outcome (PE 0)
        self.replies: dict[int, dict[str, Any]] = {}
        self.all_done: Future | None = None
        self.restore_seconds = 0.0  # how long this PE took to restore (benchmarks)
        self.restore_sys = 0.0  # of which in the kernel: mostly faulting in new memory
        self.main_image: shards.Image | None = None  # PE 0's main shard of a memory one
        self.resize = Resize(rt)  # shoal ctl shrink/expand: served like an automatic one
        rt.point.claims.append(self.at_sync_point)

    # ----------------------------------------------------------------- taking one
    def take(self, path: str | os.PathLike[str] | None, state: dict[str, Any] | None,
             memory: bool = False) -> Pending:
        """Start a checkpoint to ``path`` (``memory=True``: in memory, at every PE and its
        buddy, :mod:`shoal.runtime.buddy`) once the previous one is complete."""
        rt = self.rt
        _check_state(rt.pe, state)
        if (path is None) != memory:
            raise UsageError("shoal.checkpoint: give a path, or memory=True (not both)")
        done = rt.future()
        prev, self.last = self.last, done
        where = None if path is None else Path(path)
        rt.push(0, rt.run_task, Task(self._take(where, state, prev), None, done,
                                     "checkpoint"), None)
        return Pending(done)

    async def _take(self, root: Path | None, state: dict[str, Any] | None,
                    prev: Future | None) -> tuple[bool, Any]:
        if prev is not None:
            await prev
        rt = self.rt
        self.waiting += 1
        while True:
            await rt.quiescence.request()
            if self.sync_held:  # an AtSync point was offered to this checkpoint
                self.sync_held = False
                break
            if rt.point.hold():  # no step started since: nothing moves from here on
                break
        self.waiting -= 1
        try:
            if root is None:
                return True, await self._write_memory(state)
            return True, await self._write(root, state)
        except (CheckpointError, OSError) as exc:
            return False, str(exc)
        finally:
            rt.point.release()

    # ----------------------------------------------------------------- automatic ones
    def iteration(self, state: dict[str, Any] | None) -> Pending:
        """``shoal.iteration(state)`` in main: keep ``state`` for automatic checkpoints and
        take one now if ``every`` seconds have passed since the last (else resolve at once,
        to None)."""
        rt = self.rt
        _check_state(rt.pe, state)
        self.kept = state
        if self._due():
            return self._auto()
        done = rt.future()
        rt.resolve(0, done.fid, (True, None))
        return Pending(done)

    def at_sync_point(self) -> bool:
        """At the root, when every at_sync array has synced and no step runs (this
        manager's claim on the :class:`ConsistentPoint`): start an automatic checkpoint if
        one is due; True if it did (the point is then held for it, and the balancer's step
        waits until the checkpoint releases it). A checkpoint that waits for its consistent
        point (a manual one, or one of ``iteration()``) finds it here instead: an AtSync
        program is quiescent at its sync points only."""
        if not (self.waiting or self._due()):
            return False
        self.sync_held = True
        if not self.waiting:
            self._auto()
        return True

    def _due(self) -> bool:
        return self.resize.due() or (self.every is not None
                                     and time.perf_counter() - self.mark >= self.every)

    def _auto(self) -> Pending:
        self.mark = time.perf_counter()
        if self.resize.due():
            return self.take(self.resize.begin(), self.kept)
        assert self.auto_dir is not None
        return self.take(self.auto_dir, self.kept)

    async def _write(self, root: Path, state: dict[str, Any] | None) -> dict[str, Any]:
        rt = self.rt
        t0 = time.perf_counter()
        gen = shards.next_generation(root)
        tmp = shards.prepare(root, gen)
        self.replies = {}
        all_done = self.all_done = rt.future()  # (on one PE it resolves in on_write)
        for p in range(1, rt.npes):
            rt.send(p, (CKPT_WRITE, str(tmp), gen))
        try:
            main_files = self._write_main(tmp, state)
        except CheckpointError as exc:
            main_files = {"error": str(exc)}
        self.on_write((CKPT_WRITE, str(tmp), gen))
        replies = await all_done
        errors = [r["error"] for r in (main_files, *replies.values()) if "error" in r]
        if errors:
            shards.abandon(tmp)
            raise CheckpointError(f"checkpoint to {root} refused: {'; '.join(errors)} (the "
                                  "previous checkpoint there, if any, is kept)")
        files = dict(main_files["files"])
        colls: dict[int, list[int]] = {}
        for reply in replies.values():
            files.update(reply["files"])
            for cid, (n, nbytes) in reply["colls"].items():
                total = colls.setdefault(cid, [0, 0])
                total[0] += n
                total[1] += nbytes
        manifest = {"format": shards.FORMAT, "shoal": __version__, "generation": gen,
                    "dir": "", "pes": rt.npes,
                    "collections": [_describe(coll, *colls.get(cid, (0, 0)))
                                    for cid, coll in rt.colls.items()],
                    "elements": sum(n for n, _ in colls.values()),
                    "bytes": sum(f["bytes"] for f in files.values()), "files": files}
        shards.commit(root, gen, tmp, manifest)
        self._tell_supervisor(root)
        self.resize.done(root)
        seconds = time.perf_counter() - t0
        self._young(seconds)
        rt.publisher.event("checkpoint", generation=gen, bytes=manifest["bytes"],
                           seconds=seconds, path=str(root))
        return {"path": str(root), "generation": gen, "bytes": manifest["bytes"],
                "elements": manifest["elements"], "seconds": seconds}

    def _young(self, cost: float) -> None:
        """With ``mtbf``: the period of automatic checkpoints becomes Young's optimum for
        the mean cost of the last (up to) 5 checkpoints, and the controller's history
        says so."""
        if self.mtbf is None:
            return
        self.costs = [*self.costs[-4:], cost]
        mean = sum(self.costs) / len(self.costs)
        self.every = young(mean, self.mtbf)
        self.rt.control.note("young", "checkpoint_every", self.every, mean)

    async def _write_memory(self, state: dict[str, Any] | None) -> dict[str, Any]:
        """A double in-memory checkpoint: every PE keeps its shard and sends a copy to its
        buddy, which answers PE 0; with every answer, PE 0 commits the generation
        everywhere (``CKPT_COMMIT``)."""
        rt = self.rt
        t0 = time.perf_counter()
        STORE.last += 1
        gen = STORE.last
        self.replies = {}
        all_done = self.all_done = rt.future()
        main = self._write_main(None, state)
        self.main_image = main.pop("image")
        for p in range(1, rt.npes):
            rt.send(p, (CKPT_WRITE, None, gen))
        self.on_write((CKPT_WRITE, None, gen))
        replies = await all_done
        errors = [r["error"] for r in replies.values() if "error" in r]
        if errors:
            raise CheckpointError(f"in-memory checkpoint refused: {'; '.join(errors)} (the "
                                  "previous one is kept)")
        for p in range(rt.npes):
            rt.send(p, (CKPT_COMMIT, gen))
        done = {"path": None, "generation": gen, "memory": True,
                "bytes": main["bytes"] + sum(r["bytes"] for r in replies.values()),
                "elements": sum(n for r in replies.values() for n, _ in r["colls"].values()),
                "seconds": time.perf_counter() - t0}
        rt.publisher.event("checkpoint", generation=gen, bytes=done["bytes"],
                           seconds=done["seconds"], path=None)
        return done

    def on_copy(self, env: tuple) -> None:
        """At a buddy: keep the copy of PE ``owner``'s images; tell PE 0 it is in place."""
        _, gen, owner, images, result = env
        STORE.put(gen, owner, images)
        self.rt.send(0, (CKPT_DONE, owner, result))

    def on_commit(self, env: tuple) -> None:
        STORE.commit(env[1])

    def _write_main(self, tmp: Path | None, state: dict[str, Any] | None
                    ) -> dict[str, Any]:
        """The collections (with the root's reduction and broadcast counts) and ``state``."""
        meta = [coll.saved() for coll in self.rt.colls.values()]
        writer = shards.ShardWriter(tmp, "main")
        try:
            for key, value, what in (("colls", meta, "the collections (their classes and "
                                      "maps must be picklable)"),
                                     ("state", state, "the state given to shoal.checkpoint")):
                try:
                    writer.add(key, value)
                except Exception as exc:
                    raise CheckpointError(f"{what} cannot be saved: {exc!r}") from None
            return _closed(writer)
        except BaseException:
            writer.abandon()
            raise

    def on_write(self, env: tuple) -> None:
        """Write this PE's shard into the generation directory (``tmp`` None: keep it in
        memory and send a copy to the buddy, which answers); answer PE 0."""
        _, tmp, gen = env
        rt = self.rt
        try:
            result = self._write_shard(None if tmp is None else Path(tmp))
        except Exception as exc:
            result = {"error": f"PE {rt.pe}: {exc}"}
        if tmp is None and "error" not in result:
            images = [result.pop("image")]
            if rt.pe == 0:
                images.append(self.main_image)
            STORE.put(gen, rt.pe, images)
            buddy = STORE.buddy[rt.pe]
            if buddy != rt.pe:
                rt.send(buddy, (CKPT_COPY, gen, rt.pe, images, result))
                return
        if rt.pe == 0:
            self.on_done((CKPT_DONE, 0, result))
        else:
            rt.send(0, (CKPT_DONE, rt.pe, result))

    def _write_shard(self, tmp: Path | None) -> dict[str, Any]:
        rt = self.rt
        self._refuse_suspended()
        if rt.queue.fifo or rt.queue.heap:
            raise CheckpointError("internal: work queued at the consistent point")
        rt.location.forget_links()  # elements saved without records of destroyed ones
        writer = shards.ShardWriter(tmp, f"pe-{rt.pe:05d}")
        colls: dict[int, list[int]] = {}
        try:
            writer.add("pe", self._pe_info())
            for coll in rt.colls.values():
                count = colls[coll.cid] = [0, 0]
                for slot in coll.local.values():
                    try:
                        count[1] += writer.add(slot.key, packed(slot, []))
                    except Exception as exc:
                        raise CheckpointError(f"{_name(slot)} cannot be saved: {exc!r}"
                                              ) from None
                    count[0] += 1
            return {**_closed(writer), "colls": colls}
        except BaseException:
            writer.abandon()
            raise

    def _pe_info(self) -> dict[str, Any]:
        """This PE's counters and its part of each collection that is not in an element:
        the record each part with state saves (:meth:`_parts`), their ``colls`` entries
        merged per collection."""
        rt = self.rt
        info: dict[str, Any] = {"pe": rt.pe, "colls": {cid: {} for cid in rt.colls}}
        for part in self._parts():
            saved = part.saved()
            for cid, fields in saved.pop("colls", {}).items():
                info["colls"][cid].update(fields)
            info.update(saved)
        return info

    def _refuse_suspended(self) -> None:
        rt = self.rt
        busy = [slot for coll in rt.colls.values() for slot in coll.local.values()
                if slot.active]
        if not busy:
            return
        methods = sorted({task.name for fut in rt.futures.values() for task in fut.waiters
                          if type(task) is Task and task.slot is busy[0]})
        more = f" (and {len(busy) - 1} more element(s))" if len(busy) > 1 else ""
        raise CheckpointError(f"{_name(busy[0])} has a suspended coroutine "
                              f"({', '.join(methods) or 'an entry method'}){more}: a "
                              "coroutine cannot be saved; take the checkpoint between "
                              "iterations, when no entry method is awaiting")

    def on_done(self, env: tuple) -> None:
        """At PE 0: one PE's shard is on disk (or failed); with all of them, go on."""
        _, pe, result = env
        self.replies[pe] = result
        if len(self.replies) == self.rt.npes and self.all_done is not None:
            fut, self.all_done = self.all_done, None
            self.rt.resolve(0, fut.fid, self.replies)

    @staticmethod
    def _tell_supervisor(root: Path) -> None:
        """``shoal run`` restarts from the last checkpoint the job completed: it is here."""
        home = JobDir.of_rank()
        if home is not None:
            home.note_checkpoint(root)

    # ----------------------------------------------------------------- restarting
    def restored(self) -> Any:
        """The ``state`` of the checkpoint this run restarted from (None on a fresh start)."""
        if self.rt.pe != 0:
            raise UsageError("shoal.restored() gives main (on PE 0) its saved state")
        return self.state

    def start(self) -> None:
        """Before the scheduler runs: restore the checkpoint named at start-up, if any; the
        first interval of automatic checkpoints begins."""
        self.mark = time.perf_counter()
        STORE.buddy = buddies(self.rt.net.comm)
        if self.restart is not None:
            t0, sys0 = time.perf_counter(), os.times().system
            if isinstance(self.restart, InMemory):
                mark("started")
                self._restore(self.restart.main, self.restart.heads, self.restart)
                restored(self.rt.pe, self.restart.note)
            else:
                self._restore(*self._from_disk(Path(self.restart)))
            self.restore_seconds = time.perf_counter() - t0
            self.restore_sys = os.times().system - sys0
        self.resize.start()

    def _from_disk(self, root: Path) -> tuple[shards.Shard, list[shards.Shard]]:
        """The main shard and every PE's shard of checkpoint ``root`` (read whole where this
        PE needs every record)."""
        rt = self.rt
        manifest = shards.read_manifest(root)
        gen = root / manifest["dir"]
        files = {rel.split("/", 1)[1]: info for rel, info in manifest["files"].items()}
        old = int(manifest["pes"])
        same = old == rt.npes
        main = shards.Shard(gen, "main", files, whole=rt.pe == 0)
        pes = [shards.Shard(gen, f"pe-{q:05d}", files, whole=same and q == rt.pe)
               for q in range(old)]
        return main, pes

    def _parts(self) -> tuple[Saving, ...]:
        """The managers whose state is not in an element, each saving its part of a PE's
        record and restoring from every old PE's (Charm++'s PUP of its managers, Acun14
        II-E), in the order a restart restores them: where elements live before they
        arrive, then the core's counters and sequence numbers (which forget PEs that
        are gone), the collectives' partial results, the balancer's sync point."""
        rt = self.rt
        return (rt.location, rt, rt.reductions, rt.sections, rt.balancer)

    def _restore(self, main: shards.Shard, pes: list[shards.Shard],
                 memory: InMemory | None = None) -> None:
        """Rebuild the collections, take this PE's elements, then let every part restore
        itself, from the shards of a checkpoint taken on ``len(pes)`` PEs (``memory``: an
        in-job recovery, where ``pes`` hold the first records only and the elements come
        by :meth:`_exchange`)."""
        rt = self.rt
        old = len(pes)
        same = old == rt.npes
        infos = [shard.load(shard.entries[0]) for shard in pes]
        for m in main.load(main.entries[0]):
            self._rebuild(m, infos, old)
        for q, shard in enumerate(pes):
            if not same and q % rt.npes == rt.pe:
                shard.verify()  # every shard is checked by one PE
        elements = self._mine(pes, same) if memory is None else self._exchange(memory)
        parts = self._parts()
        parts[0].restore(infos)  # (homes and deletions: before the elements arrive)
        rt.migration.arrive(elements)
        for part in parts[1:]:
            part.restore(infos)
        if rt.pe == 0:
            # what main last gave shoal.iteration(), until it gives another: a program
            # that gives its state once (an AtSync one) keeps it over several restarts
            self.state = self.kept = main.load(main.entries[1])

    def _rebuild(self, m: dict[str, Any], infos: list[dict[str, Any]], old: int) -> None:
        """One collection, as the checkpoint saw it, on the new number of PEs."""
        rt = self.rt
        pes = m["pes"]
        if pes is not None and pes[-1] >= rt.npes:
            raise CheckpointError(
                f"group {m['cls'].__name__} has members on PEs {list(pes)} (Group(..., "
                f"pes=)), and PE {pes[-1]} does not exist among the {rt.npes} PEs of this "
                f"run: restart on at least {pes[-1] + 1} PEs (or make the group on PEs "
                f"below {rt.npes} before the checkpoint)")
        if rt.pe == 0 and m["kind"] == "group" and old != rt.npes and pes is None and (
                m["rets"] or any(info["colls"][m["cid"]]["partial"]
                                 or info["colls"][m["cid"]]["total"] for info in infos)):
            raise CheckpointError(f"group {m['cls'].__name__} had a reduction or broadcast "
                                  f"in progress at the checkpoint: restart it on {old} PEs")
        rt.colls[m["cid"]] = Collection.rebuilt(m, rt.npes, old, rt.pe == 0)
        if m["at_sync"]:
            rt.balancer.prepare()

    def _place(self, q: int, key: tuple, kept: list[int | None] | None) -> int | None:
        """The PE that restores record ``key`` (a collection and an index) of old PE
        ``q``'s shard, None if no PE does: group member p on PE p (if p remains); an array
        element where it was if PE ``q`` lives on as PE ``kept[q]``, else at its home."""
        cid, index = key
        coll = self.rt.colls[cid]
        if coll.kind == "group":
            return index[0] if index[0] < self.rt.npes else None
        if kept is not None and kept[q] is not None:
            return kept[q]
        return coll.home(index)

    def _mine(self, pes: list[shards.Shard], same: bool) -> list[tuple]:
        """The saved elements whose place is this PE: where they were when the number of
        PEs is unchanged, else at their homes (:meth:`_place`); on a PE the checkpoint did
        not have, a copy of saved member 0 of each group on every PE."""
        rt = self.rt
        kept: list[int | None] | None = list(range(len(pes))) if same else None
        mine = [shard.load(entry) for q, shard in enumerate(pes)
                for entry in shard.entries[1:] if self._place(q, entry[0], kept) == rt.pe]
        if rt.pe >= len(pes):
            mine += [_as_member(pes[0].load(entry), rt.pe) for entry in pes[0].entries[1:]
                     if _everywhere(rt.colls[entry[0][0]]) and entry[0][1] == (0,)]
        return mine

    def _exchange(self, memory: InMemory) -> list[tuple]:
        """An in-job recovery: every PE sends each record it holds to the PE that restores
        it (:meth:`_place`; a survivor's elements stay, so only the dead PEs' move), all
        in one ``alltoall``, and loads those it receives."""
        rt = self.rt
        picks: list[dict[int, list[int]]] = [{} for _ in range(rt.npes)]
        for q, image in memory.held.items():
            for k, entry in enumerate(image.entries[1:], 1):
                dest = self._place(q, entry[0], memory.now)
                if dest is not None:
                    picks[dest].setdefault(q, []).append(k)
        parts = [[memory.held[q].subset(ks) for q, ks in part.items()] for part in picks]
        here, parts[rt.pe] = parts[rt.pe], []  # (not through MPI)
        got = rt.net.comm.alltoall(parts)
        mark("exchanged")
        return [shard.load(entry) for image in (*here, *(i for part in got for i in part))
                for shard in (image.shard(),) for entry in shard.entries]


def _everywhere(coll: Collection) -> bool:
    """A group with a member on every PE (not ``Group(cls, pes=...)``)."""
    return coll.kind == "group" and coll.pes is None


def _as_member(item: tuple, pe: int) -> tuple:
    """A saved group member as the member of PE ``pe`` (:meth:`Slot.copied`)."""
    cid, _index, obj, state = item
    return (cid, (pe,), obj, Slot.copied(state))


def _closed(writer: shards.ShardWriter) -> dict[str, Any]:
    """A shard written: its files (on disk) or its image and size (in memory)."""
    if writer.dir is not None:
        return {"files": writer.close()}
    image = writer.image()
    return {"image": image, "bytes": len(image.pkl) + len(image.bin)}


def _check_state(pe: int, state: Any) -> None:
    if pe != 0:
        raise UsageError(f"shoal.checkpoint and shoal.iteration run on PE 0 (in main), not on "
                         f"PE {pe}")
    if state is not None and not isinstance(state, dict):
        raise UsageError(f"state must be a dict (or None), not {type(state).__name__}")


def _name(slot: Slot) -> str:
    return f"{slot.coll.cls.__name__}{list(slot.index)}"


def _describe(coll: Collection, elements: int, nbytes: int) -> dict[str, Any]:
    cls = coll.cls
    return {"cid": coll.cid, "kind": coll.kind, "class": f"{cls.__module__}.{cls.__qualname__}",
            "dims": None if coll.dims is None else list(coll.dims), "elements": elements,
            "bytes": nbytes}
