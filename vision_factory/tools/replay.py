"""Replay a rosbag2 through a real node over ROS 2 and record what it publishes."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..families.registry import NODE_FAMILIES
from ..files import check_folder, open_new, output_folder, write_text
from ..parameters import kept_for_late_readers, ros_text
from ..results import ResultKind
from ..results.frame import write_results
from ..ros import message_class
from ..runtime.backends import BACKENDS
from ..text import shown_path, untrusted
from . import replay_outputs
from .bags import (
    BagError,
    RawMessage,
    header_stamp,
    image_topic,
    read_frames,
    read_messages,
    topics_of_type,
    write_messages,
)
from .commands import UsageError
from .replay_node import (
    stop_replay,
    use_shared_memory_profile,
    wait_for_end,
    wait_for_node,
    wait_in_flight,
    wait_matched,
)
from .replay_outputs import NODE_TIMES, collect, collect_statuses, masks_recorded, node_results, wait_for_outputs
from .replay_params import checked_overrides, node_parameters, params_file_values, refuse_owned, replay_node
from .replay_pictures import SAVE_MAX, check_save, save_pictures


@dataclass(frozen=True)
class NodeSpec:
    """What replay reads of a family's node (``node_spec``: from its Family, when it runs)."""

    module: str  # run as `python -m module`
    outputs: dict[str, str]  # relative output topic -> message type
    main_output: str  # one message per input frame on this topic
    result: ResultKind  # what it publishes there (results/__init__.py): what replay writes of it and records latched
    parameters: dict[str, str] = field(default_factory=dict)  # replay's own overrides
    # inputs besides the image the bag must hold, fed with each frame (by stamp): relative topic -> message type
    inputs: dict[str, str] = field(default_factory=dict)
    measures: tuple[str, str] = ("", "")  # a map's (kind, unit) on its main output (families/family.py's Output)


MAX_IN_FLIGHT = 32  # frames sent and not yet answered, at most, when replaying as fast as the node keeps up
# The node keeps this many answers per frame in flight for a reader it learns of late (kept_for_late_readers).
LATE_DEPTH_PER_IN_FLIGHT = 2
DEBUG_MATCH_S = 3.0  # how long replay waits for the node's ~/debug/ topics once its output is there
END_IDLE_S = 3.0  # once every frame is sent: how long with no answer ends the replay, at least (replay_node.py)
# A node that ends its stream after seconds without frames (flush_timeout) gets a short one: the bag ends.
FLUSH_TIMEOUT = {"flush_timeout": "0.5"}


def node_spec(node: str, values: Mapping[str, Any] | None = None) -> NodeSpec:
    """The ``node`` family's node as replay runs it (any family with a node, registered ones too): this package's
    ONNX Runtime node, its main output (with the node's parameter ``values``, where known, the one they and its
    model give: Family.main_output), and the inputs it always pairs with its images (its input table: the track
    node's other node's detections), which replay plays from the bag, each with its image's stamp."""
    from ..generator.package import node_module_name  # what a package's node is named (jinja2, onnx: not at import)

    if node not in NODE_FAMILIES:
        raise ValueError(f"unknown node '{node}': choose one of {', '.join(NODE_FAMILIES)}")
    spec = NODE_FAMILIES[node]
    main = spec.main_output(values, "replay") if values else spec.output_topic
    measures = next((output.measures for output in spec.node.outputs if output.topic == main), ())
    return NodeSpec(
        f"vision_factory.{node_module_name(spec, BACKENDS['onnx'])}",
        {main: spec.result.message},
        main,
        spec.result,
        FLUSH_TIMEOUT if any(parameter.name in FLUSH_TIMEOUT for parameter in spec.parameters) else {},
        {topic.topic: topic.message for topic in spec.node.inputs[1:] if not topic.when},
        measures or ("", ""),
    )


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
    sent_stamps: list[tuple[int, int]] = field(default_factory=list, repr=False)  # each frame's header stamp, sent
    # With ``diagnostics``: the node's last /diagnostics status, its values by key and "name", "level", "message";
    # {} when the node published none.
    node_status: dict[str, str] = field(default_factory=dict)
    node: str = ""  # the node's family (--node, or the one its model file is recognised as)
    files: dict[str, str] = field(default_factory=dict)  # every file and folder written into OUT, by role: its name
    pictures: dict[str, Any] = field(default_factory=dict)  # --save: the folder, frames drawn (replay_pictures.py)

    def summary(self) -> dict:
        data = asdict(self)
        for name in ("latencies_ms", "answered_ns", "sent_stamps"):
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


