"""Audit: the hash-chained log, read audit, the memory state check, recover and incident reports."""
