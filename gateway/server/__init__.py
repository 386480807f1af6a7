"""The HTTP/WebSocket server's own concerns: Daphne's close codes and limits, the slow-request
guard, lazily imported WebSocket routes, the drain on shutdown and the Django middleware."""
