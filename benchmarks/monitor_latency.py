#!/usr/bin/env python3
"""What a node's own live figures (ros/monitor.py) say against what a client sees, in one run.

    python benchmarks/monitor_latency.py [--model ../shared/models/shapes-yolov8n.onnx] [--frames 40]
                                         [--rate 10] [--json out.json]

A yolo node in its own process, a client node here over DDS. Twice ``--frames`` frames (640 x 480): first one at
a time (each sent once its answer came), then at ``--rate`` frames/s. Per frame the node's ~/debug/ figures
(pipeline latency on its ROS clock, processing time and stages on perf_counter), and the client's round trip: the
frame's stamp to its answer's arrival, on the same ROS clock: the baseline of the node's latency. Printed: p50 /
p99 of each, the node's latency over the round trip (about 1.0: the node reads its clock just after publishing,
so a client woken at once can see the answer a little before), latency less processing time (transport and
queue, less the work after the answer: negative when the thread is held after the answer), and the /diagnostics
period (once a second on an idle machine; later ticks under load).

test/test_monitor.py asserts what these figures mean (each within what the client saw, on its own clock); how
large they are is this machine's speed and load, measured here.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from bench_detection import shared_dir  # the shared models and data, found as the tests find them
from report import environment, table

ROOT = Path(__file__).resolve().parent.parent
STAGES = ("pipeline_latency_ms", "processing_time_ms", "preprocess_ms", "inference_ms", "postprocess_ms")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=shared_dir(None) / "models" / "shapes-yolov8n.onnx")
    parser.add_argument("--frames", type=int, default=40, help="frames in each of the two phases")
    parser.add_argument("--rate", type=float, default=10.0, help="frames/s of the second phase")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if not args.model.is_file():
        print(f"no model at {args.model} (--model)")
        return 2

    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ.setdefault("FASTDDS_DEFAULT_PROFILES_FILE", str(ROOT / "config" / "fastdds_shm.xml"))
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.node import Node
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rclpy.time import Time
    from sensor_msgs.msg import Image
    from std_msgs.msg import Float64, Header
    from vision_msgs.msg import Detection2DArray

    from vision_factory.ros.messages import bgr_to_message

    namespace = f"/vf_monitor_{os.getpid()}"
    log = Path(tempfile.mkdtemp(prefix="vf_monitor_latency_")) / "node.log"
    command = [sys.executable, "-m", "vision_factory.yolo_onnx_node", "--ros-args", "-r", f"__ns:={namespace}"]
    params = {"model_path": str(args.model), "qos_reliability": "reliable", "queue_size": str(2 * args.frames)}
    for key, value in params.items():
        command += ["-p", f"{key}:={value}"]
    process = subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT)
    context = rclpy.Context()
    rclpy.init(context=context)
    node = Node("vf_monitor_client", context=context)
    executor = rclpy.executors.SingleThreadedExecutor(context=context)
    executor.add_node(node)
    reliable = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
    now_ns = lambda: node.get_clock().now().nanoseconds  # noqa: E731
    debug: dict[str, list[float]] = {name: [] for name in STAGES}
    arrived: dict[int, int] = {}  # the answer's stamp (ns) -> its arrival (ns), the client's ROS clock
    periods: list[int] = []  # the stamps of the node's /diagnostics

    def on_answer(message) -> None:
        arrived[Time.from_msg(message.header.stamp).nanoseconds] = now_ns()

    def on_diagnostics(message) -> None:
        if any(status.name == "yolo: inference" for status in message.status):
            periods.append(Time.from_msg(message.header.stamp).nanoseconds)

    subscriptions = [node.create_subscription(Detection2DArray, f"{namespace}/detections", on_answer, reliable)]
    for name in STAGES:
        topic = f"{namespace}/yolo/debug/{name}"
        subscriptions.append(node.create_subscription(Float64, topic, lambda m, n=name: debug[n].append(m.data), 100))
    subscriptions.append(node.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, 100))
    publisher = node.create_publisher(Image, f"{namespace}/image", reliable)

    def spin_until(condition, timeout: float = 300.0) -> bool:
        deadline = time.monotonic() + timeout
        while not condition() and time.monotonic() < deadline and process.poll() is None:
            executor.spin_once(timeout_sec=0.02)
        return condition()

    frame = np.random.default_rng(0).integers(0, 255, (480, 640, 3), dtype=np.uint8)
    stamps: list[int] = []

    def send() -> None:
        message = bgr_to_message(frame, Header(stamp=node.get_clock().now().to_msg(), frame_id="camera"))
        stamps.append(Time.from_msg(message.header.stamp).nanoseconds)
        publisher.publish(message)

    def all_in(count: int) -> bool:
        return len(arrived) >= count and all(len(values) >= count for values in debug.values())

    try:
        matched = lambda: publisher.get_subscription_count() > 0 and all(s.get_publisher_count() for s in subscriptions)  # noqa: E731
        if not spin_until(matched):
            print(f"the node's topics never matched; its log: {log}")
            return 1
        send()  # warm-up: the first inference is slow
        spin_until(lambda: all_in(1))
        for values in debug.values():
            values.clear()
        arrived.clear()
        stamps.clear()
        for index in range(args.frames):  # one at a time
            send()
            spin_until(lambda i=index: all_in(i + 1))
        start = time.perf_counter()
        for index in range(args.frames):  # at the rate
            spin_until(lambda i=index: time.perf_counter() - start >= i / args.rate, 1 / args.rate + 1)
            send()
        spin_until(lambda: all_in(2 * args.frames))
        ticks = len(periods)
        spin_until(lambda: len(periods) >= ticks + 3, 30)
    finally:
        process.terminate()
        process.wait(timeout=20)
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)

    rows, results = [], {}
    for phase, part in (
        ("one at a time", slice(0, args.frames)),
        (f"{args.rate:g} frames/s", slice(args.frames, None)),
    ):
        round_trip = [(arrived[stamp] - stamp) / 1e6 for stamp in stamps[part] if stamp in arrived]
        latency, processing = np.array(debug["pipeline_latency_ms"][part]), np.array(debug["processing_time_ms"][part])
        figures = {
            "client round trip": np.array(round_trip),
            "node pipeline latency": latency,
            "node processing time": processing,
            "latency / round trip": latency / np.array(round_trip),
            "latency - processing": latency - processing,
            **{f"node {name.removesuffix('_ms')}": np.array(debug[name][part]) for name in STAGES[2:]},
        }
        results[phase] = {
            name: {"p50": float(np.percentile(v, 50)), "p99": float(np.percentile(v, 99))}
            for name, v in figures.items()
        }
        rows += [[phase, name, v["p50"], v["p99"]] for name, v in results[phase].items()]
    period_s = np.diff(periods) / 1e9 if len(periods) > 1 else np.array([float("nan")])
    results["diagnostics period (s)"] = {"p50": float(np.median(period_s)), "max": float(np.max(period_s))}
    print(json.dumps(environment(threads=0)))
    print(
        table(
            f"monitor latency: {args.model.name}, 640 x 480 (ms; ratios plain)", ["phase", "figure", "p50", "p99"], rows
        )
    )
    period = results["diagnostics period (s)"]
    print(
        f"/diagnostics period: median {period['p50']:.3f} s, max {period['max']:.3f} s over {len(period_s)} intervals"
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
