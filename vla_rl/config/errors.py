"""The error of a wrong config key or value (every reader of the config raises it)."""


class ConfigError(ValueError):
    """A config key or value is wrong; the message names it and what is allowed."""
