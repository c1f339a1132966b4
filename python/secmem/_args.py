"""Values as both the command line and the Python API take them: counts, sizes, seeds and
scheme pairs, and the argparse ``type=`` functions made from them. Counts follow the core's one rule (``secmem_core::params::parse_count``), so a form
accepted by ``-n`` is accepted by ``secmem.run(instructions=…)`` and a sweep axis alike."""

from __future__ import annotations

import argparse
from typing import Any, Callable, Optional, Tuple, TypeVar

from . import _core

# Counts are stored as 64-bit signed integers (results store, JSON readers).
_COUNT_LIMIT = 2**63


def count(value: object, name: str) -> int:
    """A non-negative whole count: an int, or text the core reads ('10M', '1.5k',
    '2_000_000'; '1.5' is refused rather than rounded). A float (2e6) is refused as the
    command line refuses '2e6': both go through the core's one rule. ``name`` says whose value
    it is in the ConfigError."""
    text = value if isinstance(value, str) else str(value) if isinstance(value, int) and not isinstance(value, bool) else None
    v = None if text is None else _core.parse_count(text)
    if v is None or v >= _COUNT_LIMIT:
        raise _core.ConfigError(f"{name}: {_shown(value)} is not a whole count (an int, or text such as 10M, 500k, 2000000)")
    return v


def size(value: object, name: str) -> int:
    """A size in bytes: text with a unit as ``--set l2.size=…`` takes it ('256KiB', '1MB'),
    or a count ('20M', '4096'), or an int."""
    if isinstance(value, str):
        v = _core.parse_size(value)
        if v is None:
            v = _core.parse_count(value)
        if v is None or v >= _COUNT_LIMIT:
            raise _core.ConfigError(f"{name}: '{value}' is not a size (e.g. 256KiB, 20M, 4096)")
        return v
    return count(value, name)


def size_text(v: int) -> str:
    """Bytes as a parameter writes them: 4194304 → 4MiB (the text of a size, for display)."""
    for shift, unit in ((40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")):
        if v >= 1 << shift and v % (1 << shift) == 0:
            return f"{v >> shift}{unit}"
    return f"{v}B"


_UNITS: dict[str, str] = {}


def param_unit(key: str) -> str:
    """The declared unit of parameter ``key`` ("B" for a size), "" if none is declared."""
    if not _UNITS:
        _UNITS.update({p.key: p.unit for c in _core.components() for p in c.params})
    return _UNITS.get(key, "")


def seed(text: str) -> int:
    """argparse type of --seed: a whole number from 0 to 2^64-1."""
    try:
        v = int(str(text), 0)
    except ValueError:
        v = -1
    if not 0 <= v < 2**64:
        raise argparse.ArgumentTypeError(f"'{text}' is not a seed (a whole number from 0 to 2^64-1)")
    return v


def scheme_pair(value: object, what: str) -> Tuple[str, str]:
    """An (integrity, encryption) pair from 'INTEGRITY+ENCRYPTION' or a 2-sequence of names.
    Only the shape is checked here: the names are the registry's to judge (the run, or
    ``_core.params``, refuses an unknown one with the list of known ones)."""
    if isinstance(value, str):
        parts: list[object] = list(value.strip().split("+"))
    elif isinstance(value, (tuple, list)):
        parts = list(value)
    else:
        parts = []
    names = [p.strip() for p in parts if isinstance(p, str) and p.strip()]
    if len(parts) != 2 or len(names) != 2:
        raise _core.ConfigError(f"{what}: {_shown(value)} is not INTEGRITY+ENCRYPTION (e.g. chash+otp)")
    return names[0], names[1]


def _shown(value: object) -> str:
    return f"'{value}'" if isinstance(value, str) else repr(value)


# ---------------------------------------------------------------------------------------
# argparse


class BadArgument(Exception):
    """A flag's value refused by its argparse ``type=``: one line for ``main`` to print with
    exit status 2. Not a ValueError on purpose: argparse would replace a ValueError's message
    with a generic "invalid value" and print its usage too."""


T = TypeVar("T")


def _flag_type(parse: Callable[[str, str], T], flag: str, name: str) -> Callable[[str], T]:
    """An argparse ``type=`` for ``flag`` from one of the parsers above: its ConfigError
    becomes a BadArgument, so the message reaches the user as it is."""

    def convert(text: str) -> T:
        try:
            return parse(text, flag)
        except _core.ConfigError as e:
            raise BadArgument(str(e)) from None

    convert.__name__ = name  # what argparse calls the type in its own messages
    return convert


def counts(flag: str) -> Callable[[str], int]:
    """argparse ``type=`` of a count flag ('10M', '500k'): the one rule of ``count``."""
    return _flag_type(count, flag, "count")


def sizes(flag: str) -> Callable[[str], int]:
    """argparse ``type=`` of a size flag in bytes ('256KiB', '20M')."""
    return _flag_type(size, flag, "size")


def _pairs(text: str, flag: str) -> list[tuple[str, str]]:
    return [scheme_pair(item, flag) for item in text.split(",")]


def scheme_list(flag: str) -> Callable[[str], list[tuple[str, str]]]:
    """argparse ``type=`` of INTEGRITY+ENCRYPTION pairs, comma separated. The names are the
    registry's to check (``cli.common.check_pairs``), not this parser's."""
    return _flag_type(_pairs, flag, "schemes")


class SetAction(argparse.Action):
    """``--set KEY=VALUE``, repeatable; the same key twice is refused (which one was meant?)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, value: Any, option: Optional[str] = None) -> None:
        have = list(getattr(namespace, self.dest) or [])
        key = str(value).partition("=")[0].strip()
        if "=" in str(value) and any(s.partition("=")[0].strip() == key for s in have):
            raise BadArgument(f"--set: '{key}' is given twice (give each parameter once)")
        setattr(namespace, self.dest, have + [value])


def positive_int(flag: str) -> Callable[[str], int]:
    """An argparse type: a whole number of at least 1, refused in one line naming ``flag``."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            v = 0
        if v < 1:
            raise BadArgument(f"{flag}: {text!r} is not a whole number of at least 1")
        return v

    return parse
