"""Query indexes as bytes and back, without pickle (the bytes live in a shared Redis): a walk graph
(``WalkIndex``), the neighbour lists (``EdgeIndex``) and a BM25 index (``BM25Index``).

The container is named arrays of numbers only (``array_pack``), read back as views of the snapshot's bytes. A
list of strings (a ``StringTable``) is three arrays: its UTF-8 bytes joined, the end offset of each string and
the order that sorts them, so any string (a name with a newline, a comma) round-trips and loading one decodes
nothing. A BM25 index is its postings (each word's documents and term frequencies), its documents' lengths and
fingerprints, its two parameters and its ids and vocabulary as tables (it stores no score: queries compute them).
Any malformed input raises ``ValueError``: the caller then builds the index afresh.
"""

from __future__ import annotations

import numpy as np

from shared.domain.retrieval.bm25 import BM25Index
from shared.domain.retrieval.edge_index import EdgeIndex
from shared.domain.retrieval.graph_walk import NameIndex, WalkIndex
from shared.domain.retrieval.strings import StringTable
from shared.infra.store.array_pack import pack, unpack

_FORMAT = 4  # bumped when the layout below changes: older snapshots then read as unusable
_WALK_ARRAYS = ("indptr", "indices", "prob", "degree", "entity_passages")
_NAME_ARRAYS = ("post_ptr", "postings", "word_ptr", "words")  # the entities' name words (``NameIndex``)
_BM25_ARRAYS = ("indptr", "docs", "tf", "lengths")  # a BM25 index's postings and document lengths


def table_arrays(name: str, table: StringTable) -> dict[str, np.ndarray]:
    """The arrays of a table, named ``name``, ``name_ends`` and ``name_order``."""
    blob, ends, order = table.arrays()
    return {name: blob, f"{name}_ends": ends, f"{name}_order": order}


def table_from(arrays: dict[str, np.ndarray], name: str) -> StringTable:
    """The table ``table_arrays`` stored as ``name``; ``KeyError`` when missing, ``ValueError`` when damaged."""
    return StringTable.from_arrays(arrays[name], arrays[f"{name}_ends"], arrays[f"{name}_order"])


def _header(kind: str) -> np.ndarray:
    return np.frombuffer(f"{kind}/{_FORMAT}".encode(), dtype=np.uint8)


def _check(arrays: dict[str, np.ndarray], kind: str) -> None:
    if "format" not in arrays or arrays["format"].tobytes() != _header(kind).tobytes():
        raise ValueError(f"not a {kind} snapshot of format {_FORMAT}")


# ------------------------------------------------------------------ walk graph
def walk_to_bytes(index: WalkIndex) -> bytes:
    names = index.names or NameIndex.build(index.entities)
    return pack({"format": _header("walk"), **{name: getattr(index, name) for name in _WALK_ARRAYS},
                 **table_arrays("passages", index.passages), **table_arrays("entities", index.entities),
                 **{"name_" + name: getattr(names, name) for name in _NAME_ARRAYS},
                 **table_arrays("vocab", names.vocab)})


def walk_from_bytes(data: bytes) -> WalkIndex:
    a = unpack(data)
    _check(a, "walk")
    try:
        passages, entities = table_from(a, "passages"), table_from(a, "entities")
        names = NameIndex(table_from(a, "vocab"), *(a["name_" + name] for name in _NAME_ARRAYS))
        nodes = len(passages) + len(entities)
        words = len(names.vocab)
        if (not _csr_fits(a["indptr"], a["indices"], nodes, nodes) or a["degree"].shape != (nodes,)
                or a["entity_passages"].shape != (len(entities),) or a["indices"].shape != a["prob"].shape
                or not _csr_fits(names.post_ptr, names.postings, words, len(entities))
                or not _csr_fits(names.word_ptr, names.words, len(entities), words)):
            raise ValueError("walk snapshot arrays do not fit together")
    except KeyError as exc:
        raise ValueError(f"walk snapshot lacks {exc}") from exc
    return WalkIndex(*(a[name] for name in _WALK_ARRAYS[:4]), passages, entities, a["entity_passages"], names)


def _csr_fits(ptr: np.ndarray, idx: np.ndarray, rows: int, columns: int) -> bool:
    """Whether compressed rows index only what exists: ``rows + 1`` ascending offsets ending at ``len(idx)``, every
    column below ``columns`` (a damaged snapshot must not send a query out of bounds)."""
    return (ptr.shape == (rows + 1,) and int(ptr[-1]) == len(idx) and not bool(np.any(np.diff(ptr) < 0))
            and (not idx.size or 0 <= int(idx.min()) <= int(idx.max()) < columns))


# ------------------------------------------------------------------ neighbour lists
def edges_to_bytes(index: EdgeIndex) -> bytes:
    return pack({"format": _header("edges"), **table_arrays("names", index.names), "indptr": index.indptr,
                 "neighbours": index.neighbours, "weights": index.weights})


def edges_from_bytes(data: bytes) -> EdgeIndex:
    a = unpack(data)
    _check(a, "edges")
    try:
        names = table_from(a, "names")
        indptr, neighbours, weights = a["indptr"], a["neighbours"], a["weights"]
    except KeyError as exc:
        raise ValueError(f"edges snapshot lacks {exc}") from exc
    if neighbours.shape != weights.shape or not _csr_fits(indptr, neighbours, len(names), len(names)):
        raise ValueError("edges snapshot arrays do not fit together")
    return EdgeIndex(names, indptr, neighbours, weights)


# ------------------------------------------------------------------ BM25
def bm25_to_bytes(index: BM25Index) -> bytes:
    arrays = {"format": _header("bm25"), **table_arrays("ids", index.ids), **table_arrays("vocab", index.vocab),
              "params": np.asarray([index.k1, index.b], dtype=np.float64)}
    arrays.update({name: getattr(index, name) for name in _BM25_ARRAYS})
    if index.digests is not None:
        arrays["digests"] = index.digests
    return pack(arrays)


def bm25_from_bytes(data: bytes) -> BM25Index:
    a = unpack(data)
    _check(a, "bm25")
    try:
        ids, vocab = table_from(a, "ids"), table_from(a, "vocab")
        k1, b = (float(x) for x in a["params"])
        arrays = [a[name] for name in _BM25_ARRAYS]
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"bm25 snapshot unreadable: {exc}") from exc
    return BM25Index.of_arrays(ids, vocab, *arrays, digests=a.get("digests"), k1=k1, b=b)
