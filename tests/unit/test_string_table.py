"""``StringTable`` (names kept as one buffer, found by binary search) and the index snapshot container
(``index_codec.pack`` / ``unpack``): what a cold worker loads instead of decoding every name."""

from __future__ import annotations

import numpy as np
import pytest

from shared.domain.retrieval.bm25 import BM25Index
from shared.domain.retrieval.edge_index import EdgeIndex
from shared.domain.retrieval.strings import StringTable
from shared.infra.store import index_codec

ODD = ["zeta", "a,b", "x\ny", "", "é", "名前", "\ud800", "zeta", "Z", "😀"]


@pytest.mark.parametrize("items", [[], ["only"], sorted(set(ODD)), ODD])
def test_a_table_reads_finds_and_round_trips_every_string(items):
    table = StringTable.of(items)
    assert len(table) == len(items) and list(table) == items and table == items
    assert [table[i] for i in range(-len(items), len(items))] == items + items
    for s in items:
        assert table[table.find(s)] == s and s in table
    assert table.find("absent") == -1 and "absent" not in table and 3 not in table
    with pytest.raises(IndexError):
        table[len(items)]
    back = StringTable.from_arrays(*(np.array(a) for a in table.arrays()))
    assert back == table and list(back) == items and all(back.find(s) == table.find(s) for s in items)


def test_a_table_with_offsets_or_order_out_of_range_is_refused():
    blob, ends, order = StringTable.of(["b", "a", "c"]).arrays()
    with pytest.raises(ValueError):
        StringTable.from_arrays(blob, ends + 1, order)  # beyond the bytes
    with pytest.raises(ValueError):
        StringTable.from_arrays(blob, ends[::-1].copy(), order)  # not ascending
    with pytest.raises(ValueError):
        StringTable.from_arrays(blob, ends, order + 3)  # positions that do not exist


def test_the_container_round_trips_arrays_as_read_only_views_and_refuses_what_is_not_one():
    arrays = {"a": np.arange(5, dtype=np.int32), "empty": np.zeros(0, dtype=np.float64),
              "grid": np.arange(12, dtype=np.float16).reshape(3, 4), "bytes": np.frombuffer(b"xyz", dtype=np.uint8)}
    data = index_codec.pack(arrays)
    back = index_codec.unpack(data)
    assert back.keys() == arrays.keys()
    for name, arr in arrays.items():
        assert back[name].dtype == arr.dtype and np.array_equal(back[name], arr)
    assert not back["a"].flags.writeable and back["grid"].flags.aligned  # a view of the bytes
    for bad in (b"", b"PK\x03\x04", data[:-1], data[:20], b"GFIDX1\n" + b"\xff" * 8):
        with pytest.raises(ValueError):
            index_codec.unpack(bad)
    with pytest.raises(TypeError):
        index_codec.pack({"o": np.array(["a"], dtype=object)})


def test_loaded_indexes_answer_as_built_ones_without_any_dict_of_names():
    bm25 = BM25Index.build([(f"c{i}", t) for i, t in enumerate(["red fox", "blue fox", "red hen", "名前 fox"])])
    back = index_codec.bm25_from_bytes(index_codec.bm25_to_bytes(bm25))
    for question in ("red fox", "fox", "名前", "unknown words", ""):
        assert back.query(question, 3) == bm25.query(question, 3)
        assert np.array_equal(back.scores(question), bm25.scores(question))
    edges = EdgeIndex.build([("B", "A", 1.0), ("A", "C", 3.0), ("C", "D", 2.0)])
    loaded = index_codec.edges_from_bytes(index_codec.edges_to_bytes(edges))
    assert loaded.neighbours_of("A") == edges.neighbours_of("A") == ["C", "B"]
    assert loaded.ranked("C") == edges.ranked("C") and loaded.neighbours_of("nobody") == []
