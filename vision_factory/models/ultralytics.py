"""What Ultralytics writes into an exported model's metadata, read without running code."""

from __future__ import annotations

import ast
from collections.abc import Mapping

from ..text import untrusted
from .bounds import KEYPOINT_DIMS, MAX_CLASSES, MAX_KEYPOINTS, check_count, check_input_size

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
    """Ultralytics' ``names``, "{0: 'person', 1: 'bicycle'}", as a list in class order; [] when absent.
    More than MAX_CLASSES names is a BoundError."""
    names = metadata_literal(metadata, "names")
    if isinstance(names, dict | list | tuple):
        check_count("metadata names: the number of class names", len(names), MAX_CLASSES, minimum=0)
    if isinstance(names, dict) and all(isinstance(key, int) for key in names):
        return [str(names[key]) for key in sorted(names)]
    if isinstance(names, list | tuple):
        return [str(name) for name in names]
    return []


def recorded_imgsz(metadata: Mapping[str, str]) -> int:
    """The input size the model was exported for (the larger side of ``imgsz``); DEFAULT_IMGSZ when not recorded.
    A square input of that side beyond bounds.MAX_INPUT_PIXELS is a BoundError, raised before it is allocated."""
    recorded = metadata_literal(metadata, "imgsz")
    sizes = [v for v in (recorded if isinstance(recorded, list | tuple) else [recorded]) if isinstance(v, int)]
    size = max(sizes, default=DEFAULT_IMGSZ)
    key = f"metadata imgsz {untrusted(metadata.get('imgsz'), 40)}: the input"
    check_input_size(key, size, size, "give the input size yourself (predict --imgsz, the node's image_size)")
    return size


def keypoint_shape(metadata: Mapping[str, str]) -> tuple[int, int] | None:
    """``kpt_shape`` (keypoints, values per keypoint) as Ultralytics records it for pose models; None if absent.
    A ``kpt_shape`` that is not [keypoints, 2 or 3], or of more than MAX_KEYPOINTS keypoints, is a ValueError."""
    if "kpt_shape" not in metadata:
        return None
    shape = metadata_literal(metadata, "kpt_shape")
    if not (isinstance(shape, list | tuple) and len(shape) == 2 and all(type(n) is int for n in shape)):
        raise ValueError(
            f"metadata kpt_shape {untrusted(metadata['kpt_shape'], 40)} is not [keypoints, values per keypoint] "
            f"(e.g. [17, 3]): the model file's metadata is damaged; fix or remove its kpt_shape"
        )
    keypoints, dims = shape
    check_count("metadata kpt_shape keypoints", keypoints, MAX_KEYPOINTS)
    if dims not in KEYPOINT_DIMS:
        raise ValueError(
            f"metadata kpt_shape {untrusted(metadata['kpt_shape'], 40)} has {dims} values per keypoint; "
            f"Ultralytics writes {' or '.join(map(str, KEYPOINT_DIMS))} (x, y and visibility)"
        )
    return keypoints, dims


# The Ultralytics tasks whose exports run here, and the family each runs in (a rule recognises them by this).
TASK_FAMILIES = {"detect": "yolo", "segment": "yolo", "obb": "yolo", "pose": "yolo_pose", "classify": "yolo_cls"}


def unsupported_task(metadata: Mapping[str, str]) -> str | None:
    """Why a model whose Ultralytics metadata names a task none of the families runs is refused, one line (the
    same from the node, predict, inspect, generate and quantize); None when it names none or a supported one."""
    task = metadata.get("task")
    if task is None or task in TASK_FAMILIES:
        return None
    runs = ", ".join(f"{name} ({family})" for name, family in TASK_FAMILIES.items())
    return (
        f"Ultralytics metadata task {untrusted(repr(task), 40)} is not supported: Ultralytics exports of task {runs} "
        "run here; export the model for one of those tasks"
    )


def head_channels(metadata: Mapping[str, str], masks: int = 0) -> int | None:
    """The channels of a raw YOLO head [1, C, N] as its Ultralytics metadata gives them (a ``dynamic=True`` export
    without onnxslim leaves C symbolic): 4 box values + one per class name, + 1 angle (obb), + ``masks`` mask
    coefficients (segment), + keypoints x values (pose); None when the metadata names no task of a raw head or no
    class."""
    task, names = metadata.get("task"), class_names(metadata)
    if task not in ("detect", "segment", "obb", "pose") or not names:
        return None
    extra = {"obb": 1, "segment": masks}.get(task, 0)
    if task == "pose":
        keypoints, dims = keypoint_shape(metadata) or (17, 3)
        extra = keypoints * dims
    return 4 + len(names) + extra
