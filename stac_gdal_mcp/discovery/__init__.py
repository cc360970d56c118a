"""Discovery: search, items, collections, queryables and compact summaries (no MCP here)."""
