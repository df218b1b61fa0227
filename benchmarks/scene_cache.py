"""A cache of what a camera's detector and re-id embedder gave on a composed scene, so that a tracker or global-ID
rule change re-runs a benchmark in seconds instead of hours (bench_cross_camera.py's ``--cache DIR``).

Recorded while the node's pipeline runs (``Recorder``: the pipeline's detector and embedder wrapped, every other
step as it is), replayed into the same pipeline (``replay``: the detections as ``global_tracks``' ``detections``, the
embedder answering each call with what it answered then, after checking it is asked about the same boxes): the
tracker consumes exactly what it consumed on the run recorded. One file per scene and camera, named by the scene,
the camera and a hash of what decides the detections and embeddings (the scene's seed and textures, the detector
and embedder files' SHA-256, the detector's node values); written with vision_factory/files.py's rules.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from vision_factory.files import output_folder, write_bytes
from vision_factory.results.boxes import Boxes
from vision_factory.results.frame import FrameResult
from vision_factory.tools.quantize import sha256

FORMAT = 1  # bump when what is stored changes


def cache_key(scene: tuple, detector: Path, embedder: Path, values: Mapping[str, Any]) -> str:
    """A short hash of what decides a scene's detections and embeddings: the scene (seed, backdrop, pillars), the
    detector's and embedder's contents and the node values the detector runs with."""
    text = json.dumps(
        [FORMAT, list(scene), sha256(detector), sha256(embedder), sorted((k, repr(v)) for k, v in values.items())]
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Recorder:
    """Wraps a pipeline's detector and its tracking's embedder (``wrap``), recording each frame's detections and
    each embedding call (the frame it came in, the boxes asked about, the answer)."""

    def __init__(self, pipeline: Any):
        self.detector, self.embedder = pipeline.detector, pipeline.tracking.embedder
        self.frame = 0
        self.found: list[Boxes] = []
        self.calls: list[tuple[int, np.ndarray, np.ndarray]] = []
        pipeline.detector, pipeline.tracking.embedder = self, self

    def __getattr__(self, name: str) -> Any:  # the detector's other attributes (names, mask_channels, ...)
        return getattr(self.detector, name)

    def detect(self, frame: np.ndarray) -> FrameResult:
        self.frame += 1
        found = self.detector.detect(frame)
        if found != FrameResult.of(frame, boxes=found.boxes):
            raise ValueError("the detector gives more than boxes: the cache keeps boxes only")
        self.found.append(found.boxes)
        return found

    def embed(self, frame: np.ndarray, boxes_xyxy: Any) -> np.ndarray:
        answer = self.embedder.embed(frame, boxes_xyxy)
        self.calls.append((self.frame, np.array(boxes_xyxy, np.float64), np.array(answer)))
        return answer

    def save(self, path: Path) -> None:
        boxes = self.found
        arrays = {
            "counts": np.array([len(each) for each in boxes], np.int64),
            "xyxy": np.concatenate([each.xyxy for each in boxes]).reshape(-1, 4),
            "scores": np.concatenate([each.scores for each in boxes]),
            "class_ids": np.concatenate([each.class_ids for each in boxes]),
            "labels": np.array(json.dumps([list(each.labels) for each in boxes])),
            "names": np.array(json.dumps(boxes[0].names if boxes else None)),
            "call_frames": np.array([frame for frame, _, _ in self.calls], np.int64),
            "call_counts": np.array([len(asked) for _, asked, _ in self.calls], np.int64),
            "call_boxes": np.concatenate([asked for _, asked, _ in self.calls]).reshape(-1, 4),
            "call_answers": np.concatenate([answer for _, _, answer in self.calls])
            if self.calls
            else np.zeros((0, 0), np.float32),
        }
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **arrays)
        output_folder(path.parent, option="--cache")
        write_bytes(path, buffer.getvalue(), option="--cache")


class Replayer:
    """The embedder of a replay: each call answered with the recorded one, in order, the boxes checked equal."""

    def __init__(self, calls: list[tuple[int, np.ndarray, np.ndarray]]):
        self.calls, self.next = calls, 0

    def embed(self, frame: np.ndarray, boxes_xyxy: Any) -> np.ndarray:
        if self.next >= len(self.calls):
            raise ValueError("the replay asks the embedder more than the recorded run did: the cache is stale")
        _, asked, answer = self.calls[self.next]
        if not np.array_equal(asked, np.array(boxes_xyxy, np.float64)):
            raise ValueError(f"the replay's embedding call {self.next + 1} asks about other boxes than recorded")
        self.next += 1
        return answer


def load(path: Path, frames: list[np.ndarray]) -> tuple[list[FrameResult], Replayer]:
    """The recorded detections of each of ``frames`` (as the detector gave them) and the embedder's replayer."""
    with np.load(path) as stored:
        data = {key: stored[key] for key in stored.files}
    labels, names = json.loads(str(data["labels"])), json.loads(str(data["names"]))
    ends = np.cumsum(data["counts"])
    if len(ends) != len(frames):
        raise ValueError(f"{path}: {len(ends)} frames recorded, {len(frames)} given")
    found = []
    for frame, end, count, labelled in zip(frames, ends, data["counts"], labels):
        rows = slice(end - count, end)
        classes = None if names is None else tuple(names)
        boxes = Boxes(data["xyxy"][rows], data["scores"][rows], data["class_ids"][rows], tuple(labelled), classes)
        found.append(FrameResult.of(frame, boxes=boxes))
    calls, ends = [], np.cumsum(data["call_counts"])
    for frame, end, count in zip(data["call_frames"], ends, data["call_counts"]):
        rows = slice(end - count, end)
        calls.append((int(frame), data["call_boxes"][rows], data["call_answers"][rows]))
    return found, Replayer(calls)
