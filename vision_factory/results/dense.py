"""The dense map result kind (results/__init__.py): one float per pixel of the frame with its unit, e.g. depth in
metres or relative depth. Its files: the map as .npy (float32, height x width, NaN where invalid) and a drawn .png
beside the JSON record predict prints; its message a sensor_msgs/Image 32FC1 (REP-118: NaN invalid); compared by
the largest difference; scored against truth maps by AbsRel, RMSE and delta1."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..images import image_cdr
from ..text import shown_path, untrusted
from . import DENSE_MAP, Item, tool_module

if TYPE_CHECKING:
    from sensor_msgs.msg import Image
    from std_msgs.msg import Header

DELTA1 = 1.25  # delta1: the share of valid pixels whose ratio to the truth, either way, is below this


@dataclass
class DenseMap:
    values: np.ndarray  # [height, width] float32 in frame pixels, NaN where the model gives nothing
    unit: str  # what a value counts: "m" (metres), "relative" (scale unknown)
    kind: str  # what it measures, e.g. "depth"
    # What was wrong with the model's map (values it should not give, published as NaN): problem-log kind -> the
    # detail to log once; {} when nothing was
    problems: dict[str, str] = field(default_factory=dict)


class DenseModel(Protocol):
    """A dense family's adapter: BGR frame in, a DenseMap of the frame's size out."""

    def infer(self, image_bgr: np.ndarray) -> DenseMap: ...


def run(adapter: DenseModel, frame: np.ndarray, problems: dict[str, str] | None = None) -> DenseMap:
    """What ``predict`` runs on each frame; what was wrong with the model's map added to ``problems``."""
    result = adapter.infer(frame)
    if problems is not None:
        problems.update(result.problems)
    return result


# Files.
def frame_record(image: str, frame: int, width: int, height: int, result: DenseMap) -> dict:
    """One frame's map as predict prints it: the image, frame index and size, what the map measures and its unit,
    and its finite values' range and mean (the values themselves: the .npy that ``save`` writes)."""
    finite = result.values[np.isfinite(result.values)]
    summary = (
        {"min": float(finite.min()), "max": float(finite.max()), "mean": float(finite.mean())} if finite.size else {}
    )
    return {
        "image": image,
        "frame": int(frame),
        "width": int(width),
        "height": int(height),
        "kind": result.kind,
        "unit": result.unit,
        "valid": int(finite.size),
        **summary,
    }


def line(record: Mapping[str, Any], result: DenseMap) -> str:
    """One line of text: the image, what the map measures, its range and unit."""
    if not record["valid"]:
        return f"{untrusted(record['image'], 400)}: {result.kind} -"
    shown = f"{record['min']:.4g}..{record['max']:.4g} {result.unit}"
    return f"{untrusted(record['image'], 400)}: {result.kind} {shown}"


def save(
    folder: Path, path: Path, index: int | None, frame: np.ndarray, result: DenseMap, protected: Iterable = ()
) -> Path:
    """The map as FOLDER/<image's stem>.npy (or <video's stem>_<index>.npy) and drawn beside it as .png, a map in
    metres also as <stem>_mm.png (``millimetres``); never through a link, nor onto ``path`` or another of the
    ``protected`` files. The .npy's path."""
    import cv2

    from ..files import output_folder, staged

    output_folder(folder, option="--save folder")
    stem = f"{path.stem}_{index:06d}" if index is not None else path.stem
    saved = folder / f"{stem}.npy"
    with staged(saved, [path, *protected], "--save folder") as fresh, fresh.open("wb") as handle:
        np.save(handle, result.values.astype(np.float32), allow_pickle=False)
    with staged(folder / f"{stem}.png", [path, *protected], "--save folder") as fresh:
        cv2.imwrite(str(fresh), draw(result))
    if result.unit == "m":  # as a depth camera writes it: 16-bit millimetres, 0 invalid
        with staged(folder / f"{stem}_mm.png", [path, *protected], "--save folder") as fresh:
            cv2.imwrite(str(fresh), millimetres(result.values))
    return saved


