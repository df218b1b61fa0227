"""The detections result kind (results/__init__.py): what every detector produces, whatever its model family:
detections with optional keypoints, optional instance masks (segmentation models: models/masks.py) and, tracked,
track IDs, class-aware NMS and the COCO person keypoints; their
record in files (``frame_record``: what predict prints and replay writes), their comparison (``differences``, what
compare and quantize report), their drawing, and their ROS messages (vision_msgs; imported inside the functions).

Layout of a pose in ``Detection2DArray`` (one ``Detection2D`` per person):
- ``results[0]``: the person: ``hypothesis.class_id`` its class name, ``hypothesis.score`` in 0..1,
  ``pose.pose.position`` the box centre;
- ``results[1:]``: one per keypoint, in the model's order: ``hypothesis.class_id`` the keypoint
  name (``nose``, ``left_eye``, ...), ``hypothesis.score`` its confidence,
  ``pose.pose.position.x/y`` its position in source-image pixels.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import cv2
import numpy as np

from . import Item, tool_module
from .boxes import BOX_COLOUR, box_iou, class_colour, track_colour
from .keypoints import COCO_SKELETON, KEYPOINT_COLOUR, LIMB_COLOUR
from .masks import MASK_LABELS, fill, mask_rle, rle_iou

if TYPE_CHECKING:
    from sensor_msgs.msg import Image
    from std_msgs.msg import Header
    from vision_msgs.msg import Detection2D, Detection2DArray, LabelInfo, ObjectHypothesisWithPose
    from visualization_msgs.msg import MarkerArray

    from ..models.tracker import Track
    from .masks import InstanceMask


@dataclass
class Detection:
    xyxy: tuple[float, float, float, float]  # frame pixels
    score: float
    class_id: int
    class_name: str
    keypoints: Sequence[Sequence[float]] | None = None  # (x, y, confidence) per keypoint; may be a [K, 3] array
    mask: InstanceMask | None = None  # its instance mask at the source frame's size (segmentation models)

    def as_dict(self) -> dict:
        record = {"xyxy": list(self.xyxy), "score": self.score, "class_id": self.class_id}
        record["class_name"] = self.class_name
        if self.keypoints is not None:
            record["keypoints"] = np.asarray(self.keypoints, dtype=np.float64).tolist()
        if self.mask is not None:
            record["mask"] = mask_rle(self.mask)
        return record


def frame_record(image: str, frame: int, width: int, height: int, detections: Sequence[Detection]) -> dict:
    """One frame's detections as the tools write them (``predict --format json``: one record per line;
    ``replay``'s detections.json: a list of them): the image (a file, or PATH:FRAME of a video or a bag), the
    frame's index in its video or bag (0 for an image file), its size, and each detection's ``as_dict``."""
    return {
        "image": image,
        "frame": int(frame),
        "width": int(width),
        "height": int(height),
        "detections": [detection.as_dict() for detection in detections],
    }


def write_replayed(
    path: Path, answers: Mapping[int, Detection2DArray], latched: Mapping[str, Any], image: str, sizes: Callable
) -> Path:
    """replay's detections.json: a list, in frame order, of each answered frame's ``frame_record`` as `predict
    --format json` prints it (image IMAGE:FRAME), class ids from the node's LabelInfo (``latched["labels"]``);
    ``sizes(frames)``: each frame's (width, height)."""
    from ..files import write_text

    names = label_names(latched["labels"]) if "labels" in latched else []
    frames = {frame: detections_from_message(message, names) for frame, message in answers.items()}
    size = sizes(frames)
    write_text(path, json.dumps([frame_record(f"{image}:{f}", f, *size[f], frames[f]) for f in sorted(frames)]))
    return path


def run(detector: Detector, frame: np.ndarray) -> list[Detection]:
    """What ``predict`` runs on each frame."""
    return detector.detect(frame)


def line(record: Mapping[str, Any], detections: Sequence[Detection]) -> str:
    """One line of text: the image and each detection's class and score (names from the model or a labels file,
    and the file's name, escaped: text.untrusted)."""
    from ..text import untrusted

    found = ", ".join(f"{untrusted(d.class_name, 100)} {d.score:.2f}" for d in detections)
    return f"{untrusted(record['image'], 400)}: {found or '-'}"


