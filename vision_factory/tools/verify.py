"""vision-factory verify: a deployed node gives the model's own answers, one camera's or several cameras'.

The bag plays through the node over DDS (tools/replay.py, at the bag's own rate, each image stamped as a camera
stamps it when published), and the same model runs offline through the family's adapter on the same frames, built
from the same parameters as the node builds it (the family's ``build``). Then, message by message: every frame
answered, its header stamp and frame_id carried, the class names the model's, boxes / keypoints / ball positions
and scores within the tolerance of the backend (``TOLERANCES``), and with a latency budget the p99 pipeline latency
(when the answer came minus the image's header stamp); with tracking on, each paired detection's track ID (the
detector and its tracker offline, frame by frame in order). When something fails, each failed check names the likely
cause from the symptom, testing what it can: the model on the colour-swapped frames, a consistent scale and shift
of the boxes (letterbox), classes the model does not have, stamps that are the answers' publish times, keypoints
with left and right exchanged. What the node itself counts (frames dropped, skipped) is read from its last
/diagnostics status (replay's ``diagnostics``), from its closing log line only when it publishes none.

Several cameras (--camera NAME=SOURCE) are the same comparison, camera by camera: their frames play through ONE
node serving them all (its ``cameras`` parameter), merged in their recorded time order with their recorded stamps,
as fast as the node keeps up; the model runs offline on each camera's frames alone, from a fresh stream (its own
tracker, its own TrackNet window). A camera whose answers carry another camera's frames' stamps, or whose frames
are answered on another camera's topics, is named so: the outputs are crossed (verify_checks.py's
``name_crossing``). A silent camera (its source holds no frames) is reported, nothing compared; answers on its
topics fail it. Each camera's report is written to OUT/<camera>/, the verdict of all to OUT/verify.json and
OUT/verify.md (verify_report.py), the node's log and answers under OUT/node/ in either case.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..cameras import camera_names
from ..families.detection import MASKS
from ..families.family import Family
from ..families.frame_pipeline import class_names, run_stream
from ..families.registry import NODE_FAMILIES
from ..parameters import with_defaults
from ..progress import Progress
from ..results.frame import FrameResult
from ..ros import message_class
from ..runtime.backends import load_target
from .bags import image_topic, read_framed
from .commands import UsageError
from .replay import replay
from .replay_frames import CameraSource
from .replay_outputs import MASKS_TOPIC, mask_images, with_mask_image
from .replay_params import checked_overrides, params_file_values
from .verify_checks import (
    Seen,
    answered_check,
    class_check,
    latency_check,
    mask_check,
    name_crossing,
    node_counts,
    output_check,
    silent_check,
    stamp_check,
    track_check,
)
from .verify_frames import (
    Answer,
    FrameCheck,
    Tolerance,
    compare,
    tolerance_for,
)
from .verify_report import CamerasVerifyReport, Check, NodeCounts, VerifyReport, clear, write, write_cameras


def verify(
    bag: str | Path,
    model_type: str,
    model: str | Path,
    out_dir: str | Path,
    params: Mapping[str, str] | None = None,
    executable: list[str] | None = None,
    latency_budget_ms: float | None = None,
    backend: str = "onnx:cpu",
    tolerance_px: float | None = None,
    topic: str | None = None,
    rate: float = 1.0,
    force: bool = False,
    params_file: str | Path | None = None,
    progress: Progress | None = None,
    cameras: Sequence[CameraSource] = (),
) -> VerifyReport | CamerasVerifyReport:
    """Play ``bag`` through the ``model_type`` node (this package's, or ``executable``) and compare with ``model``
    run offline on ``backend`` (what the node runs on: it sets the tolerance). ``params`` (NAME: VALUE text, as
    ``-p``) go to the node, and those of the family to the offline model too; ``model_path`` among them is the
    node's model, checked against ``model``. ``params_file``: a ROS 2 parameters YAML for the node, read for the
    offline model too (``params`` override it). ``progress`` (progress.py): the frames run offline, then played.

    One camera (``bag``'s image topic, ``topic``) plays at ``rate`` times the bag's own, each image stamped as it is
    sent: a VerifyReport, written to OUT. ``cameras`` (replay_frames.parse_cameras's sources): several cameras
    through one node serving them all, played with their recorded stamps (so that crossed outputs are told by them)
    as fast as the node keeps up, each camera's answers compared with the model run offline on that camera's frames
    alone (a fresh stream: its own tracker, its own window): a CamerasVerifyReport, each camera's report in
    OUT/<camera>/, the verdict of all in OUT."""
    spec = verified_family(model_type)
    params = dict(params or {})
    given = checked_overrides(model_type, params)  # names and values as the node would take them, or refused
    if cameras and "cameras" in given:
        raise UsageError("--camera names the node's cameras: give no -p cameras", "--param")
    offline_values = offline_parameters(spec, Path(model), given, params_file_values(params_file))
    tolerance = tolerance_for(backend)
    if tolerance_px is not None:
        tolerance = Tolerance(tolerance_px, tolerance.score)
    sources = list(cameras) or [CameraSource("", Path(bag), topic)]
    names = list(camera_names([source.name for source in cameras])) or [""]
    out_dir = Path(out_dir)
    clear(out_dir, force, [name for name in names if name])
    framed = {}
    for source in sources:
        source_topic, _ = image_topic(source.bag, source.topic)
        framed[source.name] = list(read_framed(source.bag, source_topic))
    load = lambda path: load_target(backend, Path(path))  # noqa: E731
    tracked = bool(offline_values.get("tracking"))
    run_offline, model_names, keypoint_names = offline_runner(spec, offline_values, load)
    # Before the node plays (a model that cannot load fails here, clearly); each camera's frames alone, in order,
    # from a fresh stream: its own tracker, its own window.
    expected = {name: run_offline([frame for _, frame in framed[name]], progress) for name in names}
    # A segmentation model: the node's ~/masks recorded too, each paired detection's mask compared.
    masked = any(found.masks is not None and any(found.masks.masks) for one in expected.values() for found in one)
    expected = {name: [as_published(found) for found in results] for name, results in expected.items()}

    latched = dict(spec.result.latched)  # the node's class map
    result = replay(
        bag,
        out_dir / "node",
        model_type,
        {"model_path": str(model), **params},
        params_file,
        topic=topic,
        rate=None if cameras else rate,
        executable=executable,
        force=force,
        live_stamps=not cameras,
        latched=latched or None,
        warm_up=True,
        diagnostics=not cameras,
        also=MASKS_TOPIC if masked else None,
        progress=(lambda done, total: progress("verify: frames played", done, total)) if progress else None,
        cameras=sources if cameras else (),
    )
    main = spec.main_output(offline_values, "verify")
    answers = {name: node_answers(result.received[name][main], spec, tracked) for name in names}
    log = Path(result.node_log).read_text(errors="replace") if Path(result.node_log).is_file() else ""
    # the node's last /diagnostics status (one camera), else its closing line: its counts over all cameras
    counts = node_counts({} if cameras else result.node_status, log)
    compared = {}
    for name in names:
        received = result.received[name]
        if masked:
            with_masks(answers[name], [data for _, data in received.get(MASKS.topic, ())])
        labels = [data for _, data in received.get("labels", ())]
        node_names = label_names(labels, latched) if latched else None
        offline = Offline(run_offline, expected[name], model_names, keypoint_names, Path(model), tracked, masked)
        stamps = result.sent_stamps[name]
        checks, frame_checks, paired = compare_answers(
            spec, answers[name], stamps, framed[name], offline, node_names, tolerance, counts, params
        )
        if cameras and not framed[name]:
            checks = [silent_check(), checks[1]]  # nothing to compare; but nothing may be answered on its topics either
        compared[name] = checks, frame_checks, paired
    seen = Seen(answers, result.sent_stamps, {name: [frame_id for frame_id, _ in framed[name]] for name in names})
    reports = {}
    for name, (checks, frame_checks, paired) in compared.items():
        if cameras:
            name_crossing(name, checks, seen, {camera: found[2] for camera, found in compared.items()}, expected,
                          tolerance)  # fmt: skip
        # the pipeline latency: of the one camera's frames, each stamped as sent (several play as fast as the node
        # keeps up, with their recorded stamps: none measured)
        stamps = result.sent_stamps[name]
        latencies = [
            (answer.received_ns - (answer.stamp[0] * 10**9 + answer.stamp[1])) / 1e6
            for index, answer in paired.items()
            if not cameras and answer.stamp == stamps[index]
        ]
        p50, p99 = (float(np.percentile(latencies, q)) for q in (50, 99)) if latencies else (float("nan"),) * 2
        if latency_budget_ms is not None:
            checks.append(latency_check(latencies, p50, p99, latency_budget_ms, rate))
        report = VerifyReport(
            all(check.passed for check in checks), checks, frame_checks, tolerance, p50, p99, result.node_log, counts
        )
        write(report, out_dir / name, spec, [frame for _, frame in framed[name]], paired, expected[name])
        reports[name] = report
    if not cameras:
        return reports[""]
    passed = all(report.passed for report in reports.values()) and any(framed.values())
    verdict = CamerasVerifyReport(passed, reports, result.node_log)
    write_cameras(verdict, out_dir, spec.name)
    return verdict


@dataclass
class Offline:
    """What the model offline gives (``expected``: per frame, its result) and what verify knows of it."""

    run: Callable  # frames -> per frame, its result (a fresh stream each call)
    expected: list[FrameResult]
    names: list[str] | None  # its class names (None: no classes, the ball, a map)
    keypoint_names: list[str]
    model: Path
    tracked: bool  # with tracking on: its detections carry track IDs
    masked: bool  # a segmentation model: its detections carry masks

    @property
    def answered_names(self) -> list[str]:
        """Its class names and those it answered with (a model that names its classes as it answers: florence2's
        phrases)."""
        seen = (label for found in self.expected if found.boxes is not None for label in found.boxes.labels)
        return list(dict.fromkeys([*(self.names or []), *seen]))


def compare_answers(
    spec: Family,
    answers: list[Answer],
    stamps: list[tuple[int, int]],
    framed: list[tuple[str, np.ndarray]],
    offline: Offline,
    node_names: list[str] | None,
    tolerance: Tolerance,
    counts: NodeCounts,
    params: Mapping[str, str],
) -> tuple[list[Check], list[FrameCheck], dict[int, Answer]]:
    """The node's ``answers`` to one camera's frames (``framed``: frame_id and image, sent with ``stamps``) against
    the model's offline: the checks, each frame's comparison and each frame's answer."""
    expected, frames = offline.expected, [frame for _, frame in framed]
    paired, by_order = _pair(answers, stamps)
    frame_checks = [compare(index, paired.get(index), expected[index]) for index in range(len(frames))]
    checks = [
        answered_check(frame_checks, by_order, counts, params),
        stamp_check(answers, stamps, [frame_id for frame_id, _ in framed]),
    ]
    latched = bool(spec.result.latched)
    if latched:
        checks.append(class_check(answers, node_names, offline.names, offline.model, offline.answered_names))
    other_classes = not checks[-1].passed if latched else False
    checks.append(
        output_check(
            spec,
            frame_checks,
            paired,
            expected,
            tolerance,
            frames,
            offline.run,
            other_classes,
            counts,
            offline.keypoint_names,
        )
    )
    if offline.masked:
        checks.append(mask_check(frame_checks))
    if offline.tracked:
        checks.append(track_check(frame_checks, paired, expected, checks[0], checks[-2 if offline.masked else -1]))
    return checks, frame_checks, paired


def verified_family(model_type: str) -> Family:
    spec = NODE_FAMILIES.get(model_type)
    if spec is None or spec.make_pipeline is None:
        choices = [name for name, family in NODE_FAMILIES.items() if family.make_pipeline is not None]
        raise UsageError(
            f"verify checks {', '.join(choices)} nodes, not {model_type!r} (to check track IDs, verify the detector "
            "with -p tracking:=true: its tracker runs in the node)",
            "--model-type",
        )
    return spec


def offline_parameters(
    spec: Family, model: Path, params: Mapping[str, Any], file_values: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The family's parameter values for the offline model: the node's defaults, those of the family in
    ``file_values`` (from a parameters file) then in ``params`` (``-p`` values, checked: ``checked_overrides``),
    each checked against its parameter's valid values; model_path excepted: the offline model is ``model``. With
    ``tracking`` on, the offline model is the detector and its tracker."""
    own = {parameter.name: parameter for parameter in spec.parameters}
    given = {name: value for name, value in {**(file_values or {}), **params}.items() if name in own}
    given.pop("model_path", None)
    for name, value in given.items():
        try:
            own[name].check(value)
        except ValueError as exc:
            raise UsageError(str(exc), "--param" if name in params else "--params-file") from None
    if given.get("person_source") == "topic":
        raise UsageError(
            "verify runs rtmpose with its own person detector (person_source detector): with person_source topic "
            "its people come from another node, not from the model",
            "--param",
        )
    return with_defaults(spec.parameters, {**given, "model_path": str(model)}, spec.name)


def offline_runner(spec: Family, values: dict, load: Callable) -> tuple[Callable, list[str] | None, list[str]]:
    """The model offline as the node builds it: frames -> per frame, its result (a fresh stream per call:
    TrackNet's, the tracker); its class names (None: the ball, a map) and keypoint names ([] without).

    It is the family's frame pipeline, the node's (Family.pipeline, families/frame_pipeline.py). With ``tracking``
    on: the detector at the tracking's confidence, the Tracking updated frame by frame in order, the detections the
    node publishes each with its track ID; the tracker first sees the bag's first frame once, as the node does:
    replay's warm-up frame (its answer is not compared, but the node's tracker has seen it)."""
    pipeline = spec.pipeline(values, load)  # the models load now: a bad one fails before the node plays
    warm_up = bool(values.get("tracking"))
    offline = lambda frames, progress=None: run_stream(  # noqa: E731
        pipeline, frames, warm_up, progress, "verify: frames run offline"
    )
    return offline, *class_names(pipeline)


def as_published(result: FrameResult) -> FrameResult:
    """The model's result with its masks as the node's ~/masks label image shows them (results/masks.py), what the
    node's are compared with."""
    if result.masks is None:
        return result
    return result.with_parts(masks=result.masks.published(result.boxes))


def node_answers(received: Iterable[tuple[int, bytes]], spec: Family, tracked: bool = False) -> list[Answer]:
    """The node's answers on its main output (``received``: when each came, in ns, and its CDR bytes), in the order
    they came; ``tracked``: each detection's id is its track ID (else the id, a rank, is not compared)."""
    from rclpy.serialization import deserialize_message

    message = message_class(spec.result.message)
    answers = []
    for received_ns, data in received:
        msg = deserialize_message(data, message)
        result = FrameResult.from_message(spec.result.parts, msg, tracked=tracked)
        stamp = (msg.header.stamp.sec, msg.header.stamp.nanosec)
        answers.append(Answer(received_ns, stamp, msg.header.frame_id, result))
    return answers


def with_masks(answers: list[Answer], masks: Iterable[bytes]) -> None:
    """Gives each answer's detections their masks from the node's ~/masks label image of the same stamp
    (``masks``: the CDR bytes of each it published; one that cannot be read is left out)."""
    images = mask_images(masks)
    for answer in answers:
        with_mask_image(answer.result, images.get(answer.stamp))


def label_names(labels: list[bytes], latched: Mapping[str, str]) -> list[str] | None:
    """The class names of the node's LabelInfo (``labels``: the CDR bytes of each it published), when it published
    one."""
    from rclpy.serialization import deserialize_message

    if not labels:
        return None
    msg = deserialize_message(labels[-1], message_class(latched["labels"]))
    return [entry.class_name for entry in sorted(msg.class_map, key=lambda entry: entry.class_id)]


def _pair(answers: list[Answer], stamps: list[tuple[int, int]]) -> tuple[dict[int, Answer], bool]:
    """Each frame's answer, by the stamp it carries; when no answer carries one of the frames' stamps but there
    is one answer per frame, by order (so that restamped answers are still compared). Whether by order."""
    frame_of = {stamp: index for index, stamp in enumerate(stamps)}
    paired: dict[int, Answer] = {}
    for answer in answers:
        index = frame_of.get(answer.stamp)
        if index is not None:
            paired.setdefault(index, answer)
    if not paired and answers and len(answers) == len(stamps):
        return dict(enumerate(answers)), True
    return paired, False
