"""JSON records read a typed field at a time: a field that is missing or of another
type than the format's is a :class:`MalformedField` naming it by its path
(``shards[0].files must be an object, not a list``), where ``int(...)``, ``bool(...)``
and ``data[key]`` said a bare KeyError, or read ``"false"`` as true. A dataset's
manifest (:mod:`tacl_scale.data.manifest`) and a run's ``run.json``
(:mod:`tacl_scale.run_dir`) are read with it."""

from __future__ import annotations

import json
from typing import Any


class MalformedField(ValueError):
    """A field that is missing or of another type than the format's, in words naming
    it (``tokenizer.special_ids must be an object, not a list``); the reader of the
    record says it naming the file (a malformed manifest, an unreadable run record)."""


_REQUIRED = object()


def _what(value: Any) -> str:
    """A JSON value as a message shows what was found: an object or list by its
    kind, anything else as JSON (``null``, ``5``, ``"0.1"``, ``Infinity``)."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "a list"
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _wrong(name: str, expected: str, value: Any) -> MalformedField:
    return MalformedField(f"{name} must be {expected}, not {_what(value)}")


def _int(value: Any, name: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():  # 512.0 from a hand edit (not inf, not nan)
        return int(value)
    raise _wrong(name, "an integer", value)


def _number(value: Any, name: str) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:  # an integer past a float's range
            pass
    raise _wrong(name, "a number", value)


def _str(value: Any, name: str) -> str:
    if isinstance(value, str):
        return value
    raise _wrong(name, "a string", value)


def _bool(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    raise _wrong(name, "true or false", value)


def _list(value: Any, name: str) -> list[Any]:
    if isinstance(value, list):
        return value
    raise _wrong(name, "a list", value)


def _dict(value: Any, name: str) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    raise _wrong(name, "an object", value)


def _ints(value: Any, name: str) -> list[int]:
    return [_int(item, f"{name}[{i}]") for i, item in enumerate(_list(value, name))]


def _strs(value: Any, name: str) -> list[str]:
    return [_str(item, f"{name}[{i}]") for i, item in enumerate(_list(value, name))]


def _int_map(value: Any, name: str) -> dict[str, int]:
    return {key: _int(item, f"{name}.{key}") for key, item in _dict(value, name).items()}


def _str_map(value: Any, name: str) -> dict[str, str]:
    return {key: _str(item, f"{name}.{key}") for key, item in _dict(value, name).items()}


def _histogram(value: Any, name: str) -> dict[int, int]:
    """A length histogram: integer keys (as JSON's strings) to counts."""
    out = {}
    for key, count in _dict(value, name).items():
        try:
            length = int(key)
        except ValueError:
            raise MalformedField(f"{name} must have integer keys, not {_what(key)}") from None
        out[length] = _int(count, f"{name}.{key}")
    return out


_KINDS: dict[str, Any] = {
    "int": _int, "number": _number, "str": _str, "bool": _bool, "list": _list, "map": _dict, "ints": _ints,
    "strs": _strs, "int-map": _int_map, "str-map": _str_map, "histogram": _histogram,
}


class JsonObject:
    """A JSON object read a typed field at a time: :meth:`get` gives a field as its
    kind, and a :class:`MalformedField` naming it by its path (``shards[0].files``)
    when it is missing or of another type. ``name``: the object's path in the record
    ("" for the whole record, which messages call ``whole``)."""

    def __init__(self, value: Any, name: str = "", whole: str = "the record") -> None:
        self.data = _dict(value, name or whole)
        self.name = name

    def path(self, key: str) -> str:
        return f"{self.name}.{key}" if self.name else key

    def get(self, key: str, kind: str, default: Any = _REQUIRED) -> Any:
        """Field ``key`` as ``kind`` (a key of ``_KINDS``, or ``object``: an
        :class:`JsonObject`; a trailing ``?`` lets it be null, given as None);
        ``default`` when it is absent (without one it is required)."""
        if key not in self.data:
            if default is _REQUIRED:
                raise MalformedField(f"{self.path(key)} is missing")
            return default
        value, name = self.data[key], self.path(key)
        if kind.endswith("?"):
            if value is None:
                return None
            kind = kind[:-1]
        return JsonObject(value, name) if kind == "object" else _KINDS[kind](value, name)

    def objects(self, key: str, default: Any = _REQUIRED) -> list[JsonObject]:
        """Field ``key``, a list of objects, each named by its place (``shards[3]``)."""
        items = self.get(key, "list", default)
        return [JsonObject(item, f"{self.path(key)}[{i}]") for i, item in enumerate(items)]
