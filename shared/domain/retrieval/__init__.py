"""Hybrid retrieval: a BM25 index, score fusion, and hybrid search over a VectorStore."""