def save(
    folder: Path, path: Path, index: int | None, frame: np.ndarray, detections, protected: Iterable[Path | None] = ()
) -> Path:
    """``frame`` with its detections drawn, as FOLDER/<image's name>, or FOLDER/<video's stem>_<index>.jpg; never
    through a link, nor onto ``path`` or another of the ``protected`` files."""
    from ..files import staged

    folder.mkdir(parents=True, exist_ok=True)
    suffix = f"_{index:06d}.jpg" if index is not None else path.suffix
    saved = folder / f"{path.stem}{suffix}"
    with staged(saved, [path, *protected], "--save folder") as fresh:
        if not cv2.imwrite(str(fresh), draw_detections(frame, detections)):
            raise ValueError(f"cannot write {saved}: OpenCV writes no {suffix} image")
    return saved


# Comparison: what verify compares of the node's answers and the model's offline (results/__init__.py's Item).
def items(detections: Sequence[Detection], tracks: Sequence[str | None] | None = None) -> list[Item]:
    """Each detection as an Item: its box then its keypoints' x, y as points, their scores, its track ID, and its
    instance mask as the masks label image shows it (``mask_items``)."""
    found = []
    for detection, track in zip(detections, tracks or [None] * len(detections)):
        keypoints = np.zeros((0, 3)) if detection.keypoints is None else np.asarray(detection.keypoints, np.float64)
        points = np.concatenate([np.asarray(detection.xyxy, np.float64), keypoints[:, :2].ravel()])
        found.append(Item(detection.class_name, float(detection.score), points, keypoints[:, 2].copy(), track))
    masks = [detection.mask for detection in detections]
    if any(mask is not None for mask in masks):
        from .masks import label_image

        shape = next((mask.height, mask.width) for mask in masks if mask is not None)
        with_labels(found, label_image(masks[: MASK_LABELS["mono16"][1]], shape))
    return found


def with_labels(found: Sequence[Item], labels: np.ndarray) -> None:
    """Gives each of a frame's Items (in the order of its Detection2DArray) its mask as the instance label image
    ``labels`` shows it (label k: the k-th item; within its box)."""
    from .masks import labelled

    for index, item in enumerate(found):
        item.mask = labelled(labels, index + 1, item.points[:4])


def message_items(message: Detection2DArray, tracked: bool = False) -> list[Item]:
    """A node's answer as Items; ``tracked``: each one's Detection2D.id is its track ID (else a rank, not compared)."""
    return items(detections_from_message(message), [item.id if tracked else None for item in message.detections])


def _xyxy(xywh) -> np.ndarray:
    """COCO xywh boxes as xyxy."""
    boxes = np.asarray(xywh, dtype=np.float64)
    return np.concatenate([boxes[..., :2], boxes[..., :2] + boxes[..., 2:]], axis=-1)


def differences(a: list[dict], b: list[dict], min_score: float = 0.25, min_iou: float = 0.5) -> dict:
    """How two configurations' detections differ (what compare and quantize report): those of A and B (COCO
    results) matched per image and class by IoU, greedily by A's score.

    Reports matched and unmatched counts and the largest box (px), score and keypoint (px)
    differences of matched pairs, and with instance masks (``segmentation``) the smallest mask IoU of a matched pair;
    detections below ``min_score`` are left out.
    """

    def by_image(results):
        grouped: dict[tuple[int, int], list[dict]] = {}
        for result in results:
            if result["score"] >= min_score:
                grouped.setdefault((result["image_id"], result["category_id"]), []).append(result)
        return grouped

    group_a, group_b = by_image(a), by_image(b)
    matched, box_delta, score_delta, keypoint_delta, mask_iou = 0, 0.0, 0.0, 0.0, 1.0
    unmatched_a = unmatched_b = 0
    for key in set(group_a) | set(group_b):
        items_a = sorted(group_a.get(key, []), key=lambda r: -r["score"])
        items_b = group_b.get(key, [])
        free = list(range(len(items_b)))
        for item in items_a:
            if not free:
                unmatched_a += 1
                continue
            ious = box_iou(_xyxy(item["bbox"]), _xyxy([items_b[j]["bbox"] for j in free]))
            best = int(np.argmax(ious))
            if ious[best] < min_iou:
                unmatched_a += 1
                continue
            other = items_b[free.pop(best)]
            matched += 1
            box_delta = max(box_delta, float(np.abs(np.subtract(item["bbox"], other["bbox"])).max()))
            score_delta = max(score_delta, abs(item["score"] - other["score"]))
            if "keypoints" in item:
                points = np.reshape(item["keypoints"], (-1, 3))[:, :2] - np.reshape(other["keypoints"], (-1, 3))[:, :2]
                keypoint_delta = max(keypoint_delta, float(np.hypot(points[:, 0], points[:, 1]).max()))
            if "segmentation" in item and "segmentation" in other:
                mask_iou = min(mask_iou, rle_iou(item["segmentation"], other["segmentation"]))
        unmatched_b += len(free)
    record = {"matched": matched, "only_in_a": unmatched_a, "only_in_b": unmatched_b}
    record |= {"box_delta_max_px": box_delta, "score_delta_max": score_delta}
    if any("keypoints" in result for result in a):
        record["keypoint_delta_max_px"] = keypoint_delta
    if any("segmentation" in result for result in a):
        record["mask_iou_min"] = mask_iou
    return record


