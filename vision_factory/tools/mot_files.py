"""MOTChallenge text files: reading and writing them (no ROS); tools/mot.py scores them.

A MOTChallenge file has one line per box, ``frame,id,x,y,w,h,score,-1,-1,-1``: frames count from 1, (x, y) is the
box's top-left corner and (w, h) its size, in pixels. Ground truth comes in two layouts, told apart by the number
of columns (as MOTChallenge's own evaluation does):

- 10 columns, MOT15 (2D): ``frame,id,x,y,w,h,conf,x3d,y3d,z3d``; a box is scored unless conf is 0.
- up to 9 columns, MOT16 / MOT17 / MOT20: ``frame,id,x,y,w,h,flag,class,visibility``; a box with flag 0 is not
  scored, and a box of a distractor class (2 person on vehicle, 7 static person, 8 distractor, 12 reflection) is an
  ignore region: a predicted box matched to it (IoU >= 0.5, one-to-one against all truth boxes of the frame) is
  dropped before scoring, as MOTChallenge's evaluation (TrackEval) does, neither a hit nor a false positive.
  TrackEval also scores class 1 (pedestrian) alone; here every other class with a non-zero flag is scored too, so
  that ground truth of other objects can be. Visibility is read but not used (MOTChallenge scores every
  visibility).
"""

from __future__ import annotations

import math
import re
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import numpy as np

from ..files import open_new
from ..text import shown_path, untrusted

MAX_LINE_CHARS = 1024  # a MOTChallenge line is under 100 characters; a longer one is not this format
MIN_COLUMNS, MAX_COLUMNS = 6, 10
MOT15_COLUMNS = 10  # frame,id,x,y,w,h,conf,x3d,y3d,z3d; fewer: frame,id,x,y,w,h,flag,class,visibility (MOT16+)
DISTRACTOR_CLASSES = {2: "person on vehicle", 7: "static person", 8: "distractor", 12: "reflection"}
_FIELD = re.compile(r"\s*,\s*|\s+")  # commas (with optional spaces), or whitespace alone, as motmetrics reads


@dataclass
class MotBoxes:
    """The boxes of one MOTChallenge file, one row per box, in file order."""

    path: str
    frames: np.ndarray  # int64, from 1
    ids: np.ndarray  # int64; -1 in a detections file (no identities)
    boxes: np.ndarray  # float64 [N, 4]: x, y (top-left), w, h in pixels
    scores: np.ndarray  # float64: column 7 (a tracker's confidence; ground truth's conf or consider flag), else 1
    classes: np.ndarray  # int64: column 8 in the MOT16+ layout (9 columns or fewer), else -1
    visibility: np.ndarray  # float64: column 9 in the MOT16+ layout, else -1
    lines: np.ndarray  # int64: each row's line number in the file, for errors

    def __len__(self) -> int:
        return len(self.frames)

    def subset(self, keep: np.ndarray) -> MotBoxes:
        fields = ("frames", "ids", "boxes", "scores", "classes", "visibility", "lines")
        return MotBoxes(self.path, **{name: getattr(self, name)[keep] for name in fields})

    def by_frame(self) -> dict[int, np.ndarray]:
        """Frame -> the indices of its rows, in file order."""
        order = np.argsort(self.frames, kind="stable")
        frames, starts = np.unique(self.frames[order], return_index=True)
        return {int(frame): rows for frame, rows in zip(frames, np.split(order, starts[1:]))}


def read_mot(path: Path | str) -> MotBoxes:
    """Every box of the MOTChallenge file at ``path``, read line by line into compact arrays (a line longer than
    MAX_LINE_CHARS is refused, never read whole). A malformed line is an error naming the file, the line and the
    problem; blank lines are skipped."""
    path = Path(path)
    try:
        with open(path, encoding="utf-8", newline=None) as stream:
            return _parse(stream, str(path))
    except FileNotFoundError:
        raise ValueError(f"MOTChallenge file not found: {shown_path(path)}") from None
    except IsADirectoryError:
        raise ValueError(
            f"{shown_path(path)} is a folder: give a MOTChallenge text file (gt.txt, tracks.txt)"
        ) from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{shown_path(path)} is not a MOTChallenge text file: not UTF-8 text ({exc.reason})") from None


def _lines(stream: TextIO, path: str) -> Iterator[tuple[int, str]]:
    number = 0
    while line := stream.readline(MAX_LINE_CHARS + 1):
        number += 1
        if len(line) > MAX_LINE_CHARS and not line.endswith("\n"):
            raise ValueError(
                f"{shown_path(path)}:{number}: line longer than {MAX_LINE_CHARS} characters, not a MOTChallenge line "
                "(frame,id,x,y,w,h,score,...)"
            )
        yield number, line


