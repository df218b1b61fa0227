"""The boxes of a frame's detections (``Boxes``: one row per detection, as every detector, the tracker and the
tools hold them), their IoU, class-aware NMS, drawing colours, and their ROS messages: the detections'
vision_msgs/Detection2DArray (its keypoints, results/keypoints.py, and track IDs travel in it) and the class map's
LabelInfo (message types imported inside the functions: no ROS at import).

Layout of a detection in ``Detection2DArray`` (one ``Detection2D`` per row, in the rows' order):
- ``id``: the row's rank (0, 1, ...), or with tracking its track ID (``id_text``: empty when it has none);
- ``bbox``: the box's centre and size, in the frame's pixels; an oriented box's (an OBB model's) angle is
  ``bbox.center.theta`` (radians, its rotation about its centre: x towards y, clockwise on the image, as
  Ultralytics' ``xywhr``), 0 for the others;
- ``results[0]``: its class: ``hypothesis.class_id`` the class name (its label), ``hypothesis.score`` in 0..1,
  ``pose.pose.position`` the box centre;
- ``results[1:]``: a pose's keypoints, in the model's order: ``hypothesis.class_id`` the keypoint name (``nose``,
  ``left_eye``, ...), ``hypothesis.score`` its confidence, ``pose.pose.position.x/y`` its position in pixels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import cv2
import numpy as np

from .colours import bgr, class_colour, track_colour
from .part import Compared, Equal
from .rotated import corners

if TYPE_CHECKING:
    from std_msgs.msg import Header
    from vision_msgs.msg import Detection2DArray, LabelInfo, ObjectHypothesisWithPose
    from visualization_msgs.msg import MarkerArray

NO_TRACK = -1  # a tracked row's track ID when it is not part of a confirmed track


def box_iou(box: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """IoU of one xyxy box with each of ``boxes``."""
    top_left = np.maximum(box[:2], boxes[:, :2])
    bottom_right = np.minimum(box[2:], boxes[:, 2:])
    intersection = np.prod((bottom_right - top_left).clip(0), axis=1)
    areas = np.prod(boxes[:, 2:] - boxes[:, :2], axis=1)
    return intersection / (np.prod(box[2:] - box[:2]) + areas - intersection + 1e-9)


def nms(
    boxes: np.ndarray, scores: np.ndarray, class_ids: np.ndarray, iou_threshold: float, limit: int | None = None
) -> np.ndarray:
    """Indices kept by class-aware greedy NMS, highest score first (ties: lower index first), at most ``limit``.

    The greedy loop runs in OpenCV (``cv2.dnn.NMSBoxes``, "suppress when IoU > threshold"), given
    each box's rank as its score so that its order is exactly ours. Greedy picks never depend on
    lower-scored boxes, so the first ``limit`` picks come from a prefix of the score order: it
    starts at 4 x ``limit`` and is doubled until it yields ``limit`` picks or holds every box,
    which keeps thousands of candidates cheap.

    A box or score that is NaN or infinite (a damaged model's) takes no part: such boxes come after the kept ones
    (at most ``limit`` of them), for results/finite.py's ``finite`` to count and leave out, and never change what
    the finite boxes keep.
    """
    if not len(boxes):
        return np.zeros(0, dtype=np.int64)
    finite = np.isfinite(boxes).all(axis=1) & np.isfinite(scores)
    if not finite.all():
        good, bad = np.flatnonzero(finite), np.flatnonzero(~finite)
        kept = good[nms(boxes[good], scores[good], class_ids[good], iou_threshold, limit)]
        return np.concatenate([kept, bad[: len(bad) if limit is None else limit]])
    order = np.argsort(-scores, kind="stable")
    limit = len(order) if limit is None else limit
    # Boxes of different classes never overlap once each class is moved to its own region.
    offset = 2 * (float(np.abs(boxes).max()) + 1)
    shifted = boxes[order].astype(np.float64) + (class_ids[order].astype(np.float64) * offset)[:, None]
    xywh = np.concatenate([shifted[:, :2], shifted[:, 2:] - shifted[:, :2]], axis=1)
    ranks = np.arange(len(order), 0, -1, dtype=np.float32)  # all > 0, distinct, descending
    prefix = max(4 * limit, 1)  # usually enough at once: NMS keeps about a third of a dense detector's boxes
    while True:
        kept = np.asarray(cv2.dnn.NMSBoxes(xywh[:prefix], ranks[:prefix], 0.0, iou_threshold), np.int64)
        if len(kept) >= limit or prefix >= len(order):
            return order[kept.reshape(-1)[:limit]]
        prefix *= 2


def id_text(track: int | None) -> str:
    """Detection2D.id of a tracked row: its track ID, or empty when it is not part of a confirmed track."""
    return "" if track is None or track < 0 else str(int(track))


def _track_of(text: str) -> int:
    """The track ID a Detection2D.id says (``id_text``'s); an id that is no whole number counts as no track."""
    return int(text) if text.isdigit() else NO_TRACK


@dataclass(frozen=True, eq=False)
class Boxes(Equal):
    """A frame's detected boxes: ``xyxy`` [N, 4] in the frame's pixels, ``scores`` [N] in 0..1, ``class_ids`` [N]
    (-1: not in the class map), ``labels`` each row's class name (or a prompt's phrase), ``names`` the class map
    (class id -> name) where known, ``track_ids`` [N] with tracking on (NO_TRACK: no confirmed track; None: not
    tracked), ``angles`` [N] of oriented boxes (an OBB model's; None: upright boxes): each row's rotation in radians
    about its centre, ``xyxy`` then the box before it (its centre and size, Ultralytics' ``xywhr`` without r).
    Indexing (an index array, a boolean mask, a slice) gives the Boxes of those rows."""

    key: ClassVar[str] = "boxes"

    xyxy: np.ndarray
    scores: np.ndarray
    class_ids: np.ndarray
    labels: tuple[str, ...]
    names: tuple[str, ...] | None = None
    track_ids: np.ndarray | None = None
    angles: np.ndarray | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "xyxy", np.asarray(self.xyxy, np.float64).reshape(-1, 4))
        set_(self, "scores", np.asarray(self.scores, np.float64).reshape(-1))
        set_(self, "class_ids", np.asarray(self.class_ids, np.int64).reshape(-1))
        set_(self, "labels", tuple(self.labels))
        set_(self, "names", None if self.names is None else tuple(self.names))
        if self.track_ids is not None:
            set_(self, "track_ids", np.asarray(self.track_ids, np.int64).reshape(-1))
        if self.angles is not None:
            set_(self, "angles", np.asarray(self.angles, np.float64).reshape(-1))
        counts = {len(self.xyxy), len(self.scores), len(self.class_ids), len(self.labels)}
        counts |= {len(rows) for rows in (self.track_ids, self.angles) if rows is not None}
        if len(counts) != 1:
            raise ValueError(
                f"Boxes of unequal rows: {len(self.xyxy)} boxes, {len(self.scores)} scores, {len(self.class_ids)} "
                f"class ids, {len(self.labels)} labels"
            )

    @classmethod
    def of(
        cls, xyxy: Any, scores: Any, class_ids: Any, names: Sequence[str], track_ids: Any = None, angles: Any = None
    ) -> Boxes:
        """Boxes labelled by the class map ``names`` (an id past it: class_<id>)."""
        ids = np.asarray(class_ids, np.int64).reshape(-1)
        labels = [names[i] if 0 <= i < len(names) else f"class_{i}" for i in ids.tolist()]
        return cls(xyxy, scores, ids, labels, names, track_ids, angles)

    @classmethod
    def rotated(cls, xywhr: Any, scores: Any, class_ids: Any, names: Sequence[str]) -> Boxes:
        """Oriented boxes from [N, 5] centre, width, height and angle (radians; Ultralytics' ``xywhr``)."""
        xywhr = np.asarray(xywhr, np.float64).reshape(-1, 5)
        half = xywhr[:, 2:4] / 2
        xyxy = np.concatenate([xywhr[:, :2] - half, xywhr[:, :2] + half], axis=1)
        return cls.of(xyxy, scores, class_ids, names, angles=xywhr[:, 4])

    @classmethod
    def empty(cls, names: Sequence[str] | None = None) -> Boxes:
        return cls(np.zeros((0, 4)), np.zeros(0), np.zeros(0, np.int64), (), names)

    @classmethod
    def join(cls, parts: Sequence[Boxes], names: Sequence[str] | None = None) -> Boxes:
        """The rows of ``parts``, in order (their class map ``names``; tracked when every part is)."""
        if not parts:
            return cls.empty(names)
        tracked = all(part.track_ids is not None for part in parts)
        rotated = any(part.angles is not None for part in parts)
        return cls(
            np.concatenate([part.xyxy for part in parts]),
            np.concatenate([part.scores for part in parts]),
            np.concatenate([part.class_ids for part in parts]),
            [label for part in parts for label in part.labels],
            names,
            np.concatenate([part.track_ids for part in parts]) if tracked else None,
            np.concatenate([part.turns() for part in parts]) if rotated else None,
        )

    def __len__(self) -> int:
        return len(self.scores)

    def __getitem__(self, rows: Any) -> Boxes:
        index = np.arange(len(self))[rows].reshape(-1)
        tracks = None if self.track_ids is None else self.track_ids[index]
        labels = [self.labels[i] for i in index.tolist()]
        angles = None if self.angles is None else self.angles[index]
        return Boxes(self.xyxy[index], self.scores[index], self.class_ids[index], labels, self.names, tracks, angles)

    def turns(self) -> np.ndarray:
        """Each row's angle in radians (0 for upright boxes)."""
        return np.zeros(len(self)) if self.angles is None else self.angles

    def xywhr(self) -> np.ndarray:
        """[N, 5] each row's centre, width, height and angle (Ultralytics' ``xywhr``; angle 0 when upright)."""
        centre, size = (self.xyxy[:, :2] + self.xyxy[:, 2:]) / 2, self.xyxy[:, 2:] - self.xyxy[:, :2]
        return np.concatenate([centre, size, self.turns()[:, None]], axis=1)

    def corners(self) -> np.ndarray:
        """[N, 4, 2] each row's corners in frame pixels, rotated by its angle (results/rotated.py's order)."""
        return corners(self.xywhr())

    def enclosing(self) -> np.ndarray:
        """[N, 4] each row's upright box around its corners (xyxy itself for upright boxes)."""
        if self.angles is None:
            return self.xyxy
        points = self.corners()
        return np.concatenate([points.min(axis=1), points.max(axis=1)], axis=1)

    def tracked(self, track_ids: Sequence[int | None]) -> Boxes:
        """These boxes with each row's track ID (None: no confirmed track)."""
        ids = [NO_TRACK if track is None else int(track) for track in track_ids]
        return replace(self, track_ids=np.asarray(ids, np.int64))

    def track(self, row: int) -> int | None:
        """Row ``row``'s track ID; None when it has none (or tracking is off)."""
        if self.track_ids is None or self.track_ids[row] < 0:
            return None
        return int(self.track_ids[row])

    # Its file record: each row's box, score, class id and class name, an oriented box's angle (radians)
    # (FrameResult.record adds its siblings').
    def record(self) -> list[dict[str, Any]]:
        rows = [
            {"xyxy": xyxy, "score": score, "class_id": class_id, "class_name": label}
            for xyxy, score, class_id, label in zip(
                self.xyxy.tolist(), self.scores.tolist(), self.class_ids.tolist(), self.labels
            )
        ]
        for row, angle in zip(rows, self.angles.tolist() if self.angles is not None else ()):
            row["angle"] = angle
        return rows

    @classmethod
    def from_record(cls, rows: Sequence[Mapping[str, Any]], names: Sequence[str] | None = None) -> Boxes:
        if not rows:
            return cls.empty(names)
        return cls(
            [row["xyxy"] for row in rows],
            [row["score"] for row in rows],
            [row["class_id"] for row in rows],
            [row["class_name"] for row in rows],
            names,
            angles=[row.get("angle", 0.0) for row in rows] if any("angle" in row for row in rows) else None,
        )

    def describe(self) -> str:
        """Each row's class and score (the names come from the model or a labels file: escaped)."""
        from ..text import untrusted

        return ", ".join(f"{untrusted(label, 100)} {score:.2f}" for label, score in zip(self.labels, self.scores))

    # Comparison (results/part.py): each row's corners (an oriented box's four, rotated), score and track.
    def rows(self) -> Compared:
        no_points = [np.zeros(0)] * len(self)
        positions = list(self.xyxy) if self.angles is None else list(self.corners().reshape(-1, 8))
        return Compared(list(self.labels), positions, self.scores, no_points, self.track_ids, boxes=self.enclosing())

    # Drawing: the frame's detections in their class's colour (their track's when tracked): each row's mask (filled,
    # half see-through, outlined) under its box, its box, its keypoints above ``keypoint_threshold``, then every
    # label ("#7 person 0.91" when tracked) on a filled background, inside the image and clear of the others.
    def draw(self, image: np.ndarray, frame: Any = None, keypoint_threshold: float = 0.5) -> np.ndarray:
        from ..text import untrusted
        from .drawing import OUTLINE, draw_labels, draw_mask

        masks = getattr(frame, "masks", None)
        keypoints = getattr(frame, "keypoints", None)
        colours, texts = [], []
        for index, (box, score, label) in enumerate(zip(self.xyxy.tolist(), self.scores.tolist(), self.labels)):
            x1, y1, x2, y2 = (int(round(v)) for v in box)
            colour = self.colour(index)
            if masks is not None and masks.masks[index] is not None:
                mask = masks.masks[index]
                draw_mask(image, mask.bits, mask.left, mask.top, colour)
            if self.angles is None:
                cv2.rectangle(image, (x1, y1), (x2, y2), colour, OUTLINE)
            else:  # an oriented box: its four corners, rotated
                cv2.polylines(image, [np.round(self.corners()[index]).astype(np.int32)], True, colour, OUTLINE)
            if keypoints is not None:
                keypoints.draw_row(image, index, keypoint_threshold)
            track, shown = self.track(index), untrusted(label, 40)
            texts.append(f"{shown} {score:.2f}" if track is None else f"#{track} {shown} {score:.2f}")
            colours.append(colour)
        draw_labels(image, self.enclosing().tolist(), texts, colours)  # last: over every box, clear of each other
        return image

    def colour(self, index: int) -> tuple[int, int, int]:
        """Row ``index``'s colour (BGR): its track's when tracked (track_colour), else its class's (class_colour)."""
        track = self.track(index)
        return class_colour(int(self.class_ids[index])) if track is None else bgr(track_colour(track))

    # ROS messages.
    def to_message(self, header: Header, frame: Any = None) -> Detection2DArray:
        """The frame's Detection2DArray, stamped with its header: a Detection2D per row, its keypoints (``frame``'s,
        results/keypoints.py) in it; ``id`` the row's rank, or tracked its track ID (``id_text``)."""
        from vision_msgs.msg import BoundingBox2D, Detection2D, Detection2DArray

        keypoints = getattr(frame, "keypoints", None)
        messages = []
        for index, ((x1, y1, x2, y2), score, label) in enumerate(zip(self.xyxy.tolist(), self.scores, self.labels)):
            centre_x, centre_y = (x1 + x2) / 2, (y1 + y2) / 2
            ids = str(index) if self.track_ids is None else id_text(self.track(index))
            message = Detection2D(header=header, id=ids)
            message.bbox = BoundingBox2D(size_x=float(x2 - x1), size_y=float(y2 - y1))
            message.bbox.center.position.x, message.bbox.center.position.y = float(centre_x), float(centre_y)
            message.bbox.center.theta = float(self.angles[index]) if self.angles is not None else 0.0
            results = [hypothesis(label, score, centre_x, centre_y)]
            if keypoints is not None:
                names = keypoints.names
                results += [hypothesis(name, s, x, y) for name, (x, y, s) in zip(names, keypoints.points[index])]
            message.results = results
            messages.append(message)
        return Detection2DArray(header=header, detections=messages)

    @classmethod
    def from_message(cls, message: Detection2DArray, names: Sequence[str] = (), tracked: bool = False) -> Boxes:
        """The boxes of a Detection2DArray (another node's, e.g. person boxes for a top-down pose model): a row's
        class id is its class name's index in ``names`` (the node's LabelInfo, ``label_names``), -1 when not
        there; ``tracked``: each Detection2D.id is a track ID (else a rank, not kept). Oriented boxes where any
        ``bbox.center.theta`` is not 0 (each row's angle its theta)."""
        index: dict[str, int] = {}
        for class_id, name in enumerate(names):
            index.setdefault(name, class_id)
        xyxy, scores, labels = [], [], []
        for item in message.detections:
            centre, size = item.bbox.center.position, (item.bbox.size_x, item.bbox.size_y)
            xyxy.append(
                (centre.x - size[0] / 2, centre.y - size[1] / 2, centre.x + size[0] / 2, centre.y + size[1] / 2)
            )
            head = item.results[0].hypothesis if item.results else None
            scores.append(head.score if head is not None else 0.0)
            labels.append(head.class_id if head is not None else "")
        tracks = [_track_of(item.id) for item in message.detections] if tracked else None
        class_ids = [index.get(label, -1) for label in labels]
        thetas = [item.bbox.center.theta for item in message.detections]
        angles = thetas if any(thetas) else None
        return cls(xyxy, scores, class_ids, labels, tuple(names) or None, tracks, angles)


def hypothesis(class_id: str, score: float, x: float, y: float) -> ObjectHypothesisWithPose:
    """A vision_msgs hypothesis of ``class_id`` with ``score`` at pixel (``x``, ``y``)."""
    from vision_msgs.msg import ObjectHypothesis, ObjectHypothesisWithPose

    result = ObjectHypothesisWithPose(hypothesis=ObjectHypothesis(class_id=class_id, score=float(score)))
    result.pose.pose.position.x, result.pose.pose.position.y = float(x), float(y)
    return result


def label_names(message: LabelInfo) -> list[str]:
    """The class names of a LabelInfo by class id (label_info_message's class map; an id left out: '')."""
    by_id = {entry.class_id: entry.class_name for entry in message.class_map}
    return [by_id.get(class_id, "") for class_id in range(max(by_id, default=-1) + 1)]


def label_info_message(header: Header, names: Sequence[str], threshold: float) -> LabelInfo:
    """The class map (class id -> name) and the confidence threshold the node applies."""
    from vision_msgs.msg import LabelInfo, VisionClass

    class_map = [VisionClass(class_id=i, class_name=name) for i, name in enumerate(names)]
    return LabelInfo(header=header, class_map=class_map, threshold=float(threshold))


class TrackPath(Protocol):
    """A track as its markers draw it (models/tracker.py's Track): its ID and its recent centres (frame, x, y)."""

    id: int
    history: Sequence[tuple[int, float, float]]


def track_markers(header: Header, tracks: Sequence[TrackPath], namespace: str = "tracks") -> MarkerArray:
    """Per track a LINE_STRIP through its recent centres, in pixel units, in the colour of its ID (track_colour),
    marker id the track ID. The first marker deletes the previous frame's, so tracks that ended vanish."""
    from geometry_msgs.msg import Point
    from std_msgs.msg import ColorRGBA
    from visualization_msgs.msg import Marker, MarkerArray

    markers = [Marker(header=header, ns=namespace, action=Marker.DELETEALL)]
    for track in tracks:
        path = Marker(header=header, ns=namespace, id=track.id, type=Marker.LINE_STRIP, action=Marker.ADD)
        path.points = [Point(x=float(x), y=float(y), z=0.0) for _, x, y in track.history]
        path.scale.x = 2.0
        red, green, blue = track_colour(track.id)
        path.color = ColorRGBA(r=float(red), g=float(green), b=float(blue), a=1.0)
        markers.append(path)
    return MarkerArray(markers=markers)
