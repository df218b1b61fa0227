"""`bench --cameras N`: one node serving N cameras (its ``cameras`` parameter) against N single-camera nodes of the
same model, in the same run: answered frames/s over all cameras, each camera's latency, the CPU the nodes used and
their resident memory.

Every set-up runs at once, each node its own process (this package's node: ONNX Runtime) on the node's defaults
otherwise (the family's queue_size: a detector answers each camera's newest frame), and is fed in turn: windows of
``seconds / rounds`` each, the set-ups in order, then in the reverse order (ABBA), so that a change in the machine's
load falls on every set-up alike. In its window a set-up's cameras get the same 1280x720 frame at ``rate`` Hz,
serialized once and stamped as it is sent, over Fast DDS shared memory; the others get nothing. A frame counts when
it was sent in a window (past its first SETTLE_S) and answered, whenever its answer came.

Every answer is counted: one receiving process per node (tools/answers.py), and at the end each node's count of
what it received is set against what the node logged it published: a measure where they differ is refused."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..families.registry import family
from ..images import image_cdr
from .answers import AnswerReceivers, Arrival, checked, refuse_disagreement
from .replay_frames import restamped
from .replay_node import use_shared_memory_profile
from .replay_params import node_spec

WARM_UP_S = 3.0  # frames to each set-up before the windows: the nodes' first runs size their memory arenas
SETTLE_S = 0.5  # a window's first frames, not counted: the set-up was idle before it
IN_FLIGHT_S = 2.0  # after the last window: answers still on their way
START_S = 180.0  # the most the nodes may take to start and subscribe on a loaded machine
STOP_S = 60.0  # the most a node may take to answer what it holds and log its counts


def rss_mib(pid: int) -> float:
    """The resident memory (VmRSS) of process ``pid``, MiB (Linux /proc)."""
    with open(f"/proc/{pid}/status") as status:
        fields = dict(line.split(":", 1) for line in status if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024


def cpu_seconds(pid: int) -> float:
    """The CPU time (user + system, every thread) process ``pid`` has used, s (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class SetUp:
    """One way of serving the cameras: its node processes, each camera's image topic, each process' answer topics
    (its cameras', in camera order), and the windows it was fed in."""

    key: str  # the report's: one_node, nodes, one_node_workers
    name: str
    processes: list[subprocess.Popen]
    logs: list[Path]
    images: list[str]
    answers: list[list[str]]
    windows: list[tuple[int, int]] = field(default_factory=list)  # (from, to) ns, wall clock: the counted part
    fed_s: float = 0.0  # the windows' length, settling included
    cpu_s: float = 0.0  # the nodes' CPU time in the windows
    sent: int = 0  # frames sent to each camera in the counted parts


def _start(model_type: str, params: dict[str, str], namespace: str, cameras: list[str], log: Path):
    module = node_spec(model_type).module  # this package's ONNX Runtime node, as replay starts it
    command = [sys.executable, "-m", module, "--ros-args", "-r", f"__ns:={namespace}"]
    for name, value in params.items():
        command += ["-p", f"{name}:={value}"]
    if cameras:
        command += ["-p", f"cameras:=[{', '.join(cameras)}]"]
    return subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT)


def _set_up(key: str, name: str, model_type: str, params: dict, cameras: int, one_node: bool, work: Path) -> SetUp:
    names = [f"cam{index}" for index in range(cameras)]
    output = family(model_type).main_output(params, "bench")  # its main output, as the node publishes it
    namespace = f"/bench{os.getpid()}/{key}"  # this run's own: a node left by another run answers elsewhere
    prefixes = [f"{namespace}/{camera}" for camera in names]
    answers = [f"{prefix}/{output}" for prefix in prefixes]
    images = [f"{prefix}/image" for prefix in prefixes]
    if one_node:
        log = work / f"{key}.log"
        return SetUp(key, name, [_start(model_type, params, namespace, names, log)], [log], images, [answers])
    logs = [work / f"{key}_{camera}.log" for camera in names]
    processes = [_start(model_type, params, prefix, [], log) for prefix, log in zip(prefixes, logs)]
    return SetUp(key, name, processes, logs, images, [[topic] for topic in answers])


