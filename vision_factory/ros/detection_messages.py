"""Detections and poses as vision_msgs, and poses as a MarkerArray skeleton.

Layout of a pose in ``Detection2DArray`` (one ``Detection2D`` per person):
- ``results[0]``: the person: ``hypothesis.class_id`` its class name, ``hypothesis.score`` in 0..1,
  ``pose.pose.position`` the box centre;
- ``results[1:]``: one per keypoint, in the model's order: ``hypothesis.class_id`` the keypoint
  name (``nose``, ``left_eye``, ...), ``hypothesis.score`` its confidence,
  ``pose.pose.position.x/y`` its position in source-image pixels.
"""

from __future__ import annotations

from collections.abc import Sequence

from geometry_msgs.msg import Point
from std_msgs.msg import ColorRGBA, Header
from vision_msgs.msg import (
    BoundingBox2D,
    Detection2D,
    Detection2DArray,
    LabelInfo,
    ObjectHypothesis,
    ObjectHypothesisWithPose,
    VisionClass,
)
from visualization_msgs.msg import Marker, MarkerArray

from ..models.detections import Detection
from ..models.drawing import track_colour
from ..models.tracker import Track


def _hypothesis(class_id: str, score: float, x: float, y: float) -> ObjectHypothesisWithPose:
    result = ObjectHypothesisWithPose(hypothesis=ObjectHypothesis(class_id=class_id, score=float(score)))
    result.pose.pose.position.x, result.pose.pose.position.y = float(x), float(y)
    return result


def detection_message(header: Header, detection: Detection, keypoint_names: Sequence[str], index: int) -> Detection2D:
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
    messages = [detection_message(header, d, keypoint_names, i) for i, d in enumerate(detections)]
    for message, text in zip(messages, () if ids is None else ids):
        message.id = text
    return Detection2DArray(header=header, detections=messages)


def detections_from_message(message: Detection2DArray, names: Sequence[str] = ()) -> list[Detection]:
    """Boxes (and keypoints) back from a Detection2DArray, e.g. person boxes for a top-down pose model.

    ``hypothesis.class_id`` is the class name (detection_message): its class id is its index in ``names`` (the
    node's LabelInfo, label_names), -1 when not there."""
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
    (models/drawing.py's track_colour), marker id the track ID. The first marker deletes the previous frame's, so
    tracks that ended vanish."""
    markers = [Marker(header=header, ns=namespace, action=Marker.DELETEALL)]
    for track in tracks:
        path = Marker(header=header, ns=namespace, id=track.id, type=Marker.LINE_STRIP, action=Marker.ADD)
        path.points = [Point(x=float(x), y=float(y), z=0.0) for _, x, y in track.history]
        path.scale.x = 2.0
        red, green, blue = track_colour(track.id)
        path.color = ColorRGBA(r=float(red), g=float(green), b=float(blue), a=1.0)
        markers.append(path)
    return MarkerArray(markers=markers)
