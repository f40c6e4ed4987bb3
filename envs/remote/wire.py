"""The wire format of remote envs: one message is a JSON header followed by the raw bytes of its arrays.

::

    message := u32 little-endian header length | header (UTF-8 JSON) | array bytes, concatenated

The header is the message's value with every numpy array replaced by
``{"__ndarray__": [offset, nbytes], "dtype": "<f4", "shape": [64, 64, 3]}``: ``offset`` counts from the first
byte after the header, ``dtype`` is numpy's ``dtype.str`` (byte order explicit), the bytes are C order. Dicts
have string keys; tuples travel as lists; numpy scalars as JSON numbers and booleans; ``nan`` and ``inf``
as ``{"__float__": "nan"}``. Nothing is pickled:
a client in any language can read and write it.
"""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import numpy as np

ARRAY_KEY = "__ndarray__"
#: A float JSON cannot write (``nan``, ``inf``, ``-inf``) travels as ``{"__float__": "nan"}``.
FLOAT_KEY = "__float__"
_LENGTH = struct.Struct("<I")


class WireError(ValueError):
    """A value that the wire format cannot carry, or a message that is not one; the message says where."""


def encode(value: Any) -> bytes:
    """``value`` (dicts, lists, tuples, str, numbers, bools, None, numpy arrays and scalars) as one message.

    Raises:
        WireError: a value of another type, naming its path (``obs.images.front``).
    """
    buffers: list[bytes] = []
    offset = 0

    def walk(item: Any, path: str) -> Any:
        nonlocal offset
        if isinstance(item, np.ndarray):
            if item.dtype.hasobject:
                raise WireError(f"{path or 'value'}: arrays of Python objects cannot travel; send numbers or strings")
            data = np.ascontiguousarray(item).tobytes()
            header = {ARRAY_KEY: [offset, len(data)], "dtype": item.dtype.str, "shape": list(item.shape)}
            buffers.append(data)
            offset += len(data)
            return header
        if isinstance(item, dict):
            if not all(isinstance(key, str) for key in item):
                raise WireError(f"{path or 'value'}: dict keys must be strings, got {sorted(map(repr, item))}")
            if ARRAY_KEY in item or FLOAT_KEY in item:
                raise WireError(f"{path or 'value'}: the keys {ARRAY_KEY!r} and {FLOAT_KEY!r} are reserved by the wire format")
            return {key: walk(entry, f"{path}.{key}" if path else key) for key, entry in item.items()}
        if isinstance(item, list | tuple):
            return [walk(entry, f"{path}[{index}]") for index, entry in enumerate(item)]
        if isinstance(item, np.generic):
            return walk(item.item(), path)
        if isinstance(item, float) and not math.isfinite(item):
            return {FLOAT_KEY: repr(item)}
        if item is None or isinstance(item, str | bool | int | float):
            return item
        raise WireError(f"{path or 'value'}: a {type(item).__name__} cannot travel (send arrays, numbers, strings, "
                        "lists and dicts)")  # fmt: skip

    header = json.dumps(walk(value, ""), separators=(",", ":")).encode()
    return b"".join([_LENGTH.pack(len(header)), header, *buffers])


def decode(message: bytes) -> Any:
    """The value of one message; arrays are writable copies of their bytes.

    Raises:
        WireError: the message is truncated or its header is not the format's.
    """
    view = memoryview(message)
    if len(view) < _LENGTH.size:
        raise WireError(f"a message of {len(view)} bytes is shorter than its length prefix")
    (length,) = _LENGTH.unpack_from(view)
    start = _LENGTH.size + length
    if start > len(view):
        raise WireError(f"the header claims {length} bytes but the message has {len(view) - _LENGTH.size}")
    try:
        header = json.loads(bytes(view[_LENGTH.size : start]))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise WireError(f"the header is not JSON: {error}") from None
    payload = view[start:]

    def walk(item: Any) -> Any:
        if isinstance(item, dict):
            if ARRAY_KEY in item:
                offset, nbytes = item[ARRAY_KEY]
                if offset + nbytes > len(payload):
                    raise WireError(f"an array needs bytes {offset}..{offset + nbytes} of a {len(payload)}-byte payload")
                array = np.frombuffer(payload[offset : offset + nbytes], dtype=np.dtype(item["dtype"]))
                return array.reshape(item["shape"]).copy()
            if set(item) == {FLOAT_KEY}:
                return float(item[FLOAT_KEY])
            return {key: walk(entry) for key, entry in item.items()}
        if isinstance(item, list):
            return [walk(entry) for entry in item]
        return item

    return walk(header)