def _parse(stream: TextIO, path: str) -> MotBoxes:
    integers = {name: array("q") for name in ("frames", "ids", "classes", "lines")}
    reals = {name: array("d") for name in ("boxes", "scores", "visibility")}
    for number, line in _lines(stream, path):
        text = line.strip()
        if not text:
            continue
        fields = _FIELD.split(text)
        where = f"{shown_path(path)}:{number}"
        if not MIN_COLUMNS <= len(fields) <= MAX_COLUMNS:
            raise ValueError(
                f"{where}: {len(fields)} fields in {untrusted(text, 80)}; a MOTChallenge line has "
                f"{MIN_COLUMNS} to {MAX_COLUMNS}: frame,id,x,y,w,h,score,-1,-1,-1"
            )
        values = [_number(field, where, column) for column, field in enumerate(fields, start=1)]
        frame = _integer(values[0], where, "frame (column 1)")
        if frame < 1:
            raise ValueError(f"{where}: frame {frame}: MOTChallenge frames count from 1")
        if values[4] < 0 or values[5] < 0:
            raise ValueError(f"{where}: negative box size {values[4]:g}x{values[5]:g} (columns 5 and 6 are w, h)")
        mot16 = len(fields) < MOT15_COLUMNS
        integers["frames"].append(frame)
        integers["ids"].append(_integer(values[1], where, "id (column 2)"))
        integers["classes"].append(_integer(values[7], where, "class (column 8)") if mot16 and len(values) > 7 else -1)
        integers["lines"].append(number)
        reals["boxes"].extend(values[2:6])
        reals["scores"].append(values[6] if len(values) > 6 else 1.0)
        reals["visibility"].append(values[8] if mot16 and len(values) > 8 else -1.0)
    boxes = MotBoxes(
        path,
        **{name: np.frombuffer(values, dtype=np.int64).copy() for name, values in integers.items()},
        boxes=np.frombuffer(reals["boxes"], dtype=np.float64).reshape(-1, 4).copy(),
        scores=np.frombuffer(reals["scores"], dtype=np.float64).copy(),
        visibility=np.frombuffer(reals["visibility"], dtype=np.float64).copy(),
    )
    _refuse_duplicates(boxes)
    return boxes


def _number(field: str, where: str, column: int) -> float:
    try:
        value = float(field)
    except ValueError:
        raise ValueError(f"{where}: column {column} is '{untrusted(field, 40)}', not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{where}: column {column} is {untrusted(field, 40)}, not a finite number")
    return value


def _integer(value: float, where: str, what: str) -> int:
    if value != int(value):
        raise ValueError(f"{where}: {what} is {value:g}, not a whole number")
    if abs(value) >= 2**53:  # past that a float no longer holds every whole number
        raise ValueError(f"{where}: {what} is {value:g}, too large")
    return int(value)


def _refuse_duplicates(boxes: MotBoxes) -> None:
    """Two boxes with one ID in one frame (a tracker must not, ground truth cannot) are an error naming both lines."""
    if len(boxes) < 2:
        return
    order = np.lexsort((boxes.ids, boxes.frames))
    same = (np.diff(boxes.frames[order]) == 0) & (np.diff(boxes.ids[order]) == 0) & (boxes.ids[order][1:] >= 0)
    if same.any():
        first = int(np.argmax(same))
        lines = sorted(int(boxes.lines[order[first + k]]) for k in (0, 1))
        raise ValueError(
            f"{boxes.path}: lines {lines[0]} and {lines[1]} both give frame {boxes.frames[order[first]]} "
            f"a box with id {boxes.ids[order[first]]}; an id has at most one box per frame"
        )


def mot_line(frame: int, track_id: int, box: Iterable[float], score: float) -> str:
    """One MOTChallenge line, ``frame,id,x,y,w,h,score,-1,-1,-1``: ``box`` is x, y (top-left), w, h in pixels."""
    x, y, w, h = box
    return f"{int(frame)},{int(track_id)},{x:.2f},{y:.2f},{w:.2f},{h:.2f},{score:.4f},-1,-1,-1"


def write_mot(path: Path | str, boxes: MotBoxes) -> Path:
    """``boxes`` as a MOTChallenge file at ``path`` (frames in order; rows of one frame in their order)."""
    path = Path(path)
    with open_new(path, encoding="utf-8") as stream:
        for rows in boxes.by_frame().values():
            for row in rows:
                line = mot_line(boxes.frames[row], boxes.ids[row], boxes.boxes[row], boxes.scores[row])
                stream.write(line + "\n")
    return path


def boxes_from_rows(rows: Iterable[tuple[int, int, float, float, float, float, float]], path: str = "") -> MotBoxes:
    """MotBoxes from (frame, id, x, y, w, h, score) rows, e.g. a tracker's output."""
    table = np.asarray(list(rows), dtype=np.float64).reshape(-1, 7)
    count = len(table)
    return MotBoxes(
        path,
        frames=table[:, 0].astype(np.int64),
        ids=table[:, 1].astype(np.int64),
        boxes=table[:, 2:6].copy(),
        scores=table[:, 6].copy(),
        classes=np.full(count, -1, dtype=np.int64),
        visibility=np.full(count, -1.0),
        lines=np.arange(1, count + 1, dtype=np.int64),
    )
