"""Graph-walk passage ranking (the HippoRAG 2 idea: Gutiérrez et al. 2025, "From RAG to Memory").

One graph per tenant holds two kinds of node: passages (chunks) and entities. A passage is linked to
every entity extracted from it, and entities are linked by their relations. A query seeds a
personalized PageRank with

* the entities it names (every word of the entity's name is in the question; rarer names weigh more),
* the entities that keyword/vector search over entity descriptions finds, and
* the passages that direct retrieval (BM25 fused with vectors) ranks first,

and passages are ranked by the stationary probability of a walk that restarts at those seeds. A passage
that shares no word with the question is still reached through the entity that links it to a passage
that does (the bridge of a two-hop question). Seeds are spread over entities in proportion to their
specificity (1 / number of passages that mention them, as HippoRAG 2 weights node seeds), so a name that
occurs in every third passage does not drown the walk.

PageRank is computed by forward local push (Andersen, Chung and Lang, "Local graph partitioning using
PageRank vectors", FOCS 2006): each node holds an estimate and a residual (mass not yet spread); a node
whose residual is at least ``EPSILON`` times its weighted degree keeps ``1 - damping`` of it and hands the
rest to its neighbours in proportion to the edge weights. The work is bounded by 1 / (EPSILON * (1 -
damping)) arc updates whatever the graph's size, and every node's score is below the exact personalized
PageRank by less than EPSILON times its weighted degree. Nodes are pushed a round at a time (every node over
the threshold at once, with numpy over the graph's CSR arrays), which keeps the Python loop to a few dozen
rounds. Pure: the index is built from plain lists (``walk_build``) and knows no store.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from shared.domain.retrieval.bm25 import tokenize
from shared.domain.retrieval.strings import StringTable

DAMPING = 0.5  # probability of following an edge rather than restarting (HippoRAG 2 uses 0.5)
PASSAGE_SEED_SHARE = 0.5  # share of the restart mass on directly retrieved passages (rest: entities)
MAX_NAME_TOKENS = 8  # longer "names" are sentences the extractor mistook for entities
# Push threshold: a node is pushed while its residual is at least EPSILON times its weighted degree (the
# restart mass sums to 1). On HotpotQA and MuSiQue, 1e-5..3e-5 per unit of degree
# kept the converged walk's passage recall; ten times that lost multi-hop bridge passages, which get little mass.
EPSILON = 1e-5
MAX_ROUNDS = 200  # push rounds at most (with damping 0.5 the residual roughly halves every round)


@dataclass
class WalkInputs:
    """What a walk graph was built from, per entity in the graph's order: whether it has a stored row (a title's
    own node has none), that row's fingerprint, and the passages the row names (``src_idx[src_ptr[j]:src_ptr[j +
    1]]``, passage numbers, titles not included); per passage, its document's title ("" for none)."""

    rowed: np.ndarray  # bool
    digests: np.ndarray  # uint64
    src_ptr: np.ndarray
    src_idx: np.ndarray
    titles: StringTable
    log_at: tuple | None = None  # where the entity rows' change log stood when they were read (set by the caller)

    @property
    def nbytes(self) -> int:
        arrays = self.rowed.nbytes + self.digests.nbytes + self.src_ptr.nbytes + self.src_idx.nbytes
        return arrays + self.titles.nbytes


