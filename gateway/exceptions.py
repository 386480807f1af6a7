"""The root of every error the gateway raises on purpose."""


class VeenaError(Exception):
    """An expected failure with a stable machine-readable code."""

    code = "internal_error"
