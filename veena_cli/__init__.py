"""``veena``: a command-line client for a running veena gateway.

A library package of its own that imports nothing of the server (a test walks its imports):
it speaks the public wire protocols only, as any other client would.
"""
