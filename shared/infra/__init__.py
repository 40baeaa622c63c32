"""Infrastructure: Redis stores and key layout, jobs, tenants, quotas, the ledger, queueing, metrics and
the LLM transport. It may import the domain; the domain never imports it.
"""
