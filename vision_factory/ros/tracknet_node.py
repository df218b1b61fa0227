"""tracknet_node: ball positions from an image stream with TrackNet (+ InpaintNet), on any backend.

Subscribes  image (sensor_msgs/Image) or image/compressed (sensor_msgs/CompressedImage)
Publishes   ball (geometry_msgs/PointStamped, pixels, z = visibility), one per accepted frame,
            stamped with that frame's header; ball_markers and debug_image only when subscribed.

``run(RunnerClass)`` starts it on that backend's runner; each package binds its own.
"""

from __future__ import annotations

import signal
import threading
import time
from collections import deque

import cv2
import numpy as np
import rclpy
from geometry_msgs.msg import PointStamped
from rclpy.exceptions import ParameterException
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions
from sensor_msgs.msg import CompressedImage, Image
from visualization_msgs.msg import MarkerArray

from ..images import ImageFormatError
from ..models.ball_stream import PARAMETERS, FrameSizeChanged, ball_stream_from_parameters
from ..parameters import IMAGE_INPUT_PARAMETERS
from ..runtime.runner import Runner
from .messages import ball_message, bgr_to_message, message_to_bgr, trajectory_markers
from .parameters import declare_parameters, image_input


class TrackNetNode(Node):
    def __init__(self, runner_class: type[Runner], **kwargs):
        super().__init__("tracknet", **kwargs)
        values = declare_parameters(self, (*PARAMETERS, *IMAGE_INPUT_PARAMETERS, *runner_class.PARAMETERS))
        transport, qos = image_input(values)
        self.queue_size = values["queue_size"]
        self.flush_timeout = values["flush_timeout"]
        settings = {parameter.name: values[parameter.name] for parameter in runner_class.PARAMETERS}
        logger = self.get_logger()
        self.stream = ball_stream_from_parameters(values, lambda path: runner_class.load(path, settings, logger))
        logger.info(f"TrackNet {values['model_path']}: {self.stream.tracker.runner.describe()}")
        self.ball_pub = self.create_publisher(PointStamped, "ball", 10)
        self.marker_pub = self.create_publisher(MarkerArray, "ball_markers", 1)
        self.debug_pub = self.create_publisher(Image, "debug_image", 1)
        self.trajectory: deque[tuple[int, int]] = deque(maxlen=values["trajectory_length"])

        self.frames_in = self.frames_dropped = self.frames_skipped = self.outputs = 0
        self._reported: set[str] = set()
        self._queue: deque = deque()
        self._wake = threading.Condition()
        self._running = True
        self._worker = threading.Thread(target=self._work, name="tracknet_inference", daemon=True)
        self._worker.start()
        topic = "image" if transport == "raw" else "image/compressed"
        self.create_subscription(Image if transport == "raw" else CompressedImage, topic, self._enqueue, qos)
        logger.info(f"listening on {self.resolve_topic_name(topic)}, publishing {self.resolve_topic_name('ball')}")

    def _enqueue(self, msg) -> None:
        """Subscription callback: hand the message to the inference thread, drop the oldest if full."""
        with self._wake:
            self.frames_in += 1
            if len(self._queue) >= self.queue_size:
                self._queue.popleft()
                self.frames_dropped += 1
            self._queue.append(msg)
            self._wake.notify()

    def _work(self) -> None:
        last_frame = time.monotonic()
        while self._running:
            with self._wake:
                if not self._queue:
                    self._wake.wait(timeout=0.05)
                msg = self._queue.popleft() if self._queue else None
            try:
                if msg is not None:
                    last_frame = time.monotonic()
                    self._process(msg)
                elif self.flush_timeout > 0 and time.monotonic() - last_frame > self.flush_timeout:
                    last_frame = float("inf")
                    if self.stream.pending:
                        self._end_stream()
            except Exception as exc:  # the inference thread must survive anything a frame causes
                self.frames_skipped += 1
                self._report_once(f"{type(exc).__name__}: {exc}")

    def _process(self, msg) -> None:
        try:
            frame = message_to_bgr(msg)
            # The tag travels with the frame until its prediction is out, L-1 frames later.
            debug_frame = frame.copy() if self.debug_pub.get_subscription_count() > 0 else None
            outputs = self.stream.push(frame, (msg.header, debug_frame))
        except (ImageFormatError, FrameSizeChanged, ValueError) as exc:
            self.frames_skipped += 1
            self._report_once(str(exc))
            return
        self._publish(outputs)

    def _end_stream(self) -> None:
        outputs = self.stream.flush()
        if outputs:
            self.get_logger().info(f"no frame for {self.flush_timeout:.1f}s: flushed {len(outputs)} pending")
        self._publish(outputs)
        self.stream.reset()

    def _publish(self, outputs) -> None:
        for (header, debug_frame), prediction in outputs:
            visible = prediction["Visibility"] == 1
            self.ball_pub.publish(ball_message(header, prediction["X"], prediction["Y"], visible))
            self.outputs += 1
            if visible:
                self.trajectory.append((prediction["X"], prediction["Y"]))
            if self.marker_pub.get_subscription_count() > 0:
                self.marker_pub.publish(trajectory_markers(header, self.trajectory))
            if debug_frame is not None:
                self.debug_pub.publish(bgr_to_message(self._annotate(debug_frame), header))

    def _annotate(self, image: np.ndarray) -> np.ndarray:
        points = np.array(self.trajectory, dtype=np.int32).reshape(-1, 1, 2)
        cv2.polylines(image, [points], False, (0, 200, 255), 2)
        if len(points):
            cv2.circle(image, tuple(int(v) for v in points[-1, 0]), 8, (0, 0, 255), 2)
        return image

    def _report_once(self, reason: str) -> None:
        if reason not in self._reported:
            self._reported.add(reason)
            self.get_logger().warning(f"skipping frame: {reason} (logged once)")

    def close(self) -> None:
        """Stop the worker, publish what is pending and log the stream statistics."""
        self._running = False
        self._worker.join(timeout=5)
        while self._queue:  # frames already accepted still get their answer
            self._process(self._queue.popleft())
        self._publish(self.stream.flush())
        stats = self.stream.stats
        per_frame = lambda seconds: 1000 * seconds / max(1, stats.push_calls)  # noqa: E731
        self.get_logger().info(
            f"frames in {self.frames_in}, dropped {self.frames_dropped}, skipped {self.frames_skipped}, "
            f"outputs {self.outputs}; per frame: pre-processing {per_frame(stats.preprocess_s):.2f} ms, "
            f"inference {per_frame(stats.inference_s):.2f} ms, post-processing {per_frame(stats.postprocess_s):.2f} ms"
        )


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def run(runner_class: type[Runner], args: list[str] | None = None) -> int:
    """Run the node until SIGINT/SIGTERM; 2 when it cannot start (the reason is logged)."""
    # Our own signal handling, so that pending predictions are still published on SIGINT/SIGTERM.
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        node = TrackNetNode(runner_class)
    except (ValueError, RuntimeError, ParameterException) as exc:
        rclpy.logging.get_logger("tracknet").fatal(f"cannot start: {exc}")
        rclpy.try_shutdown()
        return 2
    executor = SingleThreadedExecutor()  # one executor: rclpy.spin_once would re-add the node every call
    executor.add_node(node)
    try:
        while rclpy.ok():
            executor.spin_once(timeout_sec=0.2)  # returns often, so signal handlers run
    except KeyboardInterrupt:
        pass
    finally:
        node.close()
        node.destroy_node()
        rclpy.try_shutdown()
    return 0