def measure(
    model_type: str,
    setups: list[tuple[str, str, dict[str, str], bool]],
    frame: np.ndarray,
    cameras: int,
    seconds: float,
    rate: float,
    work_dir: Path,
    rounds: int = 2,
) -> dict[str, dict[str, Any]]:
    """Each of ``setups`` ((key, name, node parameters, one node of ``cameras`` cameras or one node each)) fed
    ``seconds`` in all, in 2 x ``rounds`` windows (ABBA): per key, frames sent and answered per second over all
    cameras, per camera answers/s and latency p50/p99 (ms, the answer's arrival minus its stamp), the nodes' CPU in
    cores over their windows, their VmRSS summed (MiB) once the frames are through, and each node's answers received
    against its own count (refused, RuntimeError, where they differ)."""
    import rclpy
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Image
    from std_msgs.msg import Header

    if seconds / (2 * rounds) <= SETTLE_S:
        raise ValueError(f"{seconds} s in {2 * rounds} windows leaves none past their first {SETTLE_S} s: give more")
    use_shared_memory_profile()
    spec = family(model_type)
    started: list[SetUp] = []
    context = receivers = None
    try:
        for key, name, params, one_node in setups:
            started.append(_set_up(key, name, model_type, params, cameras, one_node, work_dir))
        groups = [topics for setup in started for topics in setup.answers]
        receivers = AnswerReceivers(groups, spec.result.message)
        context = rclpy.Context()
        rclpy.init(args=[], context=context)
        node = rclpy.create_node("bench_cameras_sender", context=context)
        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        publishers = {setup.key: [node.create_publisher(Image, t, reliable) for t in setup.images] for setup in started}
        _wait_started(started, publishers, receivers, work_dir)
        height, width = frame.shape[:2]
        data = image_cdr(Header(frame_id="camera"), height, width, "bgr8", width * 3, frame)
        for setup in started:
            _send(publishers[setup.key], data, rate, time.monotonic() + WARM_UP_S)
        window = seconds / (2 * rounds)
        for turn in range(2 * rounds):
            for setup in started if turn % 2 == 0 else reversed(started):
                _feed(setup, publishers[setup.key], data, rate, window)
        time.sleep(IN_FLIGHT_S)
        memory = {setup.key: sum(rss_mib(process.pid) for process in setup.processes) for setup in started}
        _stop(started)
        time.sleep(0.5)  # the last answers published as the nodes closed, on their way
        records, receivers = receivers.stop(), None
        node.destroy_node()
    finally:
        if receivers is not None:
            receivers.close()
        if context is not None:
            rclpy.try_shutdown(context=context)
        _stop(started)
    return _results(started, records, memory, cameras)


def _wait_started(started: list[SetUp], publishers: dict, receivers: AnswerReceivers, work_dir: Path) -> None:
    deadline = time.monotonic() + START_S
    while not (all(p.get_subscription_count() for ps in publishers.values() for p in ps) and receivers.matched()):
        if time.monotonic() > deadline or any(p.poll() is not None for s in started for p in s.processes):
            raise RuntimeError(f"the nodes did not start within {START_S:.0f} s: see the logs in {work_dir}")
        time.sleep(0.2)


def _send(publishers: list, data: bytes, rate: float, until: float) -> int:
    """The frame to every camera of ``publishers`` at ``rate`` Hz, each time stamped as sent, until monotonic
    ``until``: how many times."""
    start, sent, period = time.monotonic(), 0, 1.0 / rate
    while (now := time.monotonic()) < until:
        due = start + sent * period
        if now < due:
            time.sleep(min(due - now, 0.005))
            continue
        stamped, _ = restamped(data, time.time_ns())
        for publisher in publishers:
            publisher.publish(stamped)
        sent += 1
    return sent


def _feed(setup: SetUp, publishers: list, data: bytes, rate: float, seconds: float) -> None:
    """One window of ``setup``: its CPU time and its counted part (after SETTLE_S) noted."""
    cpu = sum(cpu_seconds(process.pid) for process in setup.processes)
    began = time.monotonic()
    _send(publishers, data, rate, began + SETTLE_S)
    counted_from = time.time_ns()
    setup.sent += _send(publishers, data, rate, began + seconds)
    setup.windows.append((counted_from, time.time_ns()))
    setup.fed_s += time.monotonic() - began
    setup.cpu_s += sum(cpu_seconds(process.pid) for process in setup.processes) - cpu


def _stop(started: list[SetUp]) -> None:
    """SIGINT every node (each answers what it holds and logs its counts), then wait for them."""
    processes = [process for setup in started for process in setup.processes]
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
    for process in processes:
        try:
            process.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _results(started: list[SetUp], records: list, memory: dict[str, float], cameras: int) -> dict[str, dict]:
    results, checks, groups = {}, [], iter(records)
    for setup in started:
        per_camera: list[list[Arrival]] = []
        own = []
        for log in setup.logs:
            arrivals = next(groups)  # the process' topics: its cameras'
            per_camera += arrivals
            own.append(checked(log.stem, sum(map(len, arrivals)), log.read_text()))
        checks += own
        counted_s = sum(end - begin for begin, end in setup.windows) / 1e9
        counted = [[a for a in arrivals if _in(a.stamp_ns, setup.windows)] for arrivals in per_camera]
        latencies = [[(a.arrived_ns - a.stamp_ns) / 1e6 for a in arrivals] for arrivals in counted]
        answered = sum(map(len, counted))
        fps = answered / counted_s
        each_window = [
            sum(begin <= a.stamp_ns < end for arrivals in counted for a in arrivals) / ((end - begin) / 1e9)
            for begin, end in setup.windows
        ]
        results[setup.key] = {
            "name": setup.name,
            "sent_fps": setup.sent * cameras / counted_s,
            "fps": fps,
            "window_fps": each_window,  # each window's, in the order fed
            "camera_fps": [len(arrivals) / counted_s for arrivals in counted],
            "latency_p50_ms": [float(np.percentile(a, 50)) if a else float("nan") for a in latencies],
            "latency_p99_ms": [float(np.percentile(a, 99)) if a else float("nan") for a in latencies],
            "cpu_cores": setup.cpu_s / setup.fed_s,
            # the nodes' CPU time per answer: what a frame costs, whatever share of the cores they got
            "cpu_ms_per_answer": 1000 * setup.cpu_s / (answered * setup.fed_s / counted_s)
            if answered
            else float("nan"),
            "rss_mib": memory[setup.key],
            "counts": [check.text() for check in own],
        }
    refuse_disagreement(checks)
    return results


