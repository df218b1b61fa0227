"""verify's checks: each a verdict on one aspect of the node's answers against the model's offline ones (every frame
answered, the stamps and frame_ids carried, the class names, the outputs within tolerance, the masks, the track IDs,
the pipeline latency), its numbers in one line, and when it fails the likely cause and its fix; and the node's own
counts of what it dropped and skipped (``node_counts``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..families.family import Family
from ..results.boxes import id_text
from ..results.frame import FrameResult
from ..streaming import closing_counts
from ..text import shown_path, untrusted
from .verify_frames import MASK_IOU, Answer, FrameCheck, Tolerance, compare, keypoint_cause, likely_cause, match
from .verify_report import NO_COUNTS, Check, NodeCounts


def mask_check(frames: list[FrameCheck]) -> Check:
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


def answered_check(frames: list[FrameCheck], by_order: bool, counts: NodeCounts, params: Mapping[str, str]) -> Check:
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


def stamp_check(answers: list[Answer], stamps: list[tuple[int, int]], frame_ids: list[str]) -> Check:
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


def class_check(
    answers: list[Answer], labels: list[str] | None, names: list[str], model: Path, answered: list[str] | None = None
) -> Check:
    """The node's classes against the model's: those it answered with among the model's (``answered``: its class
    map and those it answered with offline), its LabelInfo the model's class map (``names``)."""
    seen = sorted({label for answer in answers if answer.result.boxes for label in answer.result.boxes.labels})
    foreign = [name for name in seen if name not in (names if answered is None else answered)]
    label_problem = labels is not None and labels != names
    shown = lambda found: ", ".join(untrusted(name, 40) for name in found[:8]) + (", ..." if len(found) > 8 else "")  # noqa: E731
    numbers = f"node's classes: {shown(seen) or 'none'}; model's: {shown(names)}"
    if labels is not None:
        numbers += f"; node's labels topic: {shown(labels) or 'none'}"
    if not foreign and not label_problem:
        return Check("class names", True, numbers)
    cause = (
        f"the node names classes the model {shown_path(model.name)} does not have ({shown(foreign or labels)}) "
        "— a different model: check the node's model_path (and labels_path) against the model you validated"
    )
    return Check("class names", False, numbers, cause)


