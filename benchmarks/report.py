"""What the benchmark scripts share: the machine's description and plain-text tables."""

from __future__ import annotations

import importlib.metadata
import os
import platform

import numpy as np


def environment(threads: int) -> dict:
    """Versions, cores and load: what a reader needs to compare two runs."""
    import cv2
    import onnxruntime

    try:
        openvino = importlib.metadata.version("openvino")
    except importlib.metadata.PackageNotFoundError:
        openvino = None
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "load_avg_1min": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "onnxruntime": onnxruntime.__version__,
        "onnxruntime_device": onnxruntime.get_device(),
        "openvino": openvino,
        "opencv": cv2.__version__,
        "opencv_threads": cv2.getNumThreads(),
        "numpy": np.__version__,
        "intra_op_threads": threads,
    }


def fmt(value, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        return "nan" if np.isnan(value) else f"{value:.{digits}f}"
    return str(value)


def table(title: str, header: list[str], rows: list[list]) -> str:
    """A title, the header, a rule, then the rows: first column left-aligned, the others right."""
    cells = [header] + [[fmt(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = [title, "  ".join(h.ljust(w) for h, w in zip(header, widths)), "  ".join("-" * w for w in widths)]
    lines += [
        "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))) for row in cells[1:]
    ]
    return "\n".join(lines)
