#!/usr/bin/env python3
"""TrackNet stride benchmark: speed and accuracy for each stride, side by side in one run.

    python benchmarks/bench_tracknet_stride.py [--width 64] [--strides 1,2,4,8] [--json out.json]

For each stride, on the U-Net-shaped synthetic model at base width ``--width`` (64 is TrackNetV3's;
vision_factory.tools.synthetic.build_tracknet_model, bg_mode subtract, seq_len 8), it runs the
project's own tools, as the command line does:

1. ``vision-factory bench --model-type tracknet --node --stride S`` (tools/bench.run_bench, onnx:cpu):
   the raw session, the module's per-frame pipeline at 1280x720 (frames/s) and the node over DDS
   (steady frames/s, latency);
2. ``vision-factory eval --model-type tracknet --stride S`` (tools/ball_eval.evaluate_tracking) of the
   model over the demo's clip (tools/demo.write_demo_clip: its frames and its known positions):
   accuracy, precision, recall, F1.

The U-Net part of the model is multiplied by 0 before the heatmaps, so every width gives the
light model's heatmaps: the accuracy changes with the stride alone, the speed is a real
network's of that size. It is a benchmark, not a test: nothing is asserted. Timings depend on
what else runs on the machine (the 1-minute load average is recorded per stride).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from report import environment, table


def _strides(text: str) -> list[int]:
    try:
        return [int(item) for item in text.split(",") if item.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"strides must be integers like 1,2,4,8, got {text!r}") from None


def measure(model: Path, stride: int, runs: int, clip_dir: Path, work: Path) -> dict:
    from vision_factory.tools.ball_eval import evaluate_tracking
    from vision_factory.tools.bench import run_bench

    load_before = os.getloadavg()[0]
    print(f"stride {stride}: bench --node ...", file=sys.stderr, flush=True)
    measured = run_bench(model, "onnx:cpu", runs, 1, "tracknet", node=True, stride=stride)[0]
    if not measured.available:
        raise SystemExit(f"onnx:cpu unavailable: {measured.reason}")
    print(f"stride {stride}: eval on the demo clip ...", file=sys.stderr, flush=True)
    out = work / f"eval_stride{stride}"
    evaluate_tracking(clip_dir / "truth.csv", out, model=model, source=clip_dir / "clip", stride=stride)
    metrics = json.loads((out / "eval.json").read_text())["metrics"]
    return {
        "stride": stride,
        "session_fps": measured.throughput_fps,
        "session_p50_ms": measured.p50_ms,
        "module": measured.pipeline,
        "node": measured.node,
        "eval": metrics,
        "load_avg_1min": [load_before, os.getloadavg()[0]],
    }


def module_rounds(model: Path, strides: list[int], rounds: int, seq_len: int, timed: int) -> dict[int, list[float]]:
    """TrackNetModuleONNX.push: seconds for ``timed`` frames per stride and round on one session, the
    strides interleaved (forward, then backward, ...) so that a load that changes during the run weighs
    on all of them alike."""
    import numpy as np

    from vision_factory.models.tracknet import TrackNetModuleONNX
    from vision_factory.tools.synthetic import BallClip

    clip = BallClip(num_frames=seq_len + timed, width=1280, height=720)
    frames = list(clip.frames())
    median = np.ascontiguousarray(clip.background[..., ::-1])
    module = TrackNetModuleONNX(model, seq_len, "subtract", median=median)
    seconds: dict[int, list[float]] = {stride: [] for stride in strides}
    for round_index in range(rounds):
        for stride in strides if round_index % 2 == 0 else strides[::-1]:
            print(f"module rounds: {round_index + 1}/{rounds}, stride {stride} ...", file=sys.stderr, flush=True)
            module.stride = stride  # the same session, a new stream
            module.reset()
            for frame in frames[:seq_len]:  # the window fills; the first window runs
                module.push(frame)
            start = time.perf_counter()
            for frame in frames[seq_len:]:  # timed: a multiple of every stride
                module.push(frame)
            seconds[stride].append(time.perf_counter() - start)
    return seconds


def report(results: dict) -> str:
    rows = []
    base = results["strides"][0]
    for r in results["strides"]:
        module_fps, node_fps = r["module"]["fps"], r["node"]["steady_fps"]
        rows.append(
            [
                str(r["stride"]),
                f"{r['module']['model_runs']}/{r['module']['frames']}",
                module_fps,
                module_fps / base["module"]["fps"],
                node_fps,
                node_fps / base["node"]["steady_fps"],
                r["node"]["latency_p50_ms"],
                r["eval"]["f1"],
                r["eval"]["accuracy"],
                r["eval"]["precision"],
                r["eval"]["recall"],
                r["eval"]["mean_error_px"],
                f"{r['load_avg_1min'][0]:.1f}-{r['load_avg_1min'][1]:.1f}",
            ]
        )
    header = [
        "stride",
        "model runs",
        "module fps",
        "x",
        "node fps",
        "x",
        "node p50 ms",
        "F1",
        "accuracy",
        "precision",
        "recall",
        "TP err px",
        "load",
    ]
    title = (
        f"TrackNet stride: unet{results['width']} (session p50 {base['session_p50_ms']:.0f} ms at stride 1's "
        f"measurement), seq_len {results['seq_len']}, 1280x720; eval on the demo clip ({results['eval_frames']} "
        f"frames); x = over stride 1"
    )
    return table(title, header, rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--width", type=int, default=64, help="U-Net base width (TrackNetV3: 64; 0: the light model)")
    parser.add_argument("--seq-len", type=int, default=8)
    parser.add_argument("--strides", type=_strides, default=[1, 2, 4, 8])
    parser.add_argument(
        "--runs", type=int, default=24, help="bench --runs: session runs; the pipeline times runs - 8 frames"
    )
    parser.add_argument("--eval-frames", type=int, default=90, help="frames of the demo clip (the demo's default 90)")
    parser.add_argument(
        "--rounds",
        type=int,
        default=0,
        help="also time the module with the strides interleaved on one session, this many rounds (0: not)",
    )
    parser.add_argument("--rounds-only", action="store_true", help="only the interleaved module rounds")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--work-dir", type=Path, help="keep the model, the clip and the reports here")
    args = parser.parse_args(argv)

    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    from vision_factory.tools.demo import write_demo_clip
    from vision_factory.tools.synthetic import build_tracknet_model

    temp = None if args.work_dir else tempfile.TemporaryDirectory(prefix="bench_stride_")
    work = args.work_dir or Path(temp.name)
    work.mkdir(parents=True, exist_ok=True)
    model = build_tracknet_model(
        work / f"tracknet_unet{args.width}_subtract_{args.seq_len}.onnx", args.seq_len, "subtract", args.width
    )
    if args.rounds or args.rounds_only:
        timed = max(args.strides)
        seconds = module_rounds(model, args.strides, max(1, args.rounds), args.seq_len, timed)
        fps = {stride: len(times) * timed / sum(times) for stride, times in seconds.items()}
        rows = [[str(s), *seconds[s], fps[s], fps[s] / fps[args.strides[0]]] for s in fps]
        header = ["stride", *(f"round {i + 1} s" for i in range(len(seconds[args.strides[0]]))), "fps", "x"]
        title = f"TrackNetModuleONNX.push: seconds for {timed} frames per stride and round, interleaved; fps over all"
        print(table(title, header, rows))
        results_rounds = {"timed_frames": timed, "seconds": seconds, "fps": fps}
        if args.rounds_only:
            if args.json:
                args.json.write_text(json.dumps(results_rounds, indent=2))
            return 0
    clip_dir = work / "demo"
    clip_dir.mkdir(exist_ok=True)
    write_demo_clip(clip_dir, args.eval_frames)
    results = {
        "width": args.width,
        "seq_len": args.seq_len,
        "eval_frames": args.eval_frames,
        "environment": environment(0),
        "strides": [measure(model, stride, args.runs, clip_dir, work) for stride in args.strides],
    }
    if args.rounds:
        results["module_rounds"] = results_rounds
    print(report(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
        print(f"\nwrote {args.json}")
    if temp is not None:
        temp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