def _in(stamp_ns: int, windows: list[tuple[int, int]]) -> bool:
    return any(begin <= stamp_ns < end for begin, end in windows)


def cameras_vs_nodes(
    model_type: str,
    params: dict[str, str],
    frame: np.ndarray,
    cameras: int,
    seconds: float,
    rate: float,
    work: Path,
    workers: int = 1,
    rounds: int = 2,
) -> dict[str, Any]:
    """One node of ``cameras`` cameras and ``cameras`` single-camera nodes, fed in turn (``measure``), and their
    ratios (one node over the N nodes: memory, frames/s); with ``workers`` over 1, also the one node with that many
    inference_workers, each run on cores / workers intra-op threads."""
    work.mkdir(parents=True, exist_ok=True)
    setups = [("one_node", f"1 node of {cameras} cameras", params, True)]
    if workers > 1:
        threads = max(1, (os.cpu_count() or 1) // workers)
        given = {**params, "inference_workers": str(workers), "intra_op_threads": str(threads)}
        setups.append(("one_node_workers", f"1 node of {cameras} cameras, {workers} workers", given, True))
    setups.append(("nodes", f"{cameras} nodes", params, False))
    measured = measure(model_type, setups, frame, cameras, seconds, rate, work, rounds)
    one, many = measured["one_node"], measured["nodes"]
    report = {
        "cameras": cameras,
        "rate_hz": rate,
        "seconds": seconds,
        **measured,
        "memory_ratio": one["rss_mib"] / many["rss_mib"],
        "fps_ratio": one["fps"] / many["fps"] if many["fps"] else float("nan"),
    }
    if workers > 1:
        report["workers"] = workers
        workers_fps = measured["one_node_workers"]["fps"]
        report["fps_ratio_workers"] = workers_fps / many["fps"] if many["fps"] else float("nan")
        report["memory_ratio_workers"] = measured["one_node_workers"]["rss_mib"] / many["rss_mib"]
    return report


def lines(label: str, report: dict[str, Any]) -> list[str]:
    """The table's lines for a ``cameras_vs_nodes`` report."""
    cameras = report["cameras"]
    text = []
    for key in ("one_node", "one_node_workers", "nodes"):
        if key not in report:
            continue
        row = report[key]
        windows = " ".join(f"{value:.1f}" for value in row["window_fps"])
        text.append(
            f"{label} {row['name']}: {row['fps']:.1f} frames/s answered of {row['sent_fps']:.1f} sent (windows: "
            f"{windows}), on {row['cpu_cores']:.2f} cores, {row['cpu_ms_per_answer']:.1f} CPU ms an answer; per "
            f"camera {' '.join(f'{value:.1f}' for value in row['camera_fps'])}; latency p50 ms "
            f"{_latencies(row['latency_p50_ms'])}, p99 ms {_latencies(row['latency_p99_ms'])}; VmRSS "
            f"{row['rss_mib']:.0f} MiB"
        )
        text.append(f"{label}   answers counted, each node: {'; '.join(row['counts'])}")
    ratios = f"memory {report['memory_ratio']:.2f}x, frames/s {report['fps_ratio']:.2f}x"
    if "fps_ratio_workers" in report:
        ratios += (
            f"; with {report['workers']} workers frames/s {report['fps_ratio_workers']:.2f}x, memory "
            f"{report['memory_ratio_workers']:.2f}x"
        )
    text.append(f"{label} 1 node / {cameras} nodes: {ratios}")
    return text


def _latencies(per_camera: list[float]) -> str:
    """Each camera's latency (ms), and their spread (max/min) over the cameras that have one."""
    known = [value for value in per_camera if value == value]
    spread = f" (max/min {max(known) / min(known):.2f})" if known and min(known) > 0 else ""
    return " ".join(f"{value:.0f}" for value in per_camera) + spread
