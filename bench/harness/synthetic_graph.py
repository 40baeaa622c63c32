"""The synthetic passage-entity graph the walk and cold-query benchmarks build (``bench.suites.walk``,
``bench.harness.synthetic_tenant``): shaped like the ingested dev sets, ~8 entity mentions per passage, 30% of them
drawn from a Zipf law (a few names recur in thousands of passages), the rest uniform over 6 entities per passage,
and ~3 relations per entity."""

from __future__ import annotations

import numpy as np

MENTIONS_PER_PASSAGE = 8
RELATIONS_PER_ENTITY = 3


def synthetic(passages: int, seed: int = 7) -> tuple[list[str], dict[str, list[str]], list[tuple[str, str, float]]]:
    rng = np.random.default_rng(seed)
    n_entities = passages * 6  # the dev sets: 7.8k entities for 1k passages, 27k for 4.5k
    pids = [f"p{i}" for i in range(passages)]
    mentions = passages * MENTIONS_PER_PASSAGE
    common = rng.zipf(1.6, size=mentions) % n_entities  # names that recur (places, countries, years)
    rare = rng.integers(0, n_entities, size=mentions)  # names of one or two passages
    ranks = np.where(rng.random(mentions) < 0.3, common, rare)
    sources: dict[str, list[str]] = {}
    for i, e in enumerate(ranks):
        sources.setdefault(f"e{e}", []).append(pids[i // MENTIONS_PER_PASSAGE])
    names = list(sources)
    by_passage: dict[str, list[str]] = {}
    for name, ps in sources.items():
        for p in ps[:50]:
            by_passage.setdefault(p, []).append(name)
    edges = [(a, b, float(rng.integers(1, 5))) for ents in by_passage.values()
             for a, b in zip(ents, ents[1:], strict=False)]
    extra = rng.integers(0, len(names), size=(len(names) * RELATIONS_PER_ENTITY // 4, 2))
    return pids, sources, edges + [(names[a], names[b], 1.0) for a, b in extra]
