"""Context: what of a long conversation goes into each request, and compaction."""
