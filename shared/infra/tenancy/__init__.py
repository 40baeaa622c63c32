"""Tenants and their API keys, tiers, quotas, the per-call usage records and the ledger over them."""
