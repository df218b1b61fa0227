"""verify's report: verify.json, verify.md and a picture of the worst frame (the node's answers red, the model's
green), written into --out (an earlier verification there refused unless --force); with several cameras, each
camera's in OUT/<camera>/ and the verdict of all (``CamerasVerifyReport``) in OUT."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..families.family import Family
from ..files import check_folder, output_folder, staged, write_text
from ..results.boxes import Boxes
from ..results.frame import FrameResult
from ..text import markdown_cell, shown_path, untrusted
from .verify_frames import FrameCheck, Tolerance


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
        lines += [f"{name}: {shown_path(path)}" for name, path in self.files.items()]
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


REPORT_FILES = ("verify.json", "verify.md", "worst_frame.png")
WORST_LISTED = 5


def clear(out_dir: Path, force: bool, cameras: Iterable[str] = ()) -> None:
    """Refuse (or with ``force`` remove) an earlier verification's reports in ``out_dir`` and in each of
    ``cameras``' folders below it, then make those folders and OUT/node (the replay's): a link or a file at any
    folder below ``out_dir`` is refused first, and none is followed (files.check_folder, output_folder)."""
    folders = ["", *cameras, "node"]
    for below in folders:
        check_folder(out_dir, below, "--out")
    reports = [Path(below, name) for below in folders[:-1] for name in REPORT_FILES]
    earlier = [path for path in reports if (out_dir / path).exists() or (out_dir / path).is_symlink()]
    if earlier and not force:
        raise FileExistsError(
            f"{shown_path(out_dir)} holds an earlier verification ({', '.join(map(str, earlier))}): choose another "
            "--out, or --force"
        )
    for path in earlier:
        (out_dir / path).unlink()
    for below in folders:
        output_folder(out_dir, below, "--out")


def write(report: VerifyReport, out_dir: Path, spec: Family, images, paired, expected) -> None:
    worst = sorted(report.frames, key=lambda check: (check.severity(), check.score_deviation), reverse=True)
    listed = [check for check in worst if not check.within(report.tolerance) or not check.answered][:WORST_LISTED]
    listed = listed or worst[:1]
    if worst:
        frame = worst[0].frame
        node = paired[frame].result if frame in paired else None
        report.files["picture"] = str(draw(out_dir / "worst_frame.png", images[frame], node, expected[frame]))
    data = {
        "verdict": "pass" if report.passed else "fail",
        "checks": [asdict(check) for check in report.checks],
        "tolerance": asdict(report.tolerance),
        "latency_ms": {"p50": report.latency_ms_p50, "p99": report.latency_ms_p99},
        "node_counts": asdict(report.counts),
        "worst_frames": [asdict(check) for check in listed],
        "frames": [asdict(check) for check in report.frames],
        "node_log": report.node_log,
    }
    json_path, md_path = out_dir / "verify.json", out_dir / "verify.md"
    write_text(json_path, json.dumps(data, indent=2, default=_number))
    write_text(md_path, markdown(report, spec, listed))
    report.files = {"report": str(md_path), "json": str(json_path), **report.files}


def _number(value: Any) -> Any:
    return float(value) if isinstance(value, np.floating | np.integer) else str(value)


def markdown(report: VerifyReport, spec: Family, listed: Iterable[FrameCheck]) -> str:
    lines = [
        f"# vision-factory verify: {spec.name} — {'PASS' if report.passed else 'FAIL'}",
        "",
        "| check | result | numbers |",
        "|---|---|---|",
    ]
    verdict = lambda c: ("pass" if c.passed else "**FAIL**") if c.compared else "not compared"  # noqa: E731
    lines += [f"| {markdown_cell(c.name)} | {verdict(c)} | {markdown_cell(c.numbers)} |" for c in report.checks]
    latency = (
        f"p50 {report.latency_ms_p50:.1f} ms, p99 {report.latency_ms_p99:.1f} ms"
        if report.latency_ms_p99 == report.latency_ms_p99  # NaN: not measured (verify --camera plays as fast as it can)
        else "not measured"
    )
    lines += [
        "",
        f"Tolerance: {report.tolerance.px:g} px, score {report.tolerance.score:g}. Pipeline latency (answer "
        f"received minus the image's stamp): {latency}.",
        "",
        f"The node's own counts: dropped {report.counts.dropped}, skipped {report.counts.skipped}, from "
        f"{report.counts.source}.",
    ]
    causes = [f"- **{c.name}**: {c.cause}" for c in report.checks if not c.passed]
    if causes:
        lines += ["", "## Likely causes", "", *causes]
    lines += [
        "",
        "## Worst frames",
        "",
        "| frame | answered | largest difference (px) | score difference | unpaired | node / model answers |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {c.frame} | {'yes' if c.answered else 'no'} | {c.deviation_px:.4g} | {c.score_deviation:.4g} | "
        f"{c.unpaired} | {c.node_count} / {c.model_count} |"
        for c in listed
    ]
    if "picture" in report.files:
        lines += ["", f"![worst frame: node red, model green]({Path(report.files['picture']).name})"]
    lines += ["", f"Node log: `{report.node_log}`", ""]
    return "\n".join(lines)


NODE_COLOUR, MODEL_COLOUR = (40, 40, 255), (60, 200, 60)  # BGR: the node's answers red, the model's green


def draw(path: Path, image: np.ndarray, node: FrameResult | None, model: FrameResult) -> Path:
    """The frame (enlarged to at least 640 px wide) with the model's answers (green, thick) and the node's (red,
    thin), a legend below it: boxes with their class, score and keypoints, the ball (a map's values are not
    drawn)."""
    import cv2

    scale = max(1.0, 640 / image.shape[1])
    canvas = image if image.ndim == 3 else cv2.cvtColor(image, cv2.COLOR_GRAY2BGR)
    canvas = cv2.resize(canvas, None, fx=scale, fy=scale, interpolation=cv2.INTER_NEAREST)
    canvas = cv2.copyMakeBorder(canvas, 0, 28, 0, 0, cv2.BORDER_CONSTANT, value=(255, 255, 255))
    for result, colour, thickness in ((model, MODEL_COLOUR, 3), (node, NODE_COLOUR, 1)):
        if result is None:
            continue
        if result.ball is not None and result.ball.visible:
            cv2.drawMarker(
                canvas, _point((result.ball.x * scale, result.ball.y * scale)), colour, cv2.MARKER_CROSS, 16, 2
            )
        boxes = result.boxes if result.boxes is not None else Boxes.empty()
        for row, (box, score, label) in enumerate(zip(boxes.xyxy, boxes.scores, boxes.labels)):
            x1, y1, x2, y2 = (int(round(v)) for v in box * scale)
            cv2.rectangle(canvas, (x1, y1), (x2, y2), colour, thickness)
            top = y1 - 4 if colour == NODE_COLOUR else y2 + 14  # the node's labels above, the model's below
            cv2.putText(canvas, f"{label} {score:.2f}", (x1, max(12, top)), 0, 0.45, colour, 1)
            points = result.keypoints.points[row, :, :2] * scale if result.keypoints is not None else ()
            for x, y in points:
                cv2.circle(canvas, _point((x, y)), 3, colour, -1)
    legend = canvas.shape[0] - 9
    cv2.putText(canvas, "node", (8, legend), 0, 0.55, NODE_COLOUR, 2, cv2.LINE_AA)
    cv2.putText(canvas, "model offline", (80, legend), 0, 0.55, MODEL_COLOUR, 2, cv2.LINE_AA)
    with staged(path) as fresh:
        cv2.imwrite(str(fresh), canvas)
    return path


def _point(xy) -> tuple[int, int]:
    return int(round(float(xy[0]))), int(round(float(xy[1])))


NOTHING_COMPARED = "no camera's source holds a frame: nothing was compared (are these the cameras' bags and topics?)"


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


def write_cameras(verdict: CamerasVerifyReport, out_dir: Path, family: str) -> None:
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
