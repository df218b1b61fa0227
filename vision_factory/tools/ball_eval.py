"""Ball-tracking metrics with TrackNet's definitions, on CSVs or on a bag/video run through the tracker.

Positions are compared in the model's 512x288 input space: TP when prediction and truth both
see the ball within ``tolerance`` px, FP1 when both see it farther apart, FP2 a prediction
without a ball, FN a ball without a prediction, TN neither.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..families.tracknet import FAMILY
from ..families.tracknet import values as node_values
from ..files import output_folder, write_text
from ..models.ball_stream import BallStream, FrameSizeChanged
from ..models.tracknet_stream import HEIGHT, WIDTH
from ..progress import Progress
from ..results.ball import TOLERANCE_PX, Ball, BallMetrics, Row, ball_metrics
from ..text import shown_path
from .bags import read_ball_csv
from .commands import CommandReport, UsageError, frame_size
from .compare import describe_comparison, metric_differences, save_comparison
from .plots import precision_recall_axes, pyplot, save_figure
from .sources import source_frames

pipeline = FAMILY.pipeline  # the tracknet node's frame pipeline (families/pipeline.py)


def evaluate(
    truth: Sequence[Row], predictions: Sequence[Row], frame_size: tuple[int, int], tolerance: float = TOLERANCE_PX
) -> tuple[BallMetrics, list[str]]:
    """TrackNet's metrics over the truth's frames (results/ball.py), positions compared in its 512x288 input."""
    return ball_metrics(truth, predictions, frame_size, (WIDTH, HEIGHT), tolerance)


@dataclass
class TrackerRun:
    """Predictions of a tracker over a bag or video, with every frame's heatmap peak for threshold sweeps."""

    predictions: list[Row]
    frame_size: tuple[int, int]
    peaks: dict[int, tuple[float, Row]] = field(default_factory=dict)  # frame -> (peak, position at any threshold)
    runs_on: str = ""


def run_tracker(
    source: Path, runner, seq_len: int, bg_mode: str, median_warmup: int, heatmap_threshold: float, stride: int = 1
) -> TrackerRun:
    """``run_stream`` of the node's pipeline on a loaded TrackNet ``runner`` with those parameter values."""
    values = node_values(
        runner.describe(), seq_len, bg_mode, median_warmup, heatmap_threshold=heatmap_threshold, stride=stride
    )
    return run_stream(source, pipeline(values, lambda path: runner))


def run_stream(source: Path, stream: BallStream, progress: Progress | None = None) -> TrackerRun:
    """Every frame of ``source`` through the node's pipeline ``stream`` (families/pipeline.py: BallStream, with
    InpaintNet when its values name one), numbered from 0. A frame the stream skips (a frame size changed, until it
    restarts at the new size) and the frames that only feed the background median are 'no ball', as the node
    answers them (or does not). ``progress`` (progress.py): the frames run."""
    run = TrackerRun([], (0, 0), runs_on=stream.tracker.runner.describe())

    def peak(frame_id: int, value: float, anywhere: dict) -> None:
        tag = stream.tag(frame_id)
        run.peaks[tag] = (value, _row({**anywhere, "Frame": tag}))

    stream.tracker.on_peak = peak
    outputs = []
    index = -1
    for index, frame in enumerate(source_frames(source)):
        run.frame_size = (frame.shape[1], frame.shape[0])
        try:
            outputs += stream.push(frame, index)
        except FrameSizeChanged:
            continue
        finally:
            if progress:
                progress(f"{source.name}: frames", index + 1, None)
    if index < 0:
        raise ValueError(f"{shown_path(source)} holds no frames")
    outputs += stream.flush()
    answered = {tag: _ball_row(tag, result.ball) for tag, result in outputs}
    run.predictions = [answered.get(frame, (frame, 0, 0.0, 0.0)) for frame in range(index + 1)]
    return run


def _ball_row(frame: int, ball: Ball) -> Row:
    return (frame, int(ball.visible), float(ball.x), float(ball.y))


def _row(prediction: dict[str, int]) -> Row:
    return (prediction["Frame"], prediction["Visibility"], float(prediction["X"]), float(prediction["Y"]))


def precision_recall_curve(
    truth: Sequence[Row], run: TrackerRun, tolerance: float = TOLERANCE_PX
) -> list[dict[str, float]]:
    """Precision and recall as the heatmap threshold sweeps 0.05..0.95 (from the peaks of one run)."""
    curve = []
    for threshold in np.round(np.arange(0.05, 0.96, 0.05), 2):
        predictions = [
            (frame, 1 if peak > threshold and row[1] else 0, row[2], row[3]) for frame, (peak, row) in run.peaks.items()
        ]
        metrics, _ = evaluate(truth, predictions, run.frame_size, tolerance)
        curve.append({"threshold": float(threshold), "precision": metrics.precision, "recall": metrics.recall})
    return curve