def offline_items(pipeline: Any, frames: Sequence[np.ndarray]) -> list[list[Item]]:
    """Each frame's detections as the node publishes them, from a fresh stream of ``pipeline`` (families/pipeline.py's
    DetectionPipeline). With tracking on, the tracker first sees the first frame once, as the node does (replay's
    warm-up frame: its answer is not compared, but the node's tracker has seen it), each detection its track ID."""
    from ..families.tracking import id_text

    pipeline.reset()
    if pipeline.tracking is None:
        return [items(pipeline.push(frame).detections) for frame in frames]
    answers = []
    for index, frame in enumerate([*frames[:1], *frames]):
        found = pipeline.push(frame)
        answers += [items(found.detections, [id_text(track) for track in found.track_ids])] if index else []
    return answers


def names_of(pipeline: Any) -> tuple[list[str] | None, list[str]]:
    """The model's class names and its keypoint names ([] without)."""
    detector = pipeline.detector
    return list(detector.names), list(getattr(detector, "keypoint_names", []))


# Metrics: COCO box and keypoint AP (tools/coco_eval.py), what `eval` and `compare` report of detections.
def evaluate(model_type: str, options: Mapping[str, Any]) -> Any:
    """`eval`: a COCO results file (predictions), or the model run over the COCO data set, scored against its
    annotations (data); ``options``: eval's, by name."""
    run = tool_module("coco_eval").evaluate_detections
    o = options
    return run(model_type, o["data"], o["out_dir"], o["predictions"], o["model"], o["target"])


def compare_runs(model_type: str, configurations: Sequence[tuple[Path, str]], options: Mapping[str, Any]) -> Any:
    """`compare`: two (model, target) configurations over one COCO data set (data), predictions and metrics."""
    return tool_module("coco_eval").compare_detections(model_type, configurations, options["data"], options["out_dir"])


class Detector(Protocol):
    """A model family's adapter: BGR frame in, detections in frame pixels out."""

    names: list[str]  # class names by class id
    keypoint_names: list[str]  # [] for plain detectors

    def detect(self, image_bgr: np.ndarray) -> list[Detection]: ...


# Drawing: annotated images (predict --save) and debug topics.
def draw_detections(
    image_bgr: np.ndarray,
    detections: Sequence[Detection],
    skeleton: Sequence[tuple[int, int]] = COCO_SKELETON,
    keypoint_threshold: float = 0.5,
    track_ids: Sequence[int | None] | None = None,
) -> np.ndarray:
    """Boxes with class and score, limbs and keypoints above ``keypoint_threshold``; draws in place. With
    ``track_ids`` (one per detection, None: no track) a tracked box is drawn in its track's colour, labelled
    with its ID ("#7 person 0.91"). An instance mask is filled, half see-through, in its box's colour."""
    for index, detection in enumerate(detections):
        x1, y1, x2, y2 = (int(round(v)) for v in detection.xyxy)
        track = None if track_ids is None else track_ids[index]
        colour = BOX_COLOUR if track is None else tuple(int(255 * c) for c in reversed(track_colour(track)))
        if detection.mask is not None:
            fill(image_bgr, detection.mask, colour if track is not None else class_colour(detection.class_id))
        cv2.rectangle(image_bgr, (x1, y1), (x2, y2), colour, 2)
        label = f"{detection.class_name} {detection.score:.2f}"
        if track is not None:
            label = f"#{track} {label}"
        cv2.putText(image_bgr, label, (x1, max(12, y1 - 4)), cv2.FONT_HERSHEY_SIMPLEX, 0.5, colour)
        points = [] if detection.keypoints is None else detection.keypoints
        visible = [score > keypoint_threshold for _, _, score in points]
        for a, b in skeleton:
            if a < len(points) and b < len(points) and visible[a] and visible[b]:
                start, end = (int(points[a][0]), int(points[a][1])), (int(points[b][0]), int(points[b][1]))
                cv2.line(image_bgr, start, end, LIMB_COLOUR, 2)
        for (x, y, _), shown in zip(points, visible):
            if shown:
                cv2.circle(image_bgr, (int(x), int(y)), 3, KEYPOINT_COLOUR, -1)
    return image_bgr


