"""Parameters that do what they say (a part of ros/inference_node.py's InferenceNode): a value set on a node
(``ros2 param set``, a parameters service call, the prompt service or topic) is checked against its parameter's
valid values, then, by when it takes effect (Parameter.applies, parameters.py):

- LIVE (thresholds, classes, max_detections, prompts, ...): while the node is configured, what it changes is
  prepared at once on the models already loaded (``retune``: a value that cannot apply, e.g. a class the model does
  not have, is refused with the reason) and applied from the next frame, never during one
  (workers.InferenceThreads.between_frames); unconfigured, it is read at the next configure;
- CONFIGURE (the model, its input size, the topics, the backend, ...): refused while the node is configured, the
  reason saying how to change it (deactivate and clean up, set it, configure and activate again); accepted while
  unconfigured. Not declared read-only: a read-only parameter could not be changed before a reconfigure either;
- START (autostart): declared read-only, which ROS itself refuses to change.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rcl_interfaces.msg import SetParametersResult

from ..text import untrusted


class NodeLive:
    """InferenceNode's set-parameters callback (``_on_set_parameters``) and the live changes it hands the frames."""

    def retune(self, values: Mapping[str, Any], changed: set[str]) -> Callable[[], None] | None:
        """Prepare what the LIVE parameters ``changed`` (their new ``values``: every parameter's) change, on the
        models already loaded (``load_runner`` gives them back without loading), and return what applies it
        between frames (None: nothing of the subclass's). A value that cannot apply raises ValueError naming why.
        Subclasses extend it."""
        return None

    def _on_set_parameters(self, changes: list) -> SetParametersResult:
        """The set-parameters callback: every change checked, then taken by when it applies (module docstring)."""
        by_name = self._parameters_by_name
        new = {}
        for change in changes:
            parameter = by_name.get(change.name)
            if parameter is None:  # ROS's own (use_sim_time; the QoS overrides are read-only)
                continue
            try:
                new[change.name] = parameter.check(change.value)
            except ValueError as exc:
                return SetParametersResult(successful=False, reason=str(exc))
        if not new or self._configured is None:  # unconfigured: configure reads them
            return SetParametersResult(successful=True)
        late = [name for name in new if not by_name[name].live]
        if late:
            return SetParametersResult(successful=False, reason=self._configure_time(late[0]))
        values = {**self._next_values, **new}  # after the changes taken before, applied or not yet
        try:
            apply = self.retune(values, set(new))
        except ValueError as exc:  # can quote the model file and the value: one bounded line
            return SetParametersResult(successful=False, reason=untrusted(exc, 2000))
        self._next_values = values
        self._threads.between_frames(lambda: self._apply_live(values, new, apply))
        self.prompt_changed(new)  # node_prompts.py: a prompt answered at once on the last frame, where it is
        return SetParametersResult(successful=True)

    def _apply_live(self, values: Mapping[str, Any], new: Mapping[str, Any], apply: Callable[[], None] | None) -> None:
        """Between frames: the node's values and what they set, then the subclass's ``apply``."""
        self.values.update(new)
        self.max_image_pixels, self.max_frame_age = values["max_image_pixels"], values["max_frame_age"]
        if apply is not None:
            apply()
        shown = ", ".join(f"{name} {untrusted(repr(value), 200)}" for name, value in new.items())
        self.get_logger().info(f"from the next frame: {shown}")

    def _configure_time(self, name: str) -> str:
        """Why a CONFIGURE parameter ``name`` is refused on a configured node, and how to change it."""
        node = self.get_fully_qualified_name()
        live = [parameter.name for parameter in self.parameter_list if parameter.live]
        return (
            f"{name} takes effect at configure: deactivate and clean up the node (ros2 lifecycle set {node} "
            f"deactivate, then cleanup), set it, then configure and activate; applied from the next frame on a "
            f"running node: {', '.join(live) or 'none'}"
        )
