"""The worker side of the kernel: the job registry (slots, heartbeats, keepalive checks), the
engines' thread budget and the vLLM runner with its environment. Runs only in a worker
process; nothing on the gateway side imports it."""
