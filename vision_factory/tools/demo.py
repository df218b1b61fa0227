"""The built-in end-to-end demo: synthetic TrackNet + InpaintNet models and a clip with a
known ball trajectory, replayed through the real tracknet node over ROS 2."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from ..families.tracknet import PARAMETERS
from ..files import output_folder, staged
from ..models.tracknet_background import frames_before_stream
from .bags import read_ball_csv, write_ball_csv, write_image_bag
from .commands import CommandReport, frame_size, node_default
from .replay import MAX_IN_FLIGHT, ReplayResult, clear_earlier_run, replay
from .replay_params import FLUSH_TIMEOUT
from .synthetic import BallClip, BallTruth, build_inpaint_model, build_tracknet_model

# How the picture marks each kind of position: (label, BGR colour, OpenCV marker or None for a dot).
MARKS = {
    "truth": ("truth", (60, 220, 60), None),
    "tracked": ("tracked by tracknet_node", (40, 40, 255), cv2.MARKER_CROSS),
    "inpainted": ("hidden ball, position filled in (InpaintNet)", (0, 200, 255), cv2.MARKER_TILTED_CROSS),
}
# Everything a demo writes into its folder.
DEMO_OUTPUTS = (
    "tracknet_synthetic.onnx",
    "inpaintnet_synthetic.onnx",
    "clip",
    "truth.csv",
    "replay",
    "trajectory.png",
)


@dataclass
class FrameResult:
    frame: int
    truth: BallTruth
    predicted: tuple[int, int, int] | None  # (visibility, x, y); None when the node sent nothing
    warmup: bool  # only fed the background median, so never tracked

    @property
    def seen(self) -> bool:
        return bool(self.predicted and self.predicted[0])

    @property
    def status(self) -> str:
        if self.predicted is None:
            return "no output"
        if self.warmup:
            return "warm-up"
        if self.truth.visibility:
            return "tracked" if self.seen else "missed"
        return "inpainted" if self.seen else "hidden"

    @property
    def error_px(self) -> float | None:
        """Distance to the true centre, also where the ball was hidden and InpaintNet filled it."""
        if self.seen:
            return float(np.hypot(self.predicted[1] - self.truth.x, self.predicted[2] - self.truth.y))
        return None


@dataclass
class DemoReport:
    frames: list[FrameResult]
    replay: ReplayResult
    picture: Path
    seq_len: int = 8

    def count(self, status: str) -> int:
        return sum(1 for f in self.frames if f.status == status)

    def errors(self, status: str) -> list[float]:
        return [f.error_px for f in self.frames if f.status == status and f.error_px is not None]

    def text(self) -> str:
        """Each frame's true and tracked position with its error, a summary per status, the node's speed."""
        lines = [f"{'frame':>5} {'true (x, y)':>16} {'tracked (x, y)':>16} {'error px':>9}  status"]
        for f in self.frames:
            tracked = f"{f.predicted[1]:7d},{f.predicted[2]:7d}" if f.seen else ""
            error = f"{f.error_px:9.2f}" if f.error_px is not None else ""
            lines.append(f"{f.frame:>5} {f.truth.x:7.1f},{f.truth.y:7.1f}  {tracked:>16} {error:>9}  {f.status}")
        lines.append("")
        for status in ("tracked", "inpainted", "missed", "hidden", "warm-up", "no output"):
            errors = self.errors(status)
            detail = f", error mean {sum(errors) / len(errors):.2f} px, max {max(errors):.2f} px" if errors else ""
            lines.append(f"{status:>10}: {self.count(status)} frames{detail}")
        replayed = self.replay
        lines.append(f"node: {replayed.fps:.1f} frames/s over the whole replay")
        processing = replayed.node_times_ms.get("processing_p50_ms")
        if processing is not None:
            lines.append(
                f"node's own time per frame (its ~/debug/processing_time_ms): p50 {processing:.1f} ms, "
                f"p99 {replayed.node_times_ms['processing_p99_ms']:.1f} ms"
            )
        lines.append(
            f"latency from a frame sent to its ball published: p50 {replayed.latency_ms_p50:.0f} ms, "
            f"p99 {replayed.latency_ms_p99:.0f} ms. Not the node's work: the demo sends frames as fast as the node "
            f"answers, up to {MAX_IN_FLIGHT} unanswered, so a frame waits in the queue; TrackNet answers a frame "
            f"only once its window of {self.seq_len} is full, and the last {self.seq_len - 1} after "
            f"{FLUSH_TIMEOUT['flush_timeout']} s without frames (a pause: the node answers what is pending)"
        )
        marks = "; ".join(f"{_mark_name(marker)}: {label}" for label, _, marker in MARKS.values())
        lines.append(f"picture: {self.picture} ({marks})")
        lines.append(f"outputs: {replayed.output_bag}, {replayed.answers}")
        return "\n".join(lines)


def demo(out_dir: Path, frames: int, size: str, inpaint: bool, log: Callable[[str], None]) -> CommandReport:
    """`demo`: ``frames`` frames of ``size`` (WIDTHxHEIGHT) through the node; ``log`` says what runs first."""
    width, height = frame_size(size, "--size")
    log(f"demo: {frames} frames of {width}x{height} through tracknet_node (ONNX Runtime, CPU) ...")
    return CommandReport(run_demo(out_dir, frames, width, height, inpaint=inpaint).text())


def write_demo_clip(out_dir: Path, num_frames: int = 90, width: int = 1280, height: int = 720) -> tuple:
    """The demo's clip: (BallClip, its bag out_dir/clip, its truth out_dir/truth.csv), as the demo replays it."""
    clip = BallClip(num_frames, width, height)
    bag = write_image_bag(out_dir / "clip", clip.frames())
    truth = write_ball_csv(out_dir / "truth.csv", [(t.frame, t.visibility, round(t.x), round(t.y)) for t in clip.truth])
    return clip, bag, truth


