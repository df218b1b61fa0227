"""vision-factory verify: a deployed node gives the model's own answers.

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
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..families.family import Family
from ..families.registry import NODE_FAMILIES
from ..parameters import with_defaults
from ..results import Item
from ..runtime.backends import load_target
from ..streaming import closing_counts
from ..text import untrusted
from .bags import image_topic, read_framed, read_messages
from .commands import UsageError
from .replay import checked_overrides, message_class, params_file_values, replay
from .verify_frames import (
    MASK_IOU,
    Answer,
    FrameCheck,
    Tolerance,
    compare,
    keypoint_cause,
    likely_cause,
    match,
    tolerance_for,
)
from .verify_report import clear, write


@dataclass
class Check:
    name: str
    passed: bool
    numbers: str  # what was measured, one line
    cause: str = ""  # failed: one line naming the likely cause and the fix
    compared: bool = True  # false: not meaningful here (numbers says why); it neither passes nor fails the run


@dataclass
class NodeCounts:
    """The frames the node itself says it dropped (its queue full, or too old) and skipped (unusable), and where
    that was read: its last /diagnostics status, else its closing log line, else nowhere."""

    dropped: int
    skipped: int
    source: str  # one line, for the report

    @property
    def known(self) -> bool:
        return self.source != NO_COUNTS


NO_COUNTS = "none: the node published no /diagnostics status and logged no closing counts"


@dataclass
class VerifyReport:
    passed: bool
    checks: list[Check]
    frames: list[FrameCheck]
    tolerance: Tolerance
    latency_ms_p50: float
    latency_ms_p99: float
    node_log: str
    counts: NodeCounts
    files: dict[str, str] = field(default_factory=dict)

    def failures(self) -> list[str]:
        return [f"{check.name}: {check.cause}" for check in self.checks if not check.passed]

    def text(self) -> str:
        lines = [f"verify: {'PASS' if self.passed else 'FAIL'}", *check_lines(self.checks)]
        lines.append(f"pipeline latency: p50 {self.latency_ms_p50:.1f} ms, p99 {self.latency_ms_p99:.1f} ms")
        lines.append(
            f"node's counts (dropped {self.counts.dropped}, skipped {self.counts.skipped}) from {self.counts.source}"
        )
        lines += [f"{name}: {path}" for name, path in self.files.items()]
        return "\n".join(lines)


def check_lines(checks: list[Check], indent: str = "  ") -> list[str]:
    """The checks as verify prints them: one line each (ok, FAIL, or -- not compared), a failed one's cause below."""
    lines = []
    for check in checks:
        mark = "ok  " if check.passed else "FAIL"
        lines.append(f"{indent}{mark if check.compared else '--  '} {check.name}: {check.numbers}")
        if not check.passed:
            lines.append(f"{indent}     {check.cause}")
    return lines


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
) -> VerifyReport:
    """Play ``bag`` through the ``model_type`` node (this package's, or ``executable``) and compare with ``model``
    run offline on ``backend`` (what the node runs on: it sets the tolerance). ``params`` (NAME: VALUE text, as
    ``-p``) go to the node, and those of the family to the offline model too; ``model_path`` among them is the
    node's model, checked against ``model``. ``params_file``: a ROS 2 parameters YAML for the node, read for the
    offline model too (``params`` override it)."""
    spec = _family(model_type)
    params = dict(params or {})
    given = checked_overrides(model_type, params)  # names and values as the node would take them, or refused
    offline_values = _offline_values(spec, Path(model), given, params_file_values(params_file))
    tolerance = tolerance_for(backend)
    if tolerance_px is not None:
        tolerance = Tolerance(tolerance_px, tolerance.score)
    out_dir = Path(out_dir)
    clear(out_dir, force)
    topic, _ = image_topic(bag, topic)
    framed = list(read_framed(bag, topic))
    frames = [frame for _, frame in framed]
    load = lambda path: load_target(backend, Path(path))  # noqa: E731
    tracked = bool(offline_values.get("tracking"))
    run_offline, model_names, keypoint_names = _offline_runner(spec, offline_values, load)
    expected = run_offline(frames)  # before the node plays: a model that cannot load fails here, clearly
    # A segmentation model: the node's ~/masks recorded too, each paired detection's mask compared.
    masked = any(item.mask is not None for items in expected for item in items)

    node_params = {"model_path": str(model), **params}
    latched = dict(spec.result.latched)  # the node's class map
    result = replay(
        bag,
        out_dir / "node",
        model_type,
        node_params,
        params_file,
        topic=topic,
        rate=rate,
        executable=executable,
        force=force,
        live_stamps=True,
        latched=latched or None,
        warm_up=True,
        diagnostics=True,
        also=MASKS_TOPIC if masked else None,
    )
    output_bag = Path(result.output_bag)
    recorded = lambda topic: [(raw.timestamp_ns, raw.data) for raw in read_messages(output_bag, topic)]  # noqa: E731
    answers = _answers(recorded(f"/{spec.main_output(offline_values, 'verify')}"), spec, tracked)
    if masked:
        _with_masks(answers, [data for _, data in recorded("/masks")])
    node_names = _label_names(_latched_labels(output_bag), latched) if latched else None
    log = Path(result.node_log).read_text(errors="replace") if Path(result.node_log).is_file() else ""
    counts = node_counts(result.node_status, log)
    offline = Offline(run_offline, expected, model_names, keypoint_names, Path(model), tracked, masked)
    checks, frame_checks, paired = compare_answers(
        spec, answers, result.sent_stamps, framed, offline, node_names, tolerance, counts, params
    )
    latencies = [
        (answer.received_ns - (answer.stamp[0] * 10**9 + answer.stamp[1])) / 1e6
        for index, answer in paired.items()
        if answer.stamp == result.sent_stamps[index]
    ]
    p50, p99 = (float(np.percentile(latencies, q)) for q in (50, 99)) if latencies else (float("nan"),) * 2
    if latency_budget_ms is not None:
        checks.append(_latency_check(latencies, p50, p99, latency_budget_ms, rate))
    report = VerifyReport(
        all(check.passed for check in checks), checks, frame_checks, tolerance, p50, p99, result.node_log, counts
    )
    write(report, out_dir, spec, frames, paired, expected)
    return report


