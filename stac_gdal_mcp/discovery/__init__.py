"""Discovery: search, items, collections, queryables and compact summaries (nothing of the server here)."""