def run_demo(
    out_dir: str | Path,
    num_frames: int = 90,
    width: int = 1280,
    height: int = 720,
    seq_len: int = 8,
    inpaint: bool = True,
    median_warmup: int | None = None,
) -> DemoReport:
    """The demo into ``out_dir``; what an earlier demo wrote there (its own file names, nothing else) is replaced."""
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")  # a demo stays on this machine
    if median_warmup is None:  # the node's own default
        median_warmup = node_default(PARAMETERS, "median_warmup")
    out_dir = output_folder(out_dir, option="--out")
    clear_earlier_run(out_dir, {name: out_dir / name for name in DEMO_OUTPUTS}, force=True)
    clip, bag, _ = write_demo_clip(out_dir, num_frames, width, height)
    model = build_tracknet_model(out_dir / "tracknet_synthetic.onnx", seq_len, "subtract")
    params = {
        "model_path": str(model),
        "seq_len": str(seq_len),
        "bg_mode": "subtract",
        "median_warmup": str(median_warmup),
    }
    if inpaint:
        params["inpaint_model_path"] = str(build_inpaint_model(out_dir / "inpaintnet_synthetic.onnx", 16))
        params["inpaint_seq_len"] = "16"
    result = replay(bag, out_dir / "replay", params=params)
    predicted = {row[0]: (row[1], int(row[2]), int(row[3])) for row in read_ball_csv(result.answers)}
    untracked = frames_before_stream("subtract", median_warmup)
    frames = [FrameResult(t.frame, t, predicted.get(t.frame), t.frame < untracked) for t in clip.truth]
    picture = draw_trajectories(clip, frames, out_dir / "trajectory.png")
    return DemoReport(frames, result, picture, seq_len)


def _mark_name(marker: int | None) -> str:
    return {None: "green dots", cv2.MARKER_CROSS: "red +", cv2.MARKER_TILTED_CROSS: "orange x"}[marker]


def draw_trajectories(clip: BallClip, frames: list[FrameResult], path: Path) -> Path:
    """The true trajectory (MARKS' truth) and the node's positions over the clip's background: tracked ones and
    those filled in where the ball was hidden (inpainted) each marked as MARKS says, with a legend."""
    image = clip.background.copy()
    truth = [(round(f.truth.x), round(f.truth.y)) for f in frames if f.truth.visibility]
    scale = max(1, clip.width // 640)
    colour = MARKS["truth"][1]
    cv2.polylines(image, [np.array(truth, np.int32).reshape(-1, 1, 2)], False, colour, scale)
    for x, y in truth:
        cv2.circle(image, (x, y), 3 * scale, colour, -1)
    for status in ("tracked", "inpainted"):  # inpainted last: on top where they meet
        _, colour, marker = MARKS[status]
        for f in frames:
            if f.status == status:
                cv2.drawMarker(image, (f.predicted[1], f.predicted[2]), colour, marker, 10 * scale, 2 * scale)
    for row, (text, colour, _) in enumerate(MARKS.values()):
        cv2.putText(
            image,
            text,
            (12 * scale, (28 + 26 * row) * scale),
            cv2.FONT_HERSHEY_SIMPLEX,
            0.7 * scale,
            colour,
            2 * scale,
            cv2.LINE_AA,
        )
    with staged(path) as fresh:
        cv2.imwrite(str(fresh), image)
    return path
