"""The ball track result kind (results/__init__.py): TrackNet's ball, x, y in image pixels and its visibility per
frame. Its file is TrackNet's CSV (Frame, Visibility, X, Y: what replay writes and eval reads), its message a
geometry_msgs/PointStamped whose point.z is the visibility (types imported inside the functions)."""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..files import open_new
from ..text import shown_path, untrusted
from . import Item, tool_module

if TYPE_CHECKING:
    from geometry_msgs.msg import PointStamped
    from std_msgs.msg import Header
    from visualization_msgs.msg import MarkerArray


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


def ball_row(frame: int, message: PointStamped) -> tuple[int, int, int, int]:
    """The CSV row (Frame, Visibility, X, Y) of a ball message of ``frame`` (ball_message: z > 0.5 seen)."""
    visible = message.point.z > 0.5
    return frame, int(visible), int(round(message.point.x)), int(round(message.point.y))


def write_replayed(
    path: Path, answers: Mapping[int, PointStamped], latched: Mapping[str, Any], image: str, sizes: Callable
) -> Path:
    """replay's ball.csv: each answered frame's row (``ball_row``), in frame order."""
    return write_ball_csv(path, [ball_row(frame, answers[frame]) for frame in sorted(answers)])


def item(x: float, y: float, visible: bool) -> Item:
    """The ball as verify compares it: x, y when seen (none when not), score its visibility."""
    return Item("ball", 1.0 if visible else 0.0, np.array([x, y], np.float64) if visible else np.zeros(0), np.zeros(0))


def message_items(message: PointStamped, tracked: bool = False) -> list[Item]:
    return [item(message.point.x, message.point.y, message.point.z > 0.5)]


def offline_items(stream: Any, frames: Sequence[np.ndarray]) -> list[list[Item]]:
    """Each frame's ball from a fresh stream (models/ball_stream.py's BallStream), the stream flushed at the end."""
    stream.reset()
    balls: dict[int, dict] = {}
    for index, frame in enumerate(frames):
        balls.update(stream.push(frame, index))
    balls.update(stream.flush())
    return [[item(balls[i]["X"], balls[i]["Y"], balls[i]["Visibility"] == 1)] for i in range(len(frames))]


def names_of(stream: Any) -> tuple[list[str] | None, list[str]]:
    """No class names (the ball), no keypoints."""
    return None, []


def draw_trajectory(image: np.ndarray, points: Iterable[tuple[int, int]]) -> np.ndarray:
    """A line through recent ball positions and a circle on the newest, drawn in place (the node's debug image)."""
    import cv2

    line = np.array(list(points), dtype=np.int32).reshape(-1, 1, 2)
    cv2.polylines(image, [line], False, (0, 200, 255), 2)
    if len(line):
        cv2.circle(image, tuple(int(v) for v in line[-1, 0]), 8, (0, 0, 255), 2)
    return image


# Metrics: ball F1 (tools/ball_eval.py), what `eval` and `compare` report of a ball track.
def evaluate(model_type: str, options: Mapping[str, Any]) -> Any:
    """`eval`: a predictions CSV, or the model run over a source, scored against a truth CSV (data)."""
    o = options
    return tool_module("ball_eval").evaluate_tracking(
        o["data"],
        o["out_dir"],
        o["predictions"],
        o["frame_size"],
        o["model"],
        o["source"],
        o["target"],
        o["median_warmup"],
        o["heatmap_threshold"],
        o["tolerance"],
        o["stride"],
        o["inpaint_model"],
    )


def compare_runs(model_type: str, configurations: Sequence[tuple[Path, str]], options: Mapping[str, Any]) -> Any:
    """`compare`: two (model, target) configurations over one bag or video, metric differences with a truth CSV."""
    o = options
    run = tool_module("ball_eval").compare_tracking
    return run(configurations, o["source"], o["data"], o["median_warmup"], o["heatmap_threshold"], o["out_dir"])


def ball_message(header: Header, x: int, y: int, visible: bool) -> PointStamped:
    """The ball in image pixels; point.z carries visibility (1.0 seen, 0.0 not seen, x = y = 0)."""
    from geometry_msgs.msg import Point, PointStamped

    return PointStamped(header=header, point=Point(x=float(x), y=float(y), z=1.0 if visible else 0.0))


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
