"""The one reader of config sections, and type and range checks for the fields of config dataclasses.

:func:`read_dataclass` turns a mapping (a yaml section) into a config dataclass, nested dataclass fields
included, and rejects unknown keys. A config dataclass checks its own values in ``__post_init__``:
``check_types(self)`` against its annotations, then ranges with :func:`require`. A failure is a
:class:`FieldError` naming the field, its value and what is allowed; :func:`read_dataclass` gives it the
full dotted key (``algo.update.clip_low``). This module imports nothing of the project, so the policies'
own config (``policies/config.py``) reads its sections with it too.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from typing import Any


class FieldError(ValueError):
    """One field's value is wrong: ``field``, ``value`` and what is ``allowed``."""

    def __init__(self, field: str, value: Any, allowed: str):
        self.field, self.value, self.allowed = field, value, allowed
        super().__init__(f"{field}={value!r}: {allowed}")

    def under(self, section: str) -> str:
        """The one-line message with the full key, e.g. ``'algo.update.clip_low'=-0.1: must be > 0``."""
        return f"'{section}.{self.field}'={self.value!r}: {self.allowed}"

    def message(self) -> str:
        """The one-line message when ``field`` is the full key (as :func:`read_dataclass` raises it)."""
        return f"'{self.field}'={self.value!r}: {self.allowed}"


def read_dataclass(cls: type, values: Any, where: str) -> Any:
    """``values`` (a mapping, e.g. a yaml section) as a ``cls`` instance; fields it lacks keep their defaults.

    A field annotated with a dataclass is read the same way from its sub-mapping; a list becomes a tuple
    where the field is annotated ``tuple``, and an integer a float where it is annotated ``float`` (yaml's ``0``
    for ``0.0``), so that a reader needs no casts.

    Raises:
        FieldError: with the full dotted key ``where.field...``: an unknown key (listing the allowed ones),
            a value that is not a mapping where a section is expected, or the first wrong value.
    """
    if not isinstance(values, Mapping):
        raise FieldError(where, values, "must be a mapping of keys to values")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls) if f.init]
    for key in values:
        if key not in names:
            raise FieldError(f"{where}.{key}", values[key], f"unknown key; allowed: {', '.join(names)}")
    arguments, given = {}, {}
    for key, value in values.items():
        hint = hints[key]
        if dataclasses.is_dataclass(hint):
            value = read_dataclass(hint, value, f"{where}.{key}")
        elif typing.get_origin(hint) is tuple and isinstance(value, list):
            value = tuple(value)
        elif _takes_float_not_int(hint) and isinstance(value, int) and not isinstance(value, bool):
            given[key], value = value, float(value)  # an error names the value as written
        arguments[key] = value
    try:
        return cls(**arguments)
    except FieldError as error:
        raise FieldError(f"{where}.{error.field}", given.get(error.field, error.value), error.allowed) from None


def _takes_float_not_int(annotation: Any) -> bool:
    """``float`` or an optional/union of it without ``int``."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        options = typing.get_args(annotation)
        return float in options and int not in options
    return annotation is float


def _matches(value: Any, annotation: Any) -> bool:
    if annotation is Any:
        return True
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, option) for option in typing.get_args(annotation))
    if annotation is type(None):
        return value is None
    if annotation is bool:
        return isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if annotation is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if annotation is str:
        return isinstance(value, str)
    if origin in (list, tuple):
        if not isinstance(value, list | tuple):
            return False
        arguments = typing.get_args(annotation)
        if origin is tuple and arguments and arguments[-1] is not Ellipsis:
            return len(value) == len(arguments) and all(map(_matches, value, arguments))
        return all(_matches(item, arguments[0]) for item in value) if arguments else True
    if origin is dict:
        return isinstance(value, dict)
    return True  # anything else (a nested dataclass, a class) is checked by its own __post_init__


def _type_name(annotation: Any) -> str:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return " or ".join("null" if a is type(None) else _type_name(a) for a in typing.get_args(annotation))
    return getattr(annotation, "__name__", str(annotation)).replace("NoneType", "null")


def check_types(instance: Any) -> None:
    """Every field of the dataclass ``instance`` has a value of its annotated type.

    Raises:
        FieldError: the first field whose value does not match (ints pass as floats, bools never as ints).
    """
    hints = typing.get_type_hints(type(instance))
    for field in dataclasses.fields(instance):
        value = getattr(instance, field.name)
        if not _matches(value, hints[field.name]):
            raise FieldError(field.name, value, f"must be {_type_name(hints[field.name])}")


def require(instance: Any, name: str, *, low: float | None = None, high: float | None = None,
            low_open: bool = False, high_open: bool = False, choices: typing.Iterable[Any] | None = None) -> None:
    """Field ``name`` of ``instance`` lies in the range (or is one of ``choices``); None passes (optional fields).

    Raises:
        FieldError: naming the field, its value and the allowed range or choices.
    """  # fmt: skip
    value = getattr(instance, name)
    if value is None:
        return
    if choices is not None:
        allowed = list(choices)
        if value not in allowed:
            raise FieldError(name, value, f"allowed: {', '.join(map(str, allowed))}")
        return
    number = float(value)
    too_low = low is not None and (number <= low if low_open else number < low)
    too_high = high is not None and (number >= high if high_open else number > high)
    if math.isnan(number) or too_low or too_high:
        left = "" if low is None else f"{'>' if low_open else '>='} {low:g}"
        right = "" if high is None else f"{'<' if high_open else '<='} {high:g}"
        raise FieldError(name, value, "must be " + " and ".join(part for part in (left, right) if part))
