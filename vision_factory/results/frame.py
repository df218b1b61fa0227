"""One result per frame (``FrameResult``): the frame's size, its typed parts (boxes, keypoints, masks: one row per
detection; the ball; a dense map; a text: those its family produces) and why the frame started a new stream. Every
family's adapter and pipeline returns them, every consumer (the nodes, predict, replay, verify, eval, compare,
bench, track, quantize) reads them: their file record (``record``, what predict prints and replay writes), their
ROS message (the main part's: ``to_message``, ``from_message``), their comparison (``compare``), their drawing."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from .ball import Ball, write_ball_csv
from .boxes import Boxes, box_iou
from .classes import Classes
from .dense import DenseMap
from .keypoints import Keypoints
from .masks import Masks, same_frame_iou
from .part import Compared, Difference, Equal, Part, compare, pair_by_iou, pair_nearest
from .text import Text

PARTS: tuple[type, ...] = (Boxes, Keypoints, Masks, Ball, DenseMap, Text, Classes)  # in the order of their records
ROWS = ("boxes", "keypoints", "masks")  # the parts of one row per detection (indexed together)


class Adapter(Protocol):
    """A family's model on a runner (models/): a function from a BGR frame to its FrameResult."""

    def __call__(self, image_bgr: np.ndarray) -> FrameResult: ...


class Detector(Adapter, Protocol):
    """A detection or pose family's adapter: its FrameResult holds boxes, and keypoints or masks where the model
    gives them (``detect``, also its call)."""

    names: list[str]  # class names by class id
    keypoint_names: list[str]  # [] for plain detectors

    def detect(self, image_bgr: np.ndarray) -> FrameResult: ...


