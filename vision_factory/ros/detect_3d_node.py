"""detect_3d_node: another node's 2D detections in 3D, from a depth image and the cameras' intrinsics
(models/lift3d.py: the geometry, its units and alignment rules).

Subscribes  detections (vision_msgs/Detection2DArray: any detection node's, its boxes in the colour image),
            depth (sensor_msgs/Image, 16UC1 millimetres or 32FC1 metres, REP-118: the unit from its encoding),
            paired with the detections of the same header stamp (as rtmpose pairs people with images: registered
            depth from an RGB-D driver, or depth_node's output, carries the colour image's stamp);
            camera_info (sensor_msgs/CameraInfo of the colour image: its K and size), the one of the detections'
            stamp, else the newest received (camera_infos.py's rule);
            depth_camera_info (sensor_msgs/CameraInfo of the depth image), the one of the depth's stamp, else the
            newest received, optional: needed when the depth image's size differs from the colour image's
            with use_masks, masks (sensor_msgs/Image mono16 or mono8: a segmentation node's instance label image,
            label k the k-th detection), paired by stamp too: each detection measured under its mask
Publishes   detections_3d (vision_msgs/Detection3DArray), one per detections message with its header (frame_id:
            the colour camera's optical frame; camera_info's when the detections have none): one Detection3D per
            detection with valid depth, its id the Detection2D's (the track ID, or the rank), results[0] the class
            and score with the box centre as pose, bbox an axis-aligned box in metres; a detection without enough
            valid depth is left out (counted: "detection without depth"), never published at zero depth;
            box_markers (visualization_msgs/MarkerArray, when subscribed): a translucent cube and a label per box.

A managed (lifecycle) node on ros/inference_node.py's base with the nodes' conventions (lifecycle and autostart,
/diagnostics and ~/debug/ times, problems once per kind, max_frame_age, lazy, QoS overrides on the outputs, the
silence watch on the depth topic); it has no model, so its runner is ``NoModel``.
"""

from __future__ import annotations

import zlib
from dataclasses import replace
from typing import Any

from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import Header
from vision_msgs.msg import Detection2DArray, ObjectHypothesisWithPose

try:
    from vision_msgs.msg import Detection3D, Detection3DArray
except ImportError as missing:  # a vision_msgs built before the 3D messages were in its subset
    if isinstance(missing, ModuleNotFoundError):
        raise
    raise SystemExit(
        "detect_3d_node: this vision_msgs has no Detection3DArray: it was built before the 3D messages were in "
        "vision_factory's subset. Rebuild it: vision-factory install-vision-msgs --force (pip-only machines), or "
        "install the distribution's vision_msgs (rosdep)."
    ) from None

from ..camera_infos import CameraInfoError, CameraInfos, Intrinsics
from ..families.family import MARKERS_MESSAGE, Input, Output
from ..images import ImageFormatError
from ..models.lift3d import (
    CORE,
    MIN_VALID,
    Box3D,
    LiftError,
    check_camera_frame,
    depth_intrinsics,
    depth_metres,
    lift,
)
from ..parameters import FRACTION, IMAGE_INPUT_PARAMETERS, LIVE, RUNTIME_PARAMETERS, Parameter
from ..results.boxes import Boxes
from ..results.colours import track_colour
from ..results.finite import MESSAGE_FIX, finite
from ..results.frame import FrameResult
from ..results.masks import MaskImageError, Masks
from ..streaming import PAIRING_WINDOW, Pairing
from .cameras import wanted
from .inference_node import InferenceNode
from .messages import image_from_cdr
from .spin import spin

