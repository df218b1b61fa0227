"""The keypoints of a frame's detections (``Keypoints``: [N, K, 3] x, y, score per row of its Boxes, with their names
and skeleton), the COCO person keypoints and skeleton, keypoint names for other counts, their drawing and their
markers. They travel in their boxes' Detection2DArray (results/boxes.py: ``results[1:]`` of each Detection2D)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

import cv2
import numpy as np

from .part import Compared, Equal

if TYPE_CHECKING:
    from std_msgs.msg import Header
    from vision_msgs.msg import Detection2DArray
    from visualization_msgs.msg import MarkerArray

# COCO's 17 person keypoints, in the order every COCO-trained pose model outputs them.
COCO_KEYPOINTS = (
    "nose",
    "left_eye",
    "right_eye",
    "left_ear",
    "right_ear",
    "left_shoulder",
    "right_shoulder",
    "left_elbow",
    "right_elbow",
    "left_wrist",
    "right_wrist",
    "left_hip",
    "right_hip",
    "left_knee",
    "right_knee",
    "left_ankle",
    "right_ankle",
)


# Limbs as pairs of keypoint indices (COCO's skeleton, 0-based).
COCO_SKELETON = (
    (15, 13), (13, 11), (16, 14), (14, 12), (11, 12), (5, 11), (6, 12), (5, 6), (5, 7),
    (6, 8), (7, 9), (8, 10), (1, 2), (0, 1), (0, 2), (1, 3), (2, 4), (3, 5), (4, 6),
)  # fmt: skip


def keypoint_names(count: int) -> list[str]:
    """COCO's names for 17 keypoints, kp_0, kp_1, ... for any other count."""
    return list(COCO_KEYPOINTS) if count == len(COCO_KEYPOINTS) else [f"kp_{i}" for i in range(count)]


LIMB_COLOUR = (255, 160, 0)  # BGR
KEYPOINT_COLOUR = (0, 0, 255)


def skeleton_of(names: Sequence[str]) -> tuple[tuple[int, int], ...]:
    """The limbs between keypoints of ``names``: COCO's skeleton for COCO's keypoints, none for others."""
    return COCO_SKELETON if list(names) == list(COCO_KEYPOINTS) else ()


