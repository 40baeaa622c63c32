"""Named arrays of numbers as one buffer and back, for the index snapshots a cold query worker loads.

Layout: a magic line, the header's length, a JSON header (each array's name, dtype, shape and offset) and the
arrays' bytes, each at an offset aligned to 64 bytes. Reading is ``np.frombuffer`` over the buffer: no copy and no
checksum per array (``IndexSnapshots`` checks the whole snapshot's CRC), where numpy's ``.npz`` is a zip archive
whose members are each copied out and checked again on every cold load.
Arrays read back are read-only views of the buffer. Numbers only: no object arrays, so no pickle.
"""

from __future__ import annotations

import json
import struct

import numpy as np

_MAGIC = b"GFIDX1\n"
_ALIGN = 64
_KINDS = frozenset("biuf")  # numbers only: never an object array


def pack(arrays: dict[str, np.ndarray]) -> bytes:
    """Named arrays of numbers as one buffer: magic, header length, JSON header, then each array aligned."""
    header, offset, parts = {}, 0, []
    for name, arr in arrays.items():
        arr = np.ascontiguousarray(arr)
        if arr.dtype.kind not in _KINDS:
            raise TypeError(f"array {name} of dtype {arr.dtype}: numbers only")
        pad = -offset % _ALIGN
        parts.append(b"\0" * pad)
        offset += pad
        header[name] = [arr.dtype.str, list(arr.shape), offset]
        parts.append(arr.tobytes())
        offset += arr.nbytes
    head = json.dumps(header).encode()
    start = len(_MAGIC) + 8 + len(head)
    return b"".join([_MAGIC, struct.pack("<Q", len(head)), head, b"\0" * (-start % _ALIGN), *parts])


def unpack(data: bytes) -> dict[str, np.ndarray]:
    """The arrays ``pack`` wrote, as read-only views of ``data``; ``ValueError`` when ``data`` is not such a
    buffer or an array would reach beyond it."""
    data = memoryview(data).cast("B")  # bytes, or a buffer a value was read into
    if len(data) < len(_MAGIC) + 8 or data[:len(_MAGIC)] != _MAGIC:
        raise ValueError("not an index snapshot")
    (size,) = struct.unpack_from("<Q", data, len(_MAGIC))
    start = len(_MAGIC) + 8 + size
    try:
        header = json.loads(bytes(data[len(_MAGIC) + 8:start]))
        base = start + (-start % _ALIGN)
        out = {}
        for name, (dtype, shape, offset) in header.items():
            dt = np.dtype(dtype)
            count = int(np.prod(shape, dtype=np.int64))
            if dt.kind not in _KINDS or offset < 0 or count < 0 or base + offset + count * dt.itemsize > len(data):
                raise ValueError(f"array {name} does not fit the snapshot")
            view = np.frombuffer(data, dtype=dt, count=count, offset=base + offset).reshape(shape)
            view.flags.writeable = False  # a buffer a value was read into is writable: the views are not
            out[name] = view
        return out
    except (TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"not an index snapshot: {exc}") from exc
