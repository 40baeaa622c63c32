"""Jobs in Redis: their state (``store.JobStore`` and its halves), waiting for their end, submitting
ingestions and queries, a query's record and its map/reduce state."""
