"""Query indexes as bytes and back, without pickle (the bytes live in a shared Redis): a walk graph
(``WalkIndex``), the neighbour lists (``EdgeIndex``) and a BM25 index (``BM25Index``).

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
from shared.domain.retrieval.edge_index import EdgeIndex
from shared.domain.retrieval.graph_walk import NameIndex, WalkIndex

_FORMAT = 2  # bumped when the layout below changes: older snapshots then read as unusable
_WALK_ARRAYS = ("indptr", "indices", "prob", "degree", "entity_passages")
_NAME_ARRAYS = ("post_ptr", "postings", "word_ptr", "words")  # the entities' name words (``NameIndex``)
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
    names = index.names or NameIndex.build(index.entities)
    vocab, vocab_ends = strings_arrays(list(names.vocab))  # in word-number order (a dict keeps insertion order)
    return pack({"format": _header("walk"), **{name: getattr(index, name) for name in _WALK_ARRAYS},
                 "passages": passages, "passage_ends": passage_ends, "entities": entities, "entity_ends": entity_ends,
                 **{"name_" + name: getattr(names, name) for name in _NAME_ARRAYS},
                 "vocab": vocab, "vocab_ends": vocab_ends})


def walk_from_bytes(data: bytes) -> WalkIndex:
    a = unpack(data)
    _check(a, "walk")
    try:
        passages = strings_from(a["passages"], a["passage_ends"])
        entities = strings_from(a["entities"], a["entity_ends"])
        vocab = strings_from(a["vocab"], a["vocab_ends"])
        names = NameIndex({w: i for i, w in enumerate(vocab)}, *(a["name_" + name] for name in _NAME_ARRAYS))
        nodes = len(passages) + len(entities)
        words = len(names.vocab)
        if (not _csr_fits(a["indptr"], a["indices"], nodes, nodes) or a["degree"].shape != (nodes,)
                or a["entity_passages"].shape != (len(entities),) or a["indices"].shape != a["prob"].shape
                or not _csr_fits(names.post_ptr, names.postings, words, len(entities))
                or not _csr_fits(names.word_ptr, names.words, len(entities), words)):
            raise ValueError("walk snapshot arrays do not fit together")
    except KeyError as exc:
        raise ValueError(f"walk snapshot lacks {exc}") from exc
    return WalkIndex(*(a[name] for name in _WALK_ARRAYS[:4]), passages, entities,
                     {p: i for i, p in enumerate(passages)}, {e: j for j, e in enumerate(entities)},
                     a["entity_passages"], names)


def _csr_fits(ptr: np.ndarray, idx: np.ndarray, rows: int, columns: int) -> bool:
    """Whether compressed rows index only what exists: ``rows + 1`` ascending offsets ending at ``len(idx)``, every
    column below ``columns`` (a damaged snapshot must not send a query out of bounds)."""
    return (ptr.shape == (rows + 1,) and int(ptr[-1]) == len(idx) and not bool(np.any(np.diff(ptr) < 0))
            and (not idx.size or 0 <= int(idx.min()) <= int(idx.max()) < columns))


# ------------------------------------------------------------------ neighbour lists
def edges_to_bytes(index: EdgeIndex) -> bytes:
    names, ends = strings_arrays(index.names)
    return pack({"format": _header("edges"), "names": names, "name_ends": ends, "indptr": index.indptr,
                 "neighbours": index.neighbours, "weights": index.weights})


def edges_from_bytes(data: bytes) -> EdgeIndex:
    a = unpack(data)
    _check(a, "edges")
    try:
        names = strings_from(a["names"], a["name_ends"])
        indptr, neighbours, weights = a["indptr"], a["neighbours"], a["weights"]
    except KeyError as exc:
        raise ValueError(f"edges snapshot lacks {exc}") from exc
    if neighbours.shape != weights.shape or not _csr_fits(indptr, neighbours, len(names), len(names)):
        raise ValueError("edges snapshot arrays do not fit together")
    return EdgeIndex(names, {n: i for i, n in enumerate(names)}, indptr, neighbours, weights)


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
