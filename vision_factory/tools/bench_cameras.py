"""`bench --cameras N`: one node serving N cameras (its ``cameras`` parameter) against N single-camera nodes of the
same model, in the same run: answered frames/s over all cameras, each camera's latency, and the nodes' resident
memory. Each node is its own process (this package's node: ONNX Runtime), on the node's defaults otherwise
(the family's queue_size: a detector answers each camera's newest frame); every camera gets the same 1280x720
frames at ``rate`` Hz, stamped with the time they are sent, over Fast DDS shared memory."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..families.registry import family
from ..ros import message_class
from .replay import node_spec, use_shared_memory_profile

WARM_UP_S = 3.0  # frames before the measured window: the nodes' first runs size their memory arenas
IN_FLIGHT_S = 2.0  # after the window: answers still on their way are counted
START_S = 180.0  # the most a node may take to start and subscribe on a loaded machine


def rss_mib(pid: int) -> float:
    """The resident memory (VmRSS) of process ``pid``, MiB (Linux /proc)."""
    with open(f"/proc/{pid}/status") as status:
        fields = dict(line.split(":", 1) for line in status if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024


def _start(model_type: str, params: dict[str, str], namespace: str, cameras: list[str], log: Path):
    module = node_spec(model_type).module  # this package's ONNX Runtime node, as replay starts it
    command = [sys.executable, "-m", module, "--ros-args", "-r", f"__ns:={namespace}"]
    for name, value in params.items():
        command += ["-p", f"{name}:={value}"]
    if cameras:
        command += ["-p", f"cameras:=[{', '.join(cameras)}]"]
    return subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT)


def measure(
    model_type: str,
    params: dict[str, str],
    frame: np.ndarray,
    cameras: int,
    one_node: bool,
    seconds: float,
    rate: float,
    work_dir: Path,
) -> dict[str, Any]:
    """``cameras`` cameras through one node (``one_node``) or one node each: frames sent and answered per second
    over all cameras, per camera answers/s and latency p50/p99 (ms, the answer received minus its stamp), and the
    nodes' VmRSS summed (MiB) once the frames are through."""
    import rclpy
    from rclpy.node import Node
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Image
    from std_msgs.msg import Header

    from ..ros.messages import bgr_to_message

    use_shared_memory_profile()
    spec = family(model_type)
    names = [f"cam{index}" for index in range(cameras)]
    if one_node:
        processes = [_start(model_type, params, "/one", names, work_dir / "one_node.log")]
        prefixes = [f"/one/{name}" for name in names]
    else:
        processes = [_start(model_type, params, f"/{name}", [], work_dir / f"{name}.log") for name in names]
        prefixes = [f"/{name}" for name in names]
    reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    context = rclpy.Context()
    rclpy.init(args=[], context=context)
    node = Node("bench_cameras", context=context)
    executor = rclpy.executors.SingleThreadedExecutor(context=context)
    executor.add_node(node)
    latencies: list[list[float]] = [[] for _ in names]

    def received(index: int):
        def on_answer(message: Any) -> None:
            stamp = message.header.stamp
            latencies[index].append(1000 * (time.time() - stamp.sec - stamp.nanosec / 1e9))

        return on_answer

    answer_type = message_class(spec.result.message)
    output = spec.main_output(params, "bench")  # its main output, as the node publishes it for its model
    subscriptions = [
        node.create_subscription(answer_type, f"{prefix}/{output}", received(index), reliable)
        for index, prefix in enumerate(prefixes)
    ]
    publishers = [node.create_publisher(Image, f"{prefix}/image", reliable) for prefix in prefixes]
    try:
        deadline = time.monotonic() + START_S
        while not (
            all(p.get_subscription_count() for p in publishers) and all(s.get_publisher_count() for s in subscriptions)
        ):
            if time.monotonic() > deadline or any(process.poll() is not None for process in processes):
                raise RuntimeError(f"the {model_type} nodes did not start: see the logs in {work_dir}")
            executor.spin_once(timeout_sec=0.1)
        message = bgr_to_message(frame, Header(frame_id="camera"))
        period = 1.0 / rate

        def send(until: float) -> int:
            start, sent = time.monotonic(), 0
            while (now := time.monotonic()) < until:
                if now >= start + sent * period:
                    stamp = time.time()
                    message.header.stamp.sec, message.header.stamp.nanosec = int(stamp), int(stamp % 1 * 1e9)
                    for publisher in publishers:
                        publisher.publish(message)
                    sent += 1
                executor.spin_once(timeout_sec=0.002)
            return sent

        send(time.monotonic() + WARM_UP_S)
        for answered in latencies:
            answered.clear()
        start = time.monotonic()
        sent = send(start + seconds)
        elapsed = time.monotonic() - start
        end = time.monotonic() + IN_FLIGHT_S
        while time.monotonic() < end:
            executor.spin_once(timeout_sec=0.05)
        memory = sum(rss_mib(process.pid) for process in processes)
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            process.wait(timeout=30)
    return {
        "sent_fps": sent * cameras / elapsed,
        "fps": sum(len(answered) for answered in latencies) / elapsed,
        "camera_fps": [len(answered) / elapsed for answered in latencies],
        "latency_p50_ms": [float(np.percentile(a, 50)) if a else float("nan") for a in latencies],
        "latency_p99_ms": [float(np.percentile(a, 99)) if a else float("nan") for a in latencies],
        "rss_mib": memory,
    }