NAME = "detect_3d"
PARAMETERS = (
    Parameter(
        "core_fraction",
        CORE,
        "share of a box's width and height, around its centre, whose depth is the object's (detections without a mask)",
        minimum=0.05,
        maximum=1.0,
        applies=LIVE,
    ),
    Parameter(
        "min_valid_fraction",
        MIN_VALID,
        "least share of pixels with valid depth in a detection's mask or box core for a 3D box",
        **FRACTION,
        applies=LIVE,
    ),
    Parameter(
        "use_masks",
        False,
        "also subscribe masks (a segmentation node's instance label image, mono16 or mono8, label k the k-th "
        "detection), paired by stamp: each detection's depth is read under its mask",
    ),
    *(
        replace(p, choices=("raw",), description="raw: depth is read as sensor_msgs/Image (16UC1 or 32FC1)")
        if p.name == "input_transport"
        else p
        for p in IMAGE_INPUT_PARAMETERS
        if p.name != "cameras"  # one camera's detections and depth; a node per camera
    ),
    *RUNTIME_PARAMETERS,
)
INPUTS = (  # what it subscribes to, described (--help)
    Input("detections", "vision_msgs/msg/Detection2DArray", ": any detection node's, boxes in the colour image"),
    Input("depth", "sensor_msgs/msg/Image", ", 16UC1 millimetres or 32FC1 metres, paired by stamp"),
    Input("camera_info", "sensor_msgs/msg/CameraInfo", " of the colour image"),
    Input("depth_camera_info", "sensor_msgs/msg/CameraInfo", " of the depth image, where its size differs"),
    Input("masks", "sensor_msgs/msg/Image", ", mono16 or mono8 instance labels, paired by stamp", ("use_masks", True)),
)
OUTPUTS = (
    Output(
        "detections_3d",
        "vision_msgs/msg/Detection3DArray",
        ", one per detections message, in its camera's optical frame",
        depth=10,
    ),
    Output("box_markers", MARKERS_MESSAGE, on_demand=True),
)
MASKS_HINT = (
    "is the detector a segmentation model (a yolo node of a -seg model publishes masks when subscribed), and is masks "
    "remapped to its ~/masks? Without masks, set use_masks false"
)
HINT = (
    "does the depth carry the colour image's stamp (registered depth: e.g. the RealSense driver's "
    "aligned_depth_to_color with enable_sync, or depth_node's output), and is it published?"
)


class NoModel:
    """The runner of a node without a model: no parameters, nothing to prepare."""

    PARAMETERS: tuple[Parameter, ...] = ()

    @staticmethod
    def prepare(settings: dict[str, Any]) -> str | None:
        return None


