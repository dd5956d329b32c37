"""The argument codec: numpy arrays among an entry method's arguments, packed for the wire.

Numpy arrays among an entry method's arguments skip numpy's own pickling (about 11 µs for a
dump and a load here): ``pack_args`` replaces small ones by their bytes and large ones by a
``PickleBuffer`` of their memory, and ``unpack_args`` rebuilds them on arrival.
"""

from __future__ import annotations

import pickle
from typing import Any, Final

import numpy as np

OOB_MIN: Final = 8192  # bytes: smaller buffers are pickled in-band


def pack_args(args: tuple[Any, ...]) -> tuple[Any, ...] | list[Any]:
    """``args`` unchanged, or, if it holds plain numeric numpy arrays, a list
    ``[args with those arrays replaced, (position, dtype, shape), ...]``: small arrays by
    their bytes, large ones by a ``PickleBuffer`` that leaves the pickle (out of band)."""
    packed: list[Any] | None = None
    for pos, a in enumerate(args):
        if type(a) is np.ndarray:
            code = _CODES.get(a.dtype)
            if code is None:
                if a.dtype.kind not in "biufc":
                    continue  # objects, strings, records: numpy pickles them
                code = _CODES[a.dtype] = a.dtype.str
            if packed is None:
                packed = [list(args)]
            packed[0][pos] = (a.tobytes() if a.nbytes < OOB_MIN
                              # an ndarray is a buffer; the stubs say so from Python 3.12
                              else pickle.PickleBuffer(np.ascontiguousarray(a)))  # type: ignore[arg-type]
            packed.append((pos, code, a.shape))
    return args if packed is None else packed


def unpack_args(packed: list[Any]) -> tuple[Any, ...]:
    """The arguments ``pack_args`` packed, as writable arrays (large ones are views of the
    memory they were received into). A tuple: a list means packed arguments, and a message
    that waits out of order, or migrates, may be looked at again."""
    args = packed[0]
    for k in range(1, len(packed)):
        pos, code, shape = packed[k]
        data = args[pos]
        dtype = _DTYPES.get(code)
        if dtype is None:
            dtype = _DTYPES[code] = np.dtype(code)
        arr = np.ndarray(shape, dtype, data)
        args[pos] = arr.copy() if type(data) is bytes else arr
    return tuple(args)


_CODES: dict[np.dtype[Any], str] = {}  # numeric dtype -> its str, for the sender
_DTYPES: dict[str, np.dtype[Any]] = {}  # and back, for the receiver
