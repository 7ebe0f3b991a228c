"""Memwarden: a governance layer for AI-agent memory."""

__version__ = "0.1.0"