def millimetres(metres: np.ndarray) -> np.ndarray:
    """A map in metres as uint16 millimetres (a depth camera's 16UC1): rounded, 0 where invalid (NaN, not above
    0.5 mm, or beyond 65.535 m)."""
    scaled = np.asarray(metres, np.float64) * 1000
    valid = np.isfinite(scaled) & (scaled >= 0.5) & (scaled < 65535.5)
    found = np.zeros(scaled.shape, np.uint16)
    found[valid] = np.round(scaled[valid]).astype(np.uint16)
    return found


def read_map(path: str | Path) -> np.ndarray:
    """A map written by ``save``: a 2-D float .npy; anything else is a ValueError naming the file."""
    try:
        values = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read the map {shown_path(path)}: {untrusted(exc)}") from None
    if values.ndim != 2 or values.dtype.kind != "f":
        raise ValueError(f"{shown_path(path)} is not a map: a 2-D float array (it is {values.ndim}-D {values.dtype})")
    return values


# Comparison.
def differences(a: DenseMap, b: DenseMap) -> dict[str, float]:
    """How two maps of one frame differ: the largest and mean difference of the pixels valid in both (inf when
    their sizes or units differ), the mean difference relative to a's mean magnitude there (``relative_difference``:
    free of the map's scale, e.g. a relative depth's), and how many pixels are valid in one only."""
    if a.values.shape != b.values.shape or a.unit != b.unit:
        inf = float("inf")
        return {"max_difference": inf, "mean_difference": inf, "relative_difference": inf, "valid_in_one": 0}
    both = np.isfinite(a.values) & np.isfinite(b.values)
    difference = np.abs(a.values[both].astype(np.float64) - b.values[both])
    one = int(np.count_nonzero(np.isfinite(a.values) != np.isfinite(b.values)))
    largest, mean = (float(difference.max()), float(difference.mean())) if difference.size else (0.0, 0.0)
    magnitude = float(np.abs(a.values[both].astype(np.float64)).mean()) if difference.size else 0.0
    relative = mean / magnitude if magnitude > 0 else (0.0 if mean == 0 else float("inf"))
    return {"max_difference": largest, "mean_difference": mean, "relative_difference": relative, "valid_in_one": one}


# verify: a frame's map as one item whose points are its values on a grid (results/__init__.py's Item), compared
# by the largest difference (tools/verify_frames.py), in the map's unit.
VERIFY_STRIDE = 4  # every 4th row and column: a verify run holds every frame's map (a 1280x720 map: 230 KB so)
INVALID = -1e9  # a NaN pixel's value there: NaN in both maps compares equal, NaN in one differs by far


def items(result: DenseMap) -> list[Item]:
    values = result.values[::VERIFY_STRIDE, ::VERIFY_STRIDE].astype(np.float64)
    return [Item("map", 1.0, np.where(np.isfinite(values), values, INVALID).ravel(), np.zeros(0))]


def message_items(message: Image, tracked: bool = False) -> list[Item]:
    """The node's answer (a 32FC1 map) as verify compares it."""
    return items(from_message(message, "", ""))


def offline_items(pipeline: Any, frames: Sequence[np.ndarray]) -> list[list[Item]]:
    """The family's pipeline (a DenseModel) on each frame, as verify compares it."""
    return [items(pipeline.infer(frame)) for frame in frames]


def names_of(pipeline: Any) -> tuple[list[str] | None, list[str]]:
    """No class names, no keypoints."""
    return None, []


# Drawing.
def draw(result: DenseMap) -> np.ndarray:
    """The map in colour (OpenCV's TURBO over its finite range; invalid pixels black), BGR uint8."""
    import cv2

    values = result.values.astype(np.float64)
    finite = np.isfinite(values)
    low, high = (values[finite].min(), values[finite].max()) if finite.any() else (0.0, 1.0)
    scaled = np.zeros(values.shape, np.uint8)
    scaled[finite] = np.round(255 * (values[finite] - low) / max(high - low, 1e-12)).astype(np.uint8)
    drawn = cv2.applyColorMap(scaled, cv2.COLORMAP_TURBO)
    drawn[~finite] = 0
    return drawn


