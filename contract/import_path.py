"""The one resolver of import paths ``"package.module:attribute"``: env, policy, expert, tracker and target
factories, and plug-in entry points, are all named this way."""

from __future__ import annotations

import importlib
from typing import Any


def import_object(path: str, what: str = "factory") -> Any:
    """The attribute that ``path`` (``"package.module:attribute"``) names; ``what`` it is, for the messages.

    Raises:
        ValueError: ``path`` is not of that form.
        ImportError: the module cannot be imported, or has no such attribute (the message names both).
    """
    module_name, sep, attribute = str(path).partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"{what} {path!r} must look like 'package.module:function'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ImportError(f"cannot import module {module_name!r} of {what} {path!r}: {error}. Is the package "
                          "installed (pip install -e .) or on PYTHONPATH?") from error  # fmt: skip
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise ImportError(f"module {module_name!r} has no attribute {attribute!r} ({what} {path!r})") from None
