"""tracknet_node: ball positions from an image stream with TrackNet (+ InpaintNet), on any backend.

Subscribes  image (sensor_msgs/Image) or image/compressed (sensor_msgs/CompressedImage)
Publishes   families/tracknet.py's output table (its publishers, and what `vision-factory models` says): ball
            (geometry_msgs/PointStamped, pixels, z = visibility), one per accepted frame, stamped with that
            frame's header; ball_markers and debug_image only when subscribed.

With ``cameras`` (ros/inference_node.py) each camera has its own stream (window, background median, InpaintNet,
trajectory) on the one model, its frames one after another; a camera's stream ends on its own (flush_timeout).

A frame is answered ``held_back`` frames later (families/tracknet.py: seq_len - 1, and InpaintNet's seq_len - 1 with
it). When no frame comes for flush_timeout the stream pauses: its pending frames are answered from the windows so
far, and a frame that comes within another flush_timeout goes on with the stream (median, window, size, trajectory);
otherwise the stream is over and the next starts as on a fresh node. So a sender that waits for each answer before
it sends the next frame is answered frame by frame, one per flush_timeout, and its frames stay one stream.

Two stages per frame: the subscription callback (the executor's thread) converts the message and
pre-processes the frame while the inference thread runs the model on the frame before it; the
inference thread assembles the window, runs the model, decodes and publishes.

``run(RunnerClass, args, family)`` starts it (families/tracknet.py's FAMILY) on that backend's runner; each
package binds its own.
"""

from __future__ import annotations

from collections import deque

from ..families.family import Family
from ..images import ImageFormatError
from ..models.ball_stream import FrameSizeChanged
from ..models.tracknet_stream import StreamStats
from ..results.ball import Ball, draw_trajectory, trajectory_markers
from ..runtime.runner import Runner
from .cameras import wanted
from .inference_node import InferenceNode
from .messages import bgr_to_message
from .spin import spin


