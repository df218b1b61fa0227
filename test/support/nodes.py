"""What tests of running nodes share: executable names, model outputs, diagnostics."""

from __future__ import annotations

import numpy as np
from diagnostic_msgs.msg import DiagnosticStatus

from vision_factory import streaming

YOLO = "vision_factory.yolo_onnx_node"


def _yolo_output() -> np.ndarray:
    output = np.zeros((1, 6, 100), np.float32)  # 4 box + 2 classes, 100 anchors
    output[0, :, 0] = [100, 100, 50, 40, 0.1, 0.9]
    return output


def _latest(diagnostics: list, name: str) -> DiagnosticStatus | None:
    statuses = [status for array in diagnostics for status in array.status if status.name == name]
    return statuses[-1] if statuses else None


def closing_counts(log: str) -> dict[str, int]:
    """The node's closing counts line's numbers (vision_factory.streaming.closing_counts), asserted to be there."""
    counts = streaming.closing_counts(log)
    assert counts is not None, log
    return counts
