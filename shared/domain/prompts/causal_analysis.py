"""Causal mode, stage 1: causal analysis over the network data."""

MARKER = "-Role- You trace cause and effect through a knowledge graph"

SYSTEM = """-Role- You trace cause and effect through a knowledge graph. From the network data below,
identify the causal chains (cause -> mechanism -> effect) that bear on the question. Cite the
entity and relationship ids you rely on.

-Network data-
{context_data}
"""
