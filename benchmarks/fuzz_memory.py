#!/usr/bin/env python3
"""Resident memory of a node over the fuzz campaign of test/test_fuzz.py, against a clean stream as long.

    python benchmarks/fuzz_memory.py [--shots 400] [--nodes yolo,tracknet] [--transports raw,compressed]
                                     [--yolo-model PATH] [--json out.json]

test_fuzz asserts what a node does with a campaign (alive, every valid frame answered as before, nothing
refused answered, its log clean); how its resident size moves depends on the machine (allocator, the CPU's
kernels, load), so it is measured here, in one run, against a baseline. Per node and input transport, two
fresh nodes with the test's settings (reliable, queue_size and qos_depth 1000), each warmed up by the clean
stream of valid frames:

- campaign: the test's seeded campaign of ``--shots`` messages (one valid frame in 4, the rest bad, lying or
  unusual: sizes up to 65535 x 65535, decompression bombs, ...), at the test's pace (``GAP_S`` apart);
- baseline: the campaign's frames that must be answered alone, at the rate they have in the campaign: the
  same valid frames at the same rate, so what the node queues and answers is the same, the bad messages aside.

Printed per run: VmRSS after the warm-up, its growth over the run and the peak (VmHWM) above the warm-up,
for both; the campaign's growth less the baseline's (what the bad messages kept) and the ratio of the peaks
above the warm node (what the bad messages cost at once, 1.0: nothing); the largest valid frame. Linux only
(/proc). The nodes: the shapes YOLOv8n (``--yolo-model``, by default ../shared/models/shapes-yolov8n.onnx) on
shapes-val images of two sizes, and the tracknet node on a synthetic model and ball clip (the test's).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from bench_detection import shared_dir  # the shared models and data, found as the tests find them
from report import environment, table

ROOT = Path(__file__).resolve().parent.parent
SHARED = shared_dir(None)


GAP_S = 0.01  # between two messages, as test_fuzz publishes them


def _measure(fuzz, module, params, output, transport, clean, shots, rate: float, idle: float, log: Path) -> dict:
    """A fresh node: warm-up stream, then ``shots`` at ``rate`` a second; its memory (MiB) and what it answered."""
    node = fuzz.NodeUnderTest(module, params, output, transport, log)
    must_answer = {i for i, shot in enumerate(shots) if shot.expect == fuzz.ANSWER}
    try:
        node.wait_ready()
        node.play(fuzz.stream(clean, transport), until=range(len(clean)), settle=2.0 + idle)
        warm = node.memory_kib()
        played = node.play(shots, rate=rate, until=must_answer, settle=3.0 + idle)
        final = node.memory_kib()
        alive = node.process.poll() is None
    finally:
        code = node.stop()
    return {
        "warm_mib": warm["VmRSS"] / 1024,
        "growth_mib": (final["VmRSS"] - warm["VmRSS"]) / 1024,
        "peak_above_warm_mib": (final["VmHWM"] - warm["VmRSS"]) / 1024,
        "answered": len(must_answer & played.answers.keys()) / max(len(must_answer), 1),
        "alive": alive,
        "exit_code": code,
    }


def run(fuzz, name, module, params, output, transport, clean, shots, seed, unusual, idle, folder: Path) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    params = {**params, "queue_size": "1000", "qos_depth": "1000"}
    campaign_shots = fuzz.campaign(clean, shots, transport, seed=seed, unusual=unusual)
    valid = [shot for shot in campaign_shots if shot.expect == fuzz.ANSWER]
    valid_rate = len(valid) / (len(campaign_shots) * GAP_S)

    def measure(played: list, rate: float, log: Path) -> dict:
        return _measure(fuzz, module, params, output, transport, clean, played, rate, idle, log)

    baseline = measure(valid, valid_rate, folder / "clean.log")
    campaign = measure(campaign_shots, 1 / GAP_S, folder / "fuzz.log")
    return {
        "node": name,
        "transport": transport,
        "shots": shots,
        "valid_shots": len(valid),
        "largest_frame_mib": max(frame.nbytes for frame in clean) / 2**20,
        "baseline": baseline,
        "campaign": campaign,
        "growth_over_baseline_mib": campaign["growth_mib"] - baseline["growth_mib"],
        "peak_ratio": campaign["peak_above_warm_mib"] / max(baseline["peak_above_warm_mib"], 1.0),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shots", type=int, default=400, help="messages per run (the test's: 400)")
    parser.add_argument("--nodes", default="yolo,tracknet")
    parser.add_argument("--transports", default="raw,compressed")
    parser.add_argument("--yolo-model", type=Path, default=SHARED / "models" / "shapes-yolov8n.onnx")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ.setdefault("FASTDDS_DEFAULT_PROFILES_FILE", str(ROOT / "config" / "fastdds_shm.xml"))
    import cv2
    from geometry_msgs.msg import PointStamped
    from vision_msgs.msg import Detection2DArray

    from vision_factory.tools import fuzz
    from vision_factory.tools.synthetic import BallClip, build_tracknet_model

    work = Path(tempfile.mkdtemp(prefix="vf_fuzz_memory_"))
    nodes = []
    if "yolo" in args.nodes.split(","):
        images = sorted((SHARED / "data" / "shapes-val" / "images").glob("*.jpg"))[:2]
        if not (args.yolo_model.is_file() and len(images) == 2):
            print(f"yolo node skipped: no {args.yolo_model} or shapes-val images beside it")
        else:
            first, second = (cv2.imread(str(path)) for path in images)
            photos = [cv2.resize(first, (640, 480)), cv2.resize(second, (480, 600)), cv2.resize(first, (640, 480))]
            photos[2] = photos[2][:, ::-1].copy()  # three frames, two sizes, as the test's photos
            yolo = ("vision_factory.yolo_onnx_node", {"model_path": str(args.yolo_model)})
            nodes.append(("yolo", *yolo, ("detections", Detection2DArray), photos, 7, fuzz.ANSWER, 0.0))
    if "tracknet" in args.nodes.split(","):
        model = build_tracknet_model(work / "tracknet.onnx", 8, "subtract")
        clip = list(BallClip(num_frames=24, width=640, height=360, seed=5).frames())
        params = {"model_path": str(model), "bg_mode": "subtract", "median_warmup": "4", "flush_timeout": "0.3"}
        tracknet = ("vision_factory.tracknet_onnx_node", params, ("ball", PointStamped))
        nodes.append(("tracknet", *tracknet, clip, 11, fuzz.EITHER, 0.5))
    results = []
    for name, module, params, output, clean, seed, unusual, idle in nodes:
        for transport in args.transports.split(","):
            print(
                f"fuzz memory: {name} node, {transport} input, {args.shots} messages, clean then fuzz ...", flush=True
            )
            folder = work / f"{name}_{transport}"
            results.append(
                run(fuzz, name, module, params, output, transport, clean, args.shots, seed, unusual, idle, folder)
            )
    print(json.dumps(environment(threads=0)))
    rows = [
        [
            r["node"],
            r["transport"],
            r["baseline"]["warm_mib"],
            r["baseline"]["growth_mib"],
            r["campaign"]["growth_mib"],
            r["growth_over_baseline_mib"],
            r["baseline"]["peak_above_warm_mib"],
            r["campaign"]["peak_above_warm_mib"],
            r["peak_ratio"],
            r["largest_frame_mib"],
            r["campaign"]["answered"],
        ]
        for r in results
    ]
    header = ["node", "input", "warm MiB", "clean: growth", "fuzz: growth", "fuzz - clean"]
    header += ["clean: peak+", "fuzz: peak+", "peak ratio", "largest frame", "valid answered"]
    print(table(f"fuzz memory: {args.shots} messages per run (MiB; peak+: VmHWM above the warm node)", header, rows))
    print(f"logs under {work}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=float))
    ok = all(r[kind]["alive"] and r[kind]["exit_code"] == 0 for r in results for kind in ("baseline", "campaign"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