# ROS messages (vision_msgs, visualization_msgs, sensor_msgs), their types imported on first use.
def masks_message(header: Header, detections: Sequence[Detection], shape: tuple[int, int], encoding: str) -> Image:
    """The frame's instance label image (sensor_msgs/Image of ``shape`` (height, width), ``encoding`` mono16 or
    mono8): 0 where no mask is, k where the k-th detection's of the Detection2DArray of the same header is (1-based;
    where masks overlap, the earlier detection's); mono8 labels the first 255 detections only, mono16 65535."""
    from sensor_msgs.msg import Image

    from .masks import label_image

    dtype, most = MASK_LABELS[encoding]
    labels = label_image([detection.mask for detection in detections[:most]], shape, dtype)
    height, width = shape
    return Image(
        header=header,
        height=height,
        width=width,
        encoding=encoding,
        is_bigendian=0,
        step=width * dtype.itemsize,
        data=labels.tobytes(),
    )


def _hypothesis(class_id: str, score: float, x: float, y: float) -> ObjectHypothesisWithPose:
    from vision_msgs.msg import ObjectHypothesis, ObjectHypothesisWithPose

    result = ObjectHypothesisWithPose(hypothesis=ObjectHypothesis(class_id=class_id, score=float(score)))
    result.pose.pose.position.x, result.pose.pose.position.y = float(x), float(y)
    return result


def detection_message(header: Header, detection: Detection, keypoint_names: Sequence[str], index: int) -> Detection2D:
    from vision_msgs.msg import BoundingBox2D, Detection2D

    x1, y1, x2, y2 = detection.xyxy
    centre_x, centre_y = (x1 + x2) / 2, (y1 + y2) / 2
    message = Detection2D(header=header, id=str(index))
    message.bbox = BoundingBox2D(size_x=float(x2 - x1), size_y=float(y2 - y1))
    message.bbox.center.position.x, message.bbox.center.position.y = float(centre_x), float(centre_y)
    results = [_hypothesis(detection.class_name, detection.score, centre_x, centre_y)]
    for name, (x, y, score) in zip(keypoint_names, () if detection.keypoints is None else detection.keypoints):
        results.append(_hypothesis(name, score, x, y))
    message.results = results
    return message


def detections_message(
    header: Header,
    detections: Sequence[Detection],
    keypoint_names: Sequence[str] = (),
    ids: Sequence[str] | None = None,
) -> Detection2DArray:
    """All detections of one frame, stamped with that frame's header; ``id`` is the rank by score, or the
    detection's entry of ``ids`` (its track ID, families/tracking.id_text) when given."""
    from vision_msgs.msg import Detection2DArray

    messages = [detection_message(header, d, keypoint_names, i) for i, d in enumerate(detections)]
    for message, text in zip(messages, () if ids is None else ids):
        message.id = text
    return Detection2DArray(header=header, detections=messages)


