"""What the C libraries under the image and video decoders print, caught instead of reaching the log.

libpng prints ``libpng error: ...`` and libjpeg ``Corrupt JPEG data: ...`` straight to file
descriptor 2, and OpenCV adds its own ``[ WARN:0@...]`` lines: one or more lines per bad frame,
which no Python setting turns off (libpng's default error handler always prints). ``quietly``
points descriptor 2 at an in-memory file for the length of one call and hands back what the
libraries said, so that the caller can report it once per kind of problem.

Descriptor 2 belongs to the whole process, so two things keep the other threads' output whole:
calls are serialised by one lock (a decode takes milliseconds), and every captured line that is
not recognisably a decoder's (a ROS log line written by another thread meanwhile, say) is passed
on to the real descriptor 2 as soon as the call returns.

Videos are another matter (``quiet_videos``): FFmpeg, under OpenCV's video capture, prints what it finds wrong
with a video (``[mjpeg @ 0x...] dht: invalid len``, ``overread``, ``moov atom not found``) from its decoding
threads as well, so no capture around one call holds all of it: its log is turned off instead, and the tools
say what matters themselves (a video that cannot be opened, or that ends before the frames it declares:
tools/sources.py).
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
from collections.abc import Callable
from typing import TypeVar

Result = TypeVar("Result")

# The first words of what OpenCV's logger, libpng's default handlers and libjpeg's warnings print
# (libjpeg's fatal errors go through OpenCV's handler, which prints nothing).
_DECODER_LINE = re.compile(
    rb"\[ ?(?:FATAL|ERROR|WARN|INFO|DEBUG|VERBOSE):\d"  # OpenCV's log: [ WARN:0@0.038] global grfmt_png.cpp...
    rb"|OpenCV\("  # the text of an OpenCV exception, continued on its own line
    rb"|libpng (?:error|warning)"
    rb"|Corrupt JPEG data|Premature end of JPEG file|Invalid SOS parameters|Inconsistent progression sequence"
    rb"|Unknown Adobe color transform|Warning: unknown JFIF|Warning: thumbnail image size|Application transferred"
)
# OpenCV's prefix before its message: "[ WARN:0@0.038] global grfmt_png.cpp:793 readFromStreamOrBuffer ".
_OPENCV_PREFIX = re.compile(r"^\[ ?[A-Z]+:\d+@[\d.]+\] (?:\S+ )?\S+:\d+ \S+ ")
_LIMIT = 64 * 1024  # bytes of captured output read back; the rest of an absurd amount is dropped

_lock = threading.Lock()
_sink: int | None = None  # the in-memory file descriptor 2 points at during a call


def _open_sink() -> int | None:
    try:
        return os.memfd_create("vision_factory_decoder_output", os.MFD_CLOEXEC)
    except (AttributeError, OSError):  # no memfd: an unlinked temporary file does the same
        try:
            handle, path = tempfile.mkstemp(prefix="vision_factory_decoder_output_")
            os.unlink(path)
            return handle
        except OSError:
            return None


def quietly(call: Callable[..., Result], *arguments) -> tuple[Result, str]:
    """``call(*arguments)`` with descriptor 2 captured: its result, and what decoder libraries printed.

    The text is the decoders' lines joined by "; " ('' when they said nothing); anything else
    printed meanwhile goes on to the real descriptor 2. Exceptions propagate, descriptor 2 restored.
    """
    global _sink
    with _lock:
        if _sink is None:
            _sink = _open_sink()
        if _sink is None:  # nowhere to capture to: run it as it is
            return call(*arguments), ""
        try:
            sys.stderr.flush()  # Python's pending output still goes where it was meant to
        except (AttributeError, OSError, ValueError):
            pass
        saved = os.dup(2)
        os.dup2(_sink, 2)
        try:
            result = call(*arguments)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            captured = _take(_sink)
    return result, _sort(captured)


# OpenCV's FFmpeg backend sets FFmpeg's log level from this variable when the process opens its first video
# (capture or writer); -8 is AV_LOG_QUIET. Another value (e.g. a user's debugging level) is left as it is.
FFMPEG_LOG_LEVEL = "OPENCV_FFMPEG_LOGLEVEL"


def quiet_videos() -> None:
    """FFmpeg's own lines about a video kept off descriptor 2 for the rest of the process (call it before the
    process opens its first video: OpenCV reads the setting then, once); a level the user set is kept."""
    os.environ.setdefault(FFMPEG_LOG_LEVEL, "-8")


def _take(sink: int) -> bytes:
    size = os.lseek(sink, 0, os.SEEK_CUR)
    if not size:
        return b""
    captured = os.pread(sink, min(size, _LIMIT), 0)
    os.ftruncate(sink, 0)
    os.lseek(sink, 0, os.SEEK_SET)
    return captured


def _sort(captured: bytes) -> str:
    """The decoders' lines as one text; every other line is written on to descriptor 2."""
    said, others = [], []
    for line in captured.splitlines():
        if not line.strip():
            continue
        (said if _DECODER_LINE.match(line.lstrip()) else others).append(line)
    if others:
        try:
            os.write(2, b"\n".join(others) + b"\n")
        except OSError:
            pass
    return "; ".join(_OPENCV_PREFIX.sub("", line.decode("utf-8", "replace").strip()) for line in said)
