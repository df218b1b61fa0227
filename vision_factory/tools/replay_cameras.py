"""`replay --camera NAME=SOURCE ...`: several cameras' images (one bag's image topics, or several bags) played into
one node serving those cameras (its ``cameras`` parameter), merged in their recorded time order, as fast as the node
keeps up (at most ``max_in_flight`` frames of all cameras without an answer, nothing dropped). Each camera's answers
are written as replay writes one camera's (its result kind's file: detections.json, ball.csv) under OUT/<camera>/,
the node's log and a summary (frames sent and answered per camera) under OUT. What the node published is kept in
memory too (``CamerasReplayed.received``): verify --camera compares it with the model offline, camera by camera."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..cameras import camera_names, camera_topic
from ..files import open_new, output_folder, write_text
from ..parameters import ros_text
from ..ros import message_class
from ..text import shown_path, untrusted
from .bags import BagError, header_stamp, image_topic, image_topics, read_messages
from .replay import (
    END_IDLE_S,
    LATE_DEPTH_PER_IN_FLIGHT,
    MAX_IN_FLIGHT,
    cdr_stamp,
    clear_earlier_run,
    node_spec,
    restamped,
)
from .replay_node import stop_replay, use_shared_memory_profile, wait_for_end, wait_for_node, wait_in_flight
from .replay_outputs import masks_recorded, wait_for_outputs, write_answers
from .replay_params import checked_overrides, node_parameters, params_file_values, refuse_owned, replay_node


@dataclass
class CameraSource:
    """One camera of a replay: its name, the bag and the image topic its frames are read from."""

    name: str
    bag: Path
    topic: str | None = None  # None: the bag's one image topic


@dataclass
class CamerasReplayed:
    frames_sent: dict[str, int]  # per camera
    outputs: dict[str, int]  # answers on each camera's main output
    missing_frames: dict[str, list[int]]  # per camera, frame indices (bag order) never answered
    answers: dict[str, str]  # per camera, its answers' file (OUT/<camera>/detections.json, ball.csv)
    node_log: str
    wall_s: float
    order: list[str] = field(default_factory=list, repr=False)  # the cameras of the frames, in the order played
    # per camera, what the node published on each recorded output: (time received in ns, the message's CDR bytes)
    received: dict[str, dict[str, list[tuple[int, bytes]]]] = field(default_factory=dict, repr=False)

    def summary(self) -> dict:
        data = asdict(self)
        for name in ("order", "received"):
            data.pop(name)
        return data


def parse_cameras(items: Sequence[str], bag: Path) -> list[CameraSource]:
    """``--camera NAME=SOURCE`` items: SOURCE an image topic of ``bag``, else another bag (its one image topic). A
    malformed item, or a SOURCE that is neither, is a ValueError naming it and the form."""
    topics = image_topics(bag) if Path(bag).exists() else {}
    sources = []
    for item in items:
        name, equals, source = item.partition("=")
        if not equals or not name or not source:
            raise ValueError(
                f"--camera {untrusted(item, 200)}: write NAME=TOPIC (an image topic of the bag) or NAME=BAG (another "
                "bag)"
            )
        if source in topics:
            sources.append(CameraSource(name.strip(), Path(bag), source))
        elif Path(source).exists():
            sources.append(CameraSource(name.strip(), Path(source)))
        else:
            shown = untrusted(", ".join(topics), 400) or "none"
            raise ValueError(
                f"--camera {untrusted(item, 200)}: {untrusted(source, 200)} is neither an image topic of "
                f"{shown_path(bag)} (it has {shown}) nor a bag"
            )
    camera_names([source.name for source in sources])  # each a topic name, none twice
    return sources


def replay_cameras(
    sources: Sequence[CameraSource],
    out_dir: str | Path,
    node: str | None = None,
    params: dict[str, str] | None = None,
    max_in_flight: int = MAX_IN_FLIGHT,
    startup_timeout: float = 60.0,
    executable: Sequence[str] | None = None,
    force: bool = False,
    params_file: str | Path | None = None,
    warm_up: bool = False,
    also: dict[str, str] | None = None,
) -> CamerasReplayed:
    """Play every camera of ``sources`` through one ``node`` serving them all and record each camera's answers.

    ``params_file``: a ROS 2 parameters YAML for the node (``params`` override it). ``warm_up``: each camera's first
    image is sent once before the replay, stamped just before that camera's first frame, its answer awaited and left
    out (as replay's warm_up: a model's slow first inference, a tracker that has seen the first frame once; a node
    with a flush_timeout then ends the streams). ``also``: more of the node's per-frame outputs to record per camera
    (e.g. ``{"masks": "sensor_msgs/msg/Image"}``; a segmentation model's are recorded anyway). ``node``: as replay's
    (None: the family its model file is recognised as)."""
    import rclpy
    from rclpy.node import Node
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    node = replay_node(node, params or {}, params_file)
    also = {**masks_recorded(node), **(also or {})}
    spec = node_spec(node)
    if spec.inputs:
        raise ValueError(f"--camera replays images alone; the {node} node pairs them with {', '.join(spec.inputs)}")
    names = list(camera_names([source.name for source in sources]))
    given = checked_overrides(node, params or {})
    refuse_owned(node, given, params_file)
    spec = node_spec(node, {**params_file_values(params_file), **given})  # its main output, as the node publishes
    out_dir = Path(out_dir)
    answer_files = {name: out_dir / name / spec.result.file for name in names}
    log_path, summary_path = out_dir / f"{node}_node.log", out_dir / "replay.json"
    clear_earlier_run(out_dir, {"log": log_path, "summary": summary_path, **answer_files}, force)
    topics, frame_of, played, msgtypes, first = {}, {}, [], set(), {}
    for source in sources:
        topic, msgtype = image_topic(source.bag, source.topic)
        topics[source.name], msgtypes = topic, msgtypes | {msgtype}
        messages = list(read_messages(source.bag, topic))
        stamps = [header_stamp(message, source.bag, index) for index, message in enumerate(messages)]
        if len(set(stamps)) != len(stamps):
            raise BagError(f"image headers of camera {source.name} repeat their stamps; replay needs one per frame")
        frame_of[source.name] = {stamp: index for index, stamp in enumerate(stamps)}
        if messages:  # the warm-up image: the camera's first, stamped 1 ns before its earliest frame
            earliest = min(sec * 10**9 + nanosec for sec, nanosec in stamps)
            first[source.name] = restamped(messages[0].data, earliest - 1)[0]
        played += [
            (message.timestamp_ns, names.index(source.name), index, message.data)
            for index, message in enumerate(messages)
        ]
    if len(msgtypes) > 1:
        raise BagError("the cameras' images are raw and compressed: one node reads one input_transport")
    msgtype = msgtypes.pop()
    played.sort(key=lambda item: item[:3])  # the recorded time order, the cameras' order among equal times
    compressed = not msgtype.endswith("/Image")
    input_topic = "image/compressed" if compressed else "image"
    namespace = f"/vf_replay_cameras_{os.getpid()}"
    main = {name: f"{namespace}/{camera_topic(name, spec.main_output)}" for name in names}
    overrides = {
        **checked_overrides(node, {"qos_reliability": "reliable", "qos_depth": str(max_in_flight), **spec.parameters}),
        "queue_size": max_in_flight + 1,
        **given,
        **({"input_transport": "compressed"} if compressed else {}),
    }
    command = [*(executable or [sys.executable, "-m", spec.module]), "--ros-args", "-r", f"__ns:={namespace}"]
    if params_file:
        command += ["--params-file", str(params_file)]
    dynamic = {parameter.name for parameter in node_parameters(node) if parameter.dynamic_typing}
    for key, value in overrides.items():  # as replay passes them: text quoted, a text-or-list parameter as given
        command += ["-p", f"{key}:={value if key in dynamic else ros_text(value)}"]
    command += ["-p", f"cameras:=[{', '.join(names)}]"]
    for topic in [
        *main.values(),
        *(f"{namespace}/{camera_topic(name, output)}" for name in names for output in also or {}),
        *(f"{namespace}/{camera_topic(name, latched)}" for name in names for latched, _ in spec.result.latched),
    ]:
        command += ["-p", f"qos_overrides.{topic}.publisher.durability:=transient_local"]
        command += ["-p", f"qos_overrides.{topic}.publisher.depth:={LATE_DEPTH_PER_IN_FLIGHT * max_in_flight}"]
    use_shared_memory_profile()
    output_folder(out_dir, option="--out")
    log_file = open_new(log_path, [*(source.bag for source in sources), params_file])
    process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT)

    context = rclpy.Context()
    rclpy.init(args=[], context=context)
    player = Node("vf_replay_cameras", context=context)
    per_frame = {spec.main_output: spec.outputs[spec.main_output], **(also or {})}
    recorded = {**per_frame, **dict(spec.result.latched)}
    received = {name: {output: [] for output in recorded} for name in names}
    # (camera, frame index) answered -> when; an answer of a stamp none of the camera's frames has counts under its
    # stamp (a crossed output: the frames in flight are still counted down, and the replay ends)
    done: dict[tuple[str, int | tuple[int, int]], int] = {}
    answered = threading.Condition()
    late = QoSProfile(
        depth=max(100, 4 * max_in_flight),
        reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.TRANSIENT_LOCAL,
    )

    def on_output(name: str, output: str):
        def callback(data: bytes) -> None:
            now = time.time_ns()
            with answered:
                received[name][output].append((now, data))
                if output == spec.main_output:
                    stamp = cdr_stamp(data)
                    done.setdefault((name, frame_of[name].get(stamp, stamp)), now)
                answered.notify_all()

        return callback

    readers = {
        (name, output): player.create_subscription(
            message_class(kind), f"{namespace}/{camera_topic(name, output)}", on_output(name, output), late, raw=True
        )
        for name in names
        for output, kind in recorded.items()
    }
    reliable = QoSProfile(depth=max(100, 4 * max_in_flight), reliability=ReliabilityPolicy.RELIABLE)
    publishers = {
        name: player.create_publisher(
            message_class(msgtype), f"{namespace}/{camera_topic(name, input_topic)}", reliable
        )
        for name in names
    }
    executor = rclpy.executors.SingleThreadedExecutor(context=context)
    executor.add_node(player)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    order = []
    try:
        for name in names:
            wait_for_node(process, publishers[name], readers[(name, spec.main_output)], startup_timeout, log_path)
        idle_s = END_IDLE_S
        if warm_up and first:
            idle_s = _warm_up(
                first, publishers, answered, done, received, per_frame, process, overrides, startup_timeout
            )
        start = time.perf_counter()
        for sent, (_, camera, _, data) in enumerate(played):
            wait_in_flight(answered, done, sent, max_in_flight, process, log_path)
            order.append(names[camera])
            publishers[names[camera]].publish(data)
        wait_for_end(answered, done, len(played), idle_s)
        wall_s = time.perf_counter() - start
        for name in names:
            wait_for_outputs(answered, received[name], per_frame, spec.main_output)
    finally:
        stop_replay(process, log_file, executor, spinner, player, context)

    sources_by_name = {source.name: source for source in sources}
    written = {}
    for name in names:
        output_folder(out_dir, name, "--out")
        source = sources_by_name[name]
        path = write_answers(
            spec.result,
            spec.main_output,
            answer_files[name],
            received[name],
            recorded,
            source.bag,
            topics[name],
            frame_of[name],
            spec.measures,
        )
        written[name] = str(path)
    counts = {name: len(frame_of[name]) for name in names}
    result = CamerasReplayed(
        frames_sent=counts,
        outputs={name: len(received[name][spec.main_output]) for name in names},
        missing_frames={name: [i for i in range(counts[name]) if (name, i) not in done] for name in names},
        answers=written,
        node_log=str(log_path),
        wall_s=wall_s,
        order=order,
        received=received,
    )
    write_text(summary_path, json.dumps(result.summary(), indent=2), [source.bag for source in sources])
    return result


def _warm_up(first, publishers, answered, done, received, per_frame, process, overrides, timeout: float) -> float:
    """Each camera's warm-up image (``first``) sent, every camera's answer awaited (or ``timeout``), then what the
    node answered per frame (``per_frame``'s outputs; not its latched class map) forgotten; a node that ends its
    streams after a pause (flush_timeout: what is pending answered, and as long again without frames) given it.
    How long with no answer then ends the replay: END_IDLE_S, or twice the warm-up where that took longer (a heavy
    model, a loaded machine)."""
    start = time.monotonic()
    for name, data in first.items():
        publishers[name].publish(data)
    with answered:
        answered.wait_for(
            lambda: {name for name, _ in done} >= set(first) or process.poll() is not None, timeout=timeout
        )
    idle_s = max(END_IDLE_S, 2 * (time.monotonic() - start))
    time.sleep(3 * float(overrides.get("flush_timeout", 0)))
    with answered:
        done.clear()
        for outputs in received.values():
            for output in per_frame:
                outputs[output].clear()
    return idle_s
