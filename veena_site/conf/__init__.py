"""Groups of settings that ``veena_site/settings.py`` imports whole, one area a module.

Each module reads its own environment variables, named as its settings (STYLE 57):
``engines`` (the worker's engines and decoding), ``accounts`` (keys, limits, metering and
their periodic jobs). ``environment`` holds what they share; ``secret_key`` the embedded
default's key file.
"""