def cdr_stamp(data: bytes) -> tuple[int, int]:
    """header.stamp of a CDR-serialised message that starts with a std_msgs/Header."""
    little = data[1] == 1
    return struct.unpack_from("<iI" if little else ">iI", data, 4)


def restamped(data: bytes, stamp_ns: int) -> tuple[bytes, tuple[int, int]]:
    """A CDR-serialised message that starts with a std_msgs/Header, its header.stamp set to ``stamp_ns``."""
    stamp = divmod(stamp_ns, 10**9)
    copy = bytearray(data)
    struct.pack_into("<iI" if data[1] == 1 else ">iI", copy, 4, *stamp)
    return bytes(copy), stamp


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
) -> ReplayResult:
    """Play ``bag``'s image topic into a fresh ``node`` process and record its outputs.

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
    the bag's first image is sent once before the replay and its answer awaited and left out, so that
    a model's slow first inference does not count (a node with a flush_timeout then ends that stream).
    ``diagnostics``: the node's own status on /diagnostics (its counts of frames in, answered, dropped,
    skipped) is read, the last one published after the bag's frames were answered, into ``node_status``. ``also``:
    more of the node's per-frame outputs to record (e.g. ``{"masks": "sensor_msgs/msg/Image"}``: verify's masks).
    ``save``: a folder for the answered frames drawn, one every ``save_every``, at most ``save_max``
    (replay_pictures.py).
    """
    import rclpy
    from rclpy.node import Node
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import Float64

    topic, msgtype = image_topic(bag, topic)
    node = replay_node(node, params or {}, params_file)
    given = checked_overrides(node, params or {})  # before anything plays
    refuse_owned(node, given, params_file)
    spec = node_spec(node, {**params_file_values(params_file), **given})  # its main output, as the node publishes
    out_dir = Path(out_dir)
    outputs = output_paths(out_dir, node)
    clear_earlier_run(out_dir, outputs, force)
    check_save(save, force)
    output_folder(out_dir, option="--out")
    stamps = [header_stamp(message, bag, index) for index, message in enumerate(read_messages(bag, topic))]
    if len(set(stamps)) != len(stamps):
        raise BagError(
            f"image headers in {shown_path(bag)}:{untrusted(topic, 200)} repeat their stamps; replay needs one "
            "stamp per frame"
        )
    frame_of = {stamp: index for index, stamp in enumerate(stamps)}
    fed = _fed_inputs(bag, node, spec, frame_of)
    if live_stamps and fed:  # the fed messages keep the bag's stamps: the node could pair nothing
        raise BagError(f"{node} pairs its inputs by the bag's stamps; it cannot be replayed with live stamps")

    namespace = f"/vf_replay_{os.getpid()}"
    input_topic = "image" if msgtype.endswith("/Image") else "image/compressed"
    per_frame = {**spec.outputs, **masks_recorded(node), **(also or {})}
    # Every answer and stage time reaches the player even where the node's writers learn of its readers late.
    late_topics = [f"{namespace}/{name}" for name in per_frame]
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
    use_shared_memory_profile()
    log_path = outputs["log"]
    log_file = open_new(log_path, [bag, params_file])
    process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT)

    context = rclpy.Context()
    # Not this process's command line: rcl would read its -p NAME:=VALUE as remap rules (and warn they are deprecated).
    rclpy.init(args=[], context=context)
    player = Node("vf_replay_player", context=context)
    recorded = {**per_frame, **dict(spec.result.latched), **(latched or {})}  # its class map: for its file
    received: dict[str, list[tuple[int, bytes]]] = {name: [] for name in recorded}
    done_frames: dict[int, int] = {}  # frame index -> receive time (ns)
    answered = threading.Condition()
    reliable = QoSProfile(depth=max(100, max_in_flight * 4), reliability=ReliabilityPolicy.RELIABLE)
    late = QoSProfile(
        depth=reliable.depth, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
    )
    latched_qos = QoSProfile(
        depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
    )

    def on_output(name: str):
        def callback(data: bytes) -> None:
            now = time.time_ns()
            with answered:
                received[name].append((now, data))
                if name == spec.main_output:
                    done_frames.setdefault(frame_of.get(cdr_stamp(data), -1), now)
                answered.notify_all()

        return callback

    readers = {}
    for name, output_type in recorded.items():
        qos = late if name in per_frame else latched_qos
        topic_name = f"{namespace}/{name}"
        readers[name] = player.create_subscription(
            message_class(output_type), topic_name, on_output(name), qos, raw=True
        )
    node_times: dict[str, list[float]] = {name: [] for name in NODE_TIMES}
    timers = [
        player.create_subscription(Float64, f"{namespace}/{node}/debug/{name}", collect(times), late)
        for name, times in node_times.items()
    ]
    statuses: list[tuple[float, bytes | None, object]] = []  # (monotonic s, publisher gid, DiagnosticStatus)
    if diagnostics:
        player.create_subscription(
            message_class("diagnostic_msgs/msg/DiagnosticArray"), "/diagnostics", collect_statuses(statuses), reliable
        )
    publisher = player.create_publisher(message_class(msgtype), f"{namespace}/{input_topic}", reliable)
    fed_publishers = {
        name: player.create_publisher(message_class(spec.inputs[name]), f"{namespace}/{name}", reliable) for name in fed
    }
    executor = rclpy.executors.SingleThreadedExecutor(context=context)
    executor.add_node(player)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()

    sent_at: list[int] = []
    sent_stamps: list[tuple[int, int]] = []
    try:
        for waited in (*fed_publishers.values(), publisher):
            wait_for_node(process, waited, readers[spec.main_output], startup_timeout, log_path)
        wait_matched(timers, DEBUG_MATCH_S)  # the node's times from the first frame on (a node without: none)
        idle_s = END_IDLE_S
        if warm_up:
            first = next(iter(read_messages(bag, topic)))
            warm_up_start = time.monotonic()
            publisher.publish(restamped(first.data, time.time_ns())[0])
            with answered:  # its answer (frame -1: no frame of the bag's) is not the replay's
                answered.wait_for(lambda: done_frames or process.poll() is not None, timeout=startup_timeout)
            # A node whose one frame takes longer than END_IDLE_S (a heavy model, a loaded machine) is given longer.
            idle_s = max(idle_s, 2 * (time.monotonic() - warm_up_start))
            # A node that ends a stream after a pause (flush_timeout: what is pending answered, and as long again
            # without frames) starts the bag afresh.
            time.sleep(3 * float(overrides.get("flush_timeout", 0)))
            with answered:
                done_frames.clear()
                for name in spec.outputs:
                    received[name].clear()
                for times in node_times.values():
                    times.clear()
        start = time.perf_counter()
        first_bag_ns = None
        for index, message in enumerate(read_messages(bag, topic)):
            first_bag_ns = message.timestamp_ns if first_bag_ns is None else first_bag_ns
            if rate is None:
                wait_in_flight(answered, done_frames, index, max_in_flight, process, log_path)
            else:
                delay = (message.timestamp_ns - first_bag_ns) / 1e9 / rate - (time.perf_counter() - start)
                if delay > 0:
                    time.sleep(delay)
            for name, by_frame in fed.items():
                for fed_data in by_frame.get(index, ()):
                    fed_publishers[name].publish(fed_data)
            data = message.data
            sent_at.append(time.time_ns())
            if live_stamps:
                data, stamp = restamped(data, sent_at[-1])
                with answered:
                    frame_of[stamp] = index
                sent_stamps.append(stamp)
            else:
                sent_stamps.append(stamps[index])
            publisher.publish(data)
            if progress:
                progress(index + 1, len(stamps))
        wait_for_end(answered, done_frames, len(stamps), idle_s)
        wall_s = time.perf_counter() - start
        wait_for_outputs(answered, received, per_frame, spec.main_output)
        node_status = replay_outputs.node_status(player, namespace, spec.main_output, statuses) if diagnostics else {}
    finally:
        stop_replay(process, log_file, executor, spinner, player, context)

    messages = [
        RawMessage(f"/{name}", recorded[name], stamp_ns, data)
        for name, items in received.items()
        for stamp_ns, data in items
    ]
    messages.sort(key=lambda message: message.timestamp_ns)
    output_bag = outputs["bag"]
    write_messages(output_bag, messages, storage)
    found = node_results(spec.result, spec.main_output, received, recorded, bag, topic, frame_of, spec.measures)
    written = write_results(outputs["answers"], found, str(bag))
    drawn = enumerate(read_frames(bag, topic))
    pictures = save_pictures(save, drawn, found, save_every, save_max, [bag, params_file]) if save else {}
    latencies = [(done_frames[i] - sent_at[i]) / 1e6 for i in range(len(sent_at)) if i in done_frames]
    result = ReplayResult(
        frames_sent=len(sent_at),
        outputs=len(received[spec.main_output]),
        missing_frames=[i for i in range(len(sent_at)) if i not in done_frames],
        wall_s=wall_s,
        fps=len(done_frames) / wall_s if wall_s > 0 else 0.0,
        latency_ms_p50=float(np.percentile(latencies, 50)) if latencies else float("nan"),
        latency_ms_p99=float(np.percentile(latencies, 99)) if latencies else float("nan"),
        output_bag=str(output_bag),
        answers=str(written),
        node_log=str(log_path),
        node_times_ms=replay_outputs.node_times(node_times),
        latencies_ms=latencies,
        answered_ns=sorted(done_frames[i] for i in range(len(sent_at)) if i in done_frames),
        sent_stamps=sent_stamps,
        node_status=node_status,
        node=node,
        files={role: path.name for role, path in outputs.items()},
        pictures=pictures,
    )
    write_text(outputs["summary"], json.dumps(result.summary(), indent=2), [bag, params_file])
    return result


