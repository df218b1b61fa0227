"""An inference node's inputs (a part of ros/inference_node.py's InferenceNode): the image subscription (raw, read
from its serialized bytes, or compressed; each named camera's ``<camera>/image``), images paired by stamp with
another input (another node's detections: streaming.Pairing), the bounded queue they go to (cameras.CameraQueues:
the oldest dropped beyond queue_size), and with ``lazy`` listening only while an output has a subscriber.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sensor_msgs.msg import CompressedImage, Image

from ..cameras import camera_topic
from ..families.family import Input
from ..images import ImageFormatError
from ..streaming import PAIRING_WINDOW, Pairing
from . import message_class
from .messages import image_from_cdr, message_to_bgr


class NodeInputs:
    """InferenceNode's subscriptions (``subscribe_images``, ``subscribe_paired_images``) and ``enqueue``. A callback
    of an input takes the camera it is of and the message: ``callback(camera, message)``."""

    def _start_listening(self) -> None:
        """At activate: listen now, or with ``lazy`` while an output has a subscriber."""
        if self.lazy:
            self._lazy_timer = self.create_timer(self.lazy_period, self._follow_subscribers)
            self.get_logger().info("lazy: listening only while something subscribes to an output")
            self._follow_subscribers()
        else:
            self.listen()

    def _stop_following(self) -> None:
        if self._lazy_timer is not None:
            self.destroy_timer(self._lazy_timer)
            self._lazy_timer = None

    def _follow_subscribers(self) -> None:
        """lazy: listen while an output has a subscriber, stop when none has."""
        listened_to = any(publisher.get_subscription_count() > 0 for publisher in self._listened)
        if listened_to and not self._inputs:
            self.get_logger().info("lazy: an output has a subscriber, listening")
            self.listen()
        elif not listened_to and self._inputs:
            self._stop_listening()
            self.get_logger().info("lazy: no output has a subscriber, stopped listening")

    def _stop_listening(self) -> None:
        for subscription in self._inputs:
            self.destroy_subscription(subscription)
        self._inputs = []
        if getattr(self, "monitor", None) is not None:
            self.monitor.unwatch()  # no silence warning while not listening
        for camera, pairs in getattr(self, "_pairs", {}).items():
            for _ in range(pairs.clear()):  # paired images still waiting for their partner
                self._unpaired_image(camera)

    def to_bgr(self, msg: Any) -> Any:
        """The BGR frame of an image message: within max_image_pixels, decoder complaints reported by ``warn``."""
        return message_to_bgr(msg, self.max_image_pixels, self.warn)

    def subscribe_images(self, callback: Callable[[str, Any], None] | None = None) -> str:
        """Subscribe to image (raw) or image/compressed (until deactivated); with named cameras, each camera's
        ``<camera>/image``, ``callback(camera, image message)`` (default ``enqueue``) for each frame. The topics
        subscribed."""
        callback = callback or self.enqueue
        if self.transport == "raw":
            # Raw: the serialized bytes, read as an ImageView whose pixels stay in them (messages.image_from_cdr).
            topic, message_type, raw = "image", Image, True
        else:
            topic, message_type, raw = "image/compressed", CompressedImage, False
        self._listening_since = time.monotonic()
        topics = []
        for index, camera in enumerate(self.cameras):
            camera_image = camera_topic(camera, topic)
            if raw:
                take = lambda data, camera=camera: self._take_image(camera, data, callback)  # noqa: E731
            else:
                take = lambda msg, camera=camera: callback(camera, msg)  # noqa: E731
            # The monitor's silence watch follows the first camera's topic; /diagnostics says each camera's silence.
            watched = self.monitor.watch(camera_image, message_type, self.image_qos, take) if index == 0 else take
            # The monitor counts the frames each camera's publishers sent that never arrived.
            subscription = self.monitor.subscribe(message_type, camera_image, watched, self.image_qos, raw=raw)
            self._inputs.append(subscription)
            topics.append(self.resolve_topic_name(camera_image))
        return ", ".join(topics)

    def _take_image(self, camera: str, data: bytes, callback: Callable[[str, Any], None]) -> None:
        try:
            msg = image_from_cdr(data)
        except ImageFormatError as exc:  # data that ends inside a field: counted and reported, never raised here
            self.frames_in += 1
            self.skip_error(exc, camera)
            return
        callback(camera, msg)

    def subscribe_paired_images(self, partner: Input, what: str, hint: str) -> str:
        """Subscribe to the images and to the input ``partner`` (its family's table, families/family.py: e.g.
        another node's detections, ``what`` in words) and enqueue (image, partner) once both of one stamp are in,
        keeping the newest unpaired of each. An image whose partner never comes is refused (counted as "image
        without ``what``", reported with ``hint``, how to fix it). The image topic."""
        self._pairs = {camera: Pairing(PAIRING_WINDOW) for camera in self.cameras}
        self._pairing = partner.topic, what, hint
        images = self.subscribe_images(self._keep_image)
        message_type = message_class(partner.message)
        for camera in self.cameras:
            keep = lambda msg, camera=camera: self._keep_partner(camera, msg)  # noqa: E731
            topic = camera_topic(camera, partner.topic)
            self._inputs.append(self.create_subscription(message_type, topic, keep, 10))
        return images

    def _keep_image(self, camera: str, msg: Any) -> None:
        self._paired(camera, *self._pairs[camera].image(msg))

    def _keep_partner(self, camera: str, msg: Any) -> None:
        self._paired(camera, *self._pairs[camera].partner(msg))

    def _paired(self, camera: str, pair: tuple | None, unpaired: int) -> None:
        if pair is not None:
            self.enqueue(camera, pair)
        for _ in range(unpaired):
            self._unpaired_image(camera)

    def _unpaired_image(self, camera: str) -> None:
        """An image of ``camera`` whose partner never came: refused (counted and reported), not lost silently."""
        self.frames_in += 1  # on the executor's thread, as enqueue's count
        topic, what, hint = self._pairing
        self.skip(
            f"image without {what}",
            f"no {topic} message with the image's stamp came among the next {PAIRING_WINDOW} messages; {hint}",
            camera,
        )

    def enqueue(self, camera: str, item: Any) -> None:
        """Hand ``camera``'s item to the inference threads; drop its oldest when its queue is full
        (``on_dropped``)."""
        self.frames_in += 1
        stats = self.camera_stats[camera]
        stats.came()
        dropped = self._queue.put(item, camera)
        if dropped is not None:
            self.frames_dropped += 1
            stats.count("dropped")
            self._survive(camera, self.on_dropped, camera, dropped)

    def on_dropped(self, camera: str, item: Any) -> None:
        """Runs for an item of ``camera`` dropped from the full queue (on the receiving thread) or at deactivate
        (already counted)."""
