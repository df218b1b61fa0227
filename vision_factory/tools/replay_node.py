"""The node under replay (tools/replay.py): the shared-memory transport it needs for large images, what it answered
as the replay runs (``Run``), waiting for it to listen, to warm up, to keep up and to finish answering, and stopping
it however the replay ends."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..ros.transport import PROFILE_VARIABLES, SHARED_MEMORY_PROFILE
from ..share import share_path
from .replay_frames import CameraFrames
from .replay_outputs import NODE_TIMES

END_IDLE_S = 3.0  # once every frame is sent: how long with no answer ends the replay, at least (wait_for_end)
END_WAIT_MAX_S = 30.0  # once every frame is sent: how long with no answer ends the replay, at most (wait_for_end)


@dataclass
class Run:
    """A replay as it runs, per camera ("": the one camera of a node without names): what the node published on
    each recorded output (time received in ns, CDR bytes), which frames were answered when, each frame's send time
    and stamp; the node's own per-frame times and last /diagnostics status. ``answered`` guards them all."""

    received: dict[str, dict[str, list[tuple[int, bytes]]]]
    # (camera, frame index) answered -> when (ns); an answer of a stamp none of the camera's frames has is counted
    # under (camera, its stamp)
    done: dict[tuple[str, Any], int] = field(default_factory=dict)
    sent_at: dict[tuple[str, int], int] = field(default_factory=dict)  # (camera, frame index) -> when sent (ns)
    sent_stamps: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # per camera, in the order sent
    order: list[str] = field(default_factory=list)  # the cameras of the frames, in the order sent
    node_times: dict[str, list[float]] = field(default_factory=lambda: {name: [] for name in NODE_TIMES})
    node_status: dict[str, str] = field(default_factory=dict)
    wall_s: float = 0.0
    answered: threading.Condition = field(default_factory=threading.Condition)

    def __post_init__(self) -> None:
        self.sent_stamps = {name: [] for name in self.received}

    def answered_frames(self, camera: CameraFrames) -> list[int]:
        return [index for index in range(len(camera.stamps)) if (camera.name, index) in self.done]

    def missing(self, camera: CameraFrames) -> list[int]:
        return [index for index in range(len(camera.stamps)) if (camera.name, index) not in self.done]

    def forget_warm_up(self, outputs) -> None:
        """What the node answered so far on ``outputs`` (per frame; not its latched class map) and its times."""
        with self.answered:
            self.done.clear()
            for received in self.received.values():
                for output in outputs:
                    received[output].clear()
            for times in self.node_times.values():
                times.clear()


def use_shared_memory_profile() -> None:
    """Large images need Fast DDS' shared-memory transport; keep a profile the user set."""
    os.environ.setdefault(PROFILE_VARIABLES[0], str(share_path("config", SHARED_MEMORY_PROFILE)))


def stop_replay(process, log_file, executor, spinner, player, context) -> None:
    """The end of a replay, however it ends: the node's process stopped (killed if it does not stop), its log
    closed, the player's executor, thread, node and context shut down."""
    import rclpy

    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
    log_file.close()
    executor.shutdown()
    spinner.join(timeout=5)  # a spinning thread left inside rclpy at interpreter exit can abort the process
    player.destroy_node()
    rclpy.try_shutdown(context=context)


def wait_for_node(process, publisher, reader, timeout: float, log_path: Path) -> None:
    """Until the node reads what ``publisher`` sends and its main output has matched ``reader``: an answer sent
    before the reader matched would be lost (a graph that lists the node's publisher is not yet a match: on a loaded
    machine CI lost a node's first two answers so)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"node exited with code {process.returncode} before replay:\n{_tail(log_path)}")
        if publisher.get_subscription_count() > 0 and reader.get_publisher_count() > 0:
            return
        time.sleep(0.05)
    raise RuntimeError(f"node did not subscribe within {timeout:.0f}s:\n{_tail(log_path)}")


def wait_matched(subscriptions: list, timeout: float) -> None:
    """Until every subscription has a publisher, or ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not all(s.get_publisher_count() > 0 for s in subscriptions):
        time.sleep(0.05)


def warm_up_node(first: dict, publishers: dict, run, outputs, process, timeout: float, flush_s: float) -> float:
    """Each camera's warm-up image (``first``: by camera, its CDR bytes) sent, every camera's answer awaited (or
    ``timeout``), then what the node answered per frame (``outputs``; not its latched class map) and its times
    forgotten (``run``: replay's Run); a node that ends its streams after a pause (flush_timeout: what is pending
    answered, and as long again without frames) given ``flush_s`` for it. How long with no answer then ends the
    replay: END_IDLE_S, or twice the warm-up where that took longer (a heavy model, a loaded machine)."""
    start = time.monotonic()
    for name, data in first.items():
        publishers[name].publish(data)
    with run.answered:
        run.answered.wait_for(
            lambda: {name for name, _ in run.done} >= set(first) or process.poll() is not None, timeout=timeout
        )
    idle_s = max(END_IDLE_S, 2 * (time.monotonic() - start))
    time.sleep(flush_s)
    run.forget_warm_up(outputs)
    return idle_s


def wait_in_flight(answered, done_frames, index, max_in_flight, process, log_path, stall_s: float = 30.0) -> None:
    deadline = time.monotonic() + stall_s
    with answered:
        while index - len(done_frames) >= max_in_flight:
            if process.poll() is not None:
                raise RuntimeError(f"node exited with code {process.returncode} during replay:\n{_tail(log_path)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"node answered no frame for {stall_s:.0f}s:\n{_tail(log_path)}")
            answered.wait(timeout=0.1)


def wait_for_end(answered, done_frames, total: int, idle_s: float) -> None:
    """Until every frame is answered, or no answer came for longer than the node's own pace allows: ``idle_s``
    seconds, or ten times the longest gap between two of its answers so far where that is longer (a slow model
    on a loaded machine), at most END_WAIT_MAX_S."""
    with answered:
        times = sorted(done_frames.values())  # receive times (ns) of the answers so far
        gaps = [(b - a) / 1e9 for a, b in zip(times, times[1:])]
        allowed = min(max(idle_s, 10 * max(gaps, default=0.0)), END_WAIT_MAX_S)
        last_count, last_change = len(done_frames), time.monotonic()
        while len(done_frames) < total and time.monotonic() - last_change < allowed:
            answered.wait(timeout=0.1)
            if len(done_frames) != last_count:
                now = time.monotonic()
                allowed = min(max(allowed, 10 * (now - last_change)), END_WAIT_MAX_S)
                last_count, last_change = len(done_frames), now


def _tail(path: Path, lines: int = 20) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