class TrackNetNode(InferenceNode):
    """Its queue (queue_size, default 4: families/tracknet.py) is bounded but not 'newest only': every frame of a
    window counts, so a detector's keep-the-newest default would cut the windows; a frame dropped from the full
    queue, or at deactivate, is still answered, not seen (z = 0)."""

    dropped_answers = 0  # ball messages for dropped frames (receiving thread)
    ended_in_warmup = ""  # how the last stream ended inside its median warm-up, if it did (for the silence warning)
    told_waiting_sender = False  # whether the hint for a sender that waits for each answer was logged

    def __init__(self, runner_class: type[Runner], family: Family, **kwargs):
        self.family = family
        super().__init__(family.name, family.node_parameters, runner_class, **kwargs)

    def configure(self) -> None:
        values = self.values
        self.idle_timeout = values["flush_timeout"]
        # families/pipeline.py, as the tools run it: each camera's own stream, on the one model
        self.streams = self.camera_pipelines(lambda load_runner: self.family.pipeline(values, load_runner))
        tracker = self.streams[self.cameras[0]].tracker
        given = "" if values["bg_mode"] == tracker.bg_mode else " (the model's)"
        median = ""
        if tracker.needs_median:
            warmup = f"the first {tracker.median_warmup} frames of each stream"
            source = "median_path" if values["median_path"] else warmup
            median = f", background median from {source}"
        self.get_logger().info(
            f"TrackNet {values['model_path']}: {tracker.runner.describe()}; bg_mode {tracker.bg_mode!r}{given}{median}"
        )
        publishers = self.create_outputs(self.family.node.outputs)  # families/tracknet.py's table
        self.ball_pub, self.marker_pub = publishers[self.family.output_topic], publishers["ball_markers"]
        self.debug_pub = publishers["debug_image"]
        self.trajectories = {camera: deque(maxlen=values["trajectory_length"]) for camera in self.cameras}
        self.held_back = self.family.held_back(values)
        self.pauses = dict.fromkeys(self.cameras, 0)  # per camera: pauses of its stream that answered frames

    def retune(self, values, changed: set[str]):
        """Live parameters (node_live.py): the heatmap threshold, when a stream ends (flush_timeout) and the
        trajectory's length, from the next frame; the windows go on."""

        def apply() -> None:
            for stream in self.streams.values():
                stream.tracker.heatmap_threshold = values["heatmap_threshold"]
            self.idle_timeout = self._threads.idle_timeout = values["flush_timeout"]
            length = values["trajectory_length"]
            self.trajectories = {camera: deque(kept, maxlen=length) for camera, kept in self.trajectories.items()}

        return apply

    def listen(self) -> None:
        topic = self.subscribe_images(self._receive)
        self.get_logger().info(f"listening on {topic}, publishing {self.resolved_outputs('ball')}")

    def _receive(self, camera: str, msg) -> None:
        """Subscription callback: pre-process here, overlapping the inference of earlier frames.

        Whatever fails here is left to ``process``, which meets it again and reports it, in order.
        """
        frame = prepared = None
        try:
            frame = self.to_bgr(msg)
            prepared = self.streams[camera].prepare(frame)
        except Exception:  # reported by process(), in order
            pass
        self.enqueue(camera, (msg, frame, prepared))

    def process(self, camera: str, item: tuple) -> None:
        msg, frame, prepared = item  # as _receive queued it
        if prepared is not None:
            self.monitor.received(prepared.seconds)  # its pre-processing, done on the receiving thread
        try:
            if frame is None:
                frame = self.to_bgr(msg)
            # The tag travels with the frame until its prediction is out, L-1 frames later.
            debug_frame = frame.copy() if wanted(self.debug_pub[camera]) else None
            outputs = self.streams[camera].push(frame, (msg.header, debug_frame), prepared)
        except (ImageFormatError, FrameSizeChanged, ValueError) as exc:
            self.skip_error(exc, camera)
            return
        self._publish(camera, outputs)

    def on_dropped(self, camera: str, item: tuple) -> None:
        """A frame dropped from the full queue is still answered, at once: not seen (z = 0)."""
        msg, frame, _ = item
        if frame is not None:  # a message that is no frame is never answered
            self.ball_pub[camera].publish(Ball(0, 0, False).to_message(msg.header))
            self.dropped_answers += 1

    def on_idle(self, camera: str) -> bool:
        """No frame of ``camera`` for flush_timeout. Frames pending: the stream pauses; they are answered now from the
        windows so far, and the stream goes on if a frame comes within another flush_timeout (True: called again
        then). Nothing pending: the stream is over (``end_stream``)."""
        stream = self.streams[camera]
        if not stream.pending:
            pauses = self.pauses[camera]
            if pauses:
                self.get_logger().info(
                    f"no frame for {self.idle_timeout:.1f}s after the last answer: the stream is over, after {pauses} "
                    f"pause{'s' if pauses > 1 else ''} (the next starts afresh: median warm-up, window)"
                )
            self.end_stream(camera)
            return False
        try:
            outputs = stream.answer_pending()
        except Exception:
            self.end_stream(camera)  # nothing is kept of a stream whose pending frames cannot be answered
            raise
        self._publish(camera, outputs)
        self.pauses[camera] += 1
        if self.pauses[camera] == 1:
            self.get_logger().info(
                f"no frame for {self.idle_timeout:.1f}s: answered {len(outputs)} pending from the windows so far; "
                f"a frame within {self.idle_timeout:.1f}s more goes on with the stream, else it is over"
            )
        elif not self.told_waiting_sender:
            self.told_waiting_sender = True
            self.get_logger().info(
                f"the stream paused again with frames pending: a sender that waits for each answer gets one per "
                f"flush_timeout ({self.idle_timeout:.1f}s), from the windows so far. A frame's full answer needs the "
                f"{self.held_back} frames after it: send frame k+1 once frame k-{self.held_back} is answered, or at "
                "the camera's rate (logged once)"
            )
        return True

    def end_stream(self, camera: str) -> None:
        """``camera``'s stream is over: publish what is pending and forget the stream (window, median warm-up, frame
        size, trajectory): the next starts as on a fresh node."""
        stream = self.streams[camera]
        tracker = stream.tracker
        if tracker.warmup_frames:
            self.ended_in_warmup = (
                f"the last stream ended after {tracker.warmup_frames} frames, inside its {tracker.median_warmup}-frame "
                "background-median warm-up (median_warmup): its frames were answered 'no ball' (z = 0)"
            )
        elif tracker.stats.push_calls:
            self.ended_in_warmup = ""
        try:
            self._publish(camera, stream.flush())
        finally:
            self.trajectories[camera].clear()
            self.pauses[camera] = 0

    def waiting_for(self) -> str:
        """What the stream waits for now, or how the last one ended (the monitor's silence warning)."""
        streams = getattr(self, "streams", None)  # none before configure and after cleanup
        stream = streams[self.cameras[0]] if streams else None  # the first camera's, whose topic the monitor watches
        if stream is not None and stream.tracker.warmup_frames:
            tracker = stream.tracker
            return (
                f"the stream's background-median warm-up holds {tracker.warmup_frames} of its {tracker.median_warmup} "
                "frames (median_warmup): until then frames are answered 'no ball' (z = 0)"
            )
        return self.ended_in_warmup

    def _publish(self, camera: str, outputs) -> None:
        trajectory = self.trajectories[camera]
        for (header, debug_frame), result in outputs:
            ball = result.ball
            self.ball_pub[camera].publish(ball.to_message(header))
            self.outputs += 1
            self.monitor.answered(header, camera)
            if ball.visible:
                trajectory.append((ball.x, ball.y))
            if wanted(self.marker_pub[camera]):
                self.marker_pub[camera].publish(trajectory_markers(header, trajectory))
            if debug_frame is not None:
                self.debug_pub[camera].publish(bgr_to_message(draw_trajectory(debug_frame, trajectory), header))

    def finish(self, camera: str) -> None:
        """At close: publish what is pending."""
        self._publish(camera, self.streams[camera].flush())

    def counts(self, outputs: int | None = None) -> str:
        """The closing line, with the answers to dropped frames among the outputs and the per-stage times."""
        streams = getattr(self, "streams", None)  # none before configure and after cleanup
        if streams is None:
            return super().counts(self.outputs + self.dropped_answers)
        stats = StreamStats()
        for stream in streams.values():
            stats.add(stream.stats)
        per_frame = lambda seconds: 1000 * seconds / max(1, stats.push_calls)  # noqa: E731
        return (
            f"{super().counts(self.outputs + self.dropped_answers)}; per frame: pre-processing "
            f"{per_frame(stats.preprocess_s):.2f} ms, inference {per_frame(stats.inference_s):.2f} ms, "
            f"post-processing {per_frame(stats.postprocess_s):.2f} ms "
            f"({stats.prepared} of {stats.push_calls} frames pre-processed on the receiving thread)"
        )


def run(runner_class: type[Runner], args: list[str] | None, family: Family) -> int:
    """Run the node until SIGINT/SIGTERM; 2 when it cannot start (the reason is logged)."""
    return spin(lambda: TrackNetNode(runner_class, family), family.name, args)
