"""What an inference node says about its frames (a part of ros/inference_node.py's InferenceNode): problems with
frames reported once per kind and counted (streaming.ProblemLog: the counts logged every minute while new ones come,
and at stop), the closing line's counts, and with named cameras what /diagnostics says per camera (ros/cameras.py's
camera_status) and each camera's answers' latency.
"""

from __future__ import annotations

import time

from ..cameras import camera_topic
from ..streaming import CLOSING
from ..text import untrusted
from .cameras import camera_status


class NodeDiagnostics:
    """InferenceNode's counts and problems (``skip``, ``warn``) and its per-camera diagnostics."""

    def camera_answered(self, camera: str, latency_ms: float) -> None:
        """The monitor's hook: an answer for ``camera``'s frame went out ``latency_ms`` after its stamp."""
        stats = getattr(self, "camera_stats", None)
        if stats is not None:
            stats[camera].answer(latency_ms)
            self._debug(camera, "pipeline_latency_ms", latency_ms)

    def camera_statuses(self) -> list:
        """/diagnostics: one status per named camera (none for one camera)."""
        if not self.multicamera or getattr(self, "camera_stats", None) is None:
            return []
        silence = float(self.values["silence_timeout"]) if self._inputs else 0.0
        since = getattr(self, "_listening_since", time.monotonic())
        topic = "image" if self.transport == "raw" else "image/compressed"
        return [
            camera_status(
                self.get_name(), camera, self.resolve_topic_name(camera_topic(camera, topic)), stats, silence, since
            )
            for camera, stats in self.camera_stats.items()
        ]

    def monitor_values(self) -> dict[str, str]:
        """The node's status' values besides the monitor's own: with named cameras, them and the batch sizes run."""
        if not self.multicamera or getattr(self, "batch_sizes", None) is None:
            return {}
        return {"cameras": ", ".join(self.cameras), "batch sizes run (frames: runs)": self.batch_sizes.text()}

    def skip(self, kind: str, detail: str = "", camera: str | None = None) -> None:
        """Count a skipped frame (of ``camera``: counted in its diagnostics too) under ``kind``, a short fixed name
        for the kind of problem (never text from a message); the first of each kind is logged with its ``detail``."""
        first = self._problems.count(kind, "skipping frame", untrusted(detail), True)
        stats = getattr(self, "camera_stats", None)
        if camera is not None and stats is not None:
            stats[camera].count("skipped")
        if first is not None:
            self.get_logger().warning(first)

    def skip_error(self, exc: Exception, camera: str | None = None) -> None:
        """``skip`` for an exception: its ``kind`` when it has one (ImageFormatError), else its type."""
        self.skip(getattr(exc, "kind", None) or type_name(exc), str(exc), camera)

    def warn(self, kind: str, detail: str = "") -> None:
        """Count a frame that is answered despite a problem (compressed data decoded despite the decoder's
        complaints) under ``kind``; the first of each kind is logged with its ``detail``."""
        first = self._problems.count(kind, "frame answered despite a problem", untrusted(detail), False)
        if first is not None:
            self.get_logger().warning(first)

    def log_problems(self, final: bool = False) -> None:
        """Log the count of each kind of problem: when new ones came since the last count, or ``final``ly."""
        summary = self._problems.summary(final)
        if summary is not None:
            self.get_logger().warning(summary)

    @property
    def frames_skipped(self) -> int:
        """Frames skipped for a problem (counted by ``skip``)."""
        return self._problems.skipped

    def counts(self, outputs: int | None = None) -> str:
        """The closing line: frames in, dropped, skipped, ``outputs`` (default: ``self.outputs``) and the frames the
        publishers sent that never arrived (Monitor.never_arrived)."""
        outputs = self.outputs if outputs is None else outputs
        monitor = getattr(self, "monitor", None)  # none before configure and after cleanup
        return CLOSING.format(
            frames_in=self.frames_in,
            dropped=self.frames_dropped,
            skipped=self.frames_skipped,
            outputs=outputs,
            never_arrived=monitor.never_arrived if monitor is not None else 0,
        )


def type_name(exc: Exception) -> str:
    """'ValueError', or 'cv2.error' for an exception of a module's own."""
    kind = type(exc)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"