def output_check(
    spec: Family,
    frames: list[FrameCheck],
    paired: dict[int, Answer],
    expected: list[FrameResult],
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


def track_check(
    frames: list[FrameCheck], paired: dict[int, Answer], expected: list[FrameResult], answered: Check, output: Check
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
        node, model, pairs = match(paired[check.frame].result, expected[check.frame])
        for i, j in pairs:
            compared += 1
            mine, theirs = _track_text(node.tracks, i), _track_text(model.tracks, j)
            if mine == theirs:
                same += 1
            elif first is None:
                first = (check.frame, mine, theirs)
    seen = {track for result in expected if result.boxes is not None for track in _tracks(result)}
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


def _track_text(tracks: np.ndarray | None, row: int) -> str:
    """A compared row's track ID as its Detection2D.id reads ("": no confirmed track)."""
    return "" if tracks is None else id_text(int(tracks[row]))


def _tracks(result: FrameResult) -> set[int]:
    """The confirmed track IDs of a result's detections."""
    tracks = result.boxes.track_ids
    return set() if tracks is None else {int(track) for track in tracks if track >= 0}


def latency_check(latencies: list[float], p50: float, p99: float, budget: float, rate: float) -> Check:
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


SILENT = "frames played"  # the one check of a camera whose source holds no frames (besides its answers' stamps)


def silent_check() -> Check:
    numbers = "none: the camera is silent (its source holds no frames), nothing to compare"
    return Check(SILENT, True, numbers, compared=False)


@dataclass
class Seen:
    """Per camera: the node's answers on its topics, its frames' stamps and frame_ids."""

    answers: dict[str, list[Answer]]
    stamps: dict[str, list[tuple[int, int]]]
    frame_ids: dict[str, list[str]]


def name_crossing(name: str, checks: list[Check], seen: Seen, paired, expected, tolerance: Tolerance) -> None:
    """Where camera ``name``'s answers are another camera's, the failed check's cause names that camera (the node's
    outputs are crossed), in place: its answers carry other cameras' frames' stamps, or its frames are answered on
    other cameras' topics; where the cameras' frames share their stamps, its answers carry another camera's
    frame_id, or they are what the model offline gives for another camera's frame of the same stamp (``paired``:
    each camera's answer per frame, ``expected``: the model's result per frame). Track IDs that differ also name a
    tracker shared between cameras."""
    answers, stamps = seen.answers, {camera: set(frames) for camera, frames in seen.stamps.items()}
    others = [camera for camera in stamps if camera != name]
    theirs = {other: stamps[other] - stamps[name] for other in others}  # stamps of the other's frames alone
    mine = {other: stamps[name] - stamps[other] for other in others}  # stamps of this camera's frames alone
    carried = {other: sum(answer.stamp in theirs[other] for answer in answers[name]) for other in others}
    elsewhere = {other: sum(answer.stamp in mine[other] for answer in answers[other]) for other in others}
    hint = (
        "outputs crossed: check the node's topic remappings, and that each camera has its own topics and its own "
        "stream state (tracker, TrackNet window)"
    )
    for index, check in enumerate(checks):
        if check.passed:
            continue
        if check.name.startswith("header stamps") and any(carried.values()):
            shown = ", ".join(f"{count} of camera {other}'s" for other, count in carried.items() if count)
            cause = f"its answers carry other cameras' frames' stamps ({shown}) — {hint}"
        elif check.name == "every frame answered" and any(elsewhere.values()):
            shown = ", ".join(f"{count} on camera {other}'s topic" for other, count in elsewhere.items() if count)
            cause = f"its frames were answered on other cameras' topics ({shown}) — {hint}"
        elif check.name.startswith("header stamps") and (other := _frame_id_of_other(name, seen)):
            cause = f"its answers carry camera {other}'s frame_id — {hint}"
        elif check.name.endswith("within tolerance") and (
            other := _answers_of_other(name, paired, expected, seen, tolerance)
        ):
            cause = (
                f"its answers are what the model gives for camera {other}'s frames of the same stamps, not for its "
                f"own — {hint}"
            )
        elif check.name == "track IDs":  # one camera's tracks carried into another's frames: the IDs alone differ
            cause = (
                f"{check.cause}; or, several cameras through one node, cameras sharing one tracker: each needs its own"
            )
        else:
            continue
        checks[index] = Check(check.name, False, check.numbers, cause, check.compared)


def _frame_id_of_other(name: str, seen: Seen) -> str | None:
    """The camera whose frames' frame_id ``name``'s answers carry (none of its own frames has it), if any."""
    own = set(seen.frame_ids[name])
    carried = {answer.frame_id for answer in seen.answers[name]} - own
    return next((other for other in seen.frame_ids if other != name and carried & set(seen.frame_ids[other])), None)


def _answers_of_other(name: str, paired, expected, seen: Seen, tolerance: Tolerance) -> str | None:
    """The camera whose frames of the same stamps the model offline answers as the node answered ``name``'s
    frames, on every frame where the node's answer is not the model's for ``name``'s own frame; None if none."""
    wrong = [
        index
        for index, answer in paired[name].items()
        if not compare(index, answer, expected[name][index]).within(tolerance)
    ]
    for other, stamps in seen.stamps.items():
        frame_of = {stamp: index for index, stamp in enumerate(stamps)}
        shared = [
            (index, frame_of[seen.stamps[name][index]]) for index in wrong if seen.stamps[name][index] in frame_of
        ]
        if other != name and shared and len(shared) == len(wrong):
            if all(compare(i, paired[name][i], expected[other][j]).within(tolerance) for i, j in shared):
                return other
    return None