@dataclass
class Offline:
    """What the model offline gives (``expected``: per frame, its items) and what verify knows of it."""

    run: Callable  # frames -> per frame, the items (a fresh stream each call)
    expected: list[list[Item]]
    names: list[str] | None  # its class names (None: the ball)
    keypoint_names: list[str]
    model: Path
    tracked: bool  # with tracking on: its items carry track IDs
    masked: bool  # a segmentation model: its items carry masks


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
        _answered_check(frame_checks, by_order, counts, params),
        _stamp_check(answers, stamps, [frame_id for frame_id, _ in framed]),
    ]
    latched = bool(spec.result.latched)
    if latched:
        checks.append(_class_check(answers, node_names, offline.names, offline.model))
    other_classes = not checks[-1].passed if latched else False
    checks.append(
        _output_check(
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
        checks.append(_mask_check(frame_checks))
    if offline.tracked:
        checks.append(_track_check(frame_checks, paired, expected, checks[0], checks[-2 if offline.masked else -1]))
    return checks, frame_checks, paired


def _family(model_type: str) -> Family:
    spec = NODE_FAMILIES.get(model_type)
    if spec is None or spec.make_pipeline is None:
        choices = [name for name, family in NODE_FAMILIES.items() if family.make_pipeline is not None]
        raise UsageError(
            f"verify checks {', '.join(choices)} nodes, not {model_type!r} (to check track IDs, verify the detector "
            "with -p tracking:=true: its tracker runs in the node)",
            "--model-type",
        )
    return spec


def _offline_values(
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


def _offline_runner(spec: Family, values: dict, load: Callable) -> tuple[Callable, list[str] | None, list[str]]:
    """The model offline as the node builds it: frames -> per frame, the items it gives (a fresh state per call:
    TrackNet's stream, the tracker); its class names (None: the ball) and keypoint names ([] without).

    It is the family's frame pipeline, the node's (Family.pipeline, families/pipeline.py). With ``tracking`` on:
    the detector at the tracking's confidence, the Tracking updated frame by frame in order, the detections the
    node publishes each with its track ID. The tracker first sees the bag's first frame once, as
    the node does: replay's warm-up frame (its answer is not compared, but the node's tracker has seen it)."""
    pipeline = spec.pipeline(values, load)  # the models load now: a bad one fails before the node plays
    kind = spec.result.module()
    return lambda frames: kind.offline_items(pipeline, frames), *kind.names_of(pipeline)


def _answers(received: Iterable[tuple[int, bytes]], spec: Family, tracked: bool = False) -> list[Answer]:
    """The node's answers on its main output (``received``: when each came, in ns, and its CDR bytes), in the order
    they came; ``tracked``: each detection's id is its track ID (else the id, a rank, is not compared)."""
    from rclpy.serialization import deserialize_message

    kind, message = spec.result.module(), message_class(spec.result.message)
    answers = []
    for received_ns, data in received:
        msg = deserialize_message(data, message)
        items = kind.message_items(msg, tracked)
        stamp = (msg.header.stamp.sec, msg.header.stamp.nanosec)
        answers.append(Answer(received_ns, stamp, msg.header.frame_id, items))
    return answers


MASKS_TOPIC = {"masks": "sensor_msgs/msg/Image"}


def _with_masks(answers: list[Answer], masks: Iterable[bytes]) -> None:
    """Gives each answer's items their masks from the node's ~/masks label image of the same stamp (``masks``: the
    CDR bytes of each it published)."""
    from rclpy.serialization import deserialize_message

    from ..results.detections import with_labels

    by_stamp = {answer.stamp: answer for answer in answers}
    for data in masks:
        msg = deserialize_message(data, message_class(MASKS_TOPIC["masks"]))
        answer = by_stamp.get((msg.header.stamp.sec, msg.header.stamp.nanosec))
        dtype = {"mono16": np.dtype("<u2"), "mono8": np.dtype("u1")}.get(msg.encoding)
        if answer is None or dtype is None or msg.step != msg.width * dtype.itemsize:
            continue
        labels = np.frombuffer(bytes(msg.data), dtype).reshape(msg.height, msg.width)
        with_labels(answer.items, labels)


def _mask_check(frames: list[FrameCheck]) -> Check:
    """Each paired detection's mask, as the node's ~/masks shows it, overlaps the model's by at least MASK_IOU."""
    compared = [check for check in frames if check.masks]
    masks = sum(check.masks for check in compared)
    lowest = min((check.mask_iou_min for check in compared), default=1.0)
    numbers = f"{masks} paired detections' masks compared, smallest IoU {lowest:.4g} (at least {MASK_IOU:g})"
    if not masks:
        cause = "the node published no masks with its detections' stamps: is its ~/masks topic remapped or missing?"
        return Check("masks within tolerance", False, numbers, cause)
    if lowest >= MASK_IOU:
        return Check("masks within tolerance", True, numbers)
    worst = min(compared, key=lambda check: check.mask_iou_min)
    cause = (
        f"frame {worst.frame}: a mask overlaps the model's by {worst.mask_iou_min:.3g} only — check the node's model "
        "and backend against the model you validated"
    )
    return Check("masks within tolerance", False, numbers, cause)


def _latched_labels(output_bag: Path) -> list[bytes]:
    """The LabelInfo messages the node published, as recorded in ``output_bag`` (none: the topic is not there)."""
    try:
        return [raw.data for raw in read_messages(output_bag, "/labels")]
    except ValueError:
        return []


def _label_names(labels: list[bytes], latched: Mapping[str, str]) -> list[str] | None:
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


def node_counts(status: Mapping[str, str], log: str) -> NodeCounts:
    """The node's counts from its last /diagnostics status (replay's ``node_status``), else from its closing log
    line."""
    from ..ros.monitor import DROPPED, SKIPPED

    if status:
        try:
            dropped, skipped = int(status.get(DROPPED, "0")), int(status.get(SKIPPED, "0"))
        except ValueError:
            dropped = skipped = -1
        if dropped >= 0 and skipped >= 0:
            return NodeCounts(dropped, skipped, f"/diagnostics (its last status, {untrusted(status['name'], 80)!r})")
    counts = closing_counts(log)  # read only from an executable that publishes no /diagnostics status of its own
    if counts is not None:
        source = "its closing log line (it published no /diagnostics status of its own)"
        return NodeCounts(counts["dropped"], counts["skipped"], source)
    return NodeCounts(0, 0, NO_COUNTS)


def _answered_check(frames: list[FrameCheck], by_order: bool, counts: NodeCounts, params: Mapping[str, str]) -> Check:
    missing = [check.frame for check in frames if not check.answered]
    numbers = f"{len(frames) - len(missing)} of {len(frames)} frames answered"
    numbers += " (paired by order: the stamps are not the frames')" if by_order else ""
    if not missing:
        return Check("every frame answered", True, numbers)
    shown = ", ".join(str(frame) for frame in missing[:10]) + (", ..." if len(missing) > 10 else "")
    dropped, skipped = counts.dropped, counts.skipped
    what = f"frames {shown}: no answer"
    if dropped:
        queue = params.get("queue_size", "its default")
        cause = (
            f"{what} — dropped under load: the node dropped {dropped} frames from its full queue (queue_size "
            f"{queue}), it does not keep up at the bag's rate; make it faster (another backend, a smaller model) "
            "or give it a longer queue"
        )
    elif skipped:
        cause = f"{what} — the node skipped {skipped} frames it could not use (its log names the problem)"
    elif not counts.known:
        cause = (
            f"{what} — the node published no /diagnostics status and logged no closing counts: did it crash or "
            "hang? (see its log)"
        )
    else:
        cause = f"{what} — the node says it dropped and skipped none: were the answers published on another topic?"
    return Check("every frame answered", False, numbers, cause)


def _stamp_check(answers: list[Answer], stamps: list[tuple[int, int]], frame_ids: list[str]) -> Check:
    frame_of = {stamp: index for index, stamp in enumerate(stamps)}
    foreign = [answer for answer in answers if answer.stamp not in frame_of]
    wrong_ids = [
        (frame_of[answer.stamp], answer.frame_id)
        for answer in answers
        if answer.stamp in frame_of and answer.frame_id != frame_ids[frame_of[answer.stamp]]
    ]
    numbers = (
        f"{len(answers) - len(foreign)} of {len(answers)} answers carry their frame's stamp, "
        f"{len(wrong_ids)} a wrong frame_id"
    )
    if not foreign and not wrong_ids:
        return Check("header stamps and frame_ids carried", True, numbers)
    if foreign:
        sent = np.array([sec * 10**9 + nsec for sec, nsec in stamps], np.int64)
        lags = []
        for answer in foreign:
            stamp_ns = answer.stamp[0] * 10**9 + answer.stamp[1]
            earlier = sent[sent <= stamp_ns]
            lags.append((stamp_ns - earlier.max()) / 1e6 if earlier.size else float("nan"))
        near_receipt = [
            abs(answer.received_ns - (answer.stamp[0] * 10**9 + answer.stamp[1])) < 5e8 for answer in foreign
        ]
        if all(near_receipt):
            cause = (
                f"{len(foreign)} answers are stamped {np.nanmedian(lags):.1f} ms (median) after their frame, at "
                "about the time they were published — headers restamped: the node sets header.stamp to now() "
                "instead of copying the image's header, so its answers cannot be matched to frames or TF"
            )
        else:
            cause = (
                f"{len(foreign)} answers carry a stamp no frame had — headers restamped: copy the image's header "
                "into the answer"
            )
    else:
        frame, frame_id = wrong_ids[0]
        cause = (
            f"frame {frame}: frame_id {untrusted(frame_id, 80)!r} instead of the image's "
            f"{untrusted(frame_ids[frame], 80)!r} — the node sets its own frame_id; copy the image's header"
        )
    return Check("header stamps and frame_ids carried", False, numbers, cause)


def _class_check(answers: list[Answer], labels: list[str] | None, names: list[str], model: Path) -> Check:
    seen = sorted({item.name for answer in answers for item in answer.items})
    foreign = [name for name in seen if name not in names]
    label_problem = labels is not None and labels != names
    shown = lambda found: ", ".join(untrusted(name, 40) for name in found[:8]) + (", ..." if len(found) > 8 else "")  # noqa: E731
    numbers = f"node's classes: {shown(seen) or 'none'}; model's: {shown(names)}"
    if labels is not None:
        numbers += f"; node's labels topic: {shown(labels) or 'none'}"
    if not foreign and not label_problem:
        return Check("class names", True, numbers)
    cause = (
        f"the node names classes the model {model.name} does not have ({shown(foreign or labels)}) — a different "
        "model: check the node's model_path (and labels_path) against the model you validated"
    )
    return Check("class names", False, numbers, cause)


def _output_check(
    spec: Family,
    frames: list[FrameCheck],
    paired: dict[int, Answer],
    expected: list[list[Item]],
    tolerance: Tolerance,
    images: list[np.ndarray],
    run_offline: Callable,
    other_classes: bool,
    counts: NodeCounts,
    keypoint_names: list[str],
) -> Check:
    what = spec.result.what
    compared = [check for check in frames if check.answered]
    bad = [check for check in compared if not check.within(tolerance)]
    deviation = max((check.deviation_px for check in compared), default=0.0)
    scores = max((check.score_deviation for check in compared), default=0.0)
    unpaired = sum(check.unpaired for check in compared)
    numbers = (
        f"{len(compared) - len(bad)} of {len(compared)} answered frames within {tolerance.px:g} px / score "
        f"{tolerance.score:g}; largest difference {deviation:.4g} px, score {scores:.4g}; {unpaired} unpaired"
    )
    if spec.result.keypoints:
        numbers += f"; {sum(check.keypoints for check in compared)} keypoints compared"
    if not bad:
        return Check(f"{what} within tolerance", True, numbers)
    worst = max(bad, key=lambda check: (check.severity(), check.score_deviation))
    if worst.unpaired and spec.result.streamed:
        symptom = f"frame {worst.frame}: the node and the model disagree on whether the ball is seen"
    elif worst.unpaired:
        symptom = f"frame {worst.frame}: the node gives {worst.node_count} answers, the model {worst.model_count}"
    else:
        symptom = f"frame {worst.frame}: {what} differ by up to {worst.deviation_px:.4g} px"
    if counts.dropped and spec.result.streamed:  # a stream: every later window lacks it
        cause = (
            f"dropped under load: the node dropped {counts.dropped} frames from its full queue and answered them 'not "
            "seen'; its windows lack them, so its positions differ. Make it faster or give it a longer queue"
        )
    else:
        cause = keypoint_cause(bad, paired, expected, tolerance, keypoint_names) if spec.result.keypoints else None
        cause = cause or likely_cause(bad, paired, expected, tolerance, images, run_offline, other_classes)
    return Check(f"{what} within tolerance", False, numbers, f"{symptom} — {cause}")


def _track_check(
    frames: list[FrameCheck], paired: dict[int, Answer], expected: list[list[Item]], answered: Check, output: Check
) -> Check:
    """Each paired detection (``match``'s pairs) carries the model's track ID. Not meaningful when frames went
    unanswered: the node's tracker then saw another stream than the model's, and its IDs may rightly differ."""
    name = "track IDs"
    if not answered.passed:
        numbers = (
            "not compared: frames went unanswered (see 'every frame answered'), so the node's tracker saw another "
            "stream than the model's and its IDs may rightly differ"
        )
        return Check(name, True, numbers, compared=False)
    compared = same = 0
    first = None
    for check in frames:
        if not check.answered:
            continue
        for node, model in match(paired[check.frame].items, expected[check.frame])[0]:
            compared += 1
            if node.track == model.track:
                same += 1
            elif first is None:
                first = (check.frame, node.track, model.track)
    seen = {model.track for items in expected for model in items if model.track}
    tracks = f"{len(seen)} track{'' if len(seen) == 1 else 's'}"
    numbers = f"{same} of {compared} paired detections carry the model's track ID ({tracks})"
    if first is None:
        return Check(name, True, numbers)
    frame, node_id, model_id = first
    shown = lambda track: repr(untrusted(track or "", 20)) + (" (no track)" if not track else "")  # noqa: E731
    cause = (
        f"frame {frame}: the node's ID {shown(node_id)}, the model's {shown(model_id)} — the node's tracker is in "
        "another state than the model's: frames dropped or reordered before the node (its tracker saw another "
        "sequence), or different tracking parameters (track_*, reid_model_path: give verify the node's with -p or "
        "--params-file)"
    )
    if not output.passed:
        cause += "; its detections differ too (see the boxes check), so the tracker's input differs: fix that first"
    return Check(name, False, numbers, cause)


def _latency_check(latencies: list[float], p50: float, p99: float, budget: float, rate: float) -> Check:
    numbers = f"p50 {p50:.1f} ms, p99 {p99:.1f} ms over {len(latencies)} answers at {rate:g}x the bag's rate"
    if latencies and p99 <= budget:
        return Check(f"p99 pipeline latency within {budget:g} ms", True, numbers)
    if not latencies:
        cause = "no answer carries its frame's stamp, so there is no latency to measure (see the stamps check)"
        return Check(f"p99 pipeline latency within {budget:g} ms", False, numbers, cause)
    cause = (
        f"p99 pipeline latency {p99:.1f} ms is over the budget of {budget:g} ms — the node is too slow for this "
        "stream (a faster backend or a smaller model), or frames wait in its queue"
    )
    return Check(f"p99 pipeline latency within {budget:g} ms", False, numbers, cause)
