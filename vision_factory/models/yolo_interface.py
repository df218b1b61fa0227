"""What an Ultralytics YOLO export's interface is, detection, oriented boxes, pose, instance segmentation and
classification, and the rules that recognise it: one image input [B, 3, H, W] and one output [1, 4 + classes
(+ keypoints x dims), N] (or transposed), told apart by the Ultralytics metadata (task, kpt_shape) where there is
some; a segmentation model has a second output, the mask prototypes [1, M, H/4, W/4], and M mask coefficients per
detection after its classes; an OBB model (task obb) one angle channel after its classes; a classifier (task
classify) one output [1, classes] of probabilities. A ``dynamic=True`` export without onnxslim leaves the head's
channel dimension symbolic: its metadata's task and names give it (models/ultralytics.py's ``head_channels``).

Three heads (``yolo_head``), each decoded as its exporting project does (models/yolo.py):
- raw (YOLOv8, YOLO11): [1, 4 + classes (+ keypoints x dims), N], class scores, then NMS;
- end-to-end (YOLO26, YOLOv10, any export with ``nms=True``: metadata ``end2end`` True or ``args`` nms True):
  [1, N, 6 (+ keypoints x dims, or + M mask coefficients beside the prototypes)] rows of x1, y1, x2, y2 (input
  pixels), score, class, already final: no NMS;
- objectness (YOLOv5's export.py): [1, N, 5 + classes] rows of cx, cy, w, h, objectness, class probabilities,
  score = objectness x probability, then NMS; told from a raw head by YOLOv5's metadata (names, no task) or,
  without names, by N = 3 anchors x the grid cells at strides 8, 16, 32.
"""

from __future__ import annotations

from ..runtime.runner import TensorInfo, shape_text
from .interface import Interface, Recognition, Rule, batch_ok, count_text, end2end, image_details, image_input
from .ultralytics import class_names, head_channels, keypoint_shape


def _yolo_output(model: Interface, masks: int = 0) -> tuple[int, bool] | None:
    """(channels, transposed) of a single output [1, C, N] or, transposed, [1, N, C], with N > C > 4; where
    neither dimension is fixed, [1, C, N] with C as the Ultralytics metadata gives it (``masks``: a segmentation
    model's mask coefficients)."""
    if len(model.outputs) != 1:
        return None
    shape = model.outputs[0].shape
    if len(shape) != 3 or not batch_ok(shape[0]):
        return None
    first, second = shape[1], shape[2]
    if not isinstance(first, int) and not isinstance(second, int):
        channels = head_channels(model.metadata, masks)
        return (channels, False) if channels is not None and channels > 4 else None
    if isinstance(first, int) and first > 4 and (not isinstance(second, int) or second > first):
        return first, False
    if isinstance(second, int) and second > 4 and (not isinstance(first, int) or first > second):
        return second, True
    return None


RAW, END2END, OBJECTNESS = "raw", "end2end", "objectness"  # the heads; details["head"] names the last two
NO_NMS = "no NMS is run on them (iou_threshold does not apply)"
YOLOV5_ANCHORS = 3  # anchors per grid cell of a YOLOv5 head (P3-P5 at strides 8, 16, 32)


