"""What a monocular depth model's interface is (Depth Anything V1/V2, DPT/MiDaS-style and ZoeDepth models as Hugging
Face transformers and Optimum export them), shared by the adapter (models/depth.py) and the rule that recognises them:
the image processors of the known model types, and what a file can say of itself.

An export takes ``pixel_values`` [1, 3, H, W] and gives ``predicted_depth`` [1, H, W] (or [1, 1, H, W]). Whether the
map is metric (metres) or relative (relative inverse depth, scale and shift unknown) is not in the graph: a file says
it only in its metadata ``depth_kind`` (``metric`` or ``relative``); ``model_type`` (transformers' config
model_type) names its image processor and ``image_size`` (HEIGHTxWIDTH) the processor's size. Optimum's exports
carry none of them: the node's parameters then say (and are required), never guessed. ZoeDepth is metric whatever
its file says (``METRIC_ONLY``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..runtime.runner import shape_text
from .interface import Interface, Recognition, Rule, batch_ok, image_details, image_input

NAME = "depth"
OUTPUT_NAME = "predicted_depth"  # transformers' DepthEstimatorOutput field, the output Optimum names
DEPTH_KINDS = ("metric", "relative")
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
HALF = (0.5, 0.5, 0.5)  # transformers' IMAGENET_STANDARD_MEAN and _STD
BICUBIC, BILINEAR_CORNERS = "bicubic", "bilinear_corners"  # Processor.resample


@dataclass(frozen=True)
class Processor:
    """An image processor as transformers' DPTImageProcessor runs it (the checkpoint's preprocessor_config.json):
    resize to ``size`` (height, width), keeping the aspect ratio when ``keep_aspect`` (scaling as little as
    possible, then each side to the nearest multiple of ``multiple``), PIL bicubic on 8-bit RGB; then x / 255,
    minus ``mean``, over ``std``. Its depth is resized back to the frame bicubically (post_process_depth_estimation:
    torch's bicubic, align_corners False).

    ZoeDepthImageProcessor (``pad``, ``resample`` BILINEAR_CORNERS) first pads the frame by reflection (no edge
    repeat) with int(sqrt(side / 2) * 3) rows above and below and columns left and right, sizes the resize from the
    padded frame and resizes x / 255 by torch's bilinear with align_corners (no antialiasing); its depth is resized
    back to the padded frame's size, then the padding cut off."""

    size: tuple[int, int]
    multiple: int
    keep_aspect: bool
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    pad: bool = False
    resample: str = BICUBIC


# transformers' model_type -> its checkpoints' image processor.
PROCESSORS = {
    # LiheYoung/depth-anything-*-hf, depth-anything/Depth-Anything-V2-*-hf (relative and metric)
    "depth_anything": Processor((518, 518), 14, True, IMAGENET_MEAN, IMAGENET_STD),
    # DPTImageProcessor's defaults (Intel/dpt-large, dpt-hybrid-midas: MiDaS-style relative inverse depth)
    "dpt": Processor((384, 384), 1, False, HALF, HALF),
    # Intel/zoedepth-nyu, -kitti, -nyu-kitti (ZoeDepthImageProcessor, ensure_multiple_of 32)
    "zoedepth": Processor((384, 512), 32, True, HALF, HALF, pad=True, resample=BILINEAR_CORNERS),
}
# Model types whose depth is metres whatever the file says: ZoeDepth's metric bins head has no relative form.
METRIC_ONLY = ("zoedepth",)


def implied_kind(model_type: str | None) -> str | None:
    """The depth kind a model type fixes (metric for ZoeDepth), else None."""
    return "metric" if model_type in METRIC_ONLY else None


def parse_image_size(text: str | None) -> tuple[int, int] | None:
    """Metadata image_size 'HEIGHTxWIDTH' (or one number: square) as (height, width); None when absent or not that."""
    if not text:
        return None
    parts = text.lower().split("x") if "x" in text.lower() else [text, text]
    if len(parts) != 2 or not all(part.strip().isdigit() and 0 < int(part) <= 8192 for part in parts):
        return None
    return int(parts[0]), int(parts[1])


def _output_map(shape: tuple) -> bool:
    """[B, H, W] or [B, 1, H, W]: one map per image."""
    return (len(shape) == 3 and batch_ok(shape[0])) or (len(shape) == 4 and batch_ok(shape[0]) and shape[1] == 1)


def _depth(model: Interface) -> Recognition | None:
    image = image_input(model)
    if image is None or len(model.outputs) != 1 or not _output_map(model.outputs[0].shape):
        return None
    output, metadata = model.outputs[0], model.metadata
    model_type, kind = metadata.get("model_type"), metadata.get("depth_kind")
    evidence = []
    if output.name == OUTPUT_NAME:
        evidence.append(f"output named {OUTPUT_NAME}")
    if model_type in PROCESSORS:
        evidence.append(f"metadata model_type={model_type}")
    if kind in DEPTH_KINDS:
        evidence.append(f"metadata depth_kind={kind}")
    if not evidence:  # a [1, 1, H, W] map alone is any per-pixel model's (a mask, a heatmap): not called depth
        return None
    reason = (
        f"one image input {shape_text(image.shape)} and one map out {shape_text(output.shape)}, {', '.join(evidence)}"
    )
    if implied_kind(model_type):  # ZoeDepth: metric, whether its metadata says so or not
        kind = implied_kind(model_type)
        says = f"depth_kind {kind} ({model_type} is metric only)"
    else:
        says = (
            f"depth_kind {kind}" if kind in DEPTH_KINDS else "no depth_kind (metric or relative: depth_kind parameter)"
        )
    details = {
        **image_details(image),
        "model_type": model_type if model_type in PROCESSORS else None,
        "depth_kind": kind if kind in DEPTH_KINDS else None,
        "image_size": parse_image_size(metadata.get("image_size")),
    }
    return Recognition(NAME, f"{reason}: a depth model, {says}", details)


DEPTH = Rule(
    NAME,
    f"a depth model (one [1, 3, H, W] image in, one [1, H, W] map out named {OUTPUT_NAME} or with metadata "
    "model_type / depth_kind)",
    _depth,
)
