"""LLM and embedding access: one client, one cache, one usage record per call."""