def cameras_vs_nodes(
    model_type: str,
    params: dict[str, str],
    frame: np.ndarray,
    cameras: int,
    seconds: float,
    rate: float,
    work: Path,
    workers: int = 1,
) -> dict[str, Any]:
    """One node of ``cameras`` cameras and ``cameras`` single-camera nodes, one after the other, and their ratios
    (one node over the N nodes: memory, frames/s); with ``workers`` over 1, also the one node with that many
    inference_workers, each run on cores / workers intra-op threads."""
    work.mkdir(parents=True, exist_ok=True)
    one = measure(model_type, params, frame, cameras, True, seconds, rate, work)
    many = measure(model_type, params, frame, cameras, False, seconds, rate, work)
    report = {
        "cameras": cameras,
        "rate_hz": rate,
        "seconds": seconds,
        "one_node": one,
        "nodes": many,
        "memory_ratio": one["rss_mib"] / many["rss_mib"],
        "fps_ratio": one["fps"] / many["fps"] if many["fps"] else float("nan"),
    }
    if workers > 1:
        threads = max(1, (os.cpu_count() or 1) // workers)
        given = {**params, "inference_workers": str(workers), "intra_op_threads": str(threads)}
        report["workers"] = workers
        report["one_node_workers"] = measure(model_type, given, frame, cameras, True, seconds, rate, work)
        workers_fps = report["one_node_workers"]["fps"]
        report["fps_ratio_workers"] = workers_fps / many["fps"] if many["fps"] else float("nan")
    return report


def lines(label: str, report: dict[str, Any]) -> list[str]:
    """The table's lines for a ``cameras_vs_nodes`` report."""
    cameras = report["cameras"]
    rows = [(f"1 node of {cameras} cameras", report["one_node"]), (f"{cameras} nodes", report["nodes"])]
    if "one_node_workers" in report:
        rows.append((f"1 node of {cameras} cameras, {report['workers']} workers", report["one_node_workers"]))
    text = []
    for name, row in rows:
        text.append(
            f"{label} {name}: {row['fps']:.1f} frames/s answered of {row['sent_fps']:.1f} sent; per camera "
            f"{' '.join(f'{value:.1f}' for value in row['camera_fps'])}; latency p50 ms "
            f"{_latencies(row['latency_p50_ms'])}, p99 ms {_latencies(row['latency_p99_ms'])}; "
            f"VmRSS {row['rss_mib']:.0f} MiB"
        )
    ratios = f"memory {report['memory_ratio']:.2f}x, frames/s {report['fps_ratio']:.2f}x"
    if "fps_ratio_workers" in report:
        ratios += f"; with {report['workers']} workers frames/s {report['fps_ratio_workers']:.2f}x"
    text.append(f"{label} 1 node / {cameras} nodes: {ratios}")
    return text


def _latencies(per_camera: list[float]) -> str:
    """Each camera's latency (ms), and their spread (max/min) over the cameras that have one."""
    known = [value for value in per_camera if value == value]
    spread = f" (max/min {max(known) / min(known):.2f})" if known and min(known) > 0 else ""
    return " ".join(f"{value:.0f}" for value in per_camera) + spread
