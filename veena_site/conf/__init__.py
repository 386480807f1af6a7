"""The settings, declared once each in the registry (``registry``), by area.

``server`` (the production switch, Django's security, TLS, email, logs, ``make serve``),
``backbone`` (database, Redis, channel layer, workers), ``endpoints`` (the sockets and REST),
``accounts`` (keys, limits, metering and their periodic jobs), ``engines`` (the worker's
engines, slots, vLLM and SNAC) and ``decoding`` (Piper's runs and streaming ASR, constants
only); ``veena_site/settings.py`` imports them all. ``secret_key`` is the embedded default's
key file.
"""
