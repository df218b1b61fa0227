"""verify's pictures: the frame where the node and the model disagree most (``largest_disagreement``), drawn with the
model's answers solid (results/drawing.py's style: a colour per class, masks filled and outlined, labels) and the
node's dashed on top (boxes white on black, masks outlined in white, keypoints ringed, the ball crossed), a map
beside the model's (``worst_frame.png``); and on a failure the model's and the node's answers side by side
(``side_by_side.png``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from ..files import staged
from ..results.frame import FrameResult
from ..results.masks import InstanceMask, Masks
from .verify_frames import FrameCheck

WORST_PICTURE, SIDE_BY_SIDE = "worst_frame.png", "side_by_side.png"
MIN_WIDTH = 640  # pixels: a frame is drawn enlarged to at least this width
NODE_COLOUR, NODE_GAP = (255, 255, 255), (0, 0, 0)  # BGR: the node's dashes, white on black, seen over any colour
BAND = 28  # pixels: the legend line below a picture, the title above a side-by-side panel
DARK, WHITE = (32, 32, 32), (255, 255, 255)


def disagreement(check: FrameCheck) -> tuple:
    """The order of frames from the largest disagreement down: a frame the node did not answer or with answers of
    one side only (the more the worse), then the largest position difference, score difference and mask overlap
    lost; among equals (a pass: no difference at all), the frame with the most answers, which shows most."""
    missing = check.unpaired if check.answered else max(check.model_count, 1)
    answers = check.model_count + check.node_count
    return (missing > 0, missing, check.deviation_px, check.score_deviation, 1 - check.mask_iou_min, answers)


def largest_disagreement(frames: Sequence[FrameCheck]) -> list[FrameCheck]:
    """``frames`` from the largest disagreement (``disagreement``) down; among equals, in frame order."""
    return sorted(frames, key=lambda check: (*(-value for value in disagreement(check)[1:]), check.frame))


def enlarged(result: FrameResult, factor: float) -> FrameResult:
    """``result`` with its positions (boxes, keypoints, masks, the ball) in a frame ``factor`` times as large, its
    map left out (drawn beside the frame: ``_map``)."""
    import cv2

    parts: dict = {"dense": None}
    if result.boxes is not None:
        parts["boxes"] = replace(result.boxes, xyxy=result.boxes.xyxy * factor)
    if result.keypoints is not None:
        points = result.keypoints.points.copy()
        points[..., :2] *= factor
        parts["keypoints"] = replace(result.keypoints, points=points)
    if result.masks is not None:
        masks = []
        for mask in result.masks.masks:
            if mask is None or not mask.bits.size:
                masks.append(mask)
                continue
            # The mask's own frame size: a node's answer read from its message may not know the frame's.
            width, height = round(mask.width * factor), round(mask.height * factor)
            left, top = int(mask.left * factor), int(mask.top * factor)
            right = min(round((mask.left + mask.bits.shape[1]) * factor), width)
            bottom = min(round((mask.top + mask.bits.shape[0]) * factor), height)
            size = (max(right - left, 1), max(bottom - top, 1))
            bits = cv2.resize(mask.bits.astype(np.uint8), size, interpolation=cv2.INTER_NEAREST).astype(bool)
            masks.append(InstanceMask(left, top, bits, width, height))
        parts["masks"] = Masks(masks)
    if result.ball is not None:
        parts["ball"] = replace(result.ball, x=result.ball.x * factor, y=result.ball.y * factor)
    return replace(result, width=round(result.width * factor), height=round(result.height * factor), **parts)


def _canvas(image: np.ndarray) -> tuple[np.ndarray, float]:
    """The frame in colour, enlarged to at least MIN_WIDTH wide, and the factor."""
    import cv2

    factor = max(1.0, MIN_WIDTH / image.shape[1])
    canvas = image if image.ndim == 3 else cv2.cvtColor(image, cv2.COLOR_GRAY2BGR)
    return cv2.resize(canvas, None, fx=factor, fy=factor, interpolation=cv2.INTER_LINEAR), factor


def draw_node(image: np.ndarray, node: FrameResult) -> np.ndarray:
    """The node's answers over ``image`` in the node's style: each box dashed white on black, each mask's outline
    in white, each keypoint ringed in white, the ball crossed in white (no fill, no labels: the model's are
    under them)."""
    import cv2

    from ..results.drawing import draw_dashed_box

    if node.masks is not None:
        for mask in node.masks.masks:
            if mask is None or not mask.bits.size:
                continue
            contours, _ = cv2.findContours(mask.bits.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
            cv2.drawContours(image, contours, -1, NODE_COLOUR, 1, offset=(mask.left, mask.top))
    if node.boxes is not None:
        for box in node.boxes.xyxy.tolist():
            draw_dashed_box(image, box, NODE_COLOUR, NODE_GAP)
    if node.keypoints is not None:
        for x, y, _ in node.keypoints.points.reshape(-1, 3).tolist():
            cv2.circle(image, (int(round(x)), int(round(y))), 5, NODE_COLOUR, 1, cv2.LINE_AA)
    if node.ball is not None and node.ball.visible:
        centre = (int(round(node.ball.x)), int(round(node.ball.y)))
        cv2.drawMarker(image, centre, NODE_COLOUR, cv2.MARKER_CROSS, 18, 2)
    return image


def _band(image: np.ndarray, text: str, above: bool = False) -> np.ndarray:
    """``image`` with a dark line of ``text`` below it (``above``: over it)."""
    import cv2

    from ..results.drawing import FONT

    top, bottom = (BAND, 0) if above else (0, BAND)
    framed = cv2.copyMakeBorder(image, top, bottom, 0, 0, cv2.BORDER_CONSTANT, value=DARK)
    baseline = BAND - 9 if above else framed.shape[0] - 9
    cv2.putText(framed, text, (8, baseline), FONT, 0.5, WHITE, 1, cv2.LINE_AA)
    return framed


def _map(result: FrameResult | None, height: int) -> np.ndarray | None:
    """``result``'s map drawn with its colour bar (results/dense.py), ``height`` high; None without one."""
    import cv2

    if result is None or result.dense is None:
        return None
    drawn = result.dense.draw()
    width = max(1, round(drawn.shape[1] * height / drawn.shape[0]))
    return cv2.resize(drawn, (width, height), interpolation=cv2.INTER_NEAREST)