def _grid_cells(image: TensorInfo | None) -> int | None:
    """Grid cells of a P3-P5 head at strides 8, 16, 32 on a fixed input; None when the input size is not fixed."""
    if image is None or not all(isinstance(d, int) for d in image.shape[2:]):
        return None
    height, width = image.shape[2:]
    return sum(-(-height // s) * -(-width // s) for s in (8, 16, 32))


def _objectness(model: Interface, output: tuple[int, bool] | None) -> bool:
    """Whether the single output is YOLOv5-style [1, N, 5 + classes]: no Ultralytics task in the metadata, rows
    (transposed layout), and either YOLOv5's names with channels = 5 + names, or no names and N = 3 x grid cells."""
    if output is None or not output[1] or "task" in model.metadata or output[0] < 6:
        return False
    names = class_names(model.metadata)
    if names:
        return output[0] == 5 + len(names)
    cells = _grid_cells(image_input(model))
    return cells is not None and model.outputs[0].shape[1] == YOLOV5_ANCHORS * cells


def _end2end_channels(model: Interface) -> int | None:
    """Channels C of a single end-to-end output [1, N, C] with C >= 6; None otherwise."""
    if len(model.outputs) != 1:
        return None
    shape = model.outputs[0].shape
    if len(shape) != 3 or not batch_ok(shape[0]) or not isinstance(shape[2], int) or shape[2] < 6:
        return None
    return shape[2]


def yolo_head(model: Interface) -> str:
    """Which head a YOLO model has: RAW, END2END or OBJECTNESS (see the module's docstring)."""
    if end2end(model.metadata):
        return END2END
    return OBJECTNESS if _objectness(model, _yolo_output(model)) else RAW


def _end2end_evidence(metadata: dict[str, str]) -> str:
    if metadata.get("end2end", "").lower() == "true":
        return "Ultralytics metadata end2end True"
    return "Ultralytics metadata args nms True"


def _end2end(model: Interface, pose: bool) -> Recognition | None:
    """An end-to-end detector ([1, N, 6]) or, with ``pose``, pose model ([1, N, 6 + keypoints x dims])."""
    metadata = model.metadata
    task = metadata.get("task")
    image, channels = image_input(model), _end2end_channels(model)
    kpt_shape = keypoint_shape(metadata)
    if pose != (task == "pose" or kpt_shape is not None) or (not pose and task not in (None, "detect")):
        return None
    if image is None or channels is None or (not pose and channels != 6):
        return None
    names = class_names(metadata)
    out = model.outputs[0]
    keypoints, keypoint_dims = kpt_shape if kpt_shape is not None else (None, None)
    what = "pose model" if pose else "detector"
    rows = "x1, y1, x2, y2, score, class" + (" and keypoints" if pose else "")
    reason = (
        f"{_end2end_evidence(metadata)} and one output {out.name} {shape_text(out.shape)} of rows {rows} in input "
        f"pixels: an end-to-end YOLO {what} with {count_text(len(names) or None, 'class', 'classes')}"
    )
    if pose:
        reason += f" and {count_text(keypoints, 'keypoint', 'keypoints')}"
        if keypoints is not None and channels != 6 + keypoints * keypoint_dims:
            reason += f", but the output has {channels} channels, not 6 + {keypoints} x {keypoint_dims}"
    reason += f"; {NO_NMS}"
    details: dict[str, object] = {"classes": len(names) or None, "names": names, **image_details(image)}
    if pose:
        details.update(keypoints=keypoints, keypoint_dims=keypoint_dims)
    details.update(transposed=True, head=END2END)
    return Recognition("yolo_pose" if pose else "yolo", reason, details)


def _yolo_pose(model: Interface) -> Recognition | None:
    metadata = model.metadata
    if end2end(metadata):
        return _end2end(model, pose=True)
    image, output = image_input(model), _yolo_output(model)
    names = class_names(metadata)
    kpt_shape = keypoint_shape(metadata)
    by_metadata = metadata.get("task") == "pose" or kpt_shape is not None
    by_shape = (
        "task" not in metadata and len(names) <= 1 and image is not None and output is not None and output[0] == 56
    )
    if not (by_metadata or by_shape):
        return None
    classes = len(names) or 1
    out = model.outputs[0] if len(model.outputs) == 1 else None
    if kpt_shape is not None:
        keypoints, keypoint_dims = kpt_shape
    elif output is not None and (output[0] - 4 - classes) > 0 and (output[0] - 4 - classes) % 3 == 0:
        keypoints, keypoint_dims = (output[0] - 4 - classes) // 3, 3
    else:
        keypoints, keypoint_dims = None, None
    if by_metadata:
        evidence = []
        if "task" in metadata:
            evidence.append(f"task {metadata['task']!r}")
        if kpt_shape is not None:
            evidence.append(f"kpt_shape {metadata['kpt_shape']}")
        reason = f"Ultralytics metadata {' and '.join(evidence)}"
        if out is not None:
            reason += f" and output {out.name} {shape_text(out.shape)}"
    else:
        reason = (
            f"its single output {out.name} {shape_text(out.shape)} has 56 = 4 box + 1 score + 17 x 3 keypoint channels "
            "(no Ultralytics metadata; a 52-class detector would look the same)"
        )
    counts = f"{count_text(keypoints, 'keypoint', 'keypoints')} and {count_text(classes, 'class', 'classes')}"
    reason += f": a YOLO pose model with {counts}"
    if output is not None and keypoints is not None and output[0] != 4 + classes + keypoints * keypoint_dims:
        expected = f"4 + {classes} + {keypoints} x {keypoint_dims}"
        reason += f", but the output has {output[0]} channels, not {expected}"
    details: dict[str, object] = {
        "keypoints": keypoints,
        "keypoint_dims": keypoint_dims,
        "classes": classes,
        "names": names,
        **image_details(image),
        "transposed": output[1] if output is not None else None,
    }
    return Recognition("yolo_pose", reason, details, () if by_metadata else ("yolo",))


def _yolo(model: Interface) -> Recognition | None:
    metadata = model.metadata
    if end2end(metadata):
        return _end2end(model, pose=False)
    task = metadata.get("task")
    if task not in (None, "detect", "obb"):
        return None
    image, output = image_input(model), _yolo_output(model)
    if image is None or output is None:
        return None
    if _objectness(model, output):
        return _yolov5(model, image, output[0])
    channels, transposed = output
    out = model.outputs[0]
    if task == "obb":
        classes = channels - 5
        reason = (
            f"one image input {image.name} {shape_text(image.shape)} and one output {out.name} "
            f"{shape_text(out.shape)}, read as [1, 4 + classes + 1, N] with {channels} = 4 box + {classes} class + 1 "
            f"angle channels: a YOLO oriented-box (OBB) detector with {count_text(classes, 'class', 'classes')}"
        )
        return _recognised(reason, metadata, "obb", image, classes, transposed, rotated=True)
    classes = channels - 4
    layout = "[1, N, 4 + classes]" if transposed else "[1, 4 + classes, N]"
    reason = (
        f"one image input {image.name} {shape_text(image.shape)} and one output {out.name} {shape_text(out.shape)}, "
        f"read as {layout} with {channels} = 4 box + {classes} class channels: a YOLO detector "
        f"with {count_text(classes, 'class', 'classes')}"
    )
    return _recognised(reason, metadata, "detect", image, classes, transposed)


def _recognised(
    reason: str, metadata: dict[str, str], task: str, image: TensorInfo, classes: int, transposed: bool, **more: object
) -> Recognition:
    """A raw-head YOLO detector (or segmentation model) recognised for ``reason``, said more precisely by its
    Ultralytics metadata: its ``task`` confirming it, its class names disagreeing with the output."""
    names = class_names(metadata)
    if metadata.get("task") == task:
        reason += f", confirmed by Ultralytics metadata task '{task}'"
    if names and len(names) != classes:
        reason += f", but its metadata names {count_text(len(names), 'class', 'classes')}"
    details: dict[str, object] = {"classes": classes, "names": names, **image_details(image), "transposed": transposed}
    return Recognition("yolo", reason, details | more)


def _yolov5(model: Interface, image: TensorInfo, channels: int) -> Recognition:
    out = model.outputs[0]
    classes = channels - 5
    names = class_names(model.metadata)
    evidence = (
        f"YOLOv5 metadata ({count_text(len(names), 'name', 'names')}, no Ultralytics task)"
        if names
        else f"no metadata and {out.shape[1]} rows = {YOLOV5_ANCHORS} anchors x the grid cells of the input"
    )
    reason = (
        f"one image input {image.name} {shape_text(image.shape)} and one output {out.name} {shape_text(out.shape)}, "
        f"read as [1, N, 5 + classes] with {channels} = 4 box + 1 objectness + {classes} class channels by "
        f"{evidence}: a YOLOv5-style detector with {count_text(classes, 'class', 'classes')} "
        "(score = objectness x class probability, then NMS)"
    )
    details: dict[str, object] = {"classes": classes, "names": names, **image_details(image), "transposed": True}
    details["head"] = OBJECTNESS
    return Recognition("yolo", reason, details)


def _yolo_seg(model: Interface) -> Recognition | None:
    """A YOLOv8/11-seg export: two outputs, [1, 4 + classes + M, N] and the prototypes [1, M, H/4, W/4], and
    Ultralytics metadata task 'segment' (or none); decoded by the detection family, masks and all."""
    metadata = model.metadata
    if metadata.get("task") not in (None, "segment") or len(model.outputs) != 2:
        return None
    image, (head, prototypes) = image_input(model), model.outputs
    if image is None or len(prototypes.shape) != 4 or not isinstance(prototypes.shape[1], int):
        return None
    if end2end(metadata):
        return _end2end_seg(model, image, prototypes.shape[1])
    masks = prototypes.shape[1]
    output = _yolo_output(Interface(model.inputs, (head,), metadata), masks)
    if output is None:
        return None
    channels, transposed = output
    classes = channels - 4 - masks
    if classes < 1:
        return None
    reason = (
        f"one image input {image.name} {shape_text(image.shape)}, an output {head.name} {shape_text(head.shape)} "
        f"read as {channels} = 4 box + {classes} class + {masks} mask coefficient channels and the mask prototypes "
        f"{prototypes.name} {shape_text(prototypes.shape)}: a YOLO instance segmentation model with "
        f"{count_text(classes, 'class', 'classes')}"
    )
    return _recognised(reason, metadata, "segment", image, classes, transposed, masks=masks)


def _end2end_seg(model: Interface, image: TensorInfo, masks: int) -> Recognition | None:
    """An end-to-end segmentation export (YOLO26-seg, ``nms=True``): rows [1, N, 6 + M] of x1, y1, x2, y2, score,
    class and M mask coefficients, and the prototypes [1, M, H/4, W/4]."""
    head, prototypes = model.outputs
    channels = _end2end_channels(Interface(model.inputs, (head,), model.metadata))
    if channels is None or channels != 6 + masks:
        return None
    names = class_names(model.metadata)
    reason = (
        f"{_end2end_evidence(model.metadata)}, an output {head.name} {shape_text(head.shape)} of rows x1, y1, x2, y2, "
        f"score, class and {masks} mask coefficients in input pixels and the mask prototypes {prototypes.name} "
        f"{shape_text(prototypes.shape)}: an end-to-end YOLO instance segmentation model with "
        f"{count_text(len(names) or None, 'class', 'classes')}; {NO_NMS}"
    )
    details: dict[str, object] = {"classes": len(names) or None, "names": names, **image_details(image)}
    details.update(transposed=True, masks=masks, head=END2END)
    return Recognition("yolo", reason, details)


def _yolo_or_seg(model: Interface) -> Recognition | None:
    return _yolo(model) or _yolo_seg(model)


YOLO = Rule(
    "yolo",
    "a YOLO detector ([1, 3, H, W] in, [1, 4 + classes, N] out), oriented-box detector (task obb: [1, 4 + classes "
    "+ 1 angle, N] out) or instance segmentation model (and the mask prototypes [1, 32, H/4, W/4] out)",
    _yolo_or_seg,
)


def _yolo_cls(model: Interface) -> Recognition | None:
    """An Ultralytics classify export: metadata task 'classify', one image input, one output [1, classes] (its
    class count fixed, or a symbolic one the metadata's names give)."""
    metadata = model.metadata
    if metadata.get("task") != "classify" or len(model.outputs) != 1:
        return None
    image, out = image_input(model), model.outputs[0]
    if image is None or len(out.shape) != 2 or not batch_ok(out.shape[0]):
        return None
    names = class_names(metadata)
    classes = out.shape[1] if isinstance(out.shape[1], int) else len(names) or None
    reason = (
        f"Ultralytics metadata task 'classify', one image input {image.name} {shape_text(image.shape)} and one output "
        f"{out.name} {shape_text(out.shape)} of class probabilities: a YOLO classifier with "
        f"{count_text(classes, 'class', 'classes')}"
    )
    if names and classes is not None and len(names) != classes:
        reason += f", but its metadata names {count_text(len(names), 'class', 'classes')}"
    return Recognition("yolo_cls", reason, {"classes": classes, "names": names, **image_details(image)})


YOLO_CLS = Rule(
    "yolo_cls",
    "a YOLO classifier (Ultralytics task classify: [1, 3, S, S] in, [1, classes] probabilities out)",
    _yolo_cls,
)
YOLO_POSE = Rule(
    "yolo_pose",
    "a YOLO pose model ([1, 3, H, W] in, [1, 4 + classes + keypoints x 3, N] out, e.g. [1, 56, 8400])",
    _yolo_pose,
)
