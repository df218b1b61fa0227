"""vision-factory predict: a model's detections (and keypoints) on images and videos.

The detector is built from the options as the node builds it from its parameters
(the family's ``build``): each option is the node parameter it names, and an option
left out is the node's default.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..families.detection import input_shape
from ..families.family import LoadRunner
from ..families.registry import family
from ..parameters import with_defaults
from ..results.detections import Detection, Detector, frame_record
from ..runtime.backends import load_target
from ..text import untrusted
from .commands import UsageError
from .sources import file_frames

# option -> the node parameter it sets; rtmpose: FINDING sets the person detector's, POSING the pose model's.
FINDING = {
    "--conf": "confidence_threshold",
    "--iou": "iou_threshold",
    "--max-det": "max_detections",
    "--classes": "classes",
    "--imgsz": "image_size",
    "--labels": "labels_path",
    "--resize": "resize",
    "--box-units": "box_units",
    "--label-offset": "label_offset",
}
POSING = {"--input-size": "input_size", "--person-class": "person_class"}


def node_values(name: str, model: Path, options: Mapping[str, Any], parameters: Mapping[str, str]) -> dict:
    """The parameter values the node of family ``name`` would have for ``model`` and those ``options`` (option:
    value; None: not given, the node's default) that ``parameters`` maps; an option the family has no parameter
    for is an error."""
    spec = family(name)
    known = {parameter.name for parameter in spec.parameters}
    given = {option: options[option] for option in parameters if options.get(option) is not None}
    for option in given:
        if parameters[option] not in known:
            raise UsageError(f"{name} models take no {parameters[option]}", option)
    values = {parameters[option]: value for option, value in given.items()}
    return with_defaults(spec.parameters, {"model_path": str(model), **values}, name)


def build_detector(
    model_type: str,
    model: Path,
    target: str,
    options: Mapping[str, Any],
    detector_model: Path | None = None,
    detector_type: str = "yolo",
    load: LoadRunner | None = None,
) -> Detector:
    """The ``model_type`` detector on ``target`` (e.g. onnx:cpu) with the options of FINDING and POSING;
    rtmpose: on the people the ``detector_type`` model ``detector_model`` finds. ``load`` loads each model
    file instead of ``target`` (quantize records what the model is fed)."""
    if model_type == "rtmpose" and detector_model is None:
        raise UsageError("rtmpose needs person boxes: give --detector MODEL (and --detector-type if not yolo)")
    if options.get("--input-size"):
        try:
            input_shape(options["--input-size"])
        except ValueError as exc:
            raise UsageError(str(exc), "--input-size") from None
    load = load or (lambda path: load_target(target, Path(path)))
    if model_type == "rtmpose":
        people = family(detector_type).build(node_values(detector_type, detector_model, options, FINDING), load)
        values = node_values("rtmpose", model, options, POSING)
        return family("rtmpose").build(values, load, person_detector=people)
    return family(model_type).build(node_values(model_type, model, options, FINDING | POSING), load)


@dataclass
class Prediction:
    record: dict[str, Any]  # results/detections.py's frame_record: image, frame, width, height, detections
    detections: list[Detection]

    def line(self) -> str:
        """One line of text: the image and each detection's class and score (names from the model or a labels
        file, and the file's name, escaped: text.untrusted)."""
        found = ", ".join(f"{untrusted(d.class_name, 100)} {d.score:.2f}" for d in self.detections)
        return f"{untrusted(self.record['image'], 400)}: {found or '-'}"


def predict(
    detector: Detector, inputs: Iterable[Path], save: Path | None = None, protected: Iterable[Path | None] = ()
) -> Iterator[Prediction]:
    """``detector`` on each image, and each frame of each video, in order; with ``save``, each drawn there, never
    onto one of ``inputs`` or of the ``protected`` files (the model ...)."""
    inputs = list(inputs)
    protected = [*inputs, *protected]
    for path in inputs:
        for name, index, frame in file_frames(path):
            detections = detector.detect(frame)
            record = frame_record(name, index or 0, frame.shape[1], frame.shape[0], detections)
            if save is not None:
                save_annotated(save, path, index, frame, detections, protected)
            yield Prediction(record, detections)


def save_annotated(
    folder: Path, path: Path, index: int | None, frame: np.ndarray, detections, protected: Iterable[Path | None] = ()
) -> Path:
    """``frame`` with its detections drawn, as FOLDER/<image's name>, or FOLDER/<video's stem>_<index>.jpg; never
    through a link, nor onto ``path`` or another of the ``protected`` files."""
    import cv2

    from ..files import staged
    from ..results.detections import draw_detections

    folder.mkdir(parents=True, exist_ok=True)
    suffix = f"_{index:06d}.jpg" if index is not None else path.suffix
    saved = folder / f"{path.stem}{suffix}"
    with staged(saved, [path, *protected], "--save folder") as fresh:
        if not cv2.imwrite(str(fresh), draw_detections(frame, detections)):
            raise ValueError(f"cannot write {saved}: OpenCV writes no {suffix} image")
    return saved
