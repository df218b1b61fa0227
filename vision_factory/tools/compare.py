"""Two configurations' results side by side: metric differences with verdicts, output differences, the report."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..files import output_folder, write_text
from ..text import shown_path

VERDICTS = ((0.001, "excellent"), (0.01, "good"))
# Every metric compared is a score (AP, AR, F1, accuracy, precision, recall): B - A above 0 is B doing better. A rise
# of 0.01 or more is "better", a drop of as much a "warning": only a loss warns.
BETTER, WORSE = "better", "warning"


def verdict(difference: float) -> str:
    """below 0.001 either way excellent, below 0.01 good; beyond, better (B higher) or warning (B lower)."""
    limited = next((name for limit, name in VERDICTS if abs(difference) < limit), None)
    return limited or (BETTER if difference > 0 else WORSE)


def metric_differences(a: Mapping[str, float], b: Mapping[str, float]) -> dict[str, Any]:
    """Per metric: both values, B - A and its verdict; and the overall verdict, naming the metrics B lost 0.01 or more
    of (a warning), else those it gained as much on (better)."""
    rows = {name: {"a": a[name], "b": b[name], "difference": b[name] - a[name]} for name in a}
    for row in rows.values():
        row["verdict"] = verdict(row["difference"])
    named = {kind: [name for name, row in rows.items() if row["verdict"] == kind] for kind in (WORSE, BETTER)}
    if named[WORSE]:
        overall = f"{WORSE}: {', '.join(named[WORSE])} lower by 0.01 or more"
        if named[BETTER]:
            overall += f" ({', '.join(named[BETTER])} higher)"
    elif named[BETTER]:
        overall = f"{BETTER}: {', '.join(named[BETTER])} higher by 0.01 or more"
    else:
        overall = "good" if any(row["verdict"] == "good" for row in rows.values()) else "excellent"
    return {"metrics": rows, "verdict": overall}


def configuration_name(model: Path, target: str) -> str:
    """One (model, target) configuration in file names, e.g. yolov8n-openvino-CPU."""
    return f"{Path(model).stem}-{target.replace(':', '-')}"


def save_comparison(
    configurations: Sequence[tuple[Path, str]],
    runs_on: Sequence[str],
    over: tuple[str, Path],
    differences: Mapping[str, Any],
    out_dir: Path,
) -> tuple[dict[str, Any], Path]:
    """The report of configurations A and B run over ``over`` (("source" or "data", its path)), saved as
    OUT/compare_<over>_<A>_vs_<B>.json; the report and its path."""
    (model_a, target_a), (model_b, target_b) = configurations
    names = [configuration_name(model, target) for model, target in configurations]
    report = {
        over[0]: str(over[1]),
        "a": {"model": str(model_a), "backend": target_a, "runs_on": runs_on[0]},
        "b": {"model": str(model_b), "backend": target_b, "runs_on": runs_on[1]},
        **differences,
    }
    path = output_folder(out_dir, option="--out") / f"compare_{Path(over[1]).stem}_{names[0]}_vs_{names[1]}.json"
    write_text(path, json.dumps(report, indent=2) + "\n", [model_a, model_b, over[1]])
    return report, path


def describe_comparison(report: Mapping[str, Any], path: Path) -> str:
    """A saved comparison in a few lines: outputs, each metric with its verdict, the verdict, the file."""
    a, b = report["a"], report["b"]
    lines = [f"A {a['backend']} ({Path(a['model']).name}) vs B {b['backend']} ({Path(b['model']).name})"]
    lines.append("  outputs: " + ", ".join(f"{name} {value:.4g}" for name, value in report["outputs"].items()))
    for name, row in report.get("metrics", {}).items():
        lines.append(
            f"  {name}: A {row['a']:.4f}, B {row['b']:.4f}, difference {row['difference']:+.4f} ({row['verdict']})"
        )
    if "verdict" in report:
        lines.append(f"verdict: {report['verdict']}")
    lines.append(f"saved: {shown_path(path)}")
    return "\n".join(lines)
