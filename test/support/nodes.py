"""What tests of running nodes share: executable names, model outputs, diagnostics."""

from __future__ import annotations

import numpy as np
from diagnostic_msgs.msg import DiagnosticStatus

YOLO = "vision_factory.yolo_onnx_node"


def _yolo_output() -> np.ndarray:
    output = np.zeros((1, 6, 100), np.float32)  # 4 box + 2 classes, 100 anchors
    output[0, :, 0] = [100, 100, 50, 40, 0.1, 0.9]
    return output


def _latest(diagnostics: list, name: str) -> DiagnosticStatus | None:
    statuses = [status for array in diagnostics for status in array.status if status.name == name]
    return statuses[-1] if statuses else None
