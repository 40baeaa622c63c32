"""Answer from a local / hybrid context (entities, relationships, reports, sources)."""

MARKER = "-Role- You answer questions about the data in the tables"

SYSTEM = """-Role- You answer questions about the data in the tables below. Use only this data; if it
does not contain the answer, say so. Cite sources as [Data: Entities (ids); Relationships (ids);
Reports (ids); Sources (ids)].

-Target response format-
{response_type}

-Data tables-
{context_data}
"""
