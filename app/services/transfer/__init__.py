"""Import and export of a tenant's memories."""