class Detect3DNode(InferenceNode):
    def __init__(self, **kwargs):
        super().__init__(NAME, PARAMETERS, NoModel, **kwargs)

    def configure(self) -> None:
        self.core = self.values["core_fraction"]
        self.min_valid = self.values["min_valid_fraction"]
        publishers = self.create_outputs(OUTPUTS)
        self.boxes_pub, self.marker_pub = publishers["detections_3d"], publishers["box_markers"]
        self.camera_infos, self.depth_camera_infos = CameraInfos(), CameraInfos()  # by stamp
        self.use_masks = self.values["use_masks"]
        self._mask_pairs: Pairing | None = None

    def retune(self, values, changed: set[str]):
        """Live parameters (node_live.py): the box core and the valid depth needed, from the next detections."""

        def apply() -> None:
            self.core, self.min_valid = values["core_fraction"], values["min_valid_fraction"]

        return apply

    def listen(self) -> None:
        # The detections are the frames owed an answer; a depth image waits for its detections (a detector that
        # answers only the newest frame leaves depth images unpaired, which is no problem).
        self._pairs = {camera: Pairing(PAIRING_WINDOW) for camera in self.cameras}  # one camera: its own topics
        self._pairing = "depth", "depth", HINT
        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        watched = self.monitor.watch("depth", Image, self.image_qos, self._take_depth)
        self._inputs += [
            self.monitor.subscribe(Image, "depth", watched, self.image_qos, raw=True),
            self.create_subscription(Detection2DArray, "detections", lambda msg: self._keep_image("", msg), reliable),
            self.create_subscription(CameraInfo, "camera_info", self._keep_camera_info, self.image_qos),
            self.create_subscription(CameraInfo, "depth_camera_info", self._keep_depth_camera_info, self.image_qos),
        ]
        if self.use_masks:  # the paired detections and depth wait for the masks of their stamp
            self._mask_pairs = Pairing(PAIRING_WINDOW)
            self._inputs.append(self.create_subscription(Image, "masks", self._keep_masks, reliable))
            self.get_logger().info(f"measuring each detection under its mask of {self.resolve_topic_name('masks')}")
        self.get_logger().info(
            f"lifting {self.resolve_topic_name('detections')} with depth {self.resolve_topic_name('depth')} "
            f"(paired by stamp), {self.resolve_topic_name('camera_info')} and, if published, "
            f"{self.resolve_topic_name('depth_camera_info')}; publishing {self.resolve_topic_name('detections_3d')}"
        )

    def _take_depth(self, data: bytes) -> None:
        try:
            msg = image_from_cdr(data)
        except ImageFormatError as exc:  # counted under its kind, never raised in the executor
            self.skip_error(exc, "")
            return
        self._keep_partner("", msg)

    def enqueue(self, camera: str, item: Any) -> None:
        """(detections, depth) of one stamp; with use_masks, enqueued once the masks of that stamp are in too."""
        if self._mask_pairs is None or len(item) == 3:
            super().enqueue(camera, item)
            return
        self._with_masks(*self._mask_pairs.image(_Waiting(item)))

    def _keep_masks(self, msg: Image) -> None:
        if self._mask_pairs is not None:
            self._with_masks(*self._mask_pairs.partner(msg))

    def _with_masks(self, pair: tuple | None, unpaired: int) -> None:
        if pair is not None:
            waiting, masks = pair
            super().enqueue("", (*waiting.item, masks))
        for _ in range(unpaired):
            self._without_masks()

    def _without_masks(self) -> None:
        """Detections (with their depth) whose masks never came: refused (counted and reported), not lost silently."""
        self.frames_in += 1
        self.skip(
            "detections without masks",
            f"no {self.resolve_topic_name('masks')} message with their stamp came among the next {PAIRING_WINDOW} "
            f"messages; {MASKS_HINT}",
            "",
        )

    def _stop_listening(self) -> None:
        super()._stop_listening()
        pairs, self._mask_pairs = getattr(self, "_mask_pairs", None), None
        for _ in range(pairs.clear() if pairs else 0):  # waiting for their masks
            self._without_masks()

    def _keep_camera_info(self, msg: CameraInfo) -> None:
        self.camera_infos.keep(msg)

    def _keep_depth_camera_info(self, msg: CameraInfo) -> None:
        self.depth_camera_infos.keep(msg)

    def process(self, camera: str, item) -> None:
        detections_msg, depth_msg, masks_msg = item if len(item) == 3 else (*item, None)
        info = self.camera_infos.for_stamp(detections_msg.header.stamp)
        if info is None:
            self.skip(
                "no camera_info",
                f"no CameraInfo came on {self.resolve_topic_name('camera_info')}: remap camera_info to the colour "
                "camera's (the image the detections are from)",
                camera,
            )
            return
        try:
            colour = Intrinsics.of(info, "camera_info")
            depth_info = self.depth_camera_infos.for_stamp(depth_msg.header.stamp)
            depth_k = None if depth_info is None else Intrinsics.of(depth_info, "depth_camera_info")
            pixels = depth_msg.width * depth_msg.height
            if self.max_image_pixels and pixels > self.max_image_pixels:
                raise LiftError(
                    "depth image too large",
                    f"the depth image is {depth_msg.width}x{depth_msg.height}, over max_image_pixels "
                    f"{self.max_image_pixels}",
                )
            check_camera_frame(detections_msg.header.frame_id, info.header.frame_id)
            frame = detections_msg.header.frame_id or info.header.frame_id
            depth_frame = depth_msg.header.frame_id or (depth_info.header.frame_id if depth_info else "")
            k = depth_intrinsics(colour, depth_k, (depth_msg.width, depth_msg.height), frame, depth_frame)
            depth = depth_metres(
                depth_msg.encoding,
                depth_msg.width,
                depth_msg.height,
                depth_msg.step,
                depth_msg.data,
                bool(depth_msg.is_bigendian),
            )
            detections = FrameResult(*colour.size, Boxes.from_message(detections_msg))
            if masks_msg is not None:
                detections.masks = _masks(detections.boxes, masks_msg, colour)
        except (LiftError, CameraInfoError) as exc:
            self.skip_error(exc, camera)
            return
        # those of a NaN or infinite box or score: no 3D box, counted apart from those without depth
        screened = finite(detections, "detections", MESSAGE_FIX)
        for kind, detail in screened.problems.items():
            self.warn(kind, detail)
        boxes: list[Box3D | None] = [None] * len(detections)
        for index, box in zip(screened.kept, lift(screened.result, depth, colour, k, self.core, self.min_valid)):
            boxes[index] = box
        header = Header(stamp=detections_msg.header.stamp, frame_id=frame)
        self.boxes_pub[camera].publish(detections_3d_message(header, detections_msg, boxes))
        self.outputs += 1
        self.monitor.answered(header, camera)
        without = sum(boxes[index] is None for index in screened.kept)
        if without:
            self.warn(
                "detection without depth",
                f"{without} of {len(boxes)} detections have under min_valid_fraction "
                f"{self.min_valid:g} valid depth in their mask or box core (out of the depth camera's range, or "
                "outside its image): left out of detections_3d, never placed at zero depth",
            )
        if wanted(self.marker_pub[camera]):
            self.marker_pub[camera].publish(box_markers(header, detections_msg, boxes))


