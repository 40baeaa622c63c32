"""Hybrid retrieval: a BM25 index (bm25s), score fusion, and hybrid search over a VectorStore."""
