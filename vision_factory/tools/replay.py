"""Replay a rosbag2 through a real node over ROS 2 and record what it publishes: one camera (the bag's image topic,
the node on its own topics) or several through one node serving them all (its ``cameras`` parameter), one path.
What is played (tools/replay_frames.py), the node and its parameters (replay_params.py), waiting for it
(replay_node.py) and what is made of its answers (replay_outputs.py) are beside."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..cameras import camera_names, camera_topic
from ..files import check_folder, open_new, output_folder, write_text
from ..parameters import kept_for_late_readers, ros_text
from ..results.frame import write_results
from ..ros import message_class
from ..text import shown_path
from . import replay_outputs
from .bags import BagError, RawMessage, read_frames, write_messages
from .commands import UsageError
from .replay_frames import (
    CameraFrames,
    CameraSource,
    cdr_stamp,
    fed_inputs,
    first_images,
    played,
    read_cameras,
    restamped,
)
from .replay_node import (
    END_IDLE_S,
    Run,
    stop_replay,
    use_shared_memory_profile,
    wait_for_end,
    wait_for_node,
    wait_in_flight,
    wait_matched,
    warm_up_node,
)
from .replay_outputs import NODE_TIMES, collect, collect_statuses, masks_recorded, node_results, wait_for_outputs
from .replay_params import (
    checked_overrides,
    node_parameters,
    node_spec,
    params_file_values,
    refuse_owned,
    replay_node,
)
from .replay_pictures import SAVE_MAX, check_save, save_pictures

MAX_IN_FLIGHT = 32  # frames sent and not yet answered, at most, when replaying as fast as the node keeps up
# The node keeps this many answers per frame in flight for a reader it learns of late (kept_for_late_readers).
LATE_DEPTH_PER_IN_FLIGHT = 2
DEBUG_MATCH_S = 3.0  # how long replay waits for the node's ~/debug/ topics once its output is there


@dataclass
class ReplayResult:
    frames_sent: int
    outputs: int
    missing_frames: list[int]
    wall_s: float
    fps: float
    latency_ms_p50: float
    latency_ms_p99: float
    output_bag: str
    answers: str  # the node's answers as its result kind's file (results/frame.py's write_results), e.g. OUT/ball.csv
    node_log: str
    # The node's own times per frame from its ~/debug/ topics (ros/monitor.py): processing p50/p99, stage medians.
    node_times_ms: dict[str, float] = field(default_factory=dict)
    latencies_ms: list[float] = field(default_factory=list, repr=False)
    answered_ns: list[int] = field(default_factory=list, repr=False)  # when each answered frame's answer came
    # per camera ("": the one), each frame's header stamp as sent; and what the node published on each recorded
    # output: (time received in ns, the message's CDR bytes)
    sent_stamps: dict[str, list[tuple[int, int]]] = field(default_factory=dict, repr=False)
    received: dict[str, dict[str, list[tuple[int, bytes]]]] = field(default_factory=dict, repr=False)
    # With ``diagnostics``: the node's last /diagnostics status, its values by key and "name", "level", "message";
    # {} when the node published none.
    node_status: dict[str, str] = field(default_factory=dict)
    node: str = ""  # the node's family (--node, or the one its model file is recognised as)
    files: dict[str, str] = field(default_factory=dict)  # every file and folder written into OUT, by role: its name
    pictures: dict[str, Any] = field(default_factory=dict)  # --save: the folder, frames drawn (replay_pictures.py)

    def summary(self) -> dict:
        data = asdict(self)
        for name in ("latencies_ms", "answered_ns", "sent_stamps", "received"):
            data.pop(name)
        return data

    def steady_fps(self, held_back: int = 0) -> float:
        """Answers per second from the first answer to the last one not held back until the stream pauses.

        ``fps`` spans the whole replay: also the wait before the first answer and, for a node
        that holds the last ``held_back`` frames until no frame came for its flush_timeout
        (TrackNet: seq_len - 1, and InpaintNet's seq_len - 1 with it), that wait. NaN without two answers in the span.
        """
        answers = sorted(self.answered_ns)
        span = answers[: max(2, len(answers) - held_back)]
        if len(span) < 2 or span[-1] <= span[0]:
            return float("nan")
        return (len(span) - 1) / ((span[-1] - span[0]) / 1e9)


@dataclass
class CamerasReplayed:
    """What a replay of several cameras through one node gives (``replay``'s ``cameras``)."""

    frames_sent: dict[str, int]  # per camera
    outputs: dict[str, int]  # answers on each camera's main output
    missing_frames: dict[str, list[int]]  # per camera, frame indices (bag order) never answered
    answers: dict[str, str]  # per camera, its answers' file (OUT/<camera>/detections.json, ball.csv)
    node_log: str
    wall_s: float
    order: list[str] = field(default_factory=list, repr=False)  # the cameras of the frames, in the order played
    sent_stamps: dict[str, list[tuple[int, int]]] = field(default_factory=dict, repr=False)  # as ReplayResult's
    received: dict[str, dict[str, list[tuple[int, bytes]]]] = field(default_factory=dict, repr=False)

    def summary(self) -> dict:
        data = asdict(self)
        for name in ("order", "sent_stamps", "received"):
            data.pop(name)
        return data


def one_camera_result(run: Run, camera: CameraFrames, outputs: dict[str, Path], answers: Path, node: str, main: str):
    """A replay of the one camera's: its ReplayResult."""
    answered = run.answered_frames(camera)
    latencies = [(run.done[("", index)] - run.sent_at[("", index)]) / 1e6 for index in answered]
    return ReplayResult(
        frames_sent=len(run.sent_at),
        outputs=len(run.received[""][main]),
        missing_frames=run.missing(camera),
        wall_s=run.wall_s,
        fps=len(answered) / run.wall_s if run.wall_s > 0 else 0.0,
        latency_ms_p50=float(np.percentile(latencies, 50)) if latencies else float("nan"),
        latency_ms_p99=float(np.percentile(latencies, 99)) if latencies else float("nan"),
        output_bag=str(outputs["bag"]),
        answers=str(answers),
        node_log=str(outputs["log"]),
        node_times_ms=replay_outputs.node_times(run.node_times),
        latencies_ms=latencies,
        answered_ns=sorted(run.done[("", index)] for index in answered),
        sent_stamps=run.sent_stamps,
        received=run.received,
        node_status=run.node_status,
        node=node,
        files={role: path.name for role, path in outputs.items()},
    )


def parse_overrides(items: Iterable[str], prompt: str | None = None) -> dict[str, str]:
    """Node parameters given as NAME:=VALUE (the ros2 run syntax), by name; ``prompt`` (--prompt), the text prompt
    (as ``-p prompt:=TEXT``, quoted so that ROS reads it back as text)."""
    overrides = {} if prompt is None else {"prompt": ros_text(prompt)}
    for item in items:
        name, separator, value = item.partition(":=")
        if not separator or not name:
            raise UsageError(f"'{item}' is not NAME:=VALUE", "--param")
        overrides[name] = value
    return overrides


def replay(
    bag: str | Path,
    out_dir: str | Path,
    node: str | None = None,
    params: dict[str, str] | None = None,
    params_file: str | Path | None = None,
    topic: str | None = None,
    rate: float | None = None,
    max_in_flight: int = MAX_IN_FLIGHT,
    storage: str = "mcap",
    startup_timeout: float = 60.0,
    progress: Callable[[int, int], None] | None = None,
    executable: Sequence[str] | None = None,
    force: bool = False,
    live_stamps: bool = False,
    latched: dict[str, str] | None = None,
    warm_up: bool = False,
    diagnostics: bool = False,
    also: dict[str, str] | None = None,
    save: Path | None = None,
    save_every: int = 1,
    save_max: int = SAVE_MAX,
    cameras: Sequence[CameraSource] = (),
) -> ReplayResult | CamerasReplayed:
    """Play ``bag``'s image topic (or several ``cameras``') into a fresh ``node`` process and record its outputs.

    ``cameras``: several cameras (replay_frames.parse_cameras's sources) through one node serving them all (its
    ``cameras`` parameter), their frames merged in recorded time order; each camera's answers are written as one
    camera's, under OUT/<camera>/, and a CamerasReplayed is returned (what the node published kept in memory too).
    Without, the one camera is ``bag``'s image topic (``topic``: the bag's one where None) on the node's own topics,
    a ReplayResult, and the node's messages are written to a bag too (``storage``).

    ``node``: the family whose node runs; None: the one its model file (model_path) is recognised as
    (``replay_node``). A node parameter replay sets itself (OWNED) is refused. A segmentation model's masks (the
    node's ``masks`` label images) are recorded too, each detection's written with it (as COCO RLE).

    ``executable``: the command that starts the node, e.g. ``["ros2", "run", "my_tracker",
    "tracknet_node"]`` for a generated package; default: this package's own node.

    ``rate``: 1.0 plays at recorded timing, 2.0 twice as fast; None plays as fast as the
    node keeps up (at most ``max_in_flight`` frames without an answer, nothing dropped).

    ``out_dir`` holding an earlier run's outputs (any file this replay writes) is refused
    before anything is played; ``force`` removes those outputs first (and nothing else).

    ``live_stamps``: each image goes out stamped with the time it is published, as a camera driver
    stamps it (the answers are matched to frames by those stamps, ``sent_stamps``), so that a node's
    pipeline latency and frame age are those of a live camera. ``latched``: topics the node publishes
    once, transient local (e.g. ``{"labels": "vision_msgs/msg/LabelInfo"}``), recorded too. ``warm_up``:
    each camera's first image is sent once before the replay (stamped as it is sent with ``live_stamps``, else 1 ns
    before the camera's earliest frame) and its answer awaited and left out, so that a model's slow first inference
    does not count (a node with a flush_timeout then ends that stream; a tracker has seen the first frame once).
    ``diagnostics``: the node's own status on /diagnostics (its counts of frames in, answered, dropped,
    skipped) is read, the last one published after the bag's frames were answered, into ``node_status``. ``also``:
    more of the node's per-frame outputs to record (e.g. ``{"masks": "sensor_msgs/msg/Image"}``: verify's masks).
    ``save``: a folder for the one camera's answered frames drawn, one every ``save_every``, at most ``save_max``
    (replay_pictures.py).
    """
    import rclpy
    from rclpy.node import Node
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import Float64

    sources = list(cameras) or [CameraSource("", Path(bag), topic)]
    names = list(camera_names([source.name for source in cameras]))
    frames = read_cameras(sources)  # their image topics and stamps, checked before anything runs
    node = replay_node(node, params or {}, params_file)
    given = checked_overrides(node, params or {})  # before anything plays
    refuse_owned(node, given, params_file)
    spec = node_spec(node, {**params_file_values(params_file), **given})  # its main output, as the node publishes
    if names and spec.inputs:
        raise ValueError(f"--camera replays images alone; the {node} node pairs them with {', '.join(spec.inputs)}")
    if names and save is not None:
        raise ValueError("--save draws one camera's replay: replay each camera's topic on its own (--topic)")
    out_dir = Path(out_dir)
    outputs = output_paths(out_dir, node, names)
    clear_earlier_run(out_dir, outputs, force)
    check_save(save, force)
    fed = fed_inputs(frames[0], node, spec.inputs) if spec.inputs else {}
    if live_stamps and fed:  # the fed messages keep the bag's stamps: the node could pair nothing
        raise BagError(f"{node} pairs its inputs by the bag's stamps; it cannot be replayed with live stamps")
    output_folder(out_dir, option="--out")
    names = names or [""]

    namespace = f"/vf_replay_{os.getpid()}"
    msgtype = frames[0].msgtype
    input_topic = "image" if msgtype.endswith("/Image") else "image/compressed"
    per_frame = {**spec.outputs, **masks_recorded(node), **(also or {})}
    # Every answer and stage time reaches the player even where the node's writers learn of its readers late.
    late_topics = [f"{namespace}/{camera_topic(name, output)}" for name in names for output in per_frame]
    late_topics += [f"{namespace}/{node}/debug/{name}" for name in NODE_TIMES]
    overrides = {
        **checked_overrides(node, {"qos_reliability": "reliable", "qos_depth": str(max_in_flight), **spec.parameters}),
        **({"queue_size": max_in_flight + 1} if rate is None else {}),
        **given,
        **({"input_transport": "compressed"} if input_topic.endswith("compressed") else {}),
        **kept_for_late_readers(late_topics, LATE_DEPTH_PER_IN_FLIGHT * max_in_flight),
    }
    command = [*(executable or [sys.executable, "-m", spec.module]), "--ros-args", "-r", f"__ns:={namespace}"]
    if params_file:
        command += ["--params-file", str(params_file)]
    dynamic = {parameter.name for parameter in node_parameters(node) if parameter.dynamic_typing}
    for key, value in overrides.items():
        # As ROS reads it back: text quoted; a parameter of any type (a text or a list) as it was given.
        command += ["-p", f"{key}:={value if key in dynamic else ros_text(value)}"]
    if cameras:
        command += ["-p", f"cameras:=[{', '.join(names)}]"]
    use_shared_memory_profile()
    log_path = outputs["log"]
    inputs = [*(source.bag for source in sources), params_file]
    log_file = open_new(log_path, inputs)
    process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT)

    context = rclpy.Context()
    # Not this process's command line: rcl would read its -p NAME:=VALUE as remap rules (and warn they are deprecated).
    rclpy.init(args=[], context=context)
    player = Node("vf_replay_player", context=context)
    recorded = {**per_frame, **dict(spec.result.latched), **(latched or {})}  # its class map: for its file
    run = Run({name: {output: [] for output in recorded} for name in names})
    frame_of = {camera.name: camera.frame_of for camera in frames}
    reliable = QoSProfile(depth=max(100, max_in_flight * 4), reliability=ReliabilityPolicy.RELIABLE)
    late = QoSProfile(
        depth=reliable.depth, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
    )
    latched_qos = QoSProfile(
        depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
    )

    def on_output(name: str, output: str):
        def callback(data: bytes) -> None:
            now = time.time_ns()
            with run.answered:
                run.received[name][output].append((now, data))
                if output == spec.main_output:
                    # an answer of a stamp none of the camera's frames has counts under its stamp (crossed outputs,
                    # restamped answers): the frames in flight are still counted down, and the replay ends
                    stamp = cdr_stamp(data)
                    run.done.setdefault((name, frame_of[name].get(stamp, stamp)), now)
                run.answered.notify_all()

        return callback

    readers = {
        (name, output): player.create_subscription(
            message_class(output_type),
            f"{namespace}/{camera_topic(name, output)}",
            on_output(name, output),
            late if output in per_frame else latched_qos,
            raw=True,
        )
        for name in names
        for output, output_type in recorded.items()
    }
    timers = [
        player.create_subscription(Float64, f"{namespace}/{node}/debug/{name}", collect(times), late)
        for name, times in run.node_times.items()
    ]
    statuses: list[tuple[float, bytes | None, object]] = []  # (monotonic s, publisher gid, DiagnosticStatus)
    if diagnostics:
        player.create_subscription(
            message_class("diagnostic_msgs/msg/DiagnosticArray"), "/diagnostics", collect_statuses(statuses), reliable
        )
    publishers = {
        name: player.create_publisher(
            message_class(msgtype), f"{namespace}/{camera_topic(name, input_topic)}", reliable
        )
        for name in names
    }
    fed_publishers = {
        name: player.create_publisher(message_class(spec.inputs[name]), f"{namespace}/{name}", reliable) for name in fed
    }
    executor = rclpy.executors.SingleThreadedExecutor(context=context)
    executor.add_node(player)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()

    total = sum(len(camera.stamps) for camera in frames)
    try:
        for name in names:
            for waited in (*fed_publishers.values(), publishers[name]):
                wait_for_node(process, waited, readers[(name, spec.main_output)], startup_timeout, log_path)
        wait_matched(timers, DEBUG_MATCH_S)  # the node's times from the first frame on (a node without: none)
        idle_s = END_IDLE_S
        if warm_up:
            first = {  # as it is sent, or 1 ns before the camera's earliest frame: the time order kept
                camera.name: restamped(data, time.time_ns() if live_stamps else min(camera.times_ns) - 1)[0]
                for camera, data in first_images(frames)
            }
            flush_s = 3 * float(overrides.get("flush_timeout", 0))
            idle_s = warm_up_node(first, publishers, run, per_frame, process, startup_timeout, flush_s)
        start = time.perf_counter()
        first_bag_ns = None
        for sent, (bag_ns, camera_index, index, data) in enumerate(played(frames)):
            camera = frames[camera_index]
            first_bag_ns = bag_ns if first_bag_ns is None else first_bag_ns
            if rate is None:
                wait_in_flight(run.answered, run.done, sent, max_in_flight, process, log_path)
            else:
                delay = (bag_ns - first_bag_ns) / 1e9 / rate - (time.perf_counter() - start)
                if delay > 0:
                    time.sleep(delay)
            for name, by_frame in fed.items():
                for fed_data in by_frame.get(index, ()):
                    fed_publishers[name].publish(fed_data)
            run.sent_at[(camera.name, index)] = time.time_ns()
            stamp = camera.stamps[index]
            if live_stamps:
                data, stamp = restamped(data, run.sent_at[(camera.name, index)])
                with run.answered:
                    camera.frame_of[stamp] = index
            run.sent_stamps[camera.name].append(stamp)
            run.order.append(camera.name)
            publishers[camera.name].publish(data)
            if progress:
                progress(sent + 1, total)
        wait_for_end(run.answered, run.done, total, idle_s)
        run.wall_s = time.perf_counter() - start
        for name in names:
            wait_for_outputs(run.answered, run.received[name], per_frame, spec.main_output)
        if diagnostics:
            main = camera_topic(names[0], spec.main_output)
            run.node_status = replay_outputs.node_status(player, namespace, main, statuses)
    finally:
        stop_replay(process, log_file, executor, spinner, player, context)

    written, found = {}, {}
    for camera in frames:
        output_folder(out_dir, camera.name, "--out")
        found[camera.name] = node_results(
            spec.result,
            spec.main_output,
            run.received[camera.name],
            recorded,
            camera.bag,
            camera.topic,
            camera.frame_of,
            spec.measures,
        )
        path = outputs[camera_topic(camera.name, "answers")]
        written[camera.name] = write_results(path, found[camera.name], str(camera.bag))
    if cameras:
        result = CamerasReplayed(
            frames_sent={camera.name: len(camera.stamps) for camera in frames},
            outputs={name: len(run.received[name][spec.main_output]) for name in names},
            missing_frames={camera.name: run.missing(camera) for camera in frames},
            answers={name: str(path) for name, path in written.items()},
            node_log=str(log_path),
            wall_s=run.wall_s,
            order=run.order,
            sent_stamps=run.sent_stamps,
            received=run.received,
        )
    else:
        received = run.received[""]
        messages = [
            RawMessage(f"/{name}", recorded[name], stamp_ns, data)
            for name, items in received.items()
            for stamp_ns, data in items
        ]
        messages.sort(key=lambda message: message.timestamp_ns)
        write_messages(outputs["bag"], messages, storage)
        result = one_camera_result(run, frames[0], outputs, written[""], node, spec.main_output)
        if save:
            drawn = enumerate(read_frames(frames[0].bag, frames[0].topic))
            result.pictures = save_pictures(save, drawn, found[""], save_every, save_max, inputs)
    write_text(outputs["summary"], json.dumps(result.summary(), indent=2), inputs)
    return result


def output_paths(out_dir: Path, node: str, cameras: Sequence[str] = ()) -> dict[str, Path]:
    """Every file or folder a replay of ``node`` writes into ``out_dir``, by role: the one camera's answers (role
    "answers") and the bag of the node's messages, or each of ``cameras``' answers (role "<camera>/answers")."""
    spec = node_spec(node)
    paths = {"log": out_dir / f"{node}_node.log", "summary": out_dir / "replay.json"}
    if not cameras:
        paths = {"bag": out_dir / f"{node}_outputs", **paths}
    for name in cameras or [""]:
        paths[camera_topic(name, "answers")] = out_dir / name / spec.result.file  # e.g. OUT/front/detections.json
    return paths


def clear_earlier_run(out_dir: Path, outputs: dict[str, Path], force: bool) -> None:
    """Refuse (or with ``force`` remove) outputs of an earlier run, before the replay starts. ``outputs`` may lie in
    folders below ``out_dir`` (a camera's OUT/NAME/): a link or a file at any of those is refused first
    (files.check_folder), so that nothing where a link points is taken for an earlier run, nor removed."""
    for path in outputs.values():
        check_folder(out_dir, str(path.parent.relative_to(out_dir)), "--out")
    earlier = [path for path in outputs.values() if path.exists() or path.is_symlink()]
    if not earlier:
        return
    if not force:
        names = ", ".join(str(path.relative_to(out_dir)) for path in earlier)
        raise FileExistsError(
            f"{shown_path(out_dir)} holds an earlier run ({names}): choose another --out, or --force to replace that "
            "run"
        )
    for path in earlier:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()  # a file, or a link (never what it points to)
