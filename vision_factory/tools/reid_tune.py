"""vision-factory reid-tune: the tracker's appearance thresholds for one re-identification model, measured on
frames with MOTChallenge ground truth, written into a copy of the model (no ROS).

Thresholds belong to the embedder: BoT-SORT's defaults (models/tracker.py's TrackerConfig) are made for re-id
models trained to push different people apart, while an embedder of generic features (the MobileNetV2 ImageNet
model) puts everyone at a high cosine. This tool measures what the tracker will compare:

- every ground-truth box of every frame is embedded by the family's own embedder (families/reid.build, exactly as
  the tracker's: same crop, resize, normalisation and batching), one frame's boxes in one call;
- each person keeps a feature as the tracker keeps a track's: the exponential moving average of their crops'
  features (TrackerConfig's ``ema_alpha``), renormalised (models/tracker.blend_features). The tracker never
  compares a detection with one earlier crop, only with this average (stages 1, 3 and 4), so that is what is
  measured;
- **same person**: each crop against that person's feature before the crop joins it (their first crop has
  nothing to compare with);
- **different people**: each crop against the feature of every other person already seen in the truth (a track
  the tracker holds, visible or hidden), at the same frame;
- distances are the tracker's, (1 - cosine) / 2 (models/tracker.appearance_distance).

The rule (``choose``, models/reid_calibration.py, which the tracker's online calibration shares), "nearly all"
being 99 % (``MARGIN`` 1 %):

- appearance and re-entry link a pair by appearance, even against motion (re-entry by appearance alone): a wrong
  link gives one person's ID to another, so they sit at the safe end: the same-person 99th percentile (nearly all
  of a person's own crops still link), which must be below nearly all different-people distances (their 1st
  percentile);
- the veto refuses a pair: it must be above nearly all same-person distances (their 99th percentile) so it almost
  never breaks a true track, and below nearly all different-people distances to stop the wrong ones. When the two
  percentiles leave a gap (the distributions are apart), it takes the middle of the gap, as far from either kind
  as the data allows (another scene's distances drift either way);
- when they overlap, no threshold separates the two kinds without error. Each threshold then keeps its own side
  of the rule: the veto at the same-person 99th percentile (it breaks nearly no true track, and stops only the
  different-people pairs above it), appearance and re-entry at the different-people 1st percentile (they link
  nearly no stranger, and few of a person's own crops). Between the two the tracker goes by motion. A warning gives
  the split with the fewest errors (same-person pairs over it plus different-people pairs at or under it, each
  kind weighted by its count's inverse) and how many pairs of each kind fall on its wrong side; it is not used as
  a threshold: a veto there would break the true tracks over it.

Ground truth boxes that are not scored (flag / conf 0, distractor classes: tools/mot.prepare) and, in the MOT16+
layout, boxes less than ``MIN_VISIBILITY`` visible are left out: a detector would not find them either.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..families import reid, tracking
from ..files import UnsafeWrite, check_output, output_folder, staged
from ..models.reid import ReidEmbedder
from ..models.reid_calibration import MARGIN, Choice, choose
from ..models.tracker import TrackerConfig, appearance_distance, blend_features
from ..runtime.backends import load_target
from ..text import shown_path
from .commands import CommandReport, UsageError
from .mot import prepare
from .mot_files import MotBoxes, boxes_from_rows, read_mot
from .quantize import sha256
from .quantize_backends import write_onnx_metadata
from .quantize_calibration import calibration_frames

MIN_VISIBILITY = 0.3  # MOT16+ truth boxes less visible than this are left out
MIN_PAIRS = 20  # of each kind, to choose at all
PERCENTILES = (0, 1, 5, 25, 50, 75, 95, 99, 100)
KEY = "reid_tune_"  # metadata keys of the provenance


@dataclass
class Distances:
    same: np.ndarray  # float64: a crop against its own person's feature
    different: np.ndarray  # a crop against another person's feature, same frame
    crops: int  # truth boxes embedded
    people: int  # truth IDs
    frames: int  # frames read
    outside: int  # truth boxes with nothing inside the frame (not embedded)


def scored_truth(truth: MotBoxes) -> MotBoxes:
    """The boxes of ``truth`` the tracker would meet: scored (tools/mot.prepare) and visible enough."""
    fix = "give MOTChallenge ground truth of the people in the frames (frame,id,x,y,w,h,1,-1,-1,-1 per box)"
    if not len(truth):
        raise ValueError(f"{shown_path(truth.path)} holds no boxes: {fix}")
    try:
        scored = prepare(truth, boxes_from_rows([], "none")).truth
    except ValueError as exc:
        raise ValueError(f"{exc}: {fix}") from None
    visible = (scored.visibility < 0) | (scored.visibility >= MIN_VISIBILITY)
    kept = scored.subset(visible)
    if not len(kept):
        raise ValueError(
            f"{shown_path(truth.path)} has no person box to measure: every box is unscored, a distractor or under "
            f"{MIN_VISIBILITY:.0%} visible; {fix}"
        )
    return kept


def measure(embedder: ReidEmbedder, frames, truth: MotBoxes, ema_alpha: float) -> Distances:
    """The same-person and different-people distances (see the module) of ``truth`` over ``frames`` (BGR arrays in
    order, the first is frame 1)."""
    by_frame = truth.by_frame()
    last = max(by_frame)
    features: dict[int, np.ndarray] = {}  # person -> unit EMA feature
    same, different = [], []
    crops = outside = read = 0
    size = (0, 0)
    for number, frame in enumerate(frames, start=1):
        read, size = number, frame.shape[:2]
        rows = by_frame.get(number)
        if rows is None:
            continue
        boxes = truth.boxes[rows]
        xyxy = np.concatenate([boxes[:, :2], boxes[:, :2] + boxes[:, 2:]], axis=1)
        embedded = embedder.embed(frame, xyxy)
        present = np.linalg.norm(embedded, axis=1) > 0.5
        outside += int(np.count_nonzero(~present))
        people = truth.ids[rows]
        known = list(features)
        if known:
            bank = np.stack([features[person] for person in known])
            distance = appearance_distance(bank, embedded[present])  # [known, crops]
            for column, person in enumerate(people[present]):
                mine = np.array([other == person for other in known])
                same.extend(distance[mine, column].tolist())
                different.extend(distance[~mine, column].tolist())
        crops += int(np.count_nonzero(present))
        for person, feature in zip(people[present], embedded[present]):
            old = features.get(int(person))
            features[int(person)] = feature if old is None else blend_features(old[None], feature[None], ema_alpha)[0]
        if number == last:
            break
    if read >= last and not crops:
        raise ValueError(
            f"no box of the ground truth {shown_path(truth.path)} has a pixel inside the frames ({size[1]}x"
            f"{size[0]}): give the frames the truth was made for, at the size it was made"
        )
    if read < last:
        raise ValueError(
            f"the ground truth {shown_path(truth.path)} has boxes up to frame {last} but the frames end at "
            f"frame {read}: give the frames the truth was made for (frames count from 1, in order)"
        )
    return Distances(np.array(same), np.array(different), crops, len(features), read, outside)


def tune(
    model: Path,
    source: Path,
    truth: Path,
    out: Path,
    target: str = "onnx:cpu",
    input_size: str = "",
    log: Callable[[str], None] = lambda text: None,
) -> CommandReport:
    """`vision-factory reid-tune`: the thresholds of ``model`` (a re-id ONNX model) measured on the frames of
    ``source`` (a folder of images in name order, a video or a rosbag2) with the MOTChallenge ground truth
    ``truth``; a copy of the model with them in its metadata at ``out`` (the only file written)."""
    from ..models.model_file import require_file_family

    model, out = Path(model), Path(out)
    if out.suffix != ".onnx":
        raise UsageError(f"give --out as NAME.onnx (got {shown_path(out.name)})", "--out")
    try:
        check_output(out, [model, source, truth], "--out (the tuned model is a copy)")
    except UnsafeWrite as exc:
        raise UsageError(str(exc), "--out") from None
    if not model.exists():  # a folder is refused by what it holds (require_file_family)
        raise UsageError(f"model not found: {shown_path(model)}", "--model")
    try:
        require_file_family(model, "reid", "reid-tune")
    except ValueError as exc:
        raise UsageError(str(exc), "--model") from None
    people = scored_truth(read_mot(truth))
    values = reid.FAMILY.values_from_model(model, reid_input_size=input_size)
    embedder = reid.build(values, lambda path: load_target(target, Path(path)))
    frames = calibration_frames(source, None, "--frames")
    distances = measure(embedder, frames, people, TrackerConfig().ema_alpha)
    if min(len(distances.same), len(distances.different)) < MIN_PAIRS:
        raise ValueError(
            f"too few pairs to choose from: {len(distances.same)} same-person and {len(distances.different)} "
            f"different-people distances (at least {MIN_PAIRS} of each): give frames where at least two people of "
            "the truth are seen over many frames"
        )
    choice = choose(distances.same, distances.different)
    warnings = []
    if choice.overlap:
        over, under = choice.errors
        warnings.append(
            f"the distributions overlap: this model does not tell these people apart reliably; at the split "
            f"{choice.split:.4f}, {over} of {len(distances.same)} same-person distances are above it and {under} of "
            f"{len(distances.different)} different-people distances at or under it (expect ID switches; a re-id "
            "model trained for people would separate them)"
        )
    if distances.outside:
        warnings.append(
            f"{distances.outside} truth boxes have no pixel inside the frames: left out (is the truth for frames of "
            "this size?)"
        )
    metadata = {tracking.MODEL_THRESHOLDS[name]: f"{value:g}" for name, value in choice.thresholds.items()}
    metadata |= provenance(model, source, truth, distances, input_size)
    log(f"measured {distances.crops} crops of {distances.people} people over {distances.frames} frames")
    write_copy(model, out, metadata, [source, truth])
    text = describe(distances, choice, out) + "\n"
    return CommandReport(text, warnings=warnings)


def provenance(model: Path, source: Path, truth: Path, distances: Distances, input_size: str) -> dict[str, str]:
    entries = {
        "source": model.name,
        "source_sha256": sha256(model),
        "frames": str(source),
        "truth": str(truth),
        "crops": f"{distances.crops} of {distances.people} people over {distances.frames} frames",
        "pairs": f"{len(distances.same)} same-person, {len(distances.different)} different-people",
        "rule": f"appearance and re-entry at the lower, the veto at the higher of the same-person "
        f"p{100 - round(100 * MARGIN)} and the different-people p{round(100 * MARGIN)} (apart: midway between them)",
    }
    if input_size:
        entries["input_size"] = input_size
    return {KEY + key: value for key, value in entries.items()}


def write_copy(model: Path, out: Path, metadata: Mapping[str, str], inputs: Iterable[Path] = ()) -> None:
    """A copy of ``model`` at ``out`` with ``metadata`` added to (or replacing keys of) its own; never onto
    ``model`` or another of the ``inputs``, nor through a link."""
    import shutil

    output_folder(out.parent, option="--out")
    with staged(out, [model, *inputs], "--out") as fresh:
        shutil.copyfile(model, fresh)
        write_onnx_metadata(fresh, metadata)  # keeps the copy's other keys


def percentiles(values: np.ndarray) -> str:
    return "  ".join(f"p{p}={np.percentile(values, p):.4f}" for p in PERCENTILES)


def describe(distances: Distances, choice: Choice, out: Path) -> str:
    lines = [
        f"{distances.crops} crops of {distances.people} people over {distances.frames} frames; appearance distance "
        "(1 - cos) / 2 against a person's running feature (as the tracker keeps it):",
        f"  same person       ({len(distances.same)} pairs): {percentiles(distances.same)}",
        f"  different people  ({len(distances.different)} pairs): {percentiles(distances.different)}",
        "  overlapping: no threshold separates them without error"
        if choice.overlap
        else f"  apart: same-person p{100 - round(100 * MARGIN)} under different-people p{round(100 * MARGIN)}",
        f"  fewest errors at {choice.split:.4f}: {choice.errors[0]} same-person over it, {choice.errors[1]} "
        "different-people at or under it",
    ]
    lines += [f"{name}: {value:g}" for name, value in choice.thresholds.items()]
    lines.append(f"wrote {shown_path(out)} (the tracker takes them unless track_thresholds_from_model is false)")
    return "\n".join(lines)
