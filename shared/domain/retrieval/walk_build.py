"""Building a tenant's walk graph (``WalkIndex``), and building the next version's from the last one.

After a batch, a tenant's graph differs from the version before by what the batch merged: some entities' rows
were rewritten, some passages added, some edges added or reweighted. Reading every entity row again to parse the
passages it names, and every passage again for its document's title, costs what the tenant holds, on every
warm-up; so the graph keeps beside it what it was built from (``WalkInputs``): each entity's row fingerprint
and the passages that row names, and each passage's title. The next build parses only the rows whose
fingerprint changed and reads the titles of the new passages only; the rest comes from those arrays.

The entities' relations come from the neighbour lists (``EdgeIndex``) that queries read anyway, one read of the
edges for both. Whether fresh or from a former graph, a build goes through ``assemble``, so an update gives the
graph a fresh build of the same rows gives. Pure: rows, titles and edges are handed in.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache

import numpy as np

from shared.domain.extraction.records import normalise_name
from shared.domain.retrieval.edge_index import EdgeIndex
from shared.domain.retrieval.graph_walk import NameIndex, WalkIndex, WalkInputs, edge_weights
from shared.domain.retrieval.strings import StringTable

_QUALIFIER = re.compile(r"\s*\([^)]*\)\s*$")
_FILE_NAME = re.compile(r"(?<=\w)\.(txt|md|markdown|pdf|html?|docx?|rst|csv|json)$", re.IGNORECASE)  # a_b.txt


def title_key(raw: str, present) -> str | None:
    """The entity a passage of a document titled ``raw`` links to, given the names ``present``: the entity of the
    title's name when there is one, else that of the title without a trailing qualifier in parentheses ("Ed Wood
    (film)" -> "ED WOOD"), else a node of its own named as the title (the caller adds it to ``present``). None for
    a title that names nothing."""
    names = _title_names(raw)
    if names is None:
        return None
    name, plain = names
    return name if name in present or not plain or plain not in present else plain


@lru_cache(maxsize=65536)  # a document's passages share its title: normalised once, not once a passage
def _title_names(raw: str) -> tuple[str, str] | None:
    """(the title's entity name, the same without a trailing qualifier in parentheses); a file name's extension is
    dropped and its underscores read as spaces. None when the title names nothing."""
    title = _FILE_NAME.sub("", raw).replace("_", " ") if _FILE_NAME.search(raw or "") else raw
    name = normalise_name(title or "")
    return (name, normalise_name(_QUALIFIER.sub("", title))) if name else None


def build_walk(passages: Sequence[str], entity_sources: dict[str, Sequence[str]],
               edges: Iterable[tuple[str, str, float]], titles: dict[str, str] | None = None) -> WalkIndex:
    """The walk graph of plain lists: ``entity_sources``, entity name -> ids of the passages it was extracted
    from; ``edges``, (entity, entity, weight) relations (entities with no known passage still join through them);
    ``titles``, passage id -> its document's title (see ``with_titles``)."""
    titles = titles or {}
    return assemble(passages, dict.fromkeys(entity_sources, 0), lambda names: {n: entity_sources[n] for n in names},
                    EdgeIndex.build(edges), lambda ids: {p: titles[p] for p in ids if p in titles})


def assemble(passages: Sequence[str], digests: dict[str, int], sources_of: Callable[[list[str]], dict],
             edges: EdgeIndex, titles_of: Callable[[list[str]], dict[str, str]], former: WalkIndex | None = None,
             extra_edges: Iterable[tuple[str, str, float]] = ()) -> WalkIndex:
    """The walk graph of ``passages`` and the entities of ``digests`` (name -> the fingerprint of its stored row).

    ``sources_of(names)``: name -> the passages each of those entities was extracted from, asked only for the
    entities whose fingerprint differs from ``former``'s (all of them without a former graph); ``titles_of(ids)``:
    passage id -> its document's title, asked only for the passages ``former`` did not hold; ``edges``: the
    relations between entities; ``extra_edges``: more (entity, entity, weight) edges (synonyms)."""
    passages = list(dict.fromkeys(passages))
    p_index = {p: i for i, p in enumerate(passages)}
    kept = former.inputs if former is not None else None
    held_passages = list(former.passages) if kept is not None else []
    known = dict(zip(held_passages, kept.titles, strict=True)) if kept is not None else {}
    known.update(titles_of([p for p in passages if p not in known]))
    titles = [known.get(p) or "" for p in passages]

    held_names = list(former.entities) if kept is not None else []
    held = row_digests(former) or {}
    changed = [n for n, d in digests.items() if held.get(n) != d]
    parsed = sources_of(changed)

    present = set(digests)
    linked_titles: list[tuple[str, int]] = []
    for i, raw in enumerate(titles):
        key = title_key(raw, present) if raw else None
        if key is not None:
            present.add(key)
            linked_titles.append((key, i))
    entities = sorted(present)
    e_index = {e: j for j, e in enumerate(entities)}
    n_p, n_e = len(passages), len(entities)
    width = max(n_p, 1)

    codes = [np.fromiter((e_index[n] * width + p_index[s] for n in changed for s in parsed.get(n, ()) if s in p_index),
                         dtype=np.int64)]
    if kept is not None:  # the unchanged entities' passages, renumbered
        new_of = np.fromiter((e_index[n] if digests.get(n, -1) == held.get(n, -2) else -1 for n in held_names),
                             dtype=np.int64, count=len(held_names))
        p_of = np.fromiter((p_index.get(p, -1) for p in held_passages), dtype=np.int64, count=len(held_passages))
        owner = new_of[np.repeat(np.arange(len(held_names)), np.diff(kept.src_ptr))]
        at = p_of[kept.src_idx] if len(kept.src_idx) else np.zeros(0, dtype=np.int64)
        ok = (owner >= 0) & (at >= 0)
        codes.append(owner[ok] * width + at[ok])
    raw_codes = np.unique(np.concatenate(codes))
    title_codes = np.fromiter((e_index[k] * width + i for k, i in linked_titles), dtype=np.int64)
    links = np.union1d(raw_codes, title_codes)
    link_e, link_p = links // width, links % width

    emap = np.fromiter((e_index.get(n, -1) for n in edges.names), dtype=np.int64, count=len(edges.names))
    a = emap[np.repeat(np.arange(len(edges.names)), np.diff(edges.indptr))]
    b = emap[edges.neighbours] if len(edges.neighbours) else np.zeros(0, dtype=np.int64)
    ok = (a >= 0) & (b >= 0) & (a != b)  # the neighbour lists hold each relation both ways already
    extra = [(e_index[x], e_index[y], w) for x, y, w in extra_edges if x in e_index and y in e_index and x != y]
    xa = np.asarray([x for x, _, _ in extra], dtype=np.int64)
    xb = np.asarray([y for _, y, _ in extra], dtype=np.int64)
    xw = edge_weights(np.asarray([w for _, _, w in extra], dtype=np.float64))

    src = np.concatenate([link_p, link_e + n_p, a[ok] + n_p, xa + n_p, xb + n_p])
    dst = np.concatenate([link_e + n_p, link_p, b[ok] + n_p, xb + n_p, xa + n_p])
    ww = np.concatenate([np.ones(2 * len(links)), edge_weights(edges.weights[ok]), xw, xw])
    order = np.lexsort((dst, src))  # each node's arcs by far end: the same graph pushes in the same order
    src, dst, ww = src[order], dst[order], ww[order]
    n = n_p + n_e
    strength = np.bincount(src, weights=ww, minlength=n)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=indptr[1:])
    counts = np.bincount(link_e, minlength=n_e).astype(np.float64)
    index = WalkIndex(indptr, dst.astype(np.int32 if n < 2**31 else np.int64), ww / strength[src] if len(src) else ww,
                      np.where(strength > 0, strength, 1.0), StringTable.of(passages), StringTable.of(entities),
                      np.maximum(counts, 1.0))
    index.names = NameIndex.build(entities, (former.names, held_names) if kept and former.names else None)
    index.inputs = _inputs(entities, digests, raw_codes, width, titles)
    return index