def _fed_inputs(bag, node: str, spec: NodeSpec, frame_of: dict) -> dict[str, dict[int, list[bytes]]]:
    """Per input of ``spec.inputs``: the bag's messages of its type by the frame whose stamp they carry (a message
    with no frame of its stamp is not played). The bag must hold exactly one topic of each such type."""
    fed = {}
    for name, msgtype in spec.inputs.items():
        found = topics_of_type(bag, msgtype)
        if len(found) != 1:
            shown = untrusted(", ".join(found), 400)  # topic names from the bag
            which = f"has {len(found)} {msgtype} topics ({shown})" if found else f"has no {msgtype} topic"
            raise BagError(
                f"the {node} node needs its {name} input with the images, by stamp: bag {shown_path(bag)} "
                f"{which}; record one topic of the detections to track beside the images (or replay the detector "
                "itself with tracking on, e.g. --node yolo -p tracking:=true -p model_path:=..., or run vision-factory "
                "track)"
            )
        by_frame: dict[int, list[bytes]] = {}
        for index, message in enumerate(read_messages(bag, found[0])):
            frame = frame_of.get(header_stamp(message, bag, index))
            if frame is not None:
                by_frame.setdefault(frame, []).append(message.data)
        fed[name] = by_frame
    return fed


def output_paths(out_dir: Path, node: str) -> dict[str, Path]:
    """Every file or folder a replay of ``node`` writes into ``out_dir``, by role."""
    spec = node_spec(node)
    paths = {
        "bag": out_dir / f"{node}_outputs",
        "log": out_dir / f"{node}_node.log",
        "summary": out_dir / "replay.json",
        "answers": out_dir / spec.result.file,  # the result kind's file, e.g. OUT/ball.csv
    }
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