class _Waiting:
    """Detections and depth of one stamp waiting for their masks (Pairing reads ``header``)."""

    __slots__ = ("header", "item")

    def __init__(self, item: tuple):
        self.header, self.item = item[0].header, item


def _masks(boxes: Boxes, masks: Any, colour: Intrinsics) -> Masks:
    """Each detection's mask from the instance label image ``masks`` (label k + 1: the k-th detection; one beyond
    the encoding's labels keeps none: its box core is read). Of another encoding or size than the colour image's:
    a LiftError."""
    if masks.encoding in ("mono16", "mono8") and (masks.width, masks.height) != colour.size:
        raise LiftError(
            "masks size",
            f"masks is {masks.width}x{masks.height} (step {masks.step}), the colour image {colour.width}x"
            f"{colour.height} (camera_info): remap masks to the same detection node's ~/masks",
        )
    try:
        return Masks.from_message(masks, boxes)
    except MaskImageError as exc:
        raise LiftError(exc.kind, str(exc)) from None


def detections_3d_message(header: Header, detections: Any, boxes: list[Box3D | None]) -> Detection3DArray:
    """The 3D answer to a Detection2DArray: a Detection3D per detection that has a box, in order, its id and
    results[0]'s class and score the 2D detection's, results[0]'s pose the box centre."""
    found = []
    for detection, box in zip(detections.detections, boxes):
        if box is None:
            continue
        message = Detection3D(header=header, id=detection.id)
        centre = message.bbox.center
        centre.position.x, centre.position.y, centre.position.z = box.centre
        centre.orientation.w = 1.0
        message.bbox.size.x, message.bbox.size.y, message.bbox.size.z = box.size
        if detection.results:
            result = ObjectHypothesisWithPose(hypothesis=detection.results[0].hypothesis)
            result.pose.pose = centre
            message.results = [result]
        found.append(message)
    return Detection3DArray(header=header, detections=found)


def box_markers(header: Header, detections: Any, boxes: list[Box3D | None]) -> Any:
    """Per 3D box a translucent CUBE and a TEXT_VIEW_FACING label (class, score, id) above it, coloured by class;
    the first marker deletes the previous frame's."""
    from std_msgs.msg import ColorRGBA
    from visualization_msgs.msg import Marker, MarkerArray

    markers = [Marker(header=header, ns="boxes", action=Marker.DELETEALL)]
    for index, (detection, box) in enumerate(zip(detections.detections, boxes)):
        if box is None:
            continue
        hypothesis = detection.results[0].hypothesis if detection.results else None
        name = hypothesis.class_id if hypothesis else ""
        red, green, blue = track_colour(zlib.crc32(name.encode()) % 9973)
        cube = Marker(header=header, ns="boxes", id=index, type=Marker.CUBE, action=Marker.ADD)
        cube.pose.position.x, cube.pose.position.y, cube.pose.position.z = box.centre
        cube.pose.orientation.w = 1.0
        cube.scale.x, cube.scale.y, cube.scale.z = (max(value, 0.01) for value in box.size)  # RViz hides 0
        cube.color = ColorRGBA(r=float(red), g=float(green), b=float(blue), a=0.4)
        label = Marker(header=header, ns="labels", id=index, type=Marker.TEXT_VIEW_FACING, action=Marker.ADD)
        label.pose.position.x, label.pose.position.z = box.centre[0], box.centre[2]
        label.pose.position.y = box.centre[1] - box.size[1] / 2 - 0.05  # above: y points down in an optical frame
        label.pose.orientation.w = 1.0
        label.scale.z = 0.08
        label.color = ColorRGBA(r=1.0, g=1.0, b=1.0, a=1.0)
        score = f" {hypothesis.score:.2f}" if hypothesis else ""
        label.text = f"{name[:100]}{score} #{detection.id[:40]}" if detection.id else f"{name[:100]}{score}"
        markers += [cube, label]
    return MarkerArray(markers=markers)


def run(args: list[str] | None = None) -> int:
    """Run detect_3d_node until SIGINT/SIGTERM; 2 when it cannot start (the reason is logged)."""
    return spin(Detect3DNode, NAME, args)
