"""The dense map of a frame (``DenseMap``: one float per pixel of the frame with its unit, e.g. depth in metres or
relative depth). Its files: the map as .npy (float32, height x width, NaN where invalid) and a drawn .png beside
the JSON record predict prints (``save``, ``record``); its message a sensor_msgs/Image 32FC1 (REP-118: NaN invalid),
which carries neither its unit nor what it measures; compared by the largest difference (``differences``); scored
against truth maps by AbsRel, RMSE and delta1 (``depth_metrics``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..images import image_cdr
from ..text import shown_path, untrusted
from .part import Compared, Equal

if TYPE_CHECKING:
    from sensor_msgs.msg import Image
    from std_msgs.msg import Header

DELTA1 = 1.25  # delta1: the share of valid pixels whose ratio to the truth, either way, is below this
# compare: a frame's map as one row whose positions are its values on a grid, compared by the largest difference
# (results/part.py), in the map's unit.
COMPARE_STRIDE = 4  # every 4th row and column: verify holds every frame's map (a 1280x720 map: 230 KB so)
INVALID = -1e9  # a NaN pixel's value there: NaN in both maps compares equal, NaN in one differs by far
FLAT = 1e-5  # drawn: a map whose range is under this share of its largest magnitude (at least 1) is flat, one colour


@dataclass(frozen=True, eq=False)
class DenseMap(Equal):
    """A map of the frame: ``values`` [height, width] float32 in the frame's pixels, NaN where the model gives
    nothing; ``unit``: what a value counts ("m": metres, "relative": scale unknown); ``kind``: what it measures,
    e.g. "depth"."""

    key: ClassVar[str] = "dense"

    values: np.ndarray
    unit: str
    kind: str

    def record(self) -> dict[str, Any]:
        """What it measures and its unit, and its finite values' count, range and mean (the values themselves:
        the .npy that ``save`` writes)."""
        finite = self.values[np.isfinite(self.values)]
        summary = (
            {"min": float(finite.min()), "max": float(finite.max()), "mean": float(finite.mean())}
            if finite.size
            else {}
        )
        return {"kind": self.kind, "unit": self.unit, "valid": int(finite.size), **summary}

    @classmethod
    def from_record(cls, record: Mapping[str, Any], values: np.ndarray) -> DenseMap:
        """The map of a record (``record``'s) whose ``values`` are its .npy's (``read_map``)."""
        return cls(np.asarray(values, np.float32), record["unit"], record["kind"])

    def describe(self) -> str:
        """What it measures, its range and unit."""
        finite = self.values[np.isfinite(self.values)]
        if not finite.size:
            return f"{self.kind} -"
        return f"{self.kind} {float(finite.min()):.4g}..{float(finite.max()):.4g} {self.unit}"

    def rows(self) -> Compared:
        """The map as compared: one row of its values on a grid (every COMPARE_STRIDE-th pixel, NaN as INVALID)."""
        values = self.values[::COMPARE_STRIDE, ::COMPARE_STRIDE].astype(np.float64)
        return Compared(["map"], [np.where(np.isfinite(values), values, INVALID).ravel()], np.ones(1), [np.zeros(0)])

    def draw(self, image: np.ndarray | None = None, frame: Any = None) -> np.ndarray:
        """The map in colour (OpenCV's TURBO over its finite range; invalid pixels black; a flat map, its range
        under FLAT of its size, in one colour) with its colour bar (results/drawing.py's ``colour_bar``: the range
        in its unit, relative depth's ends "near" and "far"), BGR uint8: into ``image`` (the map's size; the bar
        over its right edge), or a new image (the bar in a panel beside the map)."""
        import cv2

        from .drawing import LEGEND_WIDTH, colour_bar

        values = self.values.astype(np.float64)
        finite = np.isfinite(values)
        low, high = (values[finite].min(), values[finite].max()) if finite.any() else (0.0, 0.0)
        flat = high - low <= FLAT * max(abs(low), abs(high), 1.0)
        scaled = np.zeros(values.shape, np.uint8)
        scaled[finite] = 128 if flat else np.round(255 * (values[finite] - low) / (high - low)).astype(np.uint8)
        drawn = cv2.applyColorMap(scaled, cv2.COLORMAP_TURBO)
        drawn[~finite] = 0
        if image is None:
            image = np.zeros((drawn.shape[0], drawn.shape[1] + LEGEND_WIDTH, 3), np.uint8)
        image[:, : drawn.shape[1]] = drawn
        colour_bar(image, cv2.COLORMAP_TURBO, *self.legend(low, high, flat, finite.any()))
        return image

    def legend(self, low: float, high: float, flat: bool, valid: bool) -> tuple[str, str, str, bool]:
        """The colour bar's top and bottom text, its title and whether it is one colour: relative inverse depth's
        ends "near" (larger) and "far" under "relative"; else the range in the map's unit, under what it measures
        ("-" without a valid pixel)."""
        if self.unit == "relative":
            return "near", "far", "relative", flat
        unit = untrusted(self.unit, 6)
        title = f"{untrusted(self.kind or 'map', 8)} ({unit})" if unit else untrusted(self.kind or "map", 12)
        if not valid:
            return "-", "-", title, True
        return f"{high:.3g}", "flat" if flat else f"{low:.3g}", title, flat

    def to_message(self, header: Header, frame: Any = None) -> Image:
        """A sensor_msgs/Image 32FC1 of the map, stamped with ``header``."""
        from sensor_msgs.msg import Image

        values = np.ascontiguousarray(self.values, dtype="<f4")
        height, width = values.shape
        return Image(
            header=header, height=height, width=width, encoding="32FC1", is_bigendian=0, step=4 * width,
            data=values.tobytes(),
        )  # fmt: skip

    def to_cdr(self, header: Header) -> bytes:
        """to_message's Image, serialized (what a publisher sends): the map's bytes copied once."""
        values = np.asarray(self.values, dtype="<f4")
        height, width = values.shape
        return image_cdr(header, height, width, "32FC1", 4 * width, values)

    @classmethod
    def from_message(cls, message: Image, unit: str, kind: str) -> DenseMap:
        """A 32FC1 Image as a map of ``unit`` and ``kind`` (the message does not carry them)."""
        if message.encoding != "32FC1":
            raise ValueError(f"a dense map is a 32FC1 image, not {untrusted(message.encoding, 40)}")
        order = ">" if message.is_bigendian else "<"
        rows = np.frombuffer(bytes(message.data), f"{order}f4").reshape(message.height, message.step // 4)
        return cls(rows[:, : message.width].astype(np.float32), unit, kind)

    def save(self, folder: Path, path: Path, index: int | None, protected: Iterable = ()) -> Path:
        """The map as FOLDER/<image's stem>.npy (or <video's stem>_<index>.npy) and drawn beside it as .png, a map
        in metres also as <stem>_mm.png (``millimetres``); never through a link, nor onto ``path`` or another of
        the ``protected`` files. The .npy's path."""
        import cv2

        from ..files import output_folder, staged

        output_folder(folder, option="--save folder")
        stem = f"{path.stem}_{index:06d}" if index is not None else path.stem
        saved = folder / f"{stem}.npy"
        with staged(saved, [path, *protected], "--save folder") as fresh, fresh.open("wb") as handle:
            np.save(handle, self.values.astype(np.float32), allow_pickle=False)
        with staged(folder / f"{stem}.png", [path, *protected], "--save folder") as fresh:
            cv2.imwrite(str(fresh), self.draw())
        if self.unit == "m":  # as a depth camera writes it: 16-bit millimetres, 0 invalid
            with staged(folder / f"{stem}_mm.png", [path, *protected], "--save folder") as fresh:
                cv2.imwrite(str(fresh), millimetres(self.values))
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
