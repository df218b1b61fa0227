"""What a DETR-family export's interface is (RT-DETR, D-FINE and their kin: a fixed set of queries, each a box and
class scores, no NMS), and the rule that recognises it from the file alone. Three layouts (``head``), each decoded as
its exporting project does (models/detr.py):

- ``ultralytics``: Ultralytics RT-DETR (``RTDETR('rtdetr-l.pt').export(format='onnx')``): one image input and one
  output of query rows, cx, cy, w, h normalised to the input, then either the class scores of each query
  (``[1, 300, 4 + nc]``, Ultralytics up to 8.3) or, from 8.4, the top queries x classes already chosen
  (``[1, 300, 6]``: score, class). Told by Ultralytics' metadata ``head: RTDETRDecoder`` or, without it, by rows that
  are not a YOLO head's anchors (N is not the grid cells of the input at strides 8-32, nor 4-32 or 8-64);
- ``logits_boxes``: Hugging Face transformers' RT-DETR / D-FINE (``RTDetrForObjectDetection``, ...) and DETR
  (``DetrForObjectDetection``) exported with ``torch.onnx.export`` or Optimum: outputs named ``logits``
  [1, Q, classes] and ``pred_boxes`` [1, Q, 4]. Their scores differ (``scoring``): RT-DETR and D-FINE score each
  class with a sigmoid (focal loss), DETR with a softmax over its classes and a last "no object" class (Conditional,
  Deformable and DAB-DETR, sigmoid on ImageNet-normalised input and top 100, are refused by their model_type). The
  layout alone cannot tell them apart: the file's metadata ``model_type`` (the transformers config's, as
  ``benchmarks/make_detr_heads.py`` records it) says which, or its class names (``names``) against the logits'
  width (one more: DETR's "no object"); else the adapter's ``score_function`` or the class names given to it;
  else sigmoid, said as an assumption;
- ``rfdetr``: RF-DETR's own ONNX export (``RFDETR...().export()``): an image input and outputs named ``dets``
  [1, Q, 4] (cx, cy, w, h normalised) and ``labels`` [1, Q, classes] (logits, scored with a sigmoid);
- ``deploy``: the RT-DETR / D-FINE repositories' deploy exports, post-processing inside: inputs an image and
  ``orig_target_sizes`` [1, 2] (the frame's width and height), outputs ``labels``, ``boxes`` (frame pixels) and
  ``scores``.
"""

from __future__ import annotations

from ..runtime.runner import TensorInfo, shape_text
from ..text import untrusted
from .interface import Interface, Recognition, Rule, batch_ok, count_text, end2end, image_details, image_input
from .ultralytics import class_names

ULTRALYTICS, LOGITS_BOXES, DEPLOY, RFDETR = "ultralytics", "logits_boxes", "deploy", "rfdetr"
RFDETR_OUTPUTS = ("dets", "labels")  # RF-DETR's export: boxes, logits
ULTRALYTICS_HEAD = "RTDETRDecoder"  # Ultralytics' metadata ``head`` of an RT-DETR export
SIZES_INPUT = "orig_target_sizes"
DEPLOY_OUTPUTS = ("labels", "boxes", "scores")
SIGMOID, SOFTMAX = "sigmoid", "softmax"
SCORE_FUNCTIONS = ("auto", SIGMOID, SOFTMAX)  # the adapter's score_function: auto, from the file (else the names)
# transformers' config model_type -> how its post_process_object_detection scores (DETR and Table Transformer:
# DetrImageProcessor's softmax over classes + "no object"; the others: sigmoid focal loss)
MODEL_TYPE_SCORING = {
    "detr": SOFTMAX,
    "table-transformer": SOFTMAX,
    "rt_detr": SIGMOID,
    "rt_detr_v2": SIGMOID,
    "d_fine": SIGMOID,
}
# transformers' model types of this layout decoded otherwise (ImageNet-normalised input, sigmoid, top 100): refused
UNDECODED_MODEL_TYPES = ("conditional_detr", "deformable_detr", "dab_detr")
NO_NMS = "its queries are final detections, no NMS is run (iou_threshold does not apply)"
SELECTING_VERSION = (8, 4)  # Ultralytics from which an RT-DETR export selects its top queries x classes
ANCHOR_STRIDES = ((8, 16, 32), (4, 8, 16, 32), (8, 16, 32, 64))  # YOLO heads P3-P5, P2-P5, P3-P6


