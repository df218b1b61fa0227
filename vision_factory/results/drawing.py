"""What the result parts share when they draw (OpenCV, BGR, in place): labels on a filled background, placed inside
the image and clear of each other (``place_labels``, ``draw_label``); a mask's fill and outline in its instance's
colour (``draw_mask``); a map's colour bar with its range (``colour_bar``). The colours themselves: colours.py."""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

FONT = cv2.FONT_HERSHEY_SIMPLEX
FONT_SCALE = 0.5
LABEL_PAD = 3  # pixels around a label's text, inside its filled background
MASK_OPACITY = 0.45  # of a mask's colour over the frame
OUTLINE = 2  # pixels: a mask's outline, a box's edges

Rect = tuple[int, int, int, int]  # x1, y1, x2, y2: pixels x1..x2-1, y1..y2-1


def text_colour(background: Sequence[int]) -> tuple[int, int, int]:
    """Black on a light background, white on a dark one (BGR; ITU-R BT.601 luma)."""
    blue, green, red = background[:3]
    return (0, 0, 0) if 0.114 * blue + 0.587 * green + 0.299 * red > 140 else (255, 255, 255)


def label_size(text: str) -> tuple[int, int]:
    """A label's width and height in pixels, its padding included."""
    (width, height), baseline = cv2.getTextSize(text, FONT, FONT_SCALE, 1)
    return width + 2 * LABEL_PAD, height + baseline + 2 * LABEL_PAD


def _overlaps(a: Rect, b: Rect) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def place_labels(boxes: Sequence[Sequence[float]], texts: Sequence[str], shape: Sequence[int]) -> list[Rect]:
    """Each box's label rectangle in an image of ``shape`` (height, width, ...): inside the image, and clear of
    the labels placed before it where it can be. Greedy, in the boxes' order: above the box, else inside its top,
    else below it; where each of those covers an earlier label, the first moved down (then up) a label's height
    at a time until it covers none; where nothing is clear (a crowded or tiny image), above the box."""
    height, width = int(shape[0]), int(shape[1])
    placed: list[Rect] = []
    for (x1, y1, _, y2), text in zip(boxes, texts):
        w, h = label_size(text)
        w, h = min(w, width), min(h, height)
        left = min(max(int(round(x1)), 0), width - w)

        def at(top: int, left: int = left, w: int = w, h: int = h) -> Rect:
            top = min(max(top, 0), height - h)
            return left, top, left + w, top + h

        candidates = [at(int(round(y1)) - h), at(int(round(y1))), at(int(round(y2)))]
        start = candidates[0][1]
        candidates += [at(top) for top in range(start + h, height - h + 1, h)]
        candidates += [at(top) for top in range(start - h, -1, -h)]
        clear = next((rect for rect in candidates if not any(_overlaps(rect, other) for other in placed)), None)
        placed.append(clear if clear is not None else candidates[0])
    return placed


def draw_label(image: np.ndarray, rect: Rect, text: str, colour: Sequence[int]) -> None:
    """``text`` on a background of ``colour`` filling ``rect`` (place_labels'), in black or white to be read."""
    x1, y1, x2, y2 = rect
    cv2.rectangle(image, (x1, y1), (x2 - 1, y2 - 1), tuple(int(c) for c in colour), -1)
    (_, text_height), _ = cv2.getTextSize(text, FONT, FONT_SCALE, 1)
    cv2.putText(
        image, text, (x1 + LABEL_PAD, y1 + LABEL_PAD + text_height), FONT, FONT_SCALE, text_colour(colour), 1,
        cv2.LINE_AA,
    )  # fmt: skip


def draw_labels(
    image: np.ndarray, boxes: Sequence[Sequence[float]], texts: Sequence[str], colours: Sequence[Sequence[int]]
) -> list[Rect]:
    """Each box's label, placed by ``place_labels`` and drawn by ``draw_label``; the rectangles placed."""
    rects = place_labels(boxes, texts, image.shape)
    for rect, text, colour in zip(rects, texts, colours):
        draw_label(image, rect, text, colour)
    return rects