def _beside(panels: Sequence[np.ndarray]) -> np.ndarray:
    """``panels`` left to right, each padded below to the tallest."""
    import cv2

    height = max(panel.shape[0] for panel in panels)
    padded = [cv2.copyMakeBorder(p, 0, height - p.shape[0], 0, 4, cv2.BORDER_CONSTANT, value=DARK) for p in panels]
    return np.hstack(padded)


def worst_picture(image: np.ndarray, node: FrameResult | None, model: FrameResult, title: str) -> np.ndarray:
    """The frame (enlarged to at least MIN_WIDTH wide) with the model's answers solid and the node's dashed over
    them (``draw_node``), its maps beside it (model's, then node's, each with its colour bar), a legend below."""
    canvas, factor = _canvas(image)
    enlarged(model, factor).draw(canvas)
    if node is not None:
        draw_node(canvas, enlarged(node, factor))
    maps = [drawn for drawn in (_map(model, canvas.shape[0]), _map(node, canvas.shape[0])) if drawn is not None]
    said = "node: no answer to this frame" if node is None else "node dashed white"
    picture = _beside([canvas, *maps]) if maps else canvas
    legend = f"{title}: model solid, {said}" + (" (maps: model, node)" if maps else "")
    return _band(picture, legend)


def side_by_side(image: np.ndarray, node: FrameResult | None, model: FrameResult, title: str) -> np.ndarray:
    """The frame twice (each enlarged to at least MIN_WIDTH wide), the model's answers drawn on the left and the
    node's on the right in the same style (results/drawing.py), each panel titled, a map under its frame."""
    panels = []
    for name, result in (("model", model), ("node", node)):
        canvas, factor = _canvas(image)
        if result is not None:
            enlarged(result, factor).draw(canvas)
            drawn = _map(result, canvas.shape[0])
            canvas = _beside([canvas, drawn]) if drawn is not None else canvas
        panels.append(_band(canvas, f"{name}" + ("" if result is not None else ": no answer"), above=True))
    return _band(_beside(panels), title)


def write_pictures(
    out_dir: Path, image: np.ndarray, node: FrameResult | None, model: FrameResult, frame: int, failed: bool
) -> dict[str, str]:
    """OUT/worst_frame.png, and on a failure OUT/side_by_side.png, of frame ``frame``: the files written."""
    import cv2

    title = f"frame {frame}, the largest disagreement"
    pictures = {"picture": (out_dir / WORST_PICTURE, worst_picture(image, node, model, title))}
    if failed:
        pictures["side by side"] = (out_dir / SIDE_BY_SIDE, side_by_side(image, node, model, title))
    for path, picture in pictures.values():
        with staged(path, (), "--out") as fresh:
            cv2.imwrite(str(fresh), picture)
    return {name: str(path) for name, (path, _) in pictures.items()}
