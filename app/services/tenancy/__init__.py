"""Tenancy and identity: tenants and their settings, reviewers' accounts, API keys, sign-in, rate limits."""