def _named(tensors: tuple[TensorInfo, ...], name: str) -> TensorInfo | None:
    return next((tensor for tensor in tensors if tensor.name == name), None)


def _rows(tensor: TensorInfo) -> tuple[object, object] | None:
    """(N, C) of a [1, N, C] tensor (batch 1 or dynamic); None otherwise."""
    shape = tensor.shape
    return (shape[1], shape[2]) if len(shape) == 3 and batch_ok(shape[0]) else None


def _anchor_counts(image: TensorInfo) -> set[int]:
    """The rows a YOLO head of each stride set would have on this fixed input; empty when it is dynamic."""
    height, width = image.shape[2:]
    if not (isinstance(height, int) and isinstance(width, int)):
        return set()
    return {sum(-(-height // s) * -(-width // s) for s in strides) for strides in ANCHOR_STRIDES}


def _version(metadata: dict[str, str]) -> tuple[int, ...]:
    """Ultralytics' version that exported the model, (major, minor); () when not recorded."""
    parts = metadata.get("version", "").split(".")[:2]
    return tuple(int(part) for part in parts) if all(part.isdigit() for part in parts) and len(parts) == 2 else ()


def _selected(channels: int, names: list[str], metadata: dict[str, str]) -> bool:
    """Whether rows of ``channels`` are 8.4's selected [cx, cy, w, h, score, class] rather than the class scores of
    each query: six channels and not four plus the names' classes; where both fit (two classes, or no names), the
    version that exported it (8.4 and later select)."""
    if channels != 6:
        return False
    if names and len(names) != 2:
        return True
    return _version(metadata) >= SELECTING_VERSION


def _ultralytics(model: Interface) -> Recognition | None:
    metadata = model.metadata
    image = image_input(model)
    if image is None or len(model.outputs) != 1 or end2end(metadata):
        return None
    rows = _rows(model.outputs[0])
    if rows is None or not isinstance(rows[1], int) or rows[1] < 5:
        return None
    queries, channels = rows
    names = class_names(metadata)
    out = model.outputs[0]
    if metadata.get("head") == ULTRALYTICS_HEAD:
        evidence = f"Ultralytics metadata head '{ULTRALYTICS_HEAD}'"
    elif (
        metadata.get("task") == "detect"
        and "stride" in metadata
        and "head" not in metadata
        and isinstance(queries, int)
        and _anchor_counts(image)
        and not {queries, channels} & _anchor_counts(image)  # neither [1, N, 4 + nc] nor [1, 4 + nc, N] of YOLO
        and (not names or channels in (6, 4 + len(names)))
    ):
        evidence = (
            f"Ultralytics metadata task 'detect' and {queries} rows, which are not a YOLO head's anchors on a "
            f"{image.shape[3]}x{image.shape[2]} input"
        )
    else:
        return None
    selected = _selected(channels, names, metadata)
    if selected:
        layout, classes = "[1, N, 6] rows cx, cy, w, h (normalised), score, class", len(names) or None
    else:
        layout = f"[1, N, 4 + classes] rows cx, cy, w, h (normalised) and {channels - 4} class scores"
        classes = channels - 4
    reason = (
        f"{evidence} and one output {out.name} {shape_text(out.shape)} read as {layout}: an Ultralytics RT-DETR "
        f"detector with {count_text(classes, 'class', 'classes')}"
    )
    if names and len(names) != classes:
        reason += f", but its metadata names {count_text(len(names), 'class', 'classes')}"
    reason += f"; {NO_NMS}"
    details: dict[str, object] = {"classes": classes, "names": names, **image_details(image), "head": ULTRALYTICS}
    return Recognition("detr", reason, details | {"selected": selected})


def scoring_of(classes: int, names: list[str], model_type: str) -> tuple[str, str] | None:
    """How a ``logits_boxes`` model scores (SIGMOID or SOFTMAX) and why, from its config's ``model_type`` or its
    class names against the logits' width; None where neither says."""
    known = MODEL_TYPE_SCORING.get(model_type)
    if known:
        return known, f"metadata model_type '{untrusted(model_type)}'"
    if names and classes == len(names) + 1:
        return SOFTMAX, f'{len(names)} class names and one more logit, DETR\'s "no object"'
    if names and classes == len(names):
        return SIGMOID, f"{len(names)} class names, one logit each"
    return None


def scoring_text(scoring: str) -> str:
    if scoring == SOFTMAX:
        return 'softmax over the classes and "no object", each query\'s best, as DETR'
    return "sigmoid, the top queries x classes"


def _logits_boxes(model: Interface) -> Recognition | None:
    logits, boxes = _named(model.outputs, "logits"), _named(model.outputs, "pred_boxes")
    image = image_input(model)
    if image is None or logits is None or boxes is None:
        return None
    logit_rows, box_rows = _rows(logits), _rows(boxes)
    if logit_rows is None or box_rows is None or box_rows[1] != 4 or not isinstance(logit_rows[1], int):
        return None
    width, names = logit_rows[1], class_names(model.metadata)
    found = scoring_of(width, names, model.metadata.get("model_type", ""))
    scoring = found[0] if found else None
    classes = width - 1 if scoring == SOFTMAX else width
    if found:
        scores = f"{scoring_text(scoring)} (by its {found[1]})"
    else:
        scores = f"{scoring_text(SIGMOID)}, assumed: no model_type or names say"
    reason = (
        f"outputs {logits.name} {shape_text(logits.shape)} and {boxes.name} {shape_text(boxes.shape)}, as Hugging "
        f"Face's RT-DETR / D-FINE / DETR give: a DETR detector with {count_text(classes, 'class', 'classes')} "
        f"({scores}; boxes cx, cy, w, h normalised); {NO_NMS}"
    )
    details: dict[str, object] = {"classes": classes, "names": names, **image_details(image), "head": LOGITS_BOXES}
    return Recognition("detr", reason, details | {"scoring": scoring, "logits": width})


def _rfdetr(model: Interface) -> Recognition | None:
    boxes, logits = (_named(model.outputs, name) for name in RFDETR_OUTPUTS)
    image = image_input(model)
    if image is None or logits is None or boxes is None or len(model.inputs) != 1:
        return None
    logit_rows, box_rows = _rows(logits), _rows(boxes)
    if logit_rows is None or box_rows is None or box_rows[1] != 4 or not isinstance(logit_rows[1], int):
        return None
    classes = logit_rows[1]
    reason = (
        f"outputs {boxes.name} {shape_text(boxes.shape)} and {logits.name} {shape_text(logits.shape)}, as RF-DETR's "
        f"export gives them: a DETR detector with {count_text(classes, 'class', 'classes')} (sigmoid, the top "
        f"queries x classes; boxes cx, cy, w, h normalised); {NO_NMS}"
    )
    names = class_names(model.metadata)
    details: dict[str, object] = {"classes": classes, "names": names, **image_details(image), "head": RFDETR}
    return Recognition("detr", reason, details)


def _deploy(model: Interface) -> Recognition | None:
    sizes = _named(model.inputs, SIZES_INPUT)
    if sizes is None or len(model.inputs) != 2:
        return None
    images = next(tensor for tensor in model.inputs if tensor is not sizes)
    image = image_input(Interface((images,), model.outputs, model.metadata))
    outputs = [_named(model.outputs, name) for name in DEPLOY_OUTPUTS]
    if image is None or None in outputs or len(sizes.shape) != 2:
        return None
    labels, boxes, scores = outputs
    reason = (
        f"inputs {image.name} {shape_text(image.shape)} and {sizes.name} {shape_text(sizes.shape)} (the frame's "
        f"width and height), outputs {labels.name} {shape_text(labels.shape)}, {boxes.name} "
        f"{shape_text(boxes.shape)} and {scores.name} {shape_text(scores.shape)}: an RT-DETR / D-FINE deploy "
        f"export with its post-processing inside (boxes in frame pixels); {NO_NMS}"
    )
    details: dict[str, object] = {"classes": None, "names": [], **image_details(image), "head": DEPLOY}
    return Recognition("detr", reason, details)


def _detr(model: Interface) -> Recognition | None:
    return _deploy(model) or _rfdetr(model) or _logits_boxes(model) or _ultralytics(model)


DETR = Rule(
    "detr",
    "a DETR-family detector: Ultralytics RT-DETR ([1, 300, 4 + classes] or [1, 300, 6] out), Hugging Face RT-DETR / "
    "D-FINE / DETR (logits and pred_boxes out), RF-DETR (dets and labels out) or an RT-DETR deploy export (images "
    "and orig_target_sizes in; labels, boxes, scores out)",
    _detr,
)
