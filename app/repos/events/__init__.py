"""Events and webhooks: the per-tenant event log, its streams and signed deliveries."""
