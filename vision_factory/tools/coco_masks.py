"""COCO segmentations (truth polygons and run-length encodings, results' encodings) checked before pycocotools
reads them: its C code trusts every number it is given. A polygon coordinate of 1e15 overflows its rasteriser
(SIGSEGV), one of 1e10 asks it for gigabytes, a compressed ``counts`` string whose last character says "more"
is read past its end, and runs that add up to more than the image write past the mask. Each problem found here
is a short text naming the polygon or the run and what is wrong; coco_eval.py adds the file, the entry and the fix.

The bounds: every polygon point within its image (one pixel of slack for annotation tools that put points on
the border), at least three points (six numbers) per polygon, and a perimeter within PERIMETER_TURNS times the
image's (the rasteriser's work and memory are proportional to it); a run-length encoding's ``size`` the image's
[height, width] and its runs, each >= 0, adding up to height x width exactly.
"""

from __future__ import annotations

import math
from typing import Any

from ..parameters import MAX_IMAGE_PIXELS
from ..text import untrusted

SLACK = 1.0  # pixels a polygon point may lie outside its image
# A polygon's perimeter (sum of each edge's longer side, in pixels) may be this many times the image's: a real
# outline, however jagged, stays far within; the rasteriser allocates about 40 bytes per pixel of it.
PERIMETER_TURNS = 64
RLE_DIGITS = 7  # characters of one compressed run at most (5 bits each: 35 bits, a 32-bit run fits in 7)


def image_size_problem(width: Any, height: Any) -> str:
    """Why an image of ``width`` x ``height`` cannot carry masks ('' when it can): whole numbers >= 1 (640.0 is
    640), at most MAX_IMAGE_PIXELS pixels (the largest frame the tools read)."""
    for name, value in (("width", width), ("height", height)):
        if not (_is_number(value) and math.isfinite(value) and value == int(value) and value >= 1):
            return f"'{name}' is {untrusted(value, 40)}: masks need the image's size in whole pixels >= 1"
    if width * height > MAX_IMAGE_PIXELS:
        return (
            f"is {width}x{height} = {width * height} pixels, more than the {MAX_IMAGE_PIXELS} (7680x4320) the tools "
            "read: fix its width and height"
        )
    return ""


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def polygons_problem(polygons: list, width: int, height: int) -> str:
    """Why a list of polygons [[x, y, x, y, ...], ...] is no outline within a ``width`` x ``height`` image ('' when
    it is one)."""
    if not polygons:
        return "is an empty list: no polygon"
    perimeter = 0.0
    for number, polygon in enumerate(polygons):
        which = f"polygon {number}"
        if not isinstance(polygon, list) or not all(_is_number(value) for value in polygon):
            return f"{which} is {untrusted(polygon, 80)}, not a list of numbers x1, y1, x2, y2, ..."
        if len(polygon) < 6 or len(polygon) % 2:
            return f"{which} has {len(polygon)} numbers: a polygon is x, y pairs, at least 3 points (6 numbers)"
        for index, value in enumerate(polygon):
            axis, size = ("x", width) if index % 2 == 0 else ("y", height)
            if not (math.isfinite(value) and -SLACK <= value <= size + SLACK):
                return f"{which} has {axis} {untrusted(value, 40)} (number {index}), outside the image's 0..{size}"
        xs, ys = polygon[0::2], polygon[1::2]
        perimeter += sum(
            max(abs(xs[i] - xs[i - 1]), abs(ys[i] - ys[i - 1])) for i in range(len(xs))
        )  # the edge from the last point back to the first included (i = 0)
    if perimeter > PERIMETER_TURNS * 2 * (width + height):
        return (
            f"polygons run {perimeter:.0f} pixels around, more than {PERIMETER_TURNS} times the image's perimeter "
            f"({2 * (width + height)}): no outline is so long"
        )
    return ""


def rle_counts(text: str, limit: int) -> list[int]:
    """The runs of a compressed COCO ``counts`` string (pycocotools' encoding: each run in characters '0'..'o' of
    5 bits, the 0x20 bit saying another follows, the 0x10 bit of the last one the sign; from the fourth run on,
    the difference from the run two before); a ValueError naming the problem when it is malformed or a run is
    outside 0..``limit``."""
    runs: list[int] = []
    position = 0
    while position < len(text):
        start, value, shift, more = position, 0, 0, True
        while more:
            if position >= len(text):
                raise ValueError(f"run {len(runs)} is cut off at the end of the text (its last character says more)")
            if shift >= 5 * RLE_DIGITS:
                raise ValueError(f"run {len(runs)} has more than {RLE_DIGITS} characters (from character {start})")
            code = ord(text[position]) - 48
            if not 0 <= code < 64:
                shown = untrusted(repr(text[position]), 20)
                raise ValueError(f"character {position} {shown} is not one of the encoding's ('0'..'o')")
            value |= (code & 0x1F) << shift
            more = bool(code & 0x20)
            position += 1
            shift += 5
        if code & 0x10:
            value -= 1 << shift
        if len(runs) > 2:
            value += runs[-2]
        if not 0 <= value <= limit:
            raise ValueError(f"run {len(runs)} is {value}, outside 0..{limit} (the image's pixels)")
        runs.append(value)
    return runs


def rle_problem(rle: dict, width: int, height: int, compressed_only: bool = False) -> str:
    """Why a run-length encoding {"size": [height, width], "counts": ...} is no mask of a ``width`` x ``height``
    image ('' when it is one). ``counts`` is the compressed text, or (unless ``compressed_only``: results, which
    pycocotools reads as text only) a list of runs."""
    if not {"size", "counts"} <= set(rle):
        return 'is no run-length encoding {"size": [height, width], "counts": ...}'
    if rle["size"] != [height, width]:
        return f"'size' is {untrusted(rle['size'], 40)}, not its image's [height, width] [{height}, {width}]"
    counts, pixels = rle["counts"], width * height
    if isinstance(counts, str):
        try:
            runs = rle_counts(counts, pixels)
        except ValueError as exc:
            return f"'counts' is no compressed run-length text: {exc}"
    elif isinstance(counts, list) and not compressed_only:
        if not all(isinstance(run, int) and not isinstance(run, bool) and 0 <= run <= pixels for run in counts):
            return f"'counts' {untrusted(counts, 80)} is not a list of runs, whole numbers in 0..{pixels}"
        runs = counts
    else:
        what = "the compressed text (pycocotools' encode)" if compressed_only else "text or a list of runs"
        return f"'counts' is {untrusted(counts, 60)}, not {what}"
    if sum(runs) != pixels:
        return f"'counts' runs add up to {sum(runs)} pixels, not the image's {height}x{width} = {pixels}"
    return ""


def segmentation_problem(segmentation: Any, width: int, height: int, compressed_only: bool = False) -> str:
    """Why ``segmentation`` (polygons, or a run-length encoding) is no mask of a ``width`` x ``height`` image ('' when
    it is one); ``compressed_only``: a results file's, which is a compressed run-length encoding only."""
    if isinstance(segmentation, dict):
        return rle_problem(segmentation, width, height, compressed_only)
    if isinstance(segmentation, list) and not compressed_only:
        return polygons_problem(segmentation, width, height)
    if compressed_only:
        return 'is no run-length encoding {"size": [height, width], "counts": "..."}'
    return "is neither polygons [[x1, y1, x2, y2, x3, y3, ...], ...] nor a run-length encoding"
