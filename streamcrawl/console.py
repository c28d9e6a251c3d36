"""How the command line talks to its user: one line at a time, flushed, so a pipe sees progress."""

from __future__ import annotations

import sys


def say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """``3 pages``, ``1 page``: a count and its noun, plural (``noun`` + s unless given) when it
    is not one."""
    return f"{number} {noun if number == 1 else plural or noun + 's'}"


def note(text: str) -> None:
    """A line for the user beside the output (standard error), where a pipe does not take it."""
    sys.stderr.write(text + "\n")
    sys.stderr.flush()
