"""Detection and pose nodes (yolo, yolo_pose, fasterrcnn, rtmpose), on any backend.

Subscribes  image (sensor_msgs/Image) or image/compressed (sensor_msgs/CompressedImage);
            rtmpose with person_source topic also person_detections (vision_msgs/Detection2DArray),
            paired with the image of the same stamp
Publishes   detections (detection families) or poses (pose families), vision_msgs/Detection2DArray,
            one per frame with that frame's header; labels (vision_msgs/LabelInfo, transient local,
            once); pose_markers (visualization_msgs/MarkerArray) and debug_image only when subscribed.

``run(RunnerClass, args, family)`` starts one of ``family`` (families/<name>.py's FAMILY) on that backend's
runner; each package binds its own, and imports only its own family's module.
"""

from __future__ import annotations

from collections import OrderedDict

from rclpy.qos import DurabilityPolicy, QoSProfile
from sensor_msgs.msg import Image
from std_msgs.msg import Header
from vision_msgs.msg import Detection2DArray, LabelInfo
from visualization_msgs.msg import MarkerArray

from ..families.family import Family
from ..images import ImageFormatError
from ..models.detections import COCO_KEYPOINTS, COCO_SKELETON
from ..models.drawing import draw_detections
from ..runtime.runner import Runner
from .detection_messages import detections_from_message, detections_message, label_info_message, skeleton_markers
from .inference_node import InferenceNode, spin
from .messages import bgr_to_message

PAIRING_WINDOW = 30  # images (or person detections) kept while waiting for their partner of the same stamp


def _stamp(header: Header) -> tuple[int, int]:
    return header.stamp.sec, header.stamp.nanosec


class DetectionNode(InferenceNode):
    def __init__(self, runner_class: type[Runner], family: Family, **kwargs):
        super().__init__(family.name, family.parameters, runner_class, **kwargs)
        values = self.values
        self.detector = family.build(values, lambda path: self.load_runner(runner_class, path))
        self.get_logger().info(f"{family.name} {values['model_path']}: {self.detector.runner.describe()}")
        self.pose = family.keypoints
        self.keypoint_threshold = values.get("keypoint_threshold", 0.5)
        known_skeleton = self.pose and list(self.detector.keypoint_names) == list(COCO_KEYPOINTS)
        self.skeleton = COCO_SKELETON if known_skeleton else ()
        output = family.output_topic
        self.detections_pub = self.create_publisher(Detection2DArray, output, 10)
        self.debug_pub = self.create_publisher(Image, "debug_image", 1)
        self.marker_pub = self.create_publisher(MarkerArray, "pose_markers", 1) if self.pose else None
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        labels_header = Header(stamp=self.get_clock().now().to_msg())
        self.create_publisher(LabelInfo, "labels", latched).publish(
            label_info_message(labels_header, self.detector.names, values["confidence_threshold"])
        )
        self.outputs = 0
        if values.get("person_source") == "topic":  # rtmpose's people from another node
            self._images: OrderedDict = OrderedDict()
            self._people: OrderedDict = OrderedDict()
            self.person_class = values["person_class"]  # by name here: ids mean nothing across nodes
            topic = self.subscribe_images(self._keep_image)
            self.create_subscription(Detection2DArray, "person_detections", self._keep_people, 10)
            people = self.resolve_topic_name("person_detections")
            self.get_logger().info(f"posing the people of {people}, paired with images by stamp")
        else:
            topic = self.subscribe_images()
        self.get_logger().info(f"listening on {topic}, publishing {self.resolve_topic_name(output)}")

    def _keep_image(self, msg) -> None:
        self._pair(msg, _stamp(msg.header), self._images, self._people, lambda people: (msg, people))

    def _keep_people(self, msg: Detection2DArray) -> None:
        self._pair(msg, _stamp(msg.header), self._people, self._images, lambda image: (image, msg))

    def _pair(self, msg, stamp, mine: OrderedDict, theirs: OrderedDict, item) -> None:
        """Enqueue (image, person detections) once both of one stamp are in; keep the newest unpaired."""
        partner = theirs.pop(stamp, None)
        if partner is not None:
            self.enqueue(item(partner))
            return
        mine[stamp] = msg
        while len(mine) > PAIRING_WINDOW:
            mine.popitem(last=False)
            if mine is self._images:
                self._unpaired_image()

    def _unpaired_image(self) -> None:
        """An image whose person detections never came: refused (counted and reported), not lost silently."""
        self.frames_in += 1  # on the executor's thread, as enqueue's count
        self.skip(
            "image without person detections",
            f"no person_detections message with the image's stamp came among the next {PAIRING_WINDOW} messages; "
            "is the detector running, and does it stamp its output with the image's header?",
        )

    def process(self, item) -> None:
        image_msg, people_msg = item if isinstance(item, tuple) else (item, None)
        try:
            frame = self.to_bgr(image_msg)
        except ImageFormatError as exc:
            self.skip_error(exc)
            return
        if people_msg is None:
            detections = self.detector.detect(frame)
        else:
            people = detections_from_message(people_msg)
            if self.person_class:
                people = [person for person in people if person.class_name == self.person_class]
            detections = self.detector.pose(frame, people)
        header = image_msg.header
        self.detections_pub.publish(detections_message(header, detections, self.detector.keypoint_names))
        self.outputs += 1
        if self.marker_pub is not None and self.marker_pub.get_subscription_count() > 0:
            self.marker_pub.publish(skeleton_markers(header, detections, self.skeleton, self.keypoint_threshold))
        if self.debug_pub.get_subscription_count() > 0:
            annotated = draw_detections(frame.copy(), detections, self.skeleton, self.keypoint_threshold)
            self.debug_pub.publish(bgr_to_message(annotated, header))

    def close(self) -> None:
        for _ in getattr(self, "_images", ()):  # images still waiting for their people at the end
            self._unpaired_image()
        super().close()
        self.get_logger().info(
            f"frames in {self.frames_in}, dropped {self.frames_dropped}, skipped {self.frames_skipped}, "
            f"outputs {self.outputs}"
        )


def run(runner_class: type[Runner], args: list[str] | None, family: Family) -> int:
    """Run the ``family`` node until SIGINT/SIGTERM; 2 when it cannot start (the reason is logged)."""
    return spin(lambda: DetectionNode(runner_class, family), family.name, args)
