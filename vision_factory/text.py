"""Untrusted text (from messages and model files) made safe to log, with no ROS import."""

from __future__ import annotations

DEFAULT_LIMIT = 200  # characters of untrusted text kept in one log line


def untrusted(text: object, limit: int = DEFAULT_LIMIT) -> str:
    """``text`` as one printable line of at most about ``limit`` characters.

    Every character that is not printable (newlines, carriage returns, ANSI escape sequences'
    ESC, other control and format characters, line and paragraph separators) and the backslash
    itself are written as Python escapes, so the result can never start a new log line, move the
    cursor or recolour a terminal, and an escape in the original stays distinguishable. Text
    beyond ``limit`` is cut and the cut is said.
    """
    text = str(text)
    shown = text[:limit]
    escaped = "".join(
        char if char.isprintable() and char != "\\" else char.encode("unicode_escape").decode("ascii") for char in shown
    )
    if len(text) > limit:
        escaped += f"... ({len(text) - limit} more characters)"
    return escaped
