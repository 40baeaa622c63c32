"""Query indexes as bytes and back, without pickle (the bytes live in a shared Redis): a walk graph
(``WalkIndex``) and a BM25 index (``BM25Index``).

The container is numpy's ``.npz`` (``np.savez``, read with ``allow_pickle=False``): named arrays of numbers only.
A list of strings is two arrays, its UTF-8 bytes joined and the end offset of each string, so any string (a name
with a newline, a comma) round-trips. A BM25 index is written by bm25s's own ``save`` (score arrays as ``.npy``,
vocabulary and parameters as JSON, into a temporary directory whose files become the container's byte arrays) and
read back by its ``load``. Any malformed input raises ``ValueError``: the caller then builds the index afresh.
"""

from __future__ import annotations

import io
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from shared.domain.retrieval.bm25 import BM25Index
from shared.domain.retrieval.graph_walk import WalkIndex

_FORMAT = 1  # bumped when the layout below changes: older snapshots then read as unusable
_WALK_ARRAYS = ("indptr", "indices", "prob", "degree", "entity_passages")
_FILE = "f:"  # prefix of a bm25s file's entry in the container


def pack(arrays: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def unpack(data: bytes) -> dict[str, np.ndarray]:
    if not data.startswith(b"PK"):  # an .npz is a zip archive; ``np.load`` would read other formats too
        raise ValueError("not an index snapshot")
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            return {name: npz[name] for name in npz.files}
    except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile) as exc:
        raise ValueError(f"not an index snapshot: {exc}") from exc


def strings_arrays(items: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(UTF-8 bytes of the strings joined, end offset of each)."""
    encoded = [s.encode("utf-8", "surrogatepass") for s in items]
    ends = np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)))
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), ends


def strings_from(blob: np.ndarray, ends: np.ndarray) -> list[str]:
    text = blob.tobytes()
    if ends.size and (int(ends[-1]) != len(text) or bool(np.any(np.diff(ends) < 0))):
        raise ValueError("string offsets do not match their bytes")
    starts = [0, *ends[:-1].tolist()] if ends.size else []
    return [text[a:b].decode("utf-8", "surrogatepass") for a, b in zip(starts, ends.tolist(), strict=True)]


def _header(kind: str) -> np.ndarray:
    return np.frombuffer(f"{kind}/{_FORMAT}".encode(), dtype=np.uint8)


def _check(arrays: dict[str, np.ndarray], kind: str) -> None:
    if "format" not in arrays or arrays["format"].tobytes() != _header(kind).tobytes():
        raise ValueError(f"not a {kind} snapshot of format {_FORMAT}")


# ------------------------------------------------------------------ walk graph
def walk_to_bytes(index: WalkIndex) -> bytes:
    passages, passage_ends = strings_arrays(index.passages)
    entities, entity_ends = strings_arrays(index.entities)
    return pack({"format": _header("walk"), **{name: getattr(index, name) for name in _WALK_ARRAYS},
                 "passages": passages, "passage_ends": passage_ends, "entities": entities, "entity_ends": entity_ends})


def walk_from_bytes(data: bytes) -> WalkIndex:
    a = unpack(data)
    _check(a, "walk")
    try:
        passages = strings_from(a["passages"], a["passage_ends"])
        entities = strings_from(a["entities"], a["entity_ends"])
        nodes = len(passages) + len(entities)
        if (a["indptr"].shape != (nodes + 1,) or a["degree"].shape != (nodes,)
                or a["entity_passages"].shape != (len(entities),)
                or a["indices"].shape != a["prob"].shape or int(a["indptr"][-1]) != len(a["indices"])
                or (a["indices"].size and not 0 <= int(a["indices"].min()) <= int(a["indices"].max()) < nodes)):
            raise ValueError("walk snapshot arrays do not fit together")
    except KeyError as exc:
        raise ValueError(f"walk snapshot lacks {exc}") from exc
    index = WalkIndex(*(a[name] for name in _WALK_ARRAYS[:4]), passages, entities,
                      {p: i for i, p in enumerate(passages)}, {e: j for j, e in enumerate(entities)},
                      a["entity_passages"])
    index._index_names()
    return index


# ------------------------------------------------------------------ BM25
def bm25_to_bytes(index: BM25Index) -> bytes:
    ids, ends = strings_arrays(index.ids)
    arrays = {"format": _header("bm25"), "ids": ids, "id_ends": ends}
    if index._retriever is not None:
        with tempfile.TemporaryDirectory(prefix="gf-bm25-") as tmp:
            index._retriever.save(tmp, show_progress=False)
            for path in sorted(Path(tmp).iterdir()):
                arrays[_FILE + path.name] = np.frombuffer(path.read_bytes(), dtype=np.uint8)
    return pack(arrays)


def bm25_from_bytes(data: bytes) -> BM25Index:
    a = unpack(data)
    _check(a, "bm25")
    try:
        ids = strings_from(a["ids"], a["id_ends"])
    except KeyError as exc:
        raise ValueError(f"bm25 snapshot lacks {exc}") from exc
    index = BM25Index([], [])
    index.ids = ids
    files = {name[len(_FILE):]: arr for name, arr in a.items() if name.startswith(_FILE)}
    if ids:
        import bm25s  # lazy, as bm25.py imports it

        with tempfile.TemporaryDirectory(prefix="gf-bm25-") as tmp:
            for name, arr in files.items():
                if Path(name).name != name:
                    raise ValueError(f"bm25 snapshot file name {name!r}")
                (Path(tmp) / name).write_bytes(arr.tobytes())
            try:
                retriever = bm25s.BM25.load(tmp, mmap=False, allow_pickle=False, show_progress=False)
            except (OSError, KeyError, TypeError, AttributeError) as exc:
                raise ValueError(f"bm25 snapshot unreadable: {exc}") from exc
        if int(retriever.scores.get("num_docs", -1)) != len(ids):
            raise ValueError("bm25 snapshot documents do not match its ids")
        index._retriever = retriever
    return index
