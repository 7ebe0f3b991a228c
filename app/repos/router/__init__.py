"""The router: governed memory delivered to the stores a tenant already runs, and read back."""
