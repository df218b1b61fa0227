#!/usr/bin/env python3
"""Soak: the fuzz campaign of the tests (vision_factory.tools.fuzz) at 10,000 messages and 2x overload.

    python benchmarks/soak.py [--messages 10000] [--overload 2] [--transports raw,compressed]
                              [--yolo-model PATH] [--json out.json]

Per node (the tracknet node on a synthetic TrackNet model; a yolo node on ``--yolo-model``, by default
the shared shapes YOLOv8n when ``../shared`` is there) and per input transport:

1. capacity: a separate node with a reliable subscription and a queue that never drops answers a
   clean stream of valid frames as fast as it can: valid frames/s;
2. the campaign: a fresh node with its defaults (best-effort subscription, queue_size 4 for tracknet, 1 for
   yolo) receives
   ``--messages`` messages (one valid frame in 4, the rest bad, lying or unusual) published at
   ``--overload`` times the rate whose valid frames alone would fill that capacity.

Printed per run: log lines per message and per bad message, the node's resident memory after a
clean warm-up stream, at the end and at its peak (VmHWM), frames the node counted as dropped (its
closing line), valid frames answered, and whether it was alive and exited cleanly.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from report import environment, table

from vision_factory.streaming import closing_counts

ROOT = Path(__file__).resolve().parent.parent

SHARED_YOLO = ROOT.parent / "shared" / "models" / "shapes-yolov8n.onnx"
VALID_EVERY = 4


def _capacity(fuzz, module, params, output, transport, frames, folder: Path) -> float:
    node = fuzz.NodeUnderTest(
        module, {**params, "queue_size": "1000", "qos_depth": "1000"}, output, transport, folder / "capacity.log"
    )
    try:
        node.wait_ready()
        node.play(fuzz.stream(frames[:8], transport))  # warm-up
        clean = fuzz.stream(frames * 3, transport)
        start = time.perf_counter()
        played = node.play(clean, gap=0.0, settle=1.0)
        seconds = time.perf_counter() - start - 1.0  # less the quiet wait at the end
    finally:
        node.stop()
    return len(played.answers) / seconds


def soak(fuzz, name, module, params, output, transport, frames, messages, overload, folder: Path) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    capacity = _capacity(fuzz, module, params, output, transport, frames, folder)
    rate = overload * capacity * VALID_EVERY
    shots = fuzz.campaign(frames, messages, transport, seed=2026, valid_every=VALID_EVERY, unusual=fuzz.EITHER)
    node = fuzz.NodeUnderTest(module, params, output, transport, folder / "soak.log", reliable=False, depth=10)
    try:
        node.wait_ready()
        node.play(fuzz.stream(frames, transport))
        warm = node.memory_kib()
        lines_before = len(node.log().splitlines())
        start = time.perf_counter()
        played = node.play(shots, rate=rate, settle=3.0)
        wall = time.perf_counter() - start - 3.0
        lines = len(node.log().splitlines()) - lines_before
        final = node.memory_kib()
        alive = node.process.poll() is None
    finally:
        code = node.stop()
    log = node.log()
    closing = closing_counts(log) or {}
    frames_in, dropped, skipped, outputs = (closing.get(key) for key in ("frames_in", "dropped", "skipped", "outputs"))
    valid = [i for i, shot in enumerate(shots) if shot.expect == fuzz.ANSWER]
    bad = sum(shot.kind != "valid" for shot in shots)
    return {
        "node": name,
        "transport": transport,
        "messages": messages,
        "capacity_fps": capacity,
        "sent_per_s": messages / wall,
        "log_lines": lines,
        "lines_per_message": lines / messages,
        "lines_per_bad_message": lines / bad,
        "warm_rss_mib": warm["VmRSS"] / 1024,
        "final_rss_mib": final["VmRSS"] / 1024,
        "peak_rss_mib": final["VmHWM"] / 1024,
        "largest_frame_mib": max(frame.nbytes for frame in frames) / 2**20,
        "frames_in": frames_in,  # what reached the node; the rest was lost in DDS (best effort, depth 5)
        "dropped_by_node": dropped,
        "skipped_by_node": skipped,
        "node_outputs": outputs,
        "valid_answered": sum(i in played.answers for i in valid) / len(valid),
        "duplicates": played.duplicates,
        "tracebacks": log.count("Traceback"),
        "alive": alive,
        "exit_code": code,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--overload", type=float, default=2.0)
    parser.add_argument("--transports", default="raw,compressed")
    parser.add_argument("--yolo-model", type=Path, default=SHARED_YOLO if SHARED_YOLO.is_file() else None)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    import os

    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ.setdefault("FASTDDS_DEFAULT_PROFILES_FILE", str(ROOT / "config" / "fastdds_shm.xml"))
    from geometry_msgs.msg import PointStamped
    from vision_msgs.msg import Detection2DArray

    from vision_factory.tools import fuzz
    from vision_factory.tools.synthetic import BallClip, build_tracknet_model

    work = Path(tempfile.mkdtemp(prefix="vf_soak_"))
    clip_frames = list(BallClip(num_frames=32, width=1280, height=720, seed=3).frames())
    tracknet = build_tracknet_model(work / "tracknet.onnx", 8, "subtract")
    nodes = [
        (
            "tracknet",
            "vision_factory.tracknet_onnx_node",
            {"model_path": str(tracknet), "bg_mode": "subtract", "median_warmup": "8", "flush_timeout": "0.5"},
            ("ball", PointStamped),
            clip_frames,
        )
    ]
    if args.yolo_model:
        import cv2

        images = sorted((ROOT.parent / "shared" / "data" / "shapes-val" / "images").glob("*"))[:8]
        frames = [cv2.resize(cv2.imread(str(p)), (640, 480)) for p in images] or clip_frames
        nodes.append(
            (
                "yolo",
                "vision_factory.yolo_onnx_node",
                {"model_path": str(args.yolo_model)},
                ("detections", Detection2DArray),
                frames,
            )
        )
    else:
        print("yolo node skipped: no --yolo-model and no ../shared/models/shapes-yolov8n.onnx")
    results = []
    for name, module, params, output, frames in nodes:
        for transport in args.transports.split(","):
            print(f"soak: {name} node, {transport} input, {args.messages} messages ...", flush=True)
            results.append(
                soak(
                    fuzz,
                    name,
                    module,
                    params,
                    output,
                    transport,
                    frames,
                    args.messages,
                    args.overload,
                    work / f"{name}_{transport}",
                )
            )
    print(json.dumps(environment(threads=0)))
    columns = [
        ("node", "node"),
        ("transport", "input"),
        ("capacity_fps", "valid fps"),
        ("sent_per_s", "msgs/s sent"),
        ("lines_per_message", "lines/msg"),
        ("warm_rss_mib", "warm MiB"),
        ("peak_rss_mib", "peak MiB"),
        ("final_rss_mib", "final MiB"),
        ("log_lines", "lines"),
        ("frames_in", "reached node"),
        ("dropped_by_node", "dropped"),
        ("skipped_by_node", "refused"),
        ("valid_answered", "valid answered"),
        ("tracebacks", "tracebacks"),
        ("exit_code", "exit"),
    ]
    rows = [[r[key] for key, _ in columns] for r in results]
    print(table(f"soak: {args.messages} messages per run, {args.overload}x overload", [t for _, t in columns], rows))
    print(f"logs under {work}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=float))
    return 0 if all(r["alive"] and r["exit_code"] == 0 and not r["tracebacks"] for r in results) else 1


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    sys.exit(main())
