"""`eval` and `compare` of a prompted family (families/prompts.py) over a COCO data set: its detector built as its
node builds it from the prompt options (tools/predict.py's PROMPTED: --prompt, --tokenizer, --text-threshold,
--decoder), a text prompt made of the truth's category names (a phrase each, as open-vocabulary evaluations prompt)
and a box prompt's family given each image's truth boxes (``truth_boxes``); a family that segments them (sam) is
also scored by the mean IoU of each truth instance's mask with the mask its box prompted (``prompted_ious``: mIoU,
an instance whose prompt gave no mask counting 0)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..families.prompts import SEPARATOR, phrases
from ..families.registry import family
from ..results.boxes import Boxes
from ..results.frame import FrameResult
from ..text import shown_path, untrusted
from .commands import UsageError


def category_prompt(categories: Sequence[Mapping[str, Any]], truth: Path) -> str:
    """The text prompt of a data set's categories, each name a phrase (as open-vocabulary evaluations prompt), in
    their order; a name that cannot be one phrase (empty, or holding the separator '.') is a UsageError naming it
    and --prompt."""
    for category in categories:
        if phrases(category["name"]) != [category["name"]]:
            raise UsageError(
                f"category '{untrusted(category['name'], 80)}' of {shown_path(truth)} is not one phrase of a prompt "
                "(empty, spaces around it, or a '.'): give --prompt with a phrase per category, in their order",
                "--prompt",
            )
    return SEPARATOR.join(category["name"] for category in categories)


def eval_detector(
    model_type: str,
    model: Path,
    runner: Any,
    target: str,
    truth: Mapping[str, Any],
    truth_path: Path,
    options: Mapping[str, Any] | None = None,
) -> Any:
    """The ``model_type`` detector on ``runner`` (``model`` loaded on ``target``) at validation confidence (0.001);
    a prompted family built as its node from the prompt options (tools/predict.py's PROMPTED; ``options``, by
    option): a text prompt's family prompted with the categories of the COCO annotations ``truth`` (read from
    ``truth_path``) unless --prompt is given, its phrases mapping back to the categories by name (results/coco.py's
    category_ids); a family prompted by boxes (sam) is given each image's truth boxes by ``predict_coco``."""
    from ..runtime.backends import load_target
    from .predict import PROMPTED, prompted_values, taken_options

    spec = family(model_type)
    options = dict(options or {})
    if not spec.prompts:
        taken_options(model_type, options, PROMPTED)  # none: refused, naming the option
        return spec.detector(runner, confidence=0.001)
    fixed = {}
    if spec.text_prompt is not None:
        fixed["confidence_threshold"] = 0.001  # a box prompt's mask is kept at any predicted IoU by default
        if not options.get("--prompt"):
            options["--prompt"] = category_prompt(truth["categories"], truth_path)
    values = prompted_values(model_type, model, options, **fixed)
    return spec.build(values, lambda path: runner if Path(path) == Path(model) else load_target(target, Path(path)))


def truth_instances(truth: Mapping[str, Any]) -> dict[Any, list[dict]]:
    """Image id -> its annotations (but crowds, and those of no category) in ``truth``, in their order: the
    instances a box prompt is given (``truth_boxes``) and scored by (``prompted_ious``)."""
    place = {category["id"] for category in truth["categories"]}
    rows: dict[Any, list[dict]] = {image["id"]: [] for image in truth["images"]}
    for annotation in truth["annotations"]:
        if not annotation["iscrowd"] and annotation["category_id"] in place:
            rows[annotation["image_id"]].append(annotation)
    return rows


def truth_boxes(truth: Mapping[str, Any]) -> dict[Any, Boxes]:
    """Image id -> the boxes of its annotations (``truth_instances``), x1, y1, x2, y2, in their order: each of
    its category's place among the categories as class id, the categories' names the class map."""
    place = {category["id"]: index for index, category in enumerate(truth["categories"])}
    names = tuple(category["name"] for category in truth["categories"])
    boxes = {}
    for image_id, found in truth_instances(truth).items():
        xyxy = np.array([[x, y, x + w, y + h] for x, y, w, h in (row["bbox"] for row in found)], np.float64)
        class_ids = [place[row["category_id"]] for row in found]
        boxes[image_id] = Boxes.of(xyxy.reshape(-1, 4), np.ones(len(found), np.float32), class_ids, names)
    return boxes


def prompted_ious(
    result: FrameResult, annotations: Sequence[Mapping[str, Any]], height: int, width: int
) -> list[float]:
    """The IoU of each annotation's mask (its ``segmentation``, polygons or RLE, at ``height`` x ``width``) with the
    mask its box prompted in ``result`` (the row whose track ID is the annotation's place: the boxes were given
    tracked by their place, as a node carries a box's ID to its mask); 0 where its prompt gave no mask."""
    from pycocotools import mask as mask_utils

    masks = result.masks.masks if result.masks is not None else ()
    track_ids = result.boxes.track_ids if result.boxes is not None else None
    by_place = {int(track): masks[row] for row, track in enumerate(track_ids if track_ids is not None else [])}
    ious = []
    for place, annotation in enumerate(annotations):
        segmentation = annotation["segmentation"]
        if isinstance(segmentation, list):  # polygons: one mask of their union
            rle = mask_utils.merge(mask_utils.frPyObjects(segmentation, height, width))
        elif isinstance(segmentation["counts"], list):  # an uncompressed RLE
            rle = mask_utils.frPyObjects(segmentation, height, width)
        else:
            rle = segmentation
        truth = mask_utils.decode(rle).astype(bool)
        found = by_place.get(place)
        mine = found.full() if found is not None else np.zeros((height, width), bool)
        union = np.count_nonzero(truth | mine)
        ious.append(float(np.count_nonzero(truth & mine) / union) if union else 1.0)
    return ious