def draw_mask(image: np.ndarray, bits: np.ndarray, left: int, top: int, colour: Sequence[int]) -> None:
    """A mask (``bits`` [h, w] bool, its top-left pixel at ``left``, ``top``: an InstanceMask's) drawn: its pixels
    blended with ``colour`` (MASK_OPACITY), its outline in ``colour`` at full strength (only its box's region is
    touched; a mask reaching outside the image, of another frame size, is not drawn)."""
    h, w = bits.shape
    region = image[top : top + h, left : left + w]
    if region.shape[:2] != (h, w) or not h or not w:
        return
    pixels = region[bits].astype(np.float32)
    region[bits] = (pixels * (1 - MASK_OPACITY) + np.float32(colour[:3]) * MASK_OPACITY).astype(np.uint8)
    contours, _ = cv2.findContours(bits.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
    cv2.drawContours(region, contours, -1, tuple(int(c) for c in colour[:3]), OUTLINE)


BAR_WIDTH = 14  # pixels: the colour bar
BAR_MARGIN = 6  # pixels around it and its text
LEGEND_WIDTH = 84  # pixels: the bar and its text, beside or over a map


def colour_bar(
    image: np.ndarray, colour_map: int, top: str, bottom: str, title: str = "", flat: bool = False
) -> tuple[int, int, int, int]:
    """A legend at the right edge of ``image``, ``LEGEND_WIDTH`` wide: on a dark panel, a vertical bar of
    ``colour_map`` from its highest colour at the top to its lowest at the bottom (one colour, its middle, when the
    map is ``flat``), ``top`` and ``bottom`` written beside its ends and ``title`` above it. The bar's rectangle
    (x1, y1, x2, y2)."""
    height, width = image.shape[:2]
    left = max(width - LEGEND_WIDTH, 0)
    image[:, left:] = (32, 32, 32)
    (_, line), _ = cv2.getTextSize("0", FONT, 0.4, 1)
    bar_top = BAR_MARGIN + (line + BAR_MARGIN if title else 0)
    bar_bottom = max(height - BAR_MARGIN, bar_top + 1)
    x1, x2 = left + BAR_MARGIN, min(left + BAR_MARGIN + BAR_WIDTH, width)
    rows = bar_bottom - bar_top
    levels = np.full(rows, 128, np.uint8) if flat else np.linspace(255, 0, rows).round().astype(np.uint8)
    strip = cv2.applyColorMap(levels.reshape(-1, 1), colour_map)  # [rows, 1, 3]
    image[bar_top:bar_bottom, x1:x2] = strip
    white = (255, 255, 255)
    text_x = x2 + 4
    if title:
        cv2.putText(image, title, (x1, BAR_MARGIN + line), FONT, 0.4, white, 1, cv2.LINE_AA)
    cv2.putText(image, top, (text_x, bar_top + line), FONT, 0.4, white, 1, cv2.LINE_AA)
    cv2.putText(image, bottom, (text_x, bar_bottom), FONT, 0.4, white, 1, cv2.LINE_AA)
    return x1, bar_top, x2, bar_bottom


DASH = 8  # pixels: a dashed outline's dash and gap


def draw_dashed_box(
    image: np.ndarray, box: Sequence[float], colour: Sequence[int], gap_colour: Sequence[int] | None = None
) -> None:
    """A box's outline (``box``: x1, y1, x2, y2) OUTLINE thick in dashes of ``colour``, DASH long, with gaps as
    long: left as they are, or filled with ``gap_colour`` (a dash seen on any background: white and black)."""
    x1, y1, x2, y2 = (int(round(v)) for v in box)
    edges = (((x1, y1), (x2, y1)), ((x2, y1), (x2, y2)), ((x2, y2), (x1, y2)), ((x1, y2), (x1, y1)))
    for (ax, ay), (bx, by) in edges:
        length = max(abs(bx - ax), abs(by - ay))
        for start in range(0, max(length, 1), DASH):
            end = min(start + DASH, length)
            step = (start // DASH) % 2
            shade = colour if step == 0 else gap_colour
            if shade is None:
                continue
            p = (ax + (bx - ax) * start // max(length, 1), ay + (by - ay) * start // max(length, 1))
            q = (ax + (bx - ax) * end // max(length, 1), ay + (by - ay) * end // max(length, 1))
            cv2.line(image, p, q, tuple(int(c) for c in shade[:3]), OUTLINE)
