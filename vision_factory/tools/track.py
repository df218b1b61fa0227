"""vision-factory track: a detector and the tracker over a stream of frames, the tracks in MOTChallenge format.

It runs the node's frame pipeline (Family.pipeline, families/pipeline.py) with the node's parameter values: the
detector's from the options as `predict` takes them (tools/predict.py: each option is the node parameter it names,
left out: the node's default), the tracking parameters of families/tracking.py (each ``--track-*`` / ``--reid*``
option is the parameter it names, left out: its default), as a node with ``tracking: true`` has them. Frames come
from images (in the order given), one video or one rosbag2 (tools/sources.py); they are one stream, numbered from 1.
Several cameras (``track_cameras``, `track --camera NAME=SOURCE`): each camera's source its own stream, through its
own pipeline and tracker on the models loaded once, as a node with ``cameras`` has them; OUT/NAME/ per camera.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..cameras import camera_names
from ..families import tracking
from ..families.pipeline import DetectionPipeline
from ..families.registry import family
from ..files import output_folder, staged
from ..models.global_ids import GlobalIdentities, global_ids, reentry_threshold
from ..models.tracker import Tracker, TrackerConfig, Tracking
from ..parameters import with_defaults
from ..progress import Progress
from ..quiet import quiet_videos
from ..results.boxes import Boxes
from ..results.frame import FrameResult
from ..runtime.backends import load_target
from ..text import shown_path, untrusted
from .commands import UsageError
from .mot_files import MotBoxes, boxes_from_rows, write_mot
from .predict import FINDING, POSING, node_values
from .replay import clear_earlier_run
from .sources import is_video, open_video, read_image, source_frames

TRACKS_FILE = "tracks.txt"
VIDEO_FILE = "tracks.mp4"
IMAGE_FPS = 10.0  # frame rate of the --save video of images or a bag (a video keeps its own)
REID_OPTION = "--reid"


def _option(name: str) -> str:
    return REID_OPTION if name == tracking.reid.MODEL.name else "--" + name.replace("_", "-")


# option -> the tracking parameter it sets (every one but ``tracking``, which this tool turns on).
TRACKING = {_option(p.name): p.name for p in tracking.PARAMETERS if p.name not in tracking.NODE_ONLY}


@dataclass
class TrackRun:
    tracks: Path  # OUT/tracks.txt
    video: Path | None  # OUT/tracks.mp4 with --save
    frames: int
    boxes: int  # lines of tracks.txt
    track_ids: int  # distinct IDs
    reid: bool
    thresholds_from_model: dict[str, float] = dataclasses.field(default_factory=dict)
    # with re-id: each appearance threshold in use at the end and where it came from; the online calibration's
    # measured distances (families/tracking.thresholds_in_use)
    appearance_thresholds: dict[str, Any] = dataclasses.field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        return {
            "tracks": str(self.tracks),
            "video": str(self.video) if self.video else None,
            "frames": self.frames,
            "boxes": self.boxes,
            "track_ids": self.track_ids,
            "reid": self.reid,
            "thresholds_from_model": self.thresholds_from_model,
            "appearance_thresholds": self.appearance_thresholds,
        }


def tracking_values(options: Mapping[str, Any]) -> dict[str, Any]:
    """The tracking parameters (``tracking`` on) for ``options`` (option of TRACKING: value; None: the default)."""
    given = {TRACKING[option]: value for option, value in options.items() if value is not None and option in TRACKING}
    return with_defaults(tracking.PARAMETERS, {**given, "tracking": True}, "tracking")


def stream_frames(sources: Iterable[Path]) -> Iterator[np.ndarray]:
    """The BGR frames of ``sources``: image files in order, or one video, or one rosbag2 (folder or file)."""
    sources = [Path(source) for source in sources]
    if not sources:
        raise UsageError("give the frames: image files (in order), one video or one rosbag2")
    streams = [source for source in sources if is_video(source) or source.is_dir() or _is_bag_file(source)]
    if streams and len(sources) > 1:
        raise UsageError(f"{streams[0]} is a video or a bag: track one video or one bag at a time, or image files only")
    if streams:
        yield from source_frames(streams[0])
        return
    for source in sources:
        image = read_image(source)
        if image is None:
            raise ValueError(
                f"{shown_path(source)} is not a readable image (give image files, one video or one rosbag2)"
            )
        yield image


def _is_bag_file(path: Path) -> bool:
    return path.suffix.lower() in (".mcap", ".db3")


def track(
    model_type: str,
    model: Path,
    target: str,
    sources: Iterable[Path],
    out_dir: Path,
    detector_options: Mapping[str, Any] | None = None,
    tracking_options: Mapping[str, Any] | None = None,
    save: bool = False,
    force: bool = False,
    progress: Progress | None = None,
) -> TrackRun:
    """Run the ``model_type`` detector (``model`` on ``target``, with predict's FINDING / POSING options) and the
    tracker (``tracking_options``: TRACKING's) over the frames of ``sources``; write OUT/tracks.txt (MOTChallenge:
    one line per detection with a track ID) and, with ``save``, OUT/tracks.mp4 (boxes labelled with their IDs).
    An OUT holding an earlier run's files is refused unless ``force``; models load before any frame is read.
    ``progress`` (progress.py): the frames tracked."""
    _check_detector(model_type)
    outputs = _outputs(out_dir)
    clear_earlier_run(out_dir, outputs, force)
    (pipeline,) = build_pipelines(model_type, model, target, detector_options, [tracking_options or {}])
    return _track_stream(pipeline, [Path(source) for source in sources], out_dir, "", save, model, progress)


def _outputs(out_dir: Path) -> dict[str, Path]:
    return {"tracks": out_dir / TRACKS_FILE, "video": out_dir / VIDEO_FILE}


def _track_stream(
    pipeline: DetectionPipeline,
    sources: list[Path],
    out_dir: Path,
    camera: str,
    save: bool,
    model: Path,
    progress: Progress | None = None,
) -> TrackRun:
    """The frames of ``sources`` through ``pipeline``: OUT[/CAMERA]/tracks.txt and, with ``save``, tracks.mp4 there
    (the camera's folder made never through a link: files.output_folder)."""
    outputs = _outputs(out_dir / camera)
    fps = _video_fps(sources[0]) if len(sources) == 1 and is_video(sources[0]) else IMAGE_FPS
    output_folder(out_dir, camera, "--out")
    rows: list[tuple[int, int, float, float, float, float, float]] = []
    writer, frames = None, 0
    with contextlib.ExitStack() as stack:  # the video is moved onto OUT/tracks.mp4 once written whole
        video = stack.enter_context(staged(outputs["video"], [model, *sources])) if save else None
        try:
            for frames, frame, (kept,) in tracked_frames(stream_frames(sources), [pipeline]):
                rows.extend(_rows(frames, kept))
                if progress:
                    progress("track: frames", frames, None)
                if video is not None:
                    writer = writer or _open_video(video, fps, frame.shape[:2])
                    writer.write(_annotated(frame, kept))
        finally:
            if writer is not None:
                writer.release()
        if frames == 0:
            raise ValueError(f"no frames in {', '.join(map(shown_path, sources))}")
    write_mot(outputs["tracks"], boxes_from_rows(rows, str(outputs["tracks"])))
    return TrackRun(
        outputs["tracks"],
        outputs["video"] if save else None,
        frames,
        len(rows),
        len({row[1] for row in rows}),
        pipeline.tracking.embedder is not None,
        pipeline.tracking.from_model,
        tracking.thresholds_in_use(pipeline.tracking),
    )


def parse_camera_sources(items: Sequence[str]) -> list[tuple[str, Path]]:
    """``--camera NAME=SOURCE`` items (replay --camera's form): SOURCE one video, one rosbag2 or one image of that
    camera. A malformed item, a missing SOURCE or a name that is no camera name is a UsageError naming it."""
    cameras = []
    for item in items:
        name, equals, source = item.partition("=")
        if not equals or not name.strip() or not source:
            raise UsageError(f"--camera {untrusted(item, 200)}: write NAME=SOURCE (a video, a rosbag2 or an image)")
        if not Path(source).exists():
            raise UsageError(f"--camera {untrusted(item, 200)}: {untrusted(source, 200)} does not exist")
        cameras.append((name.strip(), Path(source)))
    try:
        camera_names([name for name, _ in cameras])  # each a relative topic name (OUT/NAME/), none twice
    except ValueError as error:
        raise UsageError(str(error), "--camera") from None
    return cameras


def track_cameras(
    model_type: str,
    model: Path,
    target: str,
    cameras: Sequence[tuple[str, Path]],
    out_dir: Path,
    detector_options: Mapping[str, Any] | None = None,
    tracking_options: Mapping[str, Any] | None = None,
    save: bool = False,
    force: bool = False,
) -> dict[str, TrackRun]:
    """``track`` for several cameras (``cameras``: (name, source) as ``parse_camera_sources`` gives them): each
    camera's frames through its own pipeline, its own tracker (IDs per camera), every camera's on the same loaded
    models, as a node with ``cameras`` runs them (InferenceNode.camera_pipelines); OUT/NAME/tracks.txt (and
    tracks.mp4 with ``save``) per camera. An OUT holding an earlier run's files is refused unless ``force``."""
    _check_detector(model_type)
    for name, _ in cameras:
        clear_earlier_run(out_dir, _outputs(out_dir / name), force)
    pipelines = camera_pipelines(model_type, model, target, detector_options, tracking_options or {}, len(cameras))
    return {
        name: _track_stream(pipeline, [source], out_dir, name, save, model)
        for (name, source), pipeline in zip(cameras, pipelines)
    }


def camera_pipelines(
    model_type: str,
    model: Path,
    target: str,
    detector_options: Mapping[str, Any] | None,
    tracking_options: Mapping[str, Any],
    count: int,
) -> list[DetectionPipeline]:
    """``count`` pipelines of the node's (Family.pipeline), each with its own tracker, all on runners loaded once."""
    runners: dict[str, Any] = {}

    def load_once(path: str | Path):
        if str(path) not in runners:
            runners[str(path)] = load_target(target, Path(path))
        return runners[str(path)]

    values = {
        **node_values(model_type, model, detector_options or {}, FINDING | POSING),
        **tracking_values(tracking_options),
    }
    return [family(model_type).pipeline(values, load_once) for _ in range(count)]


Rows = dict[str, list[tuple[int, int, float, float, float, float, float]]]  # per camera: frame, ID, x, y, w, h, score


def global_tracks(
    pipelines: Mapping[str, DetectionPipeline],
    frames: Mapping[str, Sequence[np.ndarray]],
    identities: GlobalIdentities,
    fps: float,
    detections: Mapping[str, Sequence[FrameResult]] | None = None,
) -> tuple[Rows, Rows]:
    """Several cameras' frames of one time (``frames``: per camera, frame 1 first, the cameras' frames of one
    number taken at once, ``fps`` a second) through each camera's pipeline (``pipelines``: ``camera_pipelines``' or
    ``build_pipelines``'), and their tracks through ``identities`` (models/global_ids.py), frame by frame, the cameras
    in turn, as a node with ``cross_camera_reid`` serves them: per camera, the rows (frame, ID, x, y, w, h, score) of
    its tracked detections with their global IDs, and the same with the camera's own track IDs. ``detections``: each
    camera's detections of each frame, instead of its pipeline's detector's."""
    trackings = [pipeline.tracking for pipeline in pipelines.values()]
    rows: Rows = {camera: [] for camera in pipelines}
    local: Rows = {camera: [] for camera in pipelines}
    for index in range(max(len(each) for each in frames.values())):
        number = index + 1
        for camera, pipeline in pipelines.items():
            if index >= len(frames[camera]):
                continue
            frame = frames[camera][index]
            if detections is None:
                ((_, found),) = pipeline.push(frame, number)
            else:
                found = pipeline.track(frame, detections[camera][index], number)
            if found.new_stream and number > 1:
                identities.forget(camera)
            boxes = found.boxes
            tracks = [boxes.track(row) for row in range(len(boxes))]
            ids = global_ids(identities, camera, number / fps, pipeline.tracking, tracks, reentry_threshold(trackings))
            kept = boxes.track_ids >= 0  # a confirmed track: a global ID
            rows[camera] += _rows(number, found.with_parts(boxes=boxes.tracked(ids))[kept])
            local[camera] += _rows(number, found[kept])
    return rows, local


def _check_detector(model_type: str) -> None:
    from ..families.registry import SINGLE_MODEL_DETECTORS

    if model_type not in SINGLE_MODEL_DETECTORS:
        raise UsageError(f"track runs {', '.join(SINGLE_MODEL_DETECTORS)} models, not {model_type}", "--model-type")


def tracked_frames(
    frames: Iterable[np.ndarray],
    pipelines: Sequence[DetectionPipeline],
    detections: Sequence[FrameResult] | None = None,
) -> Iterator[tuple[int, np.ndarray, list[FrameResult]]]:
    """Each frame's number (from 1), the frame and, per pipeline of ``pipelines`` (``build_pipelines``'), its
    detections that have a track ID (each with it): the detector (the pipelines share it) runs once a frame, every
    pipeline's tracking updates on its detections (to compare configurations on one run). ``detections``: each
    frame's, instead of the detector's. A frame of another size than the first is an error (tracks are in the
    stream's pixels)."""
    size = None
    for number, frame in enumerate(frames, start=1):
        if size is None:
            size = frame.shape[:2]
        elif frame.shape[:2] != size:
            raise ValueError(
                f"frame {number} is {frame.shape[1]}x{frame.shape[0]}, the stream's first "
                f"{size[1]}x{size[0]}: a stream's frames have one size (tracks are in its pixels)"
            )
        found = pipelines[0].detector.detect(frame) if detections is None else detections[number - 1]
        kept = []
        for pipeline in pipelines:
            tracked = pipeline.track(frame, found, number)
            kept.append(tracked[tracked.boxes.track_ids >= 0])
        yield number, frame, kept


def _rows(number: int, kept: FrameResult) -> Iterator[tuple[int, int, float, float, float, float, float]]:
    boxes = kept.boxes
    for (x1, y1, x2, y2), score, track_id in zip(boxes.xyxy.tolist(), boxes.scores.tolist(), boxes.track_ids.tolist()):
        yield number, track_id, x1, y1, x2 - x1, y2 - y1, score


def build_pipelines(
    model_type: str,
    model: Path,
    target: str,
    detector_options: Mapping[str, Any] | None,
    tracking_options: Sequence[Mapping[str, Any]],
) -> list[DetectionPipeline]:
    """The node's frame pipeline (Family.pipeline: families/pipeline.py) for the detector's options (predict's
    FINDING / POSING, each the node parameter it names) and each of ``tracking_options`` (TRACKING's), sharing one
    detector: the pipeline of the lowest track_low_threshold builds it (its confidence lowered to that, as a
    tracking node's is), the others track its detections."""
    load = lambda path: load_target(target, Path(path))  # noqa: E731
    given = node_values(model_type, model, detector_options or {}, FINDING | POSING)
    configurations = [{**given, **tracking_values(options)} for options in tracking_options]
    lowest = min(range(len(configurations)), key=lambda index: configurations[index]["track_low_threshold"])
    first = family(model_type).pipeline(configurations[lowest], load)
    return [
        first
        if index == lowest
        else DetectionPipeline(first.detector, tracking.build(values, load), values["confidence_threshold"])
        for index, values in enumerate(configurations)
    ]


def build_trackings(
    model_type: str,
    model: Path,
    target: str,
    detector_options: Mapping[str, Any] | None,
    tracking_options: Sequence[Mapping[str, Any]],
) -> tuple[Any, list[Tracking]]:
    """The detector and one Tracking per ``tracking_options``, as ``build_pipelines`` builds them."""
    pipelines = build_pipelines(model_type, model, target, detector_options, tracking_options)
    return pipelines[0].detector, [pipeline.tracking for pipeline in pipelines]


def track_frames(
    model_type: str,
    model: Path,
    target: str,
    frames: Iterable[np.ndarray],
    detector_options: Mapping[str, Any] | None,
    tracking_options: Sequence[Mapping[str, Any]],
) -> list[MotBoxes]:
    """``track`` without files, for several tracking configurations at once: the frames (BGR arrays, in order)
    through the detector once and through the tracking of each ``tracking_options`` (TRACKING's options, as
    ``track`` takes them; built by ``build_pipelines``); the tracks of each, as ``track`` writes them."""
    pipelines = build_pipelines(model_type, model, target, detector_options, tracking_options)
    rows: list[list] = [[] for _ in pipelines]
    for number, _, kept in tracked_frames(frames, pipelines):
        for found, into in zip(kept, rows):
            into.extend(_rows(number, found))
    return [boxes_from_rows(found, f"tracks {index + 1}") for index, found in enumerate(rows)]


def _annotated(frame: np.ndarray, kept: FrameResult) -> np.ndarray:
    """The frame with each tracked box drawn (results/boxes.py) in the boxes' colour, its label led by its ID."""
    boxes = kept.boxes
    labels = [f"#{track_id} {label}" for label, track_id in zip(boxes.labels, boxes.track_ids.tolist())]
    relabelled = Boxes(boxes.xyxy, boxes.scores, boxes.class_ids, labels, boxes.names)
    return kept.with_parts(boxes=relabelled).draw(frame.copy())


def _video_fps(path: Path) -> float:
    import cv2

    capture = open_video(path)
    fps = capture.get(cv2.CAP_PROP_FPS)
    capture.release()
    return fps if fps and np.isfinite(fps) and fps > 0 else IMAGE_FPS


def _open_video(path: Path, fps: float, size: tuple[int, int]):
    import cv2

    quiet_videos()  # FFmpeg's own lines kept off the terminal (quiet.py)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (size[1], size[0]))
    if not writer.isOpened():
        raise RuntimeError(f"cannot write the video {shown_path(path)} (OpenCV has no mp4v encoder here)")
    return writer


def track_detections(detections: MotBoxes, config: TrackerConfig | None = None, class_name: str = "object") -> MotBoxes:
    """A MOTChallenge detections file (ids -1; e.g. mot.noisy_detections) through the tracker by motion alone, one
    class: the tracks, as ``track`` writes them (one row per detection with a track ID, frames as given)."""
    tracker = Tracker(config)
    frames = detections.by_frame()
    rows = []
    for frame in range(1, max(frames, default=0) + 1):  # frames with no detection still advance the tracker
        indices = frames.get(frame, ())
        boxes = np.asarray(detections.boxes[indices], np.float64).reshape(-1, 4)
        corners = np.concatenate([boxes[:, :2], boxes[:, :2] + boxes[:, 2:]], axis=1)
        found = Boxes(corners, detections.scores[indices], np.zeros(len(boxes), np.int64), [class_name] * len(boxes))
        for index, track_id in zip(indices, tracker.update(found)):
            if track_id is not None:
                rows.append((frame, track_id, *detections.boxes[index], detections.scores[index]))
    return boxes_from_rows(rows, f"{detections.path} (tracked)")