@dataclass(frozen=True, eq=False)
class Keypoints(Equal):
    """Each detection's keypoints: ``points`` [N, K, 3] (x, y in the frame's pixels, score), their ``names`` (K)
    and ``skeleton`` (limbs as pairs of keypoint indices). Indexed by rows as its Boxes."""

    key: ClassVar[str] = "keypoints"

    points: np.ndarray
    names: tuple[str, ...]
    skeleton: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "points", np.asarray(self.points, np.float64).reshape(-1, len(self.names), 3))
        object.__setattr__(self, "names", tuple(self.names))
        object.__setattr__(self, "skeleton", tuple(tuple(limb) for limb in self.skeleton))

    @classmethod
    def of(cls, points: Any, names: Sequence[str]) -> Keypoints:
        """Keypoints of ``names``, with their skeleton (``skeleton_of``)."""
        return cls(points, names, skeleton_of(names))

    def __len__(self) -> int:
        return len(self.points)

    def __getitem__(self, rows: Any) -> Keypoints:
        return replace(self, points=self.points[np.arange(len(self))[rows].reshape(-1)])

    def record(self) -> list[dict[str, Any]]:
        """Each row's keypoints, [[x, y, score], ...] (FrameResult.record merges them into its rows)."""
        return [{"keypoints": row} for row in self.points.tolist()]

    @classmethod
    def from_record(cls, rows: Sequence[Mapping[str, Any]], names: Sequence[str] | None = None) -> Keypoints | None:
        """The rows' keypoints (named ``names``, else as ``keypoint_names`` names their count); None without."""
        if not rows or "keypoints" not in rows[0]:
            return None
        points = np.asarray([row["keypoints"] for row in rows], np.float64)
        return cls.of(points, names if names is not None else keypoint_names(points.shape[1]))

    def describe(self) -> str:
        return ""

    def rows(self) -> Compared:
        """Each row's keypoints as positions (x, y each) and their scores, compared after their boxes'."""
        count = len(self)
        points = [row[:, :2].ravel() for row in self.points]
        return Compared([""] * count, points, np.zeros(count), [row[:, 2].copy() for row in self.points])

    def to_message(self, header: Header, frame: Any = None) -> None:
        """None: keypoints travel in their boxes' Detection2DArray (results/boxes.py)."""
        return None

    @classmethod
    def from_message(cls, message: Detection2DArray) -> Keypoints | None:
        """The keypoints of a Detection2DArray (``results[1:]`` of each Detection2D), named as its first
        detection's; None when no detection has any. A detection with fewer than the most is padded with
        keypoints at 0, 0 of score 0."""
        rows = [
            [(r.pose.pose.position.x, r.pose.pose.position.y, r.hypothesis.score) for r in item.results[1:]]
            for item in message.detections
        ]
        count = max((len(row) for row in rows), default=0)
        if not count:
            return None
        names = next(
            [r.hypothesis.class_id for r in item.results[1:]]
            for item in message.detections
            if len(item.results) - 1 == count
        )
        points = np.zeros((len(rows), count, 3))
        for index, row in enumerate(rows):
            points[index, : len(row)] = row
        return cls.of(points, names)

    def draw(self, image: np.ndarray, frame: Any = None, threshold: float = 0.5) -> np.ndarray:
        """Every row's limbs and keypoints above ``threshold``."""
        for index in range(len(self)):
            self.draw_row(image, index, threshold)
        return image

    def draw_row(self, image: np.ndarray, index: int, threshold: float = 0.5) -> None:
        """Row ``index``'s limbs between keypoints scoring above ``threshold``, and those keypoints."""
        points = self.points[index].tolist()
        visible = [score > threshold for _, _, score in points]
        for a, b in self.skeleton:
            if a < len(points) and b < len(points) and visible[a] and visible[b]:
                start, end = (int(points[a][0]), int(points[a][1])), (int(points[b][0]), int(points[b][1]))
                cv2.line(image, start, end, LIMB_COLOUR, 2)
        for (x, y, _), shown in zip(points, visible):
            if shown:
                cv2.circle(image, (int(x), int(y)), 3, KEYPOINT_COLOUR, -1)

    def markers(self, header: Header, threshold: float, namespace: str = "pose") -> MarkerArray:
        """Per row a LINE_LIST of limbs and a POINTS of keypoints above ``threshold``, in pixel units. The first
        marker deletes everything from the previous frame, so people who left vanish."""
        from geometry_msgs.msg import Point
        from std_msgs.msg import ColorRGBA
        from visualization_msgs.msg import Marker, MarkerArray

        markers = [Marker(header=header, ns=namespace, action=Marker.DELETEALL)]
        for index, row in enumerate(self.points.tolist()):
            points = [Point(x=float(x), y=float(y), z=0.0) for x, y, _ in row]
            shown = [score > threshold for _, _, score in row]
            limbs = Marker(header=header, ns=namespace, id=2 * index, type=Marker.LINE_LIST, action=Marker.ADD)
            pairs = [(a, b) for a, b in self.skeleton if max(a, b) < len(points) and shown[a] and shown[b]]
            limbs.points = [points[i] for pair in pairs for i in pair]
            limbs.scale.x = 2.0
            limbs.color = ColorRGBA(r=0.0, g=0.6, b=1.0, a=1.0)
            joints = Marker(header=header, ns=namespace, id=2 * index + 1, type=Marker.POINTS, action=Marker.ADD)
            joints.points = [point for point, visible in zip(points, shown) if visible]
            joints.scale.x = joints.scale.y = 5.0
            joints.color = ColorRGBA(r=1.0, g=0.2, b=0.0, a=1.0)
            markers += [limbs, joints]
        return MarkerArray(markers=markers)
