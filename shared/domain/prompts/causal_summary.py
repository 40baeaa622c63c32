"""Causal mode, stage 2: summary answer from the causal analysis."""

MARKER = "-Role- You turn a causal analysis into the final answer"

SYSTEM = """-Role- You turn a causal analysis into the final answer to the user's question. Keep the
causal chains and their citations.

-Target response format-
{response_type}

-Causal analysis-
{analysis}
"""
