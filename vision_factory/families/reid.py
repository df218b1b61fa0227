"""reid: re-identification embeddings (models/reid.py), recognised by models/reid_interface.py.

It has no node of its own (``node_module`` None): the tracker (models/tracker.py) takes its features, in whatever
node or tool tracks. Its parameters carry a ``reid_`` prefix so that they sit beside a detector's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..models.bounds import MAX_BATCH, MAX_INPUT_PIXELS
from ..models.recognition import load_checked
from ..models.reid import ReidEmbedder, parse_triple
from ..models.reid_interface import REID
from ..parameters import Parameter
from .detection import input_shape
from .family import AccuracyLoss, Family, LoadRunner

MODEL = Parameter(
    "reid_model_path",
    "",
    "re-identification model (.onnx): [B, 3, H, W] crops in, one [B, D] feature per crop out",
    launch_argument=True,
    required=True,
)
PARAMETERS = (
    MODEL,
    Parameter(
        "reid_input_size",
        "",
        "WIDTHxHEIGHT crops are resized to, for a dynamic-size model; empty: its own",
        max_pixels=MAX_INPUT_PIXELS,
    ),
    Parameter("reid_mean", "", "RGB mean in 0..1, e.g. 0.485,0.456,0.406; empty: the model's metadata, else ImageNet"),
    Parameter("reid_std", "", "RGB std in 0..1; empty: metadata, else ImageNet (mean 0,0,0 and std 1,1,1: only /255)"),
    Parameter(
        "reid_batch",
        0,
        "crops per model run at most; 0: a fixed-batch model's batch, else all crops at once",
        minimum=0,
        maximum=MAX_BATCH,
    ),
)


def build(values: Mapping[str, Any], load_runner: LoadRunner) -> ReidEmbedder:
    """The embedder of ``reid_model_path``; a missing, unreadable or other-family model is refused, naming it."""
    path = values["reid_model_path"]
    if not path:
        raise ValueError("reid_model_path is empty: give a re-identification model (.onnx)")
    try:
        runner = load_checked(load_runner, path, "reid", "reid_model_path", "the tracker's re-identification")
    except ValueError as exc:
        if str(exc).startswith("reid_model_path"):
            raise
        raise ValueError(f"reid_model_path: {exc}") from exc
    return ReidEmbedder(
        runner,
        input_size=input_shape(values["reid_input_size"]),
        mean=parse_triple(values["reid_mean"], "reid_mean") if values["reid_mean"] else None,
        std=parse_triple(values["reid_std"], "reid_std") if values["reid_std"] else None,
        batch=int(values["reid_batch"]),
    )


FAMILY = Family(
    name="reid",
    summary="re-identification embeddings of detection crops, for the tracker (no node of its own)",
    rule=REID,
    parameters=PARAMETERS,
    build=build,
    result=None,  # embeddings, for the tracker
    runs_on=("person boxes",),  # crops of the people a detector finds
    model_parameter=MODEL.name,
    # 1 - the mean cosine of each person's two embeddings
    accuracy_loss=AccuracyLoss("1 - mean cosine", 0.05, lambda report: 1.0 - report["outputs"]["cosine_mean"]),
)