# Metrics.
def depth_metrics(predicted: Sequence[np.ndarray], truth: Sequence[np.ndarray]) -> dict[str, float]:
    """AbsRel (mean |p - t| / t), RMSE (root of the mean (p - t)^2, in the maps' unit) and delta1 (share with
    max(p / t, t / p) < 1.25) of each frame over its pixels whose truth is finite and positive and prediction
    finite and positive, then averaged over the frames that have such pixels, as depth evaluations report them
    (each image's metrics, then their mean: Monodepth2's and ZoeDepth's evaluation code; each image weighs alike,
    whatever its valid pixels); a frame whose sizes differ is a ValueError."""
    per_frame = []
    for index, (p, t) in enumerate(zip(predicted, truth, strict=True)):
        if p.shape != t.shape:
            raise ValueError(
                f"frame {index}: the map is {p.shape[1]}x{p.shape[0]}, its truth {t.shape[1]}x{t.shape[0]}"
            )
        valid = np.isfinite(t) & (t > 0) & np.isfinite(p) & (p > 0)
        if not valid.any():
            continue
        p, t = p[valid].astype(np.float64), t[valid].astype(np.float64)
        per_frame.append(
            (
                float(np.mean(np.abs(p - t) / t)),
                float(np.sqrt(np.mean((p - t) ** 2))),
                float(np.mean(np.maximum(p / t, t / p) < DELTA1)),
            )
        )
    if not per_frame:
        raise ValueError("no pixel to score: no truth is finite and positive where the prediction is")
    absrel, rmse, delta1 = np.mean(per_frame, axis=0)
    return {"AbsRel": float(absrel), "RMSE": float(rmse), "delta1": float(delta1)}


