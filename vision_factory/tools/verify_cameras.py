"""vision-factory verify --camera NAME=SOURCE ...: one node serving several cameras gives, camera by camera, the
model's own answers.

The cameras' frames play through ONE node serving them all (its ``cameras`` parameter), merged in their recorded
time order as ``replay --camera`` plays them (tools/replay_cameras.py, as fast as the node keeps up, nothing dropped,
each camera's first frame sent once before as a warm-up). The same model runs offline on each camera's frames alone,
in order, with that camera's own stream state (a fresh tracker, TrackNet window per camera: the result kind's
verify's offline run starts a fresh stream on each call), and each camera's answers are checked as verify checks one
camera's (tools/verify.py's ``compare_answers``). A camera whose answers carry another camera's frames' stamps, or
whose frames are answered on another camera's topics, is named so: the outputs are crossed. A silent camera (its
source holds no frames) is reported, nothing compared; answers on its topics fail it. Each camera's report is
written to OUT/<camera>/ (verify.json, verify.md, worst_frame.png), the verdict of all to OUT/verify.json and
OUT/verify.md, the node's log and answers under OUT/node/.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..cameras import camera_names
from ..files import write_text
from ..runtime.backends import load_target
from ..text import markdown_cell, shown_path, untrusted
from .bags import header_stamp, image_topic, read_framed, read_messages
from .commands import UsageError
from .replay_cameras import CameraSource, replay_cameras
from .replay_outputs import MASKS_TOPIC
from .replay_params import checked_overrides, params_file_values
from .verify import (
    Offline,
    as_published,
    compare_answers,
    label_names,
    node_answers,
    offline_parameters,
    offline_runner,
    verified_family,
    with_masks,
)
from .verify_checks import node_counts
from .verify_frames import Answer, Tolerance, compare, tolerance_for
from .verify_report import Check, VerifyReport, check_lines, clear, write

NOTHING_COMPARED = "no camera's source holds a frame: nothing was compared (are these the cameras' bags and topics?)"
SILENT = "frames played"  # the one check of a camera whose source holds no frames (besides its answers' stamps)


@dataclass
class CamerasVerifyReport:
    passed: bool
    cameras: dict[str, VerifyReport]  # per camera, in the order given
    node_log: str
    files: dict[str, str] = field(default_factory=dict)

    def summary(self, name: str) -> dict:
        """One camera's figures: its frames, those answered within the tolerance (matched), the largest difference."""
        report = self.cameras[name]
        return {
            "verdict": "pass" if report.passed else "fail",
            "frames": len(report.frames),
            "matched": sum(check.answered and check.within(report.tolerance) for check in report.frames),
            "worst_difference_px": max((check.deviation_px for check in report.frames), default=0.0),
            "unpaired": sum(check.unpaired for check in report.frames),
        }

    def failures(self) -> list[str]:
        failed = [f"camera {name}: {failure}" for name, report in self.cameras.items() for failure in report.failures()]
        if not any(report.frames for report in self.cameras.values()):
            failed.append(NOTHING_COMPARED)
        return failed

    def text(self) -> str:
        lines = [f"verify: {'PASS' if self.passed else 'FAIL'} ({len(self.cameras)} cameras through one node)"]
        if not any(report.frames for report in self.cameras.values()):
            lines.append(f"  {NOTHING_COMPARED}")
        for name, report in self.cameras.items():
            figures = self.summary(name)
            if figures["frames"]:
                shown = (
                    f"{figures['frames']} frames, {figures['matched']} matched, worst difference "
                    f"{figures['worst_difference_px']:.4g} px, {figures['unpaired']} unpaired"
                )
            else:
                shown = "silent (no frames)"
            lines.append(f"camera {name}: {'PASS' if report.passed else 'FAIL'}: {shown}")
            lines += check_lines(report.checks, "    ")
        counts = next(iter(self.cameras.values())).counts if self.cameras else None
        if counts is not None:
            lines.append(f"node's counts, all cameras (dropped {counts.dropped}, skipped {counts.skipped}) from "
                         f"{counts.source}")  # fmt: skip
        lines += [f"{name}: {shown_path(path)}" for name, path in self.files.items()]
        return "\n".join(lines)