@dataclass
class WalkIndex:
    """Passage-entity graph of one tenant, ready for personalized PageRank."""

    indptr: np.ndarray  # CSR rows: the arcs out of node u are indptr[u]:indptr[u + 1] (each edge both ways)
    indices: np.ndarray  # the arc's far end
    prob: np.ndarray  # transition probability of the arc (its weight / the strength of its source)
    degree: np.ndarray  # weighted degree per node (the sum of its edges' weights; 1 for a node with no edge)
    passages: StringTable  # node i < len(passages) is passage i
    entities: StringTable  # node len(passages) + j is entity j (sorted)
    entity_passages: np.ndarray  # passages per entity (specificity = 1 / this)
    names: NameIndex | None = None  # the entities' name words (``named_entities``)
    inputs: WalkInputs | None = None  # what it was built from, for the next version's build (not in a snapshot)

    def __len__(self) -> int:
        return len(self.passages)

    @property
    def nbytes(self) -> int:
        """What the index holds in memory: its arrays, node names and the name words (what a byte-bounded
        cache counts)."""
        arrays = sum(a.nbytes for a in (self.indptr, self.indices, self.prob, self.degree, self.entity_passages))
        names = self.passages.nbytes + self.entities.nbytes
        return (arrays + names + (self.names.nbytes if self.names is not None else 0)
                + (self.inputs.nbytes if self.inputs is not None else 0))

    @property
    def node_count(self) -> int:
        return len(self.passages) + len(self.entities)

    @property
    def edge_count(self) -> int:
        return len(self.indices) // 2

    def pagerank(self, seeds: dict[int, float], damping: float = DAMPING, epsilon: float = EPSILON) -> Push:
        """Personalized PageRank by forward push: restart distribution ``seeds`` (node -> weight, scaled to
        sum to 1); the mass on nodes with no edge restarts too (as igraph does). Each node's score is
        below the exact one by less than ``epsilon`` times its weighted degree (1 for a node with no edge)."""
        nodes = np.fromiter(seeds, dtype=np.int64, count=len(seeds))
        restart = np.fromiter(seeds.values(), dtype=np.float64, count=len(seeds))
        restart /= restart.sum()
        n, keep = self.node_count, 1.0 - damping
        residual = np.zeros(n, dtype=np.float64)  # zero pages are mapped lazily: only touched ones cost
        estimate = np.zeros(n, dtype=np.float64)
        residual[nodes] = restart
        touched = [nodes]
        frontier = nodes[residual[nodes] >= epsilon * self.degree[nodes]]
        for _ in range(MAX_ROUNDS):
            if not frontier.size:
                break
            mass = residual[frontier]
            residual[frontier] = 0.0
            estimate[frontier] += keep * mass
            starts = self.indptr[frontier]
            counts = self.indptr[frontier + 1] - starts
            total = int(counts.sum())
            # every arc out of the frontier, as positions in the CSR arrays
            arcs = np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(total)
            targets = self.indices[arcs]
            share = np.repeat(damping * mass, counts) * self.prob[arcs]
            stranded = damping * float(mass[counts == 0].sum())  # from nodes with no edge: back to the seeds
            if stranded > 0:
                targets = np.concatenate([targets, nodes])
                share = np.concatenate([share, stranded * restart])
            reached, where = np.unique(targets, return_inverse=True)
            residual[reached] += np.bincount(where, weights=share, minlength=len(reached))
            touched.append(reached)
            frontier = reached[residual[reached] >= epsilon * self.degree[reached]]
        seen = np.unique(np.concatenate(touched))
        # the residual's first step belongs to the node that holds it: a closer lower bound, at no cost
        left = residual[seen]
        return Push(seen, estimate[seen] + keep * left, damping * float(left.sum()))

    # ----------------------------------------------------------------- seeds
    def named_entities(self, query: str, limit: int = 20) -> list[tuple[str, float]]:
        """Entities whose every name word is in ``query``, scored by the IDF of their name words (a
        longer, rarer name is a more specific match). Best first. Two adjacent words of the question also
        count as their join when that join is a name word ("Space Dev" names SPACEDEV)."""
        if self.names is None:
            return []
        best = self.names.match(query, max(1, len(self.entities)))[:limit]
        return [(self.entities[j], s) for j, s in best]

    def walk(self, entity_seeds: Sequence[tuple[str, float]], passage_seeds: Sequence[tuple[str, float]],
             top_k: int, passage_share: float = PASSAGE_SEED_SHARE, damping: float = DAMPING) -> WalkResult:
        """Personalized PageRank from the seeds, each list best first: a seed weighs by its place in its list
        (``_spread``), not by its score, each side is scaled to its share, and entity seeds are weighted by
        specificity. The best ``top_k`` passages and entities."""
        n_p = len(self.passages)
        ent = _spread(_known(self.entities, entity_seeds))
        ent = {n_p + j: w / self.entity_passages[j] for j, w in ent.items()}
        pas = _spread(_known(self.passages, passage_seeds))
        e_mass, p_mass = sum(ent.values()), sum(pas.values())
        if e_mass <= 0 and p_mass <= 0:
            return WalkResult([], [], 0, 0)
        share = passage_share if e_mass > 0 and p_mass > 0 else (1.0 if p_mass > 0 else 0.0)
        seeds = {node: (1.0 - share) * w / e_mass for node, w in ent.items()} if e_mass > 0 else {}
        for i, w in pas.items():
            seeds[i] = seeds.get(i, 0.0) + share * w / p_mass
        pr = self.pagerank(seeds, damping)
        cut = int(np.searchsorted(pr.nodes, n_p))  # nodes are sorted: passages first
        return WalkResult(_top(pr.scores[:cut], pr.nodes[:cut], self.passages, top_k),
                          _top(pr.scores[cut:], pr.nodes[cut:] - n_p, self.entities, top_k), len(ent), len(pas))

    def rank(self, entity_seeds: Sequence[tuple[str, float]], passage_seeds: Sequence[tuple[str, float]],
             top_k: int, passage_share: float = PASSAGE_SEED_SHARE, damping: float = DAMPING
             ) -> list[tuple[str, float]]:
        """Passages only: ``walk(...).passages``."""
        return self.walk(entity_seeds, passage_seeds, top_k, passage_share, damping).passages