def aligned(predicted: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """A relative map (relative inverse depth, as Depth Anything's and MiDaS's) as depth aligned to ``truth`` as the
    depth literature scores such models (MiDaS, Depth Anything): the scale s and shift t of least squares between
    s x prediction + t and the truth's inverse depth over the pixels of finite positive truth and finite prediction,
    then 1 / (s x prediction + t), that disparity held at least 1 / the frame's largest truth depth (depth capped
    there); NaN elsewhere."""
    valid = np.isfinite(truth) & (truth > 0) & np.isfinite(predicted)
    found = np.full(truth.shape, np.nan, np.float64)
    if np.count_nonzero(valid) < 2:
        return found
    p, inverse = predicted[valid].astype(np.float64), 1 / truth[valid].astype(np.float64)
    design = np.stack([p, np.ones_like(p)], axis=1)
    (scale, shift), *_ = np.linalg.lstsq(design, inverse, rcond=None)
    disparity = np.maximum(scale * p + shift, 1 / truth[valid].max())
    found[valid] = 1 / disparity
    return found


def evaluate_maps(predictions: Path, truth: Path) -> dict[str, float]:
    """``depth_metrics`` of the .npy maps in folder ``predictions`` (as ``save`` writes them) against the truth maps
    of the same names in folder ``truth``, as they are and ``aligned`` (``aligned_AbsRel``, ``aligned_RMSE``,
    ``aligned_delta1``: a relative model's scores); a truth map without a prediction is a ValueError."""
    names = sorted(path.name for path in Path(truth).glob("*.npy"))
    if not names:
        raise ValueError(f"no truth maps (.npy) in {shown_path(truth)}")
    missing = [name for name in names if not (Path(predictions) / name).is_file()]
    if missing:
        raise ValueError(f"{shown_path(predictions)} has no prediction for {untrusted(', '.join(missing[:5]), 400)}")
    found = [read_map(Path(predictions) / name) for name in names]
    truths = [read_map(Path(truth) / name) for name in names]
    scores = depth_metrics(found, truths)
    shifted = depth_metrics([aligned(p, t) for p, t in zip(found, truths, strict=True)], truths)
    return {**scores, **{f"aligned_{name}": value for name, value in shifted.items()}}


def evaluate(model_type: str, options: Mapping[str, Any]) -> Any:
    """`eval`: the maps in folder ``predictions`` (as predict --save writes them) against the truth maps of the same
    names in folder ``data``: AbsRel, RMSE and delta1, written as OUT/eval.json."""
    import json

    from ..files import output_folder, write_text

    commands = tool_module("commands")
    if options["predictions"] is None:
        raise commands.UsageError(f"{model_type} is scored from its maps: give --predictions FOLDER (predict --save)")
    metrics = evaluate_maps(Path(options["predictions"]), Path(options["data"]))
    path = output_folder(options["out_dir"], option="--out") / "eval.json"
    write_text(path, json.dumps({"model_type": model_type, **metrics}, indent=2) + "\n")
    text = f"AbsRel {metrics['AbsRel']:.4f}, RMSE {metrics['RMSE']:.4f}, delta1 {metrics['delta1']:.4f}"
    text += (
        f" (scale-and-shift aligned: AbsRel {metrics['aligned_AbsRel']:.4f}, RMSE {metrics['aligned_RMSE']:.4f}, "
        f"delta1 {metrics['aligned_delta1']:.4f})\n"
    )
    return commands.CommandReport(text, {"eval": path})


def compare_runs(model_type: str, configurations: Sequence[tuple[Path, str]], options: Mapping[str, Any]) -> Any:
    """`compare`: two (model, target) configurations over ``source`` (an image, a video or a folder of images): the
    largest and mean difference of their maps, saved as compare's report; ``options["options"]``: predict's options
    by flag (quantize's --depth-kind)."""
    predict, compare = tool_module("predict"), tool_module("compare")
    source = options["source"] if options.get("source") is not None else options.get("data")  # quantize: --data
    if source is None:
        raise tool_module("commands").UsageError(
            f"{model_type} needs --source, the images both configurations run over"
        )
    source = Path(source)
    inputs = sorted(path for path in source.iterdir() if path.is_file()) if source.is_dir() else [source]
    runs = []
    for model, target in configurations:
        adapter = predict.detector_from_options(model_type, model, target, options.get("options") or {})
        runs.append([found.result for found in predict.predict(adapter, inputs, result=DENSE_MAP)])
    found = [differences(a, b) for a, b in zip(*runs, strict=True)]
    outputs = {name: max((one[name] for one in found), default=0.0) for name in ("max_difference", "valid_in_one")}
    for name in ("mean_difference", "relative_difference"):
        outputs[name] = float(np.mean([one[name] for one in found])) if found else 0.0
    runs_on = [target for _, target in configurations]
    report, path = compare.save_comparison(
        configurations, runs_on, ("source", source), {"outputs": outputs}, options["out_dir"]
    )
    return tool_module("commands").CommandReport(compare.describe_comparison(report, path))


# ROS messages (sensor_msgs/Image 32FC1), their types imported on first use.
def to_message(header: Header, result: DenseMap) -> Image:
    from sensor_msgs.msg import Image

    values = np.ascontiguousarray(result.values, dtype="<f4")
    height, width = values.shape
    return Image(
        header=header,
        height=height,
        width=width,
        encoding="32FC1",
        is_bigendian=0,
        step=4 * width,
        data=values.tobytes(),
    )


def to_cdr(header: Header, result: DenseMap) -> bytes:
    """to_message's Image, serialized (what a publisher sends): the map's bytes copied once."""
    values = np.asarray(result.values, dtype="<f4")
    height, width = values.shape
    return image_cdr(header, height, width, "32FC1", 4 * width, values)


def from_message(message: Image, unit: str, kind: str) -> DenseMap:
    """A 32FC1 Image as a map of ``unit`` and ``kind`` (the message does not carry them)."""
    if message.encoding != "32FC1":
        raise ValueError(f"a dense map is a 32FC1 image, not {untrusted(message.encoding, 40)}")
    order = ">" if message.is_bigendian else "<"
    rows = np.frombuffer(bytes(message.data), f"{order}f4").reshape(message.height, message.step // 4)
    return DenseMap(rows[:, : message.width].astype(np.float32), unit, kind)


def write_replayed(
    path: Path, answers: Mapping[int, Image], latched: Mapping[str, Any], image: str, sizes: Callable
) -> Path:
    """replay's dense.json: each answered frame's ``frame_record`` (unit unknown to the message: "")."""
    import json

    from ..files import write_text

    maps = {frame: from_message(message, "", "") for frame, message in answers.items()}
    records = [
        frame_record(f"{image}:{f}", f, m.values.shape[1], m.values.shape[0], m) for f, m in sorted(maps.items())
    ]
    write_text(path, json.dumps(records))
    return path
