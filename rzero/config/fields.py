"""The machinery under every config section: `option` declares a field with its help text
and allowed values, `Section` coerces and range-checks every field when a section is built
(from YAML or in code), and `ConfigError` is the one-line error naming key, value and fix."""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar


class ConfigError(ValueError):
    """A config value that cannot be used; the message names key, value and what is allowed."""


def option(
    default: Any,
    help: str,
    *,
    choices: tuple | None = None,
    min: float | None = None,
    max: float | None = None,
    min_exclusive: bool = False,
) -> Any:
    meta = {
        "help": help,
        "choices": choices,
        "min": min,
        "max": max,
        "min_exclusive": min_exclusive,
    }
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class Section:
    """A config section: every field is coerced to its type and checked against the range in
    its metadata when the section is built, from YAML or in code; `check` adds the rules
    that span several fields. The error names `section.key`, the value and what is allowed."""

    section: ClassVar[str] = ""

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):
            key = f"{self.section}.{f.name}"
            value = coerce(key, getattr(self, f.name), hints[f.name])
            if value is not None and not isinstance(value, dict):
                for item in value if isinstance(value, list) else [value]:
                    check_range(key, item, f.metadata)
            object.__setattr__(self, f.name, value)  # frozen: the one write, at construction
        self.check()

    def check(self) -> None:
        """Rules between fields of this section; raise ConfigError."""


def type_name(tp: Any) -> str:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return " or ".join(type_name(a) for a in typing.get_args(tp))
    if typing.get_origin(tp) is list:
        return f"list of {type_name(typing.get_args(tp)[0])}"
    return "null" if tp is type(None) else tp.__name__


def coerce(key: str, value: Any, tp: Any) -> Any:
    """Return value as type tp or raise ConfigError; ints are accepted where floats are."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return coerce(key, value, arg)
            except ConfigError:
                pass
        raise ConfigError(f"{key}={value!r}: expected {type_name(tp)}")
    if origin is list:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, list):
            raise ConfigError(f"{key}={value!r}: expected {type_name(tp)}")
        return [coerce(key, v, typing.get_args(tp)[0]) for v in value]
    if origin is dict:
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise ConfigError(f"{key}={value!r}: expected a mapping of option names to values")
        return dict(value)
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            # YAML 1.1 reads '1e-3' (no dot) as a string; accept what float() accepts
            try:
                return float(value)
            except ValueError:
                pass
    elif tp is str:
        if isinstance(value, str):
            return value
    raise ConfigError(f"{key}={value!r}: expected {type_name(tp)}")


def check_range(key: str, value: Any, meta: dict[str, Any]) -> None:
    choices = meta.get("choices")
    if choices is not None and value not in choices:
        raise ConfigError(f"{key}={value!r}: allowed values are {', '.join(map(str, choices))}")
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return
    lo, hi = meta.get("min"), meta.get("max")
    if lo is not None and (value < lo or (meta.get("min_exclusive") and value == lo)):
        op = ">" if meta.get("min_exclusive") else ">="
        raise ConfigError(f"{key}={value!r}: must be {op} {lo}")
    if hi is not None and value > hi:
        raise ConfigError(f"{key}={value!r}: must be <= {hi}")
