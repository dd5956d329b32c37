"""Guarded entry methods and awaited conditions: a message waits until its chare is ready
for it (Acun14, II-B: message-driven execution, where the order in which messages arrive
is not the order a chare can use them; Charm++'s ``when`` clauses, charm4py's ``@when`` and
``self.wait``).

``@shoal.when("self.iter == iter")`` on an entry method: a message to it runs only when the
condition, evaluated on the chare (``self``) and the message's arguments (by the method's
parameter names, defaults included), holds. Until then it waits in its element's buffer
(``Slot.held``, in arrival order), which travels with the element when it migrates and is
saved by checkpoints. After every entry method and every coroutine step of that element,
the buffer is looked at again in arrival order: each message whose condition now holds runs
at once, before anything else of the element's queue (what one of them does may let others
run; the scan starts over after each). The condition is compiled once, when the class is
defined, into a function with the method's own signature.

``await self.wait("self.count == 4")`` inside a coroutine entry method: resumes once the
condition on ``self`` holds, checked at once and then after each entry method and
coroutine step of the element, like the buffer (each condition text is compiled once per
class).

The same buffer keeps the messages that reach an element while its ``async def __init__``
runs (:mod:`shoal.runtime.building`): they are queued again, in arrival order, once it has
returned.

Semantics worth knowing: a message that waits counts as delivered for quiescence (like a
value in a channel buffer), so a condition that never comes true ends a program whose main
awaits it with "no work is pending" instead of hanging; calling a guarded method directly
(``self.step(...)``, not as a message) runs its condition too, and raises if it is false.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from types import CodeType, FunctionType
from typing import TYPE_CHECKING, Any, TypeVar

from shoal.errors import UsageError
from shoal.runtime.futures import Task
from shoal.runtime.protocol import I_ARGS, I_KWARGS, I_METHOD

if TYPE_CHECKING:
    from shoal.runtime.collection import Slot
    from shoal.runtime.futures import Future
    from shoal.runtime.interfaces import Core

F = TypeVar("F", bound=Callable[..., Any])


class GuardError(UsageError):
    """A guarded method was called while its condition was false. When the runtime calls
    it for a message, the message waits; raised from a direct call, it is the caller's
    error."""


def when(condition: str) -> Callable[[F], F]:
    """Decorate an entry method: its messages run only once ``condition`` (a Python
    expression over ``self`` and the method's parameters) holds; until then they wait in
    the element's buffer (see the module doc)."""
    if not isinstance(condition, str):
        raise UsageError(f"@shoal.when takes the condition as a string, not {condition!r}")

    def decorate(fn: F) -> F:
        guard = _compile_guard(fn, condition)
        name = getattr(fn, "__qualname__", repr(fn))

        @functools.wraps(fn)
        def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
            if guard(self, *args, **kwargs):
                return fn(self, *args, **kwargs)
            raise GuardError(f"{name}: its condition {condition!r} is false (a guarded method "
                       "waits for it only when a message calls it)")

        guarded._shoal_guard = guard  # type: ignore[attr-defined]
        return guarded  # type: ignore[return-value]

    return decorate


class _Default:
    """Stands for a parameter's default in the text of a compiled guard (the function it
    becomes gets the method's real defaults)."""

    def __repr__(self) -> str:
        return "None"


def _compile_guard(fn: Callable[..., Any], condition: str) -> Callable[..., bool]:
    """``condition`` as a function with ``fn``'s signature, which returns its value."""
    if not isinstance(fn, FunctionType):
        raise UsageError(f"@shoal.when decorates a method (a def in the class), not {fn!r}")
    sig = inspect.signature(fn)
    params = [p.replace(annotation=p.empty,
                        default=p.empty if p.default is p.empty else _Default())
              for p in sig.parameters.values()]
    text = str(sig.replace(parameters=params, return_annotation=sig.empty))
    code = _code(f"def guard{text}:\n    return bool({condition})\n", condition,
                 fn.__qualname__)
    guard = FunctionType(code, fn.__globals__, "guard", fn.__defaults__)
    guard.__kwdefaults__ = fn.__kwdefaults__
    return guard


_WAITS: dict[tuple[type, str], Callable[[Any], bool]] = {}


def _compile_wait(cls: type, condition: str) -> Callable[[Any], bool]:
    """``condition`` over ``self`` as a function of the chare, compiled once per class."""
    cond = _WAITS.get((cls, condition))
    if cond is None:
        if not isinstance(condition, str):
            raise UsageError(f"self.wait takes the condition as a string, not {condition!r}")
        code = _code(f"def wait(self):\n    return bool({condition})\n", condition,
                     f"{cls.__qualname__}.wait")
        module = sys.modules.get(cls.__module__)
        cond = FunctionType(code, vars(module) if module is not None else {}, "wait")
        _WAITS[(cls, condition)] = cond
    return cond


def _code(source: str, condition: str, where: str) -> CodeType:
    """The code of the one function ``source`` defines."""
    try:
        module = compile(source, f"<condition {condition!r} of {where}>", "exec")
    except SyntaxError as exc:
        raise UsageError(f"{where}: the condition {condition!r} is not a Python expression "
                         f"({exc.msg})") from None
    return next(c for c in module.co_consts if isinstance(c, CodeType))


class Guards:
    """The held messages and awaited conditions of one PE's elements."""

    def __init__(self, rt: Core):
        self.rt = rt
        self.releasing: set[int] = set()  # id() of the elements whose buffer is being run
        self.run_recheck = self._recheck  # the queue entry (compared by identity)

    def hold(self, slot: Slot, env: tuple, held: GuardError) -> None:
        """The message ``env`` ran into its method's false condition: keep it. A
        :class:`GuardError` raised deeper (a guarded method called directly inside the method)
        is the program's error."""
        tb = held.__traceback__
        if tb is None or tb.tb_next is None or tb.tb_next.tb_next is not None:
            raise held
        slot.held.append(env)
        slot.after = True

    def wait(self, slot: Slot, condition: str) -> Future:
        """``self.wait(condition)``: a future resolved once the condition holds."""
        rt = self.rt
        if slot.obj is None or rt.current is not slot:
            raise UsageError("self.wait(...) is called by an entry method of the chare "
                             "(and awaited there)")
        cond = _compile_wait(type(slot.obj), condition)
        fut = rt.future()
        if cond(slot.obj):
            rt.resolve(rt.pe, fut.fid, None)
        else:
            slot.waits.append((cond, fut))
            slot.after = True
        return fut

    def release(self, slot: Slot) -> bool:
        """Run the held messages of ``slot`` whose condition holds, in arrival order, and
        resume the coroutines whose awaited condition holds, until none does. False if
        this element's buffer is being run already (a call made from here returned)."""
        key = id(slot)
        if key in self.releasing:
            return False
        self.releasing.add(key)
        try:
            while slot.coll.local.get(slot.index) is slot and (
                    self._run_one(slot) or self._resume_one(slot)):
                pass
        finally:
            self.releasing.discard(key)
        return True

    def _run_one(self, slot: Slot) -> bool:
        obj = slot.obj
        for k, env in enumerate(slot.held):
            guard = getattr(type(obj), env[I_METHOD])._shoal_guard
            kwargs = env[I_KWARGS] or {}
            if guard(obj, *env[I_ARGS], **kwargs):
                del slot.held[k]
                self.rt._run_invoke(slot, env)
                return True
        return False

    def _resume_one(self, slot: Slot) -> bool:
        rt = self.rt
        for k, (cond, fut) in enumerate(slot.waits):
            if cond(slot.obj):
                del slot.waits[k]
                rt.futures.pop(fut.fid, None)
                fut.done = True
                waiters, fut.waiters = fut.waiters, []
                for task in waiters:  # at once: the condition holds now
                    if isinstance(task, Task):
                        rt._resume(task, None)
                    else:  # shoal.iwait's: it hears of the future at once
                        task(fut)
                return True
        return False

    def recheck_later(self, slot: Slot) -> None:
        """An element arrived with held messages: look at them once the queue gets there
        (the entry names the element second: a move takes only its messages along)."""
        self.rt.push(0, self.run_recheck, None, slot)

    def _recheck(self, _: None, slot: Slot) -> None:
        if slot.held and slot.coll.local.get(slot.index) is slot:
            self.rt._after(slot)
