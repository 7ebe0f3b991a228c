"""Runtime: the services' context, background jobs and leaders, health, idempotency, the outbound rule."""
