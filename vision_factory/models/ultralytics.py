"""What Ultralytics writes into an exported model's metadata, read without running code."""

from __future__ import annotations

import ast
from collections.abc import Mapping

DEFAULT_IMGSZ = 640  # Ultralytics' default input size


def metadata_literal(metadata: Mapping[str, str], key: str) -> object:
    """A Python literal Ultralytics wrote into the model's metadata, parsed without running code; None if absent."""
    text = metadata.get(key)
    if text is None:
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def class_names(metadata: Mapping[str, str]) -> list[str]:
    """Ultralytics' ``names``, "{0: 'person', 1: 'bicycle'}", as a list in class order; [] when absent."""
    names = metadata_literal(metadata, "names")
    if isinstance(names, dict) and all(isinstance(key, int) for key in names):
        return [str(names[key]) for key in sorted(names)]
    if isinstance(names, list | tuple):
        return [str(name) for name in names]
    return []


def recorded_imgsz(metadata: Mapping[str, str]) -> int:
    """The input size the model was exported for (the larger side of ``imgsz``); DEFAULT_IMGSZ when not recorded."""
    recorded = metadata_literal(metadata, "imgsz")
    sizes = [v for v in (recorded if isinstance(recorded, list | tuple) else [recorded]) if isinstance(v, int)]
    return max(sizes, default=DEFAULT_IMGSZ)


def keypoint_shape(metadata: Mapping[str, str]) -> tuple[int, int] | None:
    """``kpt_shape`` (keypoints, values per keypoint) as Ultralytics records it for pose models; None if absent."""
    shape = metadata_literal(metadata, "kpt_shape")
    if isinstance(shape, list | tuple) and len(shape) == 2 and all(isinstance(n, int) for n in shape):
        return shape[0], shape[1]
    return None