def row_digests(former: WalkIndex | None) -> dict[str, int] | None:
    """The fingerprint of each stored entity row ``former`` was built from (None: no former graph, or one loaded
    from a snapshot, which keeps no inputs)."""
    kept = former.inputs if former is not None else None
    if kept is None:
        return None
    return {n: d for n, d, r in zip(former.entities, kept.digests.tolist(), kept.rowed.tolist(), strict=True) if r}


def _inputs(entities: list[str], digests: dict[str, int], raw_codes: np.ndarray, width: int,
            titles: list[str]) -> WalkInputs:
    """The arrays the next build starts from (``raw_codes``: entity * width + passage, ascending)."""
    owner = raw_codes // width
    src_ptr = np.zeros(len(entities) + 1, dtype=np.int64)
    np.cumsum(np.bincount(owner, minlength=len(entities)), out=src_ptr[1:])
    rowed = np.fromiter((e in digests for e in entities), dtype=bool, count=len(entities))
    fingerprints = np.fromiter((digests.get(e, 0) for e in entities), dtype=np.uint64, count=len(entities))
    return WalkInputs(rowed, fingerprints, src_ptr, (raw_codes % width).astype(np.int32), StringTable.of(titles))


def passage_titles(reader, ids: Sequence[str] | None = None) -> dict[str, str]:
    """chunk id -> the title of its document (documents without a title are left out), for ``ids`` (None: every
    chunk)."""
    chunks = reader.chunks(reader.all_chunk_ids() if ids is None else ids)
    docs = reader.documents({c.doc_id for c in chunks.values()})
    return {cid: docs[c.doc_id].title for cid, c in chunks.items() if c.doc_id in docs and docs[c.doc_id].title}


def with_titles(entity_sources: dict[str, Sequence[str]], titles: dict[str, str]) -> dict[str, list[str]]:
    """Link each passage to its document's title as an entity: the entity of that name when the extractor
    found one (a title's trailing qualifier in parentheses, "Ed Wood (film)", may be dropped to find it),
    else a title node of its own. A document is about its title, even when the extractor missed the name
    in its text (a title run into the first line, "Samuel Fuller\nSamuel Michael Fuller", reads as one
    longer name); and the chunks of one document are then one hop apart."""
    out = {name: list(ps) for name, ps in entity_sources.items()}
    for pid, raw in titles.items():
        key = title_key(raw, out)
        if key is None:
            continue
        linked = out.setdefault(key, [])
        if pid not in linked:
            linked.append(pid)
    return out
