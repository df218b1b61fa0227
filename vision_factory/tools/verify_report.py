"""verify's report: verify.json, verify.md and pictures of the frame of the largest disagreement (the model's
answers solid, the node's dashed; on a failure side by side: tools/verify_pictures.py), written into --out (an
earlier verification there refused unless --force); with several cameras, each camera's in OUT/<camera>/ and the
verdict of all (``CamerasVerifyReport``) in OUT."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..families.family import Family
from ..files import check_folder, output_folder, write_text
from ..text import markdown_cell, shown_path, untrusted
from .verify_frames import FrameCheck, Tolerance
from .verify_pictures import SIDE_BY_SIDE, WORST_PICTURE, largest_disagreement, write_pictures


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


REPORT_FILES = ("verify.json", "verify.md", WORST_PICTURE, SIDE_BY_SIDE)
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
    worst = largest_disagreement(report.frames)
    listed = [check for check in worst if not check.within(report.tolerance) or not check.answered][:WORST_LISTED]
    listed = listed or worst[:1]
    if worst:
        frame = worst[0].frame
        node = paired[frame].result if frame in paired and paired[frame] is not None else None
        report.files |= write_pictures(out_dir, images[frame], node, expected[frame], frame, not report.passed)
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
        lines += ["", f"![largest disagreement: model solid, node dashed]({Path(report.files['picture']).name})"]
    if "side by side" in report.files:
        lines += ["", f"![model and node side by side]({Path(report.files['side by side']).name})"]
    lines += ["", f"Node log: `{report.node_log}`", ""]
    return "\n".join(lines)


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
