"""Detection, pose and classification nodes (yolo, yolo_pose, fasterrcnn, rtmpose, sam, yolo_cls), on any backend.

Subscribes  image (sensor_msgs/Image) or image/compressed (sensor_msgs/CompressedImage);
            rtmpose with person_source topic also person_detections, sam boxes (vision_msgs/Detection2DArray),
            paired with the image of the same stamp
Publishes   families/detection.py's output table (node()), from which configure creates the publishers and
            `vision-factory models` describes them: detections (detection families) or poses (pose families),
            vision_msgs/Detection2DArray, one per frame with that frame's header (a classifier: classification,
            vision_msgs/Classification, its best classes, best first: results/classes.py); labels (the class map,
            transient local, once); pose markers, with tracking on track markers, and debug_image when subscribed;
            a segmentation model's masks (sensor_msgs/Image label image, mask_encoding) when subscribed.

With ``tracking`` on (yolo, yolo_pose, fasterrcnn: families/tracking.py's parameters) each Detection2D.id is the
detection's track ID, empty when it is not (yet) part of a confirmed track; the detector then hands the tracker
its detections down to track_low_threshold and the node publishes those above confidence_threshold and the lower
ones that continue a track (families/tracking.published). With ``cross_camera_reid`` on
(several cameras, a re-id model) it is the person's global ID over every camera instead (models/global_ids.py),
and the camera's own track ID stays on its track_markers. The tracker starts a new stream (IDs from 1 again)
when the frame size changes or a stamp goes back in time (families/pipeline.py's StreamRule). The node runs
its family's frame pipeline (Family.pipeline), as verify, track and the other tools do.

With ``cameras`` (ros/inference_node.py) each camera has its own pipeline (its tracker) on the one model, and a
model that takes a batch (a dynamic batch, or a fixed one over 1) answers the frames waiting from several cameras
in one run (cameras.py's detect_batch); others run them one after another.

A managed (lifecycle) node as every node (ros/inference_node.py); its queue_size defaults to 1 (families/family.py):
a detector answers the newest frame, never a backlog.

``run(RunnerClass, args, family)`` starts one of ``family`` (families/<name>.py's FAMILY) on that backend's
runner; each package binds its own, and imports only its own family's module.
"""

from __future__ import annotations

from typing import Any

from std_msgs.msg import Header
from vision_msgs.msg import Detection2DArray  # noqa: F401  imported at start: a node without it says so (ros/start.py)

from ..cameras import batches, detect_batch
from ..families import tracking as tracking_parameters
from ..families.family import Family
from ..families.pipeline import detector_of
from ..images import ImageFormatError
from ..models.global_ids import global_ids, reentry_threshold
from ..results.boxes import Boxes, label_info_message, track_markers
from ..results.frame import FrameResult
from ..runtime.runner import Runner
from ..streaming import stamp_ns, stamp_of
from .cameras import wanted
from .inference_node import InferenceNode
from .messages import bgr_to_message
from .spin import spin


