"""Transport between the two processes: the channel layers (Redis, in-process), how every Redis
client connects, and the listeners that ride out an outage of the layer. Both sides use it."""