@dataclass(eq=False)
class FrameResult(Equal):
    """A frame's result: its size (``width``, ``height``), its parts (None: not produced; ``classes``: an image
    classifier's), with a stream's state
    (a tracker) why this frame started a new stream ("": it did not), and what was wrong with the model's output
    and left out (``problems``)."""

    width: int
    height: int
    boxes: Boxes | None = None
    keypoints: Keypoints | None = None
    masks: Masks | None = None
    ball: Ball | None = None
    dense: DenseMap | None = None
    text: Text | None = None
    classes: Classes | None = None
    new_stream: str = ""
    # What was wrong with the model's output (or another node's) for this frame and was left out or mended
    # (results/finite.py; a map's values a model should not give): problem-log kind -> the detail to log once
    problems: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, frame: np.ndarray, **parts: Any) -> FrameResult:
        """The result of ``frame`` (an image: its size) with ``parts`` (by key)."""
        return cls(int(frame.shape[1]), int(frame.shape[0]), **parts)

    @property
    def parts(self) -> list[Part]:
        """Its parts, in PARTS' order."""
        return [part for part in (getattr(self, kind.key) for kind in PARTS) if part is not None]

    def __len__(self) -> int:
        """Its detections (rows of its boxes); 0 without boxes."""
        return 0 if self.boxes is None else len(self.boxes)

    def __getitem__(self, rows: Any) -> FrameResult:
        """The result with only those detections (``rows``: an index array, a boolean mask, a slice)."""
        chosen = {key: getattr(self, key)[rows] for key in ROWS if getattr(self, key) is not None}
        return replace(self, **chosen)

    def with_parts(self, **parts: Any) -> FrameResult:
        return replace(self, **parts)

    # Files.
    def record(self, image: str, frame: int) -> dict[str, Any]:
        """The frame's record as the tools write it (``predict --format json``: one per line; ``replay``: a list
        of them): the image (a file, or PATH:FRAME of a video or a bag), the frame's index in its video or bag (0
        for an image file), its size, and its parts': the detections (each row's box, score, class id and name,
        keypoints, mask), a map's kind, unit and range, the ball's, the text."""
        record: dict[str, Any] = {"image": image, "frame": int(frame), "width": int(self.width)}
        record["height"] = int(self.height)
        if self.boxes is not None:
            rows = self.boxes.record()
            for part in (self.keypoints, self.masks):
                for row, more in zip(rows, part.record() if part is not None else ()):
                    row.update(more)
            record["detections"] = rows
        for part in (self.ball, self.dense, self.text, self.classes):
            if part is not None:
                record.update(part.record())
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, Any], values: np.ndarray | None = None) -> FrameResult:
        """A result back from its ``record`` (a map's ``values``: its .npy, which the record does not hold)."""
        found = cls(int(record["width"]), int(record["height"]))
        if "detections" in record:
            rows = record["detections"]
            found.boxes = Boxes.from_record(rows)
            found.keypoints, found.masks = Keypoints.from_record(rows), Masks.from_record(rows)
        if "Visibility" in record:
            found.ball = Ball.from_record(record)
        if "unit" in record and values is not None:
            found.dense = DenseMap.from_record(record, values)
        if "text" in record:
            found.text = Text.from_record(record)
        if "classes" in record:
            found.classes = Classes.from_record(record)
        return found

    def line(self, image: str) -> str:
        """One line of text: the image and its parts in a few words (e.g. each detection's class and score)."""
        from ..text import untrusted

        words = " ".join(said for said in (part.describe() for part in self.parts) if said)
        return f"{untrusted(image, 400)}: {words or '-'}"

    def save(self, folder: Path, path: Path, index: int | None, frame: np.ndarray, protected: Sequence = ()) -> Path:
        """What ``predict --save`` writes of it into ``folder``: a map's files (results/dense.py), else ``frame``
        drawn, as FOLDER/<image's name> or FOLDER/<video's stem>_<index>.jpg; never through a link, nor onto
        ``path`` or another of the ``protected`` files."""
        import cv2

        from ..files import staged

        if self.dense is not None:
            return self.dense.save(folder, path, index, protected)
        folder.mkdir(parents=True, exist_ok=True)
        suffix = f"_{index:06d}.jpg" if index is not None else path.suffix
        saved = folder / f"{path.stem}{suffix}"
        with staged(saved, [path, *protected], "--save folder") as fresh:
            if not cv2.imwrite(str(fresh), self.draw(frame)):
                raise ValueError(f"cannot write {saved}: OpenCV writes no {suffix} image")
        return saved

    # Drawing.
    def draw(self, image: np.ndarray, keypoint_threshold: float = 0.5) -> np.ndarray:
        """``image`` (the frame, BGR) with its parts drawn, in place: each detection's mask, box, label and
        keypoints (results/boxes.py), the ball, the text."""
        for part in self.parts:
            if part is self.boxes:
                self.boxes.draw(image, self, keypoint_threshold)
            elif part.key not in ROWS:
                part.draw(image, self)
        return image

    # Comparison (results/part.py).
    def compared(self) -> Compared:
        """What of it is compared: each detection's label, its box corners then its keypoints, its score and its
        keypoints' scores, its track, its mask; the ball; the map's values on a grid; the text."""
        if self.boxes is not None:
            rows = self.boxes.rows()
            for part in (self.keypoints, self.masks):
                if part is not None:
                    rows = rows.joined(part.rows())
            return rows
        rows = [part.rows() for part in self.parts]
        labels = [label for row in rows for label in row.labels]
        positions = [position for row in rows for position in row.positions]
        point_scores = [scores for row in rows for scores in row.point_scores]
        return Compared(labels, positions, np.concatenate([np.zeros(0), *(row.scores for row in rows)]), point_scores)

    def compare(self, other: FrameResult, min_iou: float | None = None, min_score: float = 0.0) -> Difference:
        """How this result differs from ``other`` of the same frame: detections paired within their class by the
        nearest positions (verify's pairing of a node's answers with the model's), or with ``min_iou`` greedily by
        score at an IoU of their boxes at least that (compare's of two configurations), those scoring under
        ``min_score`` left out."""
        mine, theirs = (result.scoring(min_score) for result in (self, other))
        a, b = mine.compared(), theirs.compared()
        pairs = pair_nearest(a, b) if min_iou is None else pair_by_iou(a, b, min_iou, box_iou)
        return compare(a, b, pairs, same_frame_iou)

    def scoring(self, min_score: float) -> FrameResult:
        """The result with only the detections scoring at least ``min_score``."""
        return self if self.boxes is None or not min_score else self[self.boxes.scores >= min_score]

    # ROS messages: its main part's (the first of its parts), e.g. the detections' Detection2DArray.
    def to_message(self, header: Any) -> Any:
        return self.parts[0].to_message(header, self)

    @classmethod
    def from_message(
        cls,
        parts: Sequence[str],
        message: Any,
        width: int = 0,
        height: int = 0,
        names: Sequence[str] = (),
        tracked: bool = False,
        measures: tuple[str, str] = ("", ""),
    ) -> FrameResult:
        """A node's answer (``message``, its main output's) of a frame of ``width`` x ``height`` as a result of
        ``parts`` (its result kind's; the first is the message's): the detections' class ids by ``names`` (its
        LabelInfo) and, ``tracked``, their track IDs; a map's (kind, unit): ``measures`` (its output's)."""
        main = parts[0]
        found = cls(width, height)
        if main == Boxes.key:
            found.boxes = Boxes.from_message(message, names, tracked)
            found.keypoints = Keypoints.from_message(message)
        elif main == Ball.key:
            found.ball = Ball.from_message(message)
        elif main == DenseMap.key:
            found.dense = DenseMap.from_message(message, measures[1], measures[0])
            found.height, found.width = found.dense.values.shape
        elif main == Text.key:
            found.text = Text.from_message(message)
        elif main == Classes.key:
            found.classes = Classes.from_message(message, names)
        else:
            raise ValueError(f"no part {main!r}: parts are {', '.join(kind.key for kind in PARTS)}")
        return found


def write_results(path: Path, results: Mapping[int, FrameResult], image: str, protected: Sequence = ()) -> Path:
    """A stream's results (by frame index) as its file: a ball track as TrackNet's CSV (Frame, Visibility, X, Y),
    anything else as a JSON list of each frame's ``record`` (images named IMAGE:FRAME), in frame order."""
    from ..files import write_text

    frames = sorted(results)
    if any(results[frame].ball is not None for frame in frames):
        return write_ball_csv(path, [results[frame].ball.row(frame) for frame in frames])
    write_text(path, json.dumps([results[frame].record(f"{image}:{frame}", frame) for frame in frames]), protected)
    return path
