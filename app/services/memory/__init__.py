"""Memory write and recall: remember, recall, staging and screening of writes, lineage, compaction and consolidation."""