def track(
    model: Path,
    source: Path,
    target: str,
    median_warmup: int | None,
    heatmap_threshold: float,
    stride: int = 1,
    inpaint_model: Path | None = None,
    progress: Progress | None = None,
) -> TrackerRun:
    """A TrackNet ``model`` on ``target`` (as runtime/backends.py reads it) over a bag or video, as the node runs
    it (with InpaintNet ``inpaint_model`` when given); ``median_warmup`` None: the node's default."""
    from ..runtime.backends import load_target

    inpaint = {"inpaint_model_path": str(inpaint_model)} if inpaint_model is not None else {}
    given = {"heatmap_threshold": heatmap_threshold, "stride": stride, **inpaint}  # stride checked before loading
    values = FAMILY.values_from_model(model, median_warmup=median_warmup, **given)
    return run_stream(source, pipeline(values, lambda path: load_target(target, Path(path))), progress)


def evaluate_tracking(
    data: Path,
    out_dir: Path,
    predictions: Path | None = None,
    size: str | None = None,
    model: Path | None = None,
    source: Path | None = None,
    target: str = "onnx:cpu",
    median_warmup: int | None = None,
    heatmap_threshold: float = 0.5,
    tolerance: float = TOLERANCE_PX,
    stride: int = 1,
    inpaint_model: Path | None = None,
    progress: Progress | None = None,
) -> CommandReport:
    """`eval` for tracknet: a predictions CSV of frames ``size`` (WIDTHxHEIGHT), or ``model`` run over ``source``
    (once every ``stride`` frames, with a precision-recall curve; ``inpaint_model``: InpaintNet repairing the
    track, as the node's inpaint_model_path), scored against the truth CSV ``data``; the report written in
    ``out_dir``."""
    truth = read_ball_csv(data)
    if predictions is not None:
        if size is None:
            raise UsageError("give --frame-size WIDTHxHEIGHT with --predictions", "--frame-size")
        rows, frame, curve = read_ball_csv(predictions), frame_size(size, "--frame-size"), None
        about = {"predictions": str(predictions)}
    elif model is not None and source is not None:
        run = track(model, source, target, median_warmup, heatmap_threshold, stride, inpaint_model, progress)
        rows, frame = run.predictions, run.frame_size
        curve = precision_recall_curve(truth, run, tolerance)
        about = {"model": str(model), "source": str(source), "runs_on": run.runs_on, "stride": stride}
        if inpaint_model is not None:
            about["inpaint_model"] = str(inpaint_model)
    else:
        raise UsageError("give --predictions CSV, or --model and --source to run the tracker")
    metrics, _ = evaluate(truth, rows, frame, tolerance)
    files = write_report(
        out_dir, metrics, truth, rows, frame, {**about, "truth": str(data), "tolerance_px": tolerance}, curve
    )
    return CommandReport(files["markdown"].read_text() + "\n", files)


def write_report(
    out_dir: Path,
    metrics: BallMetrics,
    truth: Sequence[Row],
    predictions: Sequence[Row],
    frame_size: tuple[int, int],
    about: dict[str, Any],
    curve: list[dict[str, float]] | None = None,
) -> dict[str, Path]:
    """eval.json, eval.md, trajectory.png and (with a curve) pr_curve.png in ``out_dir``."""
    output_folder(out_dir, option="--out")
    record = {**about, "frame_size": list(frame_size), "metrics": asdict(metrics), "pr_curve": curve}
    files = {"json": out_dir / "eval.json", "markdown": out_dir / "eval.md"}
    write_text(files["json"], json.dumps(record, indent=2) + "\n")
    counts = metrics.counts
    lines = [
        f"# Ball tracking: {about.get('predictions') or about.get('source')}",
        "",
        f"Truth `{about['truth']}`, {metrics.frames} frames of {frame_size[0]}x{frame_size[1]}, "
        f"compared in {WIDTH}x{HEIGHT} with a {about['tolerance_px']} px tolerance"
        + (f"; the model ran once every {about['stride']} frames." if about.get("stride", 1) > 1 else "."),
        "",
        "| accuracy | precision | recall | F1 | TP | FP1 | FP2 | FN | TN | mean TP error (px, 512x288) |",
        "|---|---|---|---|---|---|---|---|---|---|",
        f"| {metrics.accuracy:.4f} | {metrics.precision:.4f} | {metrics.recall:.4f} | {metrics.f1:.4f} | "
        f"{counts['TP']} | {counts['FP1']} | {counts['FP2']} | {counts['FN']} | {counts['TN']} | "
        f"{metrics.mean_error_px:.2f} |",
    ]
    if metrics.missing_predictions:
        lines += ["", f"{metrics.missing_predictions} truth frames had no prediction row (counted as no ball)."]
    write_text(files["markdown"], "\n".join(lines) + "\n")
    files["trajectory"] = _plot_trajectory(out_dir / "trajectory.png", truth, predictions, frame_size)
    if curve:
        files["pr_curve"] = _plot_curve(out_dir / "pr_curve.png", curve)
    return files