@dataclass
class NameIndex:
    """The words of the entities' names as arrays (what a snapshot stores, so a cold worker loads it without
    re-reading every name): ``vocab`` the words, by word number; the entities whose name has that word
    (``postings[post_ptr[w]:post_ptr[w + 1]]``, ascending); each entity's name words (``words[word_ptr[j]:
    word_ptr[j + 1]]``). Names of no word or of more than ``MAX_NAME_TOKENS`` words are left out (empty)."""

    vocab: StringTable  # word number -> word
    post_ptr: np.ndarray
    postings: np.ndarray
    word_ptr: np.ndarray
    words: np.ndarray

    @classmethod
    def build(cls, entities: Sequence[str], former: tuple[NameIndex, Sequence[str]] | None = None) -> NameIndex:
        """The name words of ``entities``; with ``former`` (an index and the entities it was built for), the names
        it held keep their words and word numbers and only new names are split (its words no name uses any more
        stay in the vocabulary, matching nothing)."""
        vocab: dict[str, int] = {}
        at: dict[str, int] = {}
        if former is not None:
            vocab = {w: i for i, w in enumerate(former[0].vocab)}
            at = {name: j for j, name in enumerate(former[1])}
        lengths = np.zeros(len(entities), dtype=np.int64)
        held = np.full(len(entities), -1, dtype=np.int64)  # each entity's place in ``former``, or -1
        new: list[tuple[int, list[int]]] = []
        for j, name in enumerate(entities):
            if (fj := at.get(name)) is not None:
                held[j] = fj
                continue
            toks = dict.fromkeys(tokenize(name))
            if toks and len(toks) <= MAX_NAME_TOKENS:
                new.append((j, [vocab.setdefault(t, len(vocab)) for t in toks]))
                lengths[j] = len(toks)
        mask = held >= 0
        if former is not None:
            old_ptr = former[0].word_ptr.astype(np.int64)
            lengths[mask] = np.diff(old_ptr)[held[mask]]
        offset = np.int32 if int(lengths.sum()) < 2**31 else np.int64
        word_ptr = np.zeros(len(entities) + 1, dtype=offset)
        np.cumsum(lengths, out=word_ptr[1:])
        words = np.zeros(int(word_ptr[-1]), dtype=np.int32)
        if former is not None and mask.any():  # the held names' words, copied a run per entity
            runs = lengths[mask]
            within = np.arange(int(runs.sum())) - np.repeat(np.cumsum(runs) - runs, runs)
            words[np.repeat(word_ptr[:-1][mask].astype(np.int64), runs) + within] = (
                former[0].words[np.repeat(old_ptr[held[mask]], runs) + within])
        for j, ws in new:
            words[int(word_ptr[j]):int(word_ptr[j + 1])] = ws
        owner = np.repeat(np.arange(len(entities), dtype=np.int32), lengths)
        order = np.lexsort((owner, words))  # by word, then entity
        post_ptr = np.zeros(len(vocab) + 1, dtype=offset)
        np.cumsum(np.bincount(words, minlength=len(vocab)), out=post_ptr[1:])
        return cls(StringTable.of(list(vocab)), post_ptr, owner[order], word_ptr, words)

    @property
    def nbytes(self) -> int:
        arrays = sum(a.nbytes for a in (self.post_ptr, self.postings, self.word_ptr, self.words))
        return arrays + self.vocab.nbytes

    def match(self, query: str, entity_count: int) -> list[tuple[int, float]]:
        """Entities whose every name word is in ``query`` (or is the join of two adjacent words of it), as
        (entity number, the IDF sum of its name words), best first."""
        words = _WORD.findall(query.lower())
        found = (self.vocab.find(t) for t in [*tokenize(query), *(a + b for a, b in zip(words, words[1:],
                                                                                       strict=False))])
        q = {w for w in found if w >= 0}
        ptr = self.post_ptr
        scores: dict[int, float] = {}
        for w in q:
            for j in self.postings[ptr[w]:ptr[w + 1]].tolist():
                if j in scores:
                    continue
                mine = self.words[self.word_ptr[j]:self.word_ptr[j + 1]].tolist()
                if all(x in q for x in mine):
                    scores[j] = sum(math.log(1 + entity_count / int(ptr[x + 1] - ptr[x])) for x in mine)
        return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