def detections_from_message(message: Detection2DArray, names: Sequence[str] = ()) -> list[Detection]:
    """Boxes (and keypoints) back from a Detection2DArray, e.g. person boxes for a top-down pose model.

    ``hypothesis.class_id`` is the class name (detection_message): its class id is its index in ``names`` (the
    node's LabelInfo, label_names), -1 when not there."""
    from vision_msgs.msg import ObjectHypothesis

    index = {}
    for class_id, name in enumerate(names):
        index.setdefault(name, class_id)
    detections = []
    for item in message.detections:
        centre, size = item.bbox.center.position, (item.bbox.size_x, item.bbox.size_y)
        xyxy = (centre.x - size[0] / 2, centre.y - size[1] / 2, centre.x + size[0] / 2, centre.y + size[1] / 2)
        head = item.results[0].hypothesis if item.results else ObjectHypothesis()
        keypoints = [(r.pose.pose.position.x, r.pose.pose.position.y, r.hypothesis.score) for r in item.results[1:]]
        detections.append(Detection(xyxy, head.score, index.get(head.class_id, -1), head.class_id, keypoints or None))
    return detections


def label_names(message: LabelInfo) -> list[str]:
    """The class names of a LabelInfo by class id (label_info_message's class map; an id left out: '')."""
    by_id = {entry.class_id: entry.class_name for entry in message.class_map}
    return [by_id.get(class_id, "") for class_id in range(max(by_id, default=-1) + 1)]


def label_info_message(header: Header, names: Sequence[str], threshold: float) -> LabelInfo:
    """The class map (class id -> name) and the confidence threshold the node applies."""
    from vision_msgs.msg import LabelInfo, VisionClass

    class_map = [VisionClass(class_id=i, class_name=name) for i, name in enumerate(names)]
    return LabelInfo(header=header, class_map=class_map, threshold=float(threshold))


def skeleton_markers(
    header: Header,
    detections: Sequence[Detection],
    skeleton: Sequence[tuple[int, int]],
    keypoint_threshold: float,
    namespace: str = "pose",
) -> MarkerArray:
    """Per person a LINE_LIST of limbs and a POINTS of keypoints above the threshold, in pixel units.

    The first marker deletes everything from the previous frame, so people who left vanish.
    """
    from geometry_msgs.msg import Point
    from std_msgs.msg import ColorRGBA
    from visualization_msgs.msg import Marker, MarkerArray

    markers = [Marker(header=header, ns=namespace, action=Marker.DELETEALL)]
    for index, detection in enumerate(detections):
        keypoints = [] if detection.keypoints is None else detection.keypoints
        points = [Point(x=float(x), y=float(y), z=0.0) for x, y, _ in keypoints]
        shown = [score > keypoint_threshold for _, _, score in keypoints]
        limbs = Marker(header=header, ns=namespace, id=2 * index, type=Marker.LINE_LIST, action=Marker.ADD)
        pairs = [(a, b) for a, b in skeleton if max(a, b) < len(points) and shown[a] and shown[b]]
        limbs.points = [points[i] for pair in pairs for i in pair]
        limbs.scale.x = 2.0
        limbs.color = ColorRGBA(r=0.0, g=0.6, b=1.0, a=1.0)
        joints = Marker(header=header, ns=namespace, id=2 * index + 1, type=Marker.POINTS, action=Marker.ADD)
        joints.points = [point for point, visible in zip(points, shown) if visible]
        joints.scale.x = joints.scale.y = 5.0
        joints.color = ColorRGBA(r=1.0, g=0.2, b=0.0, a=1.0)
        markers += [limbs, joints]
    return MarkerArray(markers=markers)


def track_markers(header: Header, tracks: Sequence[Track], namespace: str = "tracks") -> MarkerArray:
    """Per track a LINE_STRIP through its recent centres (Track.history), in pixel units, in the colour of its ID
    (track_colour above), marker id the track ID. The first marker deletes the previous frame's, so
    tracks that ended vanish."""
    from geometry_msgs.msg import Point
    from std_msgs.msg import ColorRGBA
    from visualization_msgs.msg import Marker, MarkerArray

    markers = [Marker(header=header, ns=namespace, action=Marker.DELETEALL)]
    for track in tracks:
        path = Marker(header=header, ns=namespace, id=track.id, type=Marker.LINE_STRIP, action=Marker.ADD)
        path.points = [Point(x=float(x), y=float(y), z=0.0) for _, x, y in track.history]
        path.scale.x = 2.0
        red, green, blue = track_colour(track.id)
        path.color = ColorRGBA(r=float(red), g=float(green), b=float(blue), a=1.0)
        markers.append(path)
    return MarkerArray(markers=markers)
