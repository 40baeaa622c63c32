"""Storage protocols and their Redis / Weaviate implementations (adapters hold no algorithms)."""
