"""A text prompt taken on a running node (a part of ros/inference_node.py's InferenceNode, for a family that
declares a TextPrompt or a PointsPrompt: families/prompts.py). Three ways in, one path: the ``prompt`` parameter
(its value at start, or ``ros2 param set``), the ``~/set_prompt`` service (vision_factory_interfaces/srv/SetPrompt,
the fields of Isaac ROS Grounding DINO's: ``string prompt`` -> ``bool success``) and the ``~/prompt`` topic
(std_msgs/String, as NanoOWL's node reads a query that may change any time). The service and the topic set the
parameter, so ``ros2 param get <node> prompt`` is always the prompt in use and each prompt is checked and applied as
any live parameter is (ros/node_live.py): from the next frame, what the family derives from it (tokens, text
embeddings) computed once when its adapter is built again, the labels republished when the phrases change.

A prompt is untrusted text: one that is too long, holds control characters or names more phrases than the model
takes is refused (the service answers success false; the reason is logged once per kind of problem and counted;
each reason quotes the prompt escaped and length-limited: families/prompts.py, node_live.py); memory stays bounded
(MAX_PROMPT_CHARS).

A prompt that ``answers_last_frame`` (a PointsPrompt: sam's boxes and points, clicked on the image the user sees) is
answered at once: whichever way it is set, the last frame each camera answered is queued again (a LastFrame, with
its partner: the same boxes of the same stamp), after the change (both go between frames, in order), unless a newer
frame of that camera waits already (it carries the change). The answer has that frame's header; the family's own
cache makes it cheap (sam: the frame's embedding, no second encoder run).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from rclpy.parameter import Parameter as RosParameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from ..families.prompts import PointsPrompt, PromptError, TextPrompt
from ..streaming import LastFrame

MISSING = (
    "vision_factory_interfaces (the ~/set_prompt service's type) is not importable: build it into this environment "
    "with `vision-factory install-vision-msgs` (ROS from PyPI wheels), or build interfaces/vision_factory_interfaces "
    "with colcon in the workspace (a ROS distribution)"
)


class NodePrompts:
    """InferenceNode's prompt service and topic (``offer_prompt``), which set its prompt parameter."""

    _served_prompt: TextPrompt | PointsPrompt | None = None

    def offer_prompt(self, prompt: TextPrompt | PointsPrompt) -> None:
        """Take ``prompt`` (the family's) from ~/set_prompt and ~/prompt too, for as long as the node lives."""
        try:
            from vision_factory_interfaces.srv import SetPrompt
        except ImportError:
            raise RuntimeError(MISSING) from None
        self._served_prompt = prompt
        self._last_items: dict[str, LastFrame] = {}  # camera -> the last item answered (answers_last_frame)
        self.prompts_refused: Counter = Counter()  # kind of problem -> prompts refused for it
        self.create_service(SetPrompt, "~/set_prompt", self._on_set_prompt)
        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        self.create_subscription(
            String, "~/prompt", lambda message: self.take_prompt(message.data, "~/prompt"), reliable
        )

    def _on_set_prompt(self, request: Any, response: Any) -> Any:
        response.success = self.take_prompt(request.prompt, "~/set_prompt")
        return response

    def take_prompt(self, text: str, source: str) -> bool:
        """Set the prompt parameter to ``text`` (from ``source``, in the log), as ``ros2 param set`` does; whether
        it was taken (it applies from the next frame)."""
        name = self._served_prompt.parameter.name
        try:
            self._served_prompt.check(text)
            (result,) = self.set_parameters([RosParameter(name, value=text)])
            if not result.successful:  # what the family makes of it (node_live.py): its reason, already escaped
                raise PromptError("prompt refused", result.reason)
        except PromptError as exc:
            first = not self.prompts_refused[exc.kind]
            self.prompts_refused[exc.kind] += 1
            if first:
                self.get_logger().warning(
                    f"refused a prompt from {source} ({exc.kind}): {exc} (logged once per kind; the node goes on "
                    "with its prompt)"
                )
            return False
        return True

    @property
    def _answers_last_frame(self) -> bool:
        return self._served_prompt is not None and self._served_prompt.answers_last_frame

    def keep_last(self, camera: str, item: Any) -> None:
        """``camera``'s ``item`` was answered (the inference thread): the one a new prompt is answered on at once,
        with a prompt that answers_last_frame."""
        if self._answers_last_frame:
            self._last_items[camera] = LastFrame(item if isinstance(item, tuple) else (item, None))

    def prompt_changed(self, new: dict[str, Any]) -> None:
        """After a live change ``new`` (parameter -> value, taken; between_frames holds it): with a prompt that
        answers_last_frame and a change of it, each camera's last frame queued again unless a newer one waits."""
        if not self._answers_last_frame or self._served_prompt.parameter.name not in new:
            return
        if not self._threads.running:  # inactive: the next frame after activate carries it
            self._last_items.clear()
            return
        for camera, item in list(self._last_items.items()):
            if camera in self.cameras and not self._queue.waiting(camera):
                self.enqueue(camera, item)