def verify_cameras(
    cameras: Sequence[CameraSource],
    model_type: str,
    model: str | Path,
    out_dir: str | Path,
    params: Mapping[str, str] | None = None,
    executable: list[str] | None = None,
    backend: str = "onnx:cpu",
    tolerance_px: float | None = None,
    force: bool = False,
    params_file: str | Path | None = None,
) -> CamerasVerifyReport:
    """Play ``cameras`` (replay_cameras.parse_cameras's) through one ``model_type`` node serving them all (this
    package's, or ``executable``) and compare each camera's answers with ``model`` run offline on ``backend`` on
    that camera's frames. ``params`` and ``params_file`` as verify's."""
    spec = verified_family(model_type)
    params = dict(params or {})
    given = checked_overrides(model_type, params)
    if "cameras" in given:
        raise UsageError("--camera names the node's cameras: give no -p cameras", "--param")
    offline_values = offline_parameters(spec, Path(model), given, params_file_values(params_file))
    tolerance = tolerance_for(backend)
    if tolerance_px is not None:
        tolerance = Tolerance(tolerance_px, tolerance.score)
    names = camera_names([camera.name for camera in cameras])
    out_dir = Path(out_dir)
    clear(out_dir, force, names)
    framed, stamps = {}, {}
    for camera in cameras:
        topic, _ = image_topic(camera.bag, camera.topic)
        framed[camera.name] = list(read_framed(camera.bag, topic))
        stamps[camera.name] = [
            header_stamp(message, camera.bag, index) for index, message in enumerate(read_messages(camera.bag, topic))
        ]
    tracked = bool(offline_values.get("tracking"))
    load = lambda path: load_target(backend, Path(path))  # noqa: E731
    run_offline, model_names, keypoint_names = offline_runner(spec, offline_values, load)
    # Each camera's frames alone, in order, from a fresh stream: its own tracker, its own window.
    expected = {name: run_offline([frame for _, frame in framed[name]]) for name in names}
    masked = any(found.masks is not None and any(found.masks.masks) for one in expected.values() for found in one)
    expected = {name: [as_published(found) for found in results] for name, results in expected.items()}

    result = replay_cameras(
        cameras,
        out_dir / "node",
        model_type,
        {"model_path": str(model), **params},
        executable=executable,
        force=force,
        params_file=params_file,
        warm_up=True,
        also=MASKS_TOPIC if masked else None,
    )
    main = spec.main_output(offline_values, "verify")
    latched = dict(spec.result.latched)
    answers = {name: node_answers(result.received[name][main], spec, tracked) for name in names}
    log = Path(result.node_log).read_text(errors="replace") if Path(result.node_log).is_file() else ""
    counts = node_counts({}, log)  # the node's closing line: its counts over all cameras
    compared = {}
    for name in names:
        if masked:
            with_masks(answers[name], [data for _, data in result.received[name]["masks"]])
        labels = [data for _, data in result.received[name].get("labels", [])]
        node_names = label_names(labels, latched) if latched else None
        offline = Offline(run_offline, expected[name], model_names, keypoint_names, Path(model), tracked, masked)
        checks, frame_checks, paired = compare_answers(
            spec, answers[name], stamps[name], framed[name], offline, node_names, tolerance, counts, params
        )
        if not framed[name]:
            checks = [_silent(), checks[1]]  # nothing to compare; but nothing may be answered on its topics either
        compared[name] = checks, frame_checks, paired
    seen = Seen(answers, stamps, {camera: [frame_id for frame_id, _ in framed[camera]] for camera in names})
    reports = {}
    for name, (checks, frame_checks, paired) in compared.items():
        _name_crossing(
            name, checks, seen, {camera: found[2] for camera, found in compared.items()}, expected, tolerance
        )
        nan = float("nan")  # played as fast as the node keeps up: no camera's pipeline latency is measured
        report = VerifyReport(
            all(check.passed for check in checks), checks, frame_checks, tolerance, nan, nan, result.node_log, counts
        )
        write(report, out_dir / name, spec, [frame for _, frame in framed[name]], paired, expected[name])
        reports[name] = report
    passed = all(report.passed for report in reports.values()) and any(framed.values())
    verdict = CamerasVerifyReport(passed, reports, result.node_log)
    _write(verdict, out_dir, spec.name)
    return verdict


def _silent() -> Check:
    numbers = "none: the camera is silent (its source holds no frames), nothing to compare"
    return Check(SILENT, True, numbers, compared=False)


@dataclass
class Seen:
    """Per camera: the node's answers on its topics, its frames' stamps and frame_ids."""

    answers: dict[str, list[Answer]]
    stamps: dict[str, list[tuple[int, int]]]
    frame_ids: dict[str, list[str]]


def _name_crossing(name: str, checks: list[Check], seen: Seen, paired, expected, tolerance: Tolerance) -> None:
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


def _write(verdict: CamerasVerifyReport, out_dir: Path, family: str) -> None:
    """OUT/verify.json and OUT/verify.md: the verdict and each camera's figures; each camera's report beside."""
    cameras = {name: {**verdict.summary(name), "report": str(out_dir / name / "verify.md")} for name in verdict.cameras}
    data = {"verdict": "pass" if verdict.passed else "fail", "cameras": cameras, "node_log": verdict.node_log}
    json_path, md_path = out_dir / "verify.json", out_dir / "verify.md"
    write_text(json_path, json.dumps(data, indent=2))
    lines = [
        f"# vision-factory verify: {family}, {len(cameras)} cameras through one node — "
        f"{'PASS' if verdict.passed else 'FAIL'}",
        "",
        "| camera | result | frames | matched | worst difference (px) | unpaired |",
        "|---|---|---|---|---|---|",
    ]
    for name, figures in cameras.items():
        result = "pass" if figures["verdict"] == "pass" else "**FAIL**"
        frames = figures["frames"] or "silent"
        lines.append(
            f"| [{markdown_cell(untrusted(name, 80))}]({name}/verify.md) | {result} | {frames} | {figures['matched']} "
            f"| {figures['worst_difference_px']:.4g} | {figures['unpaired']} |"
        )
    causes = [f"- {markdown_cell(failure)}" for failure in verdict.failures()]
    if causes:
        lines += ["", "## Likely causes", "", *causes]
    lines += ["", f"Node log: `{verdict.node_log}`", ""]
    write_text(md_path, "\n".join(lines))
    verdict.files = {"report": str(md_path), "json": str(json_path)}