@dataclass
class WalkResult:
    passages: list[tuple[str, float]]  # best first, positive scores only
    entities: list[tuple[str, float]]
    entity_seeds: int  # seeds that were in the graph
    passage_seeds: int


@dataclass
class Push:
    """Personalized PageRank of the nodes the push reached (the rest score 0)."""

    nodes: np.ndarray  # node numbers, ascending
    scores: np.ndarray  # lower bounds of their PageRank
    residual: float  # L1 distance to the exact PageRank (mass still to be spread)


def _top(scores: np.ndarray, nodes: np.ndarray, ids: Sequence[str], k: int) -> list[tuple[str, float]]:
    """The ``k`` best of ``nodes`` (ascending), ties in node order; positive scores only."""
    if k <= 0 or not len(scores):
        return []
    k = min(k, len(scores))
    part = np.argpartition(-scores, k - 1)[:k]
    order = part[np.lexsort((part, -scores[part]))]
    return [(ids[node], score) for node, score in zip(nodes[order].tolist(), scores[order].tolist(), strict=True)
            if score > 0]


_WORD = re.compile(r"\w+")


def edge_weights(w: np.ndarray) -> np.ndarray:
    """Relation weights are summed over mentions: damp them so one chatty pair does not trap the walk."""
    return 1.0 + np.log1p(np.maximum(0.0, w))


def _known(nodes: StringTable, seeds: Sequence[tuple[str, float]]) -> list[tuple[int, float]]:
    """The seeds that name a node, as (node number within ``nodes``, score), in their order."""
    found = ((nodes.find(name), score) for name, score in seeds)
    return [(at, score) for at, score in found if at >= 0]


def _spread(seeds: Sequence[tuple[int, float]]) -> dict[int, float]:
    """Seed weights from a list ordered best first: the seed at rank r (from 0) weighs 1 / (r + 1); a node
    listed twice keeps its better rank. The order is what the lists agree on: the scores of the lists that
    seed a walk are on unrelated scales (IDF sums of name words, z-scores of a fusion, cosines), and scaling
    them to the best one let a single runaway score (a rare name, a passage far above the rest) take nearly
    the whole restart mass, where the second and third seeds of a two-hop question are its other hop."""
    out: dict[int, float] = {}
    for rank, (node, _score) in enumerate(seeds):
        out.setdefault(node, 1.0 / (rank + 1))
    return out