def _plot_trajectory(path: Path, truth: Sequence[Row], predictions: Sequence[Row], size: tuple[int, int]) -> Path:
    plt = pyplot()
    figure, axes = plt.subplots(figsize=(8, 8 * size[1] / size[0] + 0.6))
    for rows, style, label in ((truth, "g.-", "truth"), (predictions, "r+", "predicted")):
        seen = np.array([(row[2], row[3]) for row in rows if row[1] == 1]).reshape(-1, 2)
        axes.plot(seen[:, 0], seen[:, 1], style, label=label, markersize=5, linewidth=0.8)
    axes.set_xlim(0, size[0])
    axes.set_ylim(size[1], 0)
    axes.set_aspect("equal")
    axes.legend()
    axes.set_title("ball trajectory (image pixels)")
    return save_figure(figure, path)


def _plot_curve(path: Path, curve: list[dict[str, float]]) -> Path:
    plt = pyplot()
    figure, axes = plt.subplots(figsize=(5, 5))
    axes.plot([p["recall"] for p in curve], [p["precision"] for p in curve], "o-")
    for point in curve[::3]:
        axes.annotate(f"{point['threshold']:.2f}", (point["recall"], point["precision"]), fontsize=7)
    precision_recall_axes(axes, "precision-recall over the heatmap threshold")
    return save_figure(figure, path)


def compare_runs(
    a: Sequence[Row], b: Sequence[Row], metrics_a: BallMetrics | None, metrics_b: BallMetrics | None
) -> dict[str, Any]:
    """Metric differences with verdicts (when there is a truth) and output-level position differences."""
    rows_b = {row[0]: row for row in b}
    both = [(row, rows_b[row[0]]) for row in a if row[0] in rows_b]
    visible = [(p, q) for p, q in both if p[1] == 1 and q[1] == 1]
    distances = [math.hypot(p[2] - q[2], p[3] - q[3]) for p, q in visible]
    outputs = {
        "frames_compared": len(both),
        "frames_only_in_one": len(a) + len(b) - 2 * len(both),
        "visibility_disagreements": sum(1 for p, q in both if p[1] != q[1]),
        "both_visible": len(visible),
        "position_diff_max_px": max(distances, default=0.0),
        "position_diff_mean_px": float(np.mean(distances)) if distances else 0.0,
    }
    report: dict[str, Any] = {"outputs": outputs}
    if metrics_a is not None and metrics_b is not None:
        names = ("accuracy", "precision", "recall", "f1")
        report |= metric_differences(
            {name: getattr(metrics_a, name) for name in names}, {name: getattr(metrics_b, name) for name in names}
        )
    return report


def compare_tracking(
    configurations: Sequence[tuple[Path, str]],
    source: Path | None,
    data: Path | None,
    median_warmup: int | None,
    heatmap_threshold: float,
    out_dir: Path,
    progress: Progress | None = None,
) -> CommandReport:
    """`compare` for tracknet: two (model, target) configurations over one bag or video, with metric differences
    when ``data`` (a truth CSV) is given; the report is saved in ``out_dir``."""
    if source is None:
        raise UsageError("tracknet needs --source, the bag or video both configurations run over")
    runs = [
        track(model, source, target, median_warmup, heatmap_threshold, progress=progress)
        for model, target in configurations
    ]
    metrics = [None, None]
    if data is not None:
        truth = read_ball_csv(data)
        metrics = [evaluate(truth, run.predictions, run.frame_size)[0] for run in runs]
    differences = compare_runs(runs[0].predictions, runs[1].predictions, *metrics)
    report, path = save_comparison(
        configurations, [run.runs_on for run in runs], ("source", source), differences, out_dir
    )
    return CommandReport(describe_comparison(report, path))


def evaluate_command(model_type: str, options: Mapping[str, Any]) -> CommandReport:
    """`eval` of a ball track: ``evaluate_tracking`` with eval's options (by name)."""
    o = options
    return evaluate_tracking(
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
        o.get("progress"),
    )


def compare_command(
    model_type: str, configurations: Sequence[tuple[Path, str]], options: Mapping[str, Any]
) -> CommandReport:
    """`compare` of a ball track: ``compare_tracking`` over compare's --source (with --data: a truth CSV)."""
    o = options
    return compare_tracking(
        configurations,
        o["source"],
        o["data"],
        o["median_warmup"],
        o["heatmap_threshold"],
        o["out_dir"],
        o.get("progress"),
    )
