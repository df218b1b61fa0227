"""The ball of a frame (``Ball``: TrackNet's, x, y in image pixels and whether it is seen). Its file is TrackNet's
CSV (Frame, Visibility, X, Y: what replay writes and eval reads), its message a geometry_msgs/PointStamped whose
point.z is the visibility (types imported inside the functions); its metrics TrackNet's (``ball_metrics``: TP, FP1,
FP2, FN, TN within a tolerance, precision, recall, F1)."""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..files import open_new
from ..text import shown_path, untrusted
from .part import Compared

if TYPE_CHECKING:
    from geometry_msgs.msg import PointStamped
    from std_msgs.msg import Header
    from visualization_msgs.msg import MarkerArray

Row = tuple[int, int, float, float]  # a row of the CSV: Frame, Visibility, X, Y


@dataclass(frozen=True)
class Ball:
    """The ball in a frame: its position (x, y in the frame's pixels; 0, 0 when not seen) and whether it is seen."""

    key: ClassVar[str] = "ball"

    x: float
    y: float
    visible: bool

    def record(self) -> dict[str, int]:
        """Its row of TrackNet's CSV but the frame: Visibility, X, Y (whole pixels)."""
        return {"Visibility": int(self.visible), "X": int(round(self.x)), "Y": int(round(self.y))}

    @classmethod
    def from_record(cls, row: Mapping[str, Any]) -> Ball:
        return cls(float(row["X"]), float(row["Y"]), int(row["Visibility"]) == 1)

    def row(self, frame: int) -> tuple[int, int, int, int]:
        """Its CSV row (Frame, Visibility, X, Y) as the ``frame``-th frame's."""
        record = self.record()
        return frame, record["Visibility"], record["X"], record["Y"]

    def describe(self) -> str:
        return f"ball {self.x:.0f}, {self.y:.0f}" if self.visible else "no ball"

    def rows(self) -> Compared:
        """The ball as compared: its position when seen (none when not: a seen ball and an unseen one never pair),
        its score its visibility."""
        position = np.array([self.x, self.y], np.float64) if self.visible else np.zeros(0)
        return Compared(["ball"], [position], np.array([1.0 if self.visible else 0.0]), [np.zeros(0)])

    def to_message(self, header: Header, frame: Any = None) -> PointStamped:
        """The ball in image pixels; point.z carries visibility (1.0 seen, 0.0 not seen, x = y = 0)."""
        from geometry_msgs.msg import Point, PointStamped

        point = Point(x=float(self.x), y=float(self.y), z=1.0 if self.visible else 0.0)
        return PointStamped(header=header, point=point)

    @classmethod
    def from_message(cls, message: PointStamped) -> Ball:
        """A ball message (``to_message``'s: z > 0.5 seen)."""
        return cls(float(message.point.x), float(message.point.y), message.point.z > 0.5)

    def draw(self, image: np.ndarray, frame: Any = None) -> np.ndarray:
        """A ring around the ball where it is seen."""
        return draw_trajectory(image, [(self.x, self.y)] if self.visible else [])


def write_ball_csv(path: str | Path, rows: Iterable[tuple[int, int, int, int]]) -> Path:
    """TrackNet's ball CSV: Frame, Visibility, X, Y."""
    path = Path(path)
    with open_new(path, newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["Frame", "Visibility", "X", "Y"])
        writer.writerows(rows)
    return path


