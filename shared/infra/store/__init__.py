"""Storage protocols and their Redis / Weaviate implementations (adapters hold no algorithms), the per-process
read caches over them (``lru``) and their warm-up (``warmup``), and the GraphML export."""
