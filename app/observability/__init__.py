"""What an operator watches: Prometheus metrics (`metrics`, served by `endpoint`), the request
context every log line carries (`logs`), and the middleware that sets both up per request (`requests`)."""
