"""Fixtures live in `tests/harness.py` (loaded for the whole suite through `-p tests.harness`)."""