class DetectionNode(InferenceNode):
    def __init__(self, runner_class: type[Runner], family: Family, **kwargs):
        self.family = family
        super().__init__(family.name, family.node_parameters, runner_class, family.served_prompt, **kwargs)

    def configure(self) -> None:
        values, family = self.values, self.family
        # families/pipeline.py, as the tools run it: each camera's own (its tracker), on one model and one adapter (a
        # prompt's tokens derived once)
        built: dict[str, Any] = {}

        def make(load_runner):
            pipeline = family.pipeline(values, load_runner, detector=built.get("detector"))
            built.setdefault("detector", pipeline.detector)
            return pipeline

        self.pipelines = self.camera_pipelines(make)
        self.pipeline = self.pipelines[self.cameras[0]]
        self.tracking, self.detector = self.pipeline.tracking, self.pipeline.detector
        # cross_camera_reid: one global ID per person over the cameras (models/global_ids.py)
        self.global_ids = tracking_parameters.cross_camera(values, self.cameras if self.multicamera else ())
        if self.multicamera and family.node.paired(values) is None and batches(self.detector):
            self.batch_limit = len(self.cameras)  # the frames waiting from the cameras, in runs of the model's batch
        note = tracking_parameters.from_model_text(self.tracking) if self.tracking else None
        if note:
            self.get_logger().info(note)
        self.get_logger().info(f"{family.name} {values['model_path']}: {self.detector.runner.describe()}")
        head_note = getattr(self.detector, "head_note", None)  # e.g. YOLO's end-to-end head: no NMS
        if head_note:
            self.get_logger().info(head_note)
        self.confidence = values.get("confidence_threshold", 0.0)  # a classifier (yolo_cls) lists its best classes
        self.keypoint_threshold = values.get("keypoint_threshold", 0.5)
        publishers = self.create_outputs(family.node.outputs)  # families/detection.py's table
        self.detections_pub, self.labels_pub = publishers[family.output_topic], publishers["labels"]
        self.debug_pub = publishers["debug_image"]
        self.marker_pub = publishers.get("pose_markers")  # pose families
        self.track_marker_pub = publishers.get("track_markers")  # with tracking on
        self.masks_pub = publishers.get("masks")  # a segmentation model's (yolo)
        self.text_pub = publishers.get("text")  # a model that answers in words too (florence2)
        self.mask_encoding = values.get("mask_encoding", "mono16")
        if self.masks_pub is not None and self.pipeline.masks:
            self.get_logger().info(f"instance segmentation: masks publishes {self.mask_encoding} instance labels")
        if self.tracking:
            reid = "re-identification " + values["reid_model_path"] if self.tracking.embedder else "motion only"
            held = "the person's global ID over the cameras" if self.global_ids is not None else "the track ID"
            self.get_logger().info(f"tracking ({reid}): Detection2D.id is {held}")

    def status_values(self) -> dict[str, str]:
        """/diagnostics' values of this node (ros/monitor.py): with re-id, the tracker's thresholds and calibration;
        an adapter's own counts (sam: its encoder and decoder runs)."""
        tracking = getattr(self, "tracking", None)
        values = tracking_parameters.diagnostic_values(tracking) if tracking is not None else {}
        counts = getattr(getattr(self, "detector", None), "status_values", None)
        return {**values, **(counts() if counts is not None else {})}

    def on_activate(self, state):
        result = super().on_activate(state)
        self._publish_labels()
        return result

    def _publish_labels(self) -> None:
        """The class map (latched), with the confidence threshold in use."""
        labels_header = Header(stamp=self.get_clock().now().to_msg())  # when published
        self.labels_pub.publish(label_info_message(labels_header, self.detector.names, self.confidence))

    def retune(self, values, changed: set[str]):
        """Live parameters (node_live.py): the detector again on the models loaded (a prompt's tokens derived once,
        as it is built), the tracker's motion thresholds; applied, the labels again when the classes or the
        threshold changed."""
        detector = detector_of(self.family, values, self.load_runner)
        tracker = tracking_parameters.live_config(self.tracking, values) if self.tracking else None

        def apply() -> None:
            labels = (list(self.detector.names), self.confidence)
            for pipeline in self.pipelines.values():
                pipeline.retune(detector, values, tracker)
            self.detector, self.confidence = detector, values.get("confidence_threshold", 0.0)
            self.keypoint_threshold = values.get("keypoint_threshold", 0.5)
            self.mask_encoding = values.get("mask_encoding", "mono16")
            if (list(detector.names), self.confidence) != labels and self._threads.running:  # inactive: at activate
                self._publish_labels()

        return apply

    def listen(self) -> None:
        partner, boxes = self.family.node.paired(self.values), self.family.boxes_prompt
        if partner is not None:  # boxes from another node: rtmpose's people (with person_source topic)
            hint = "is the detector running, and does it stamp its output with the image's header?"
            topic = self.subscribe_paired_images(partner, boxes.what, hint)
            self.get_logger().info(
                f"{boxes.use} of {self.resolve_topic_name(partner.topic)}, paired with images by stamp"
            )
        else:
            topic = self.subscribe_images()
        self.get_logger().info(f"listening on {topic}, publishing {self.resolved_outputs(self.family.output_topic)}")

    def process(self, camera: str, item) -> None:
        image_msg, boxes_msg = item if isinstance(item, tuple) else (item, None)
        try:
            frame = self.to_bgr(image_msg)
        except ImageFormatError as exc:
            self.skip_error(exc, camera)
            return
        boxes = None
        if boxes_msg is not None:  # another node's, paired by stamp: those of the class the prompt keeps
            prompt = self.family.boxes_prompt
            received = FrameResult.of(frame, boxes=Boxes.from_message(boxes_msg, tracked=prompt.ids))
            boxes = prompt.kept(received, self.values)
        header = image_msg.header
        pipeline = self.pipelines[camera]
        if boxes is None and batches(self.detector):  # a model of a fixed batch over 1 takes one frame padded
            found = detect_batch([pipeline.detector], [frame], self.batch_sizes.ran)[0]
            result = pipeline.track(frame, found, stamp_of(header))
        else:
            ((_, result),) = pipeline.push(frame, stamp_of(header), boxes)
            self.batch_sizes.ran(1)
        self._publish(camera, header, frame, result)
        self.keep_last(camera, item)  # a prompt changed without a new frame is answered on it (node_prompts.py)

    def process_batch(self, batch) -> None:
        """The frames of several cameras (one each) in one model run (cameras.py's detect_batch), then each
        through its camera's tracker and out on its camera's topics."""
        frames = []
        for camera, image_msg in batch:
            try:
                frames.append((camera, image_msg.header, self.to_bgr(image_msg)))
            except ImageFormatError as exc:
                self.skip_error(exc, camera)
        detectors = [self.pipelines[camera].detector for camera, _, _ in frames]
        found = detect_batch(detectors, [frame for _, _, frame in frames], self.batch_sizes.ran)
        for (camera, header, frame), result in zip(frames, found):
            self._publish(camera, header, frame, self.pipelines[camera].track(frame, result, stamp_of(header)))

    def _publish(self, camera: str, header, frame, result: FrameResult) -> None:
        """A frame's answer, and the markers, masks and debug image that are subscribed, on its camera's topics; what
        was left out of it (a NaN or infinite value: the pipeline's ``problems``) reported once per kind, counted."""
        tracking = self.pipelines[camera].tracking
        for kind, detail in result.problems.items():
            self.warn(kind, detail)
        if result.new_stream:
            named = f"camera {camera}: " if self.multicamera else ""
            self.get_logger().info(f"{named}new stream ({result.new_stream}): tracks reset, IDs count from 1 again")
        track_ids = result.boxes.track_ids if result.boxes is not None else None  # a classifier's: none
        if self.global_ids is not None and track_ids is not None:  # the camera's track IDs as global IDs
            if result.new_stream:
                self.global_ids.forget(camera)
            threshold = reentry_threshold(pipeline.tracking for pipeline in self.pipelines.values())
            tracks = [result.boxes.track(row) for row in range(len(result))]
            ids = global_ids(self.global_ids, camera, stamp_ns(header) / 1e9, tracking, tracks, threshold)
            result = result.with_parts(boxes=result.boxes.tracked(ids))
        self.detections_pub[camera].publish(result.to_message(header))
        self.outputs += 1
        self.monitor.answered(header, camera)
        if self.marker_pub is not None and wanted(self.marker_pub[camera]) and result.keypoints is not None:
            self.marker_pub[camera].publish(result.keypoints.markers(header, self.keypoint_threshold))
        if self.track_marker_pub is not None and wanted(self.track_marker_pub[camera]):
            self.track_marker_pub[camera].publish(track_markers(header, tracking.tracker.active))
        if self.masks_pub is not None and wanted(self.masks_pub[camera]) and result.masks is not None:
            self.masks_pub[camera].publish(result.masks.to_message(header, result, self.mask_encoding))
        if self.text_pub is not None and result.text is not None:
            self.text_pub[camera].publish(result.text.to_message(header))
        if wanted(self.debug_pub[camera]):
            annotated = result.draw(frame.copy(), self.keypoint_threshold)
            self.debug_pub[camera].publish(bgr_to_message(annotated, header))


def run(runner_class: type[Runner], args: list[str] | None, family: Family) -> int:
    """Run the ``family`` node until SIGINT/SIGTERM; 2 when it cannot start (the reason is logged)."""
    return spin(lambda: DetectionNode(runner_class, family), family.name, args)
