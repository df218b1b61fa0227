"""track_node: track IDs for another node's detections, on any backend (the re-identification model's).

Subscribes  image (sensor_msgs/Image) or image/compressed (sensor_msgs/CompressedImage), and detections
            (vision_msgs/Detection2DArray), paired by stamp
Publishes   families/track.py's output table (its publishers, and what `vision-factory models` says): tracks
            (vision_msgs/Detection2DArray), each detections message as it came, with every Detection2D.id the
            detection's track ID, or empty when it is not (yet) part of a confirmed track; track_markers and
            debug_image only when subscribed.

Detections are tracked per class: their results[0] class_id (a name) sets it. Those scoring under
track_low_threshold are republished too, with an empty id; so are those of a NaN or infinite box or score, never
tracked (reported once, counted). New streams as in ros/tracks.py. With ``cameras``
(ros/inference_node.py) each camera's images and detections are paired and tracked on their own (a tracker per
camera, one re-id model).
"""

from __future__ import annotations

from dataclasses import replace

from vision_msgs.msg import Detection2DArray  # noqa: F401  imported at start: a node without it says so (ros/start.py)

from ..families.family import Family
from ..families.tracking import diagnostic_values, live_config
from ..images import ImageFormatError
from ..results.boxes import Boxes, id_text, track_markers
from ..results.finite import MESSAGE_FIX, finite
from ..results.frame import FrameResult
from ..results.keypoints import Keypoints
from ..runtime.runner import Runner
from .cameras import wanted
from .inference_node import InferenceNode
from .messages import bgr_to_message
from .spin import spin
from .tracks import TrackedStream


class TrackNode(InferenceNode):
    def __init__(self, runner_class: type[Runner], family: Family, **kwargs):
        self.family = family
        super().__init__(family.name, family.node_parameters, runner_class, **kwargs)

    def configure(self) -> None:
        trackings = self.camera_pipelines(lambda load_runner: self.family.build(self.values, load_runner))
        self.streams = {camera: TrackedStream(tracking, self.get_logger()) for camera, tracking in trackings.items()}
        self.tracking = trackings[self.cameras[0]]
        self.classes: dict[str, int] = {}  # class name -> the tracker's class id, in order of first sight
        publishers = self.create_outputs(self.family.node.outputs)  # families/track.py's table
        self.tracks_pub = publishers[self.family.output_topic]
        self.marker_pub, self.debug_pub = publishers["track_markers"], publishers["debug_image"]

    def status_values(self) -> dict[str, str]:
        """/diagnostics' values of this node (ros/monitor.py): with re-id, the tracker's thresholds and calibration."""
        tracking = getattr(self, "tracking", None)
        return diagnostic_values(tracking) if tracking is not None else {}

    def retune(self, values, changed: set[str]):
        """Live parameters (node_live.py): the trackers' motion thresholds, from the next frame; the tracks go on."""
        config = live_config(self.tracking, values)

        def apply() -> None:
            for stream in self.streams.values():
                stream.tracking.tracker.retune(config)

        return apply

    def listen(self) -> None:
        hint = "is the detector running, and does it stamp its output with the image's header?"
        detections = self.family.node.paired(self.values)  # families/track.py's table
        topic = self.subscribe_paired_images(detections, "detections", hint)
        reid = "re-identification " + self.values["reid_model_path"] if self.tracking.embedder else "motion only"
        self.get_logger().info(
            f"tracking ({reid}) the detections of {self.resolve_topic_name(detections.topic)} paired with {topic}, "
            f"publishing {self.resolved_outputs(self.family.output_topic)}"
        )

    def process(self, camera: str, item) -> None:
        image_msg, detections_msg = item
        try:
            frame = self.to_bgr(image_msg)
        except ImageFormatError as exc:
            self.skip_error(exc, camera)
            return
        keypoints = Keypoints.from_message(detections_msg)  # drawn as they are, without limbs
        received = FrameResult.of(
            frame,
            boxes=Boxes.from_message(detections_msg),
            keypoints=None if keypoints is None else replace(keypoints, skeleton=()),
        )
        # those of a NaN or infinite box or score are not tracked (republished with an empty id), counted
        screened = finite(received, "detections", MESSAGE_FIX)
        for kind, detail in screened.problems.items():
            self.warn(kind, detail)
        boxes = screened.result.boxes
        # tracked per class: each class name the tracker's class id, in order of first sight
        classes = [self.classes.setdefault(label, len(self.classes)) for label in boxes.labels]
        detections = screened.result.with_parts(boxes=Boxes(boxes.xyxy, boxes.scores, classes, boxes.labels))
        stream = self.streams[camera]
        track_ids = stream.update(detections_msg.header, frame, detections.boxes)
        ids: list[int | None] = [None] * len(detections_msg.detections)
        for index, track in zip(screened.kept, track_ids):
            ids[index] = track
        for message, track in zip(detections_msg.detections, ids):
            message.id = id_text(track)
        self.tracks_pub[camera].publish(detections_msg)
        self.outputs += 1
        self.monitor.answered(detections_msg.header, camera)
        if wanted(self.marker_pub[camera]):
            self.marker_pub[camera].publish(track_markers(detections_msg.header, stream.tracking.tracker.active))
        if wanted(self.debug_pub[camera]):
            tracked = detections.with_parts(boxes=detections.boxes.tracked(track_ids))
            self.debug_pub[camera].publish(bgr_to_message(tracked.draw(frame.copy()), image_msg.header))


def run(runner_class: type[Runner], args: list[str] | None, family: Family) -> int:
    """Run track_node until SIGINT/SIGTERM; 2 when it cannot start (the reason is logged)."""
    return spin(lambda: TrackNode(runner_class, family), family.name, args)