def read_ball_csv(path: str | Path) -> list[tuple[int, int, float, float]]:
    """Rows (Frame, Visibility, X, Y) of a TrackNet ball CSV; a malformed file is a ValueError naming the row."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{shown_path(path)} is a folder: give the ball CSV file (Frame,Visibility,X,Y)")
    if not path.is_file():
        raise ValueError(f"ball CSV not found: {shown_path(path)}")
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        missing = {"Frame", "Visibility", "X", "Y"} - set(reader.fieldnames or ())
        if missing:
            raise ValueError(
                f"{shown_path(path)} lacks column(s) {', '.join(sorted(missing))}: TrackNet's CSV is "
                "Frame,Visibility,X,Y"
            )
        rows = []
        try:
            for row in reader:
                rows.append((int(row["Frame"]), int(row["Visibility"]), float(row["X"]), float(row["Y"])))
                if not np.isfinite(rows[-1][2:]).all():
                    raise ValueError(f"X, Y {row['X']}, {row['Y']} is not a finite position (NaN or infinity)")
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{shown_path(path)} line {reader.line_num}: {untrusted(exc)}") from exc
        return rows


def draw_trajectory(image: np.ndarray, points: Iterable[tuple[int, int]]) -> np.ndarray:
    """A line through recent ball positions and a circle on the newest, drawn in place (the node's debug image)."""
    import cv2

    line = np.array(list(points), dtype=np.int32).reshape(-1, 1, 2)
    cv2.polylines(image, [line], False, (0, 200, 255), 2)
    if len(line):
        cv2.circle(image, tuple(int(v) for v in line[-1, 0]), 8, (0, 0, 255), 2)
    return image


def trajectory_markers(header: Header, points: Iterable[tuple[int, int]], namespace: str = "ball") -> MarkerArray:
    """A line through recent ball positions and a sphere on the newest, in pixel units."""
    from geometry_msgs.msg import Point
    from std_msgs.msg import ColorRGBA
    from visualization_msgs.msg import Marker, MarkerArray

    positions = [Point(x=float(x), y=float(y), z=0.0) for x, y in points]
    line = Marker(header=header, ns=namespace, id=0, type=Marker.LINE_STRIP, action=Marker.ADD)
    line.points = positions
    line.scale.x = 2.0
    line.color = ColorRGBA(r=1.0, g=0.8, b=0.0, a=1.0)
    ball = Marker(header=header, ns=namespace, id=1, type=Marker.SPHERE, action=Marker.ADD)
    if positions:
        ball.pose.position = positions[-1]
    else:
        ball.action = Marker.DELETE
    ball.scale.x = ball.scale.y = ball.scale.z = 8.0
    ball.color = ColorRGBA(r=1.0, g=0.2, b=0.0, a=1.0)
    return MarkerArray(markers=[line, ball])


# Metrics: TrackNet's, in the model's input space.
CASES = ("TP", "FP1", "FP2", "FN", "TN")


TOLERANCE_PX = 4.0


@dataclass
class BallMetrics:
    counts: dict[str, int]
    accuracy: float
    precision: float
    recall: float
    f1: float
    frames: int
    missing_predictions: int  # truth frames without a prediction row (counted as "no ball")
    mean_error_px: float  # over TP frames, in 512x288 space

    @classmethod
    def from_cases(cls, cases: Sequence[str], errors: Sequence[float], missing: int) -> BallMetrics:
        counts = {case: sum(1 for c in cases if c == case) for case in CASES}
        tp, fp = counts["TP"], counts["FP1"] + counts["FP2"]
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / (tp + counts["FN"]) if tp + counts["FN"] else 0.0
        return cls(
            counts=counts,
            accuracy=(tp + counts["TN"]) / len(cases) if cases else 0.0,
            precision=precision,
            recall=recall,
            f1=2 * precision * recall / (precision + recall) if precision + recall else 0.0,
            frames=len(cases),
            missing_predictions=missing,
            mean_error_px=float(np.mean(errors)) if errors else 0.0,
        )


def classify(truth: Row, prediction: Row | None, scale: tuple[float, float], tolerance: float) -> tuple[str, float]:
    """The TrackNet case of one frame, and the distance in input space when both see a ball."""
    seen = prediction is not None and prediction[1] == 1
    if truth[1] != 1:
        return ("FP2" if seen else "TN"), math.nan
    if not seen:
        return "FN", math.nan
    distance = math.hypot((prediction[2] - truth[2]) * scale[0], (prediction[3] - truth[3]) * scale[1])
    return ("TP" if distance <= tolerance else "FP1"), distance


def ball_metrics(
    truth: Sequence[Row],
    predictions: Sequence[Row],
    frame_size: tuple[int, int],
    space: tuple[int, int],
    tolerance: float = TOLERANCE_PX,
) -> tuple[BallMetrics, list[str]]:
    """Metrics over the truth's frames, and each frame's case; positions compared in ``space`` (width, height: the
    model's input, TrackNet's 512x288), ``tolerance`` px there."""
    if not truth:
        raise ValueError("the ground truth has no rows")
    scale = (space[0] / frame_size[0], space[1] / frame_size[1])
    by_frame = {row[0]: row for row in predictions}
    cases, errors = [], []
    for row in truth:
        case, distance = classify(row, by_frame.get(row[0]), scale, tolerance)
        cases.append(case)
        if case == "TP":
            errors.append(distance)
    missing = sum(1 for row in truth if row[0] not in by_frame)
    return BallMetrics.from_cases(cases, errors, missing), cases
