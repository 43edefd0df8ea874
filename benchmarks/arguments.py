"""argparse ``type`` functions the benchmark scripts share: a bad number is refused
at parse time with a message naming it (``argument --steps: 0: must be at least 1``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def count(least: int) -> Callable[[str], int]:
    """A whole number of at least ``least``, else a clear error."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: not a whole number") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"{value}: must be at least {least}")
        return value

    return parse


def positive(text: str) -> float:
    """A number above 0, else a clear error."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{value:g}: must be above 0")
    return value
