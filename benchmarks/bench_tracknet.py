#!/usr/bin/env python3
"""TrackNet throughput benchmark: raw ONNX Runtime session, streaming module, real ROS node.

    python benchmarks/bench_tracknet.py [--frames N] [--size 1280x720] [--json out.json]

In one run it measures, for each model (``--backbone-widths``) and bg_mode, seq_len 8 by default:

1. raw ``session.run`` per call on a fixed input, after warm-up (p50/p90/p99 ms) and the
   implied maximum frames/s: streaming TrackNet runs the session once per frame;
2. ``TrackNetModuleONNX.push`` per frame at ``--size`` (BallClip frames), with the stage
   split from the module's ``stats`` (pre-processing, inference, post-processing, median),
   plus the parts of pre-processing timed on their own, and frames/s when a second thread
   pre-processes the next frame (``prepare``) during each ``push``, as the node does;
3. the tracknet node end to end: a synthetic bag replayed through a fresh node process with
   ``vision_factory.tools.replay.replay`` as fast as the node keeps up (``rate=None``):
   frames/s and latency (image publish -> ball receive);
4. the ratios node / raw session, module / raw session, the node's overhead per frame
   (1000 / node frames/s - session p50) and pre-processing ms per frame;
5. with ``--baseline-code DIR`` (a checkout of the code before a change, e.g. ``git worktree add
   DIR main``): the node from DIR against this checkout's, replayed alternately for ``--rounds``
   rounds, each round with its own raw session p50 and load average; node / session and the
   overhead per frame of each, as median [min-max] over the rounds;
6. the background median of a ``--median-warmup`` frame warm-up at ``--size``: the former
   whole-stack ``np.median`` when the last warm-up frame arrives against ``WarmupMedian``,
   which builds the same median as the frames arrive (the last frame's cost, the most any
   warm-up frame costs, the whole warm-up), and the ratio. ``--median-only`` runs just this.

Models (vision_factory.tools.synthetic.build_tracknet_model): width 0 is the light synthetic
TrackNet, whose session.run takes a few ms, so the ratio mostly measures the node's fixed
per-frame cost; width W > 0 adds a U-Net with TrackNetV3's layer shapes at base width W
(64 is TrackNetV3's own, about 3 s per window on 2 CPU cores), with the same heatmaps.

It is a benchmark, not a test: nothing is asserted. Timings depend on what else runs on
the machine; run it on an otherwise idle machine and compare runs made on the same one.
ROS: set ROS_DOMAIN_ID (and ROS_HOME / ROS_LOG_DIR if you like) before running; the
discovery range defaults to LOCALHOST here.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from report import environment, fmt, table

BG_ALIASES = {"none": "", "rgb": "", "": ""}


def _bg_modes(text: str) -> list[str]:
    from vision_factory.models.tracknet_stream import BG_MODES

    modes = []
    for item in text.split(","):
        mode = BG_ALIASES.get(item.strip(), item.strip())
        if mode not in BG_MODES:
            raise argparse.ArgumentTypeError(
                f"unknown bg_mode {item!r}: use none (= ''), subtract, subtract_concat, concat"
            )
        modes.append(mode)
    return modes


def _size(text: str) -> tuple[int, int]:
    """--size WIDTHxHEIGHT as (width, height), read as every vision_factory size is."""
    from vision_factory.text import parse_size

    try:
        return parse_size(text.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _label(mode: str) -> str:
    return mode or "none"


def _model_label(width: int) -> str:
    return "light" if width == 0 else f"unet{width}"


def _key(width: int, mode: str) -> str:
    """Results are keyed by model and bg_mode, e.g. "light subtract", "unet8 none"."""
    return f"{_model_label(width)} {_label(mode)}"


def _widths(text: str) -> list[int]:
    try:
        widths = [int(item) for item in text.split(",") if item.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"widths must be integers like 0,8, got {text!r}") from None
    if not widths or min(widths) < 0:
        raise argparse.ArgumentTypeError(f"widths must be >= 0, got {text!r}")
    return widths


def _percentiles(samples_s: list[float]) -> dict[str, float]:
    ms = np.asarray(samples_s, dtype=np.float64) * 1e3
    return {
        "mean_ms": float(ms.mean()),
        "p50_ms": float(np.percentile(ms, 50)),
        "p90_ms": float(np.percentile(ms, 90)),
        "p99_ms": float(np.percentile(ms, 99)),
        "n": int(ms.size),
    }


def _provider_config(threads: int):
    from vision_factory.runtime.providers import ProviderConfig

    return ProviderConfig(intra_op_threads=threads)


def bench_session(model: Path, runs: int, warmup: int, threads: int) -> dict:
    """Raw session.run on a fixed input, as the node's OnnxRunner creates it."""
    from vision_factory.runtime.onnx_runner import OnnxRunner

    runner = OnnxRunner(model, _provider_config(threads), logging.getLogger("bench"))
    session = runner.session
    info = session.get_inputs()[0]
    feeds = {info.name: np.random.default_rng(0).random((1, *info.shape[1:]), dtype=np.float32)}
    names = [output.name for output in session.get_outputs()]
    for _ in range(warmup):
        session.run(names, feeds)
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        session.run(names, feeds)
        samples.append(time.perf_counter() - start)
    result = _percentiles(samples)
    result["max_fps"] = 1000.0 / result["p50_ms"]  # one run per frame when streaming
    return result


def _median_rgb(clip) -> np.ndarray:
    return np.ascontiguousarray(clip.background[..., ::-1])


def _time_call(function, repeats: int) -> float:
    """Median ms of ``function()`` over ``repeats`` calls (after 3 warm-up calls)."""
    for _ in range(3):
        function()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return float(np.median(samples) * 1e3)


def bench_module(
    model: Path, mode: str, frames: list[np.ndarray], clip, pushes: int, seq_len: int, threads: int
) -> dict:
    """TrackNetModuleONNX.push per frame, and its stats per frame."""
    from vision_factory.models import tracknet_stream as tn
    from vision_factory.models.tracknet import TrackNetModuleONNX
    from vision_factory.models.tracknet_background import background_difference

    median = _median_rgb(clip) if mode in ("subtract", "subtract_concat", "concat") else None
    if mode == "concat":
        median = tn._bgr_to_chw_rgb(tn._resize(clip.background))  # CHW RGB at 288x512
    module = TrackNetModuleONNX(model, seq_len, mode, median=median, provider_config=_provider_config(threads))
    for index in range(2 * seq_len):  # fill the window and warm the session up
        module.push(frames[index % len(frames)])
    before = dataclasses.replace(module.stats)
    samples = []
    for index in range(pushes):
        frame = frames[index % len(frames)]
        start = time.perf_counter()
        module.push(frame)
        samples.append(time.perf_counter() - start)
    stats = module.stats
    delta = {name: getattr(stats, name) - getattr(before, name) for name in before.as_dict()}
    result = _percentiles(samples)
    result["fps"] = len(samples) / sum(samples)
    per_push = lambda seconds: 1e3 * seconds / max(1, delta["push_calls"])  # noqa: E731
    result["stages_ms_per_frame"] = {
        "preprocess": per_push(delta["preprocess_s"]),
        "inference": per_push(delta["inference_s"]),
        "postprocess": per_push(delta["postprocess_s"]),
        "median": per_push(delta["median_s"]),
    }
    result["inference_calls"] = int(delta["inference_calls"])
    result["pipelined_fps"] = _pipelined_fps(module, frames, pushes)
    # The parts of pre-processing on their own (median ms of one call on one frame).
    frame = frames[len(frames) // 2]
    parts = {
        "resize_bgr": _time_call(lambda: tn._resize(frame), 100),
        "feature": _time_call(lambda: module.prepare(frame), 100),
    }
    if mode in ("subtract", "subtract_concat"):
        parts["background_difference"] = _time_call(lambda: background_difference(frame, module._median), 100)
        difference = background_difference(frame, module._median)
        parts["resize_difference"] = _time_call(lambda: tn._resize(difference), 100)
    result["preprocess_parts_ms"] = parts
    return result


def _pipelined_fps(module, frames: list[np.ndarray], pushes: int) -> float:
    """Frames/s of ``push`` while a second thread ``prepare``s the next frame, as the node does."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        following = pool.submit(module.prepare, frames[0])
        start = time.perf_counter()
        for index in range(pushes):
            prepared = following.result()
            following = pool.submit(module.prepare, frames[(index + 1) % len(frames)])
            module.push(frames[index % len(frames)], prepared=prepared)
        elapsed = time.perf_counter() - start
        following.result()
    return pushes / elapsed


def bench_replay(
    model: Path,
    mode: str,
    clip,
    frames: int,
    seq_len: int,
    threads: int,
    max_in_flight: int,
    work: Path,
    rate: float | None = None,
    code: Path | None = None,
) -> dict:
    """The real node, fed a synthetic bag as fast as it keeps up (or at ``rate`` x 30 fps); the node's code
    from ``code`` (another checkout) when given, else this one's."""
    from vision_factory.tools.bags import write_image_bag
    from vision_factory.tools.replay import replay

    bag = work / f"clip_{_label(mode)}_{clip.width}x{clip.height}_{frames}"
    if not bag.exists():
        write_image_bag(bag, (clip.frame(i % clip.num_frames) for i in range(frames)), fps=30.0)
    params = {"model_path": str(model), "seq_len": str(seq_len), "bg_mode": mode}
    if mode:
        median = work / "median_rgb.npy"
        np.save(median, _median_rgb(clip) if mode != "concat" else _concat_median(clip))
        params["median_path"] = str(median)
    if threads:
        params["intra_op_threads"] = str(threads)
    out = Path(tempfile.mkdtemp(prefix=f"replay_{_label(mode)}_", dir=work))
    cpu_before = _cpu_seconds()
    with _node_code(code):
        result = replay(bag, out, "tracknet", params=params, rate=rate, max_in_flight=max_in_flight)
    cpu_after = _cpu_seconds()
    # Steady state: from the first output to the last one not held back for the end-of-stream
    # flush (the last seq_len-1 frames only come out after flush_timeout without input).
    steady_fps = result.steady_fps(held_back=seq_len - 1)
    latencies = result.latencies_ms[: max(1, len(result.latencies_ms) - (seq_len - 1))]
    node_split = _node_split(Path(result.node_log))
    return {
        "frames_sent": result.frames_sent,
        "outputs": result.outputs,
        "missing": len(result.missing_frames),
        "wall_s": result.wall_s,
        "replay_fps": result.fps,
        "steady_fps": steady_fps,
        "latency_ms_p50": result.latency_ms_p50,
        "latency_ms_p99": result.latency_ms_p99,
        "steady_latency_ms_p50": float(np.percentile(latencies, 50)),
        "steady_latency_ms_p99": float(np.percentile(latencies, 99)),
        "max_in_flight": max_in_flight,
        "node_ms_per_frame": node_split,
        # CPU time (user + system, all threads) per frame: the node process, and this one
        # (the player: bag reading, publishing, receiving). Compare with 1000 / fps x cores.
        "node_cpu_ms_per_frame": 1e3 * (cpu_after[1] - cpu_before[1]) / max(1, result.frames_sent),
        "player_cpu_ms_per_frame": 1e3 * (cpu_after[0] - cpu_before[0]) / max(1, result.frames_sent),
        "node_log": result.node_log,
    }


@contextlib.contextmanager
def _node_code(code: Path | None):
    """Start the node with ``code``'s vision_factory: first on PYTHONPATH, and the working directory
    (``python -m`` puts it before PYTHONPATH)."""
    if code is None:
        yield
        return
    saved_path, saved_cwd = os.environ.get("PYTHONPATH"), os.getcwd()
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code.resolve()), saved_path]))
    os.chdir(code)
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        if saved_path is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved_path


def _compare_code(model: Path, mode: str, clip, args, work: Path, timed: int) -> dict:
    """The node of ``args.baseline_code`` ("before") against this checkout's ("after"), alternately."""
    rounds: dict[str, list[dict]] = {"before": [], "after": []}
    for index in range(args.rounds):
        session = bench_session(model, timed, args.warmup, args.threads)["p50_ms"]
        order = ("before", "after") if index % 2 == 0 else ("after", "before")
        for name in order:
            code = args.baseline_code if name == "before" else None
            replayed = bench_replay(
                model, mode, clip, args.replay_frames, args.seq_len, args.threads, args.max_in_flight, work, code=code
            )
            fps = replayed["steady_fps"]
            rounds[name].append(
                {
                    "load_avg_1min": os.getloadavg()[0],
                    "session_p50_ms": session,
                    "steady_fps": fps,
                    "node_vs_session": fps * session / 1000.0,
                    "node_overhead_ms": 1000.0 / fps - session,
                    "node_cpu_ms_per_frame": replayed["node_cpu_ms_per_frame"],
                    "outputs": replayed["outputs"],
                    "frames_sent": replayed["frames_sent"],
                }
            )
    return rounds


def _spread(values: list[float]) -> str:
    return f"{fmt(float(np.median(values)))} [{fmt(min(values))}-{fmt(max(values))}]"


def _compare_report(results: dict) -> str:
    rows = []
    for key, variants in results["compare"].items():
        for name, rounds in variants.items():
            column = lambda field, rounds=rounds: [entry[field] for entry in rounds]  # noqa: E731
            rows.append(
                [
                    key,
                    name,
                    len(rounds),
                    _spread(column("load_avg_1min")),
                    _spread(column("session_p50_ms")),
                    _spread(column("steady_fps")),
                    _spread(column("node_vs_session")),
                    _spread(column("node_overhead_ms")),
                    _spread(column("node_cpu_ms_per_frame")),
                ]
            )
    return table(
        f"node before ({results['baseline_code']}) and after (this checkout), replayed alternately; "
        "median [min-max] over the rounds",
        [
            "model bg_mode",
            "code",
            "rounds",
            "load avg",
            "session p50",
            "steady fps",
            "node/session",
            "overhead ms",
            "node CPU ms",
        ],
        rows,
    )


def _cpu_seconds() -> tuple[float, float]:
    """(this process, its finished children) user + system CPU seconds."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def _concat_median(clip) -> np.ndarray:
    from vision_factory.models import tracknet_stream as tn

    return np.ascontiguousarray(tn._resize(clip.background)[..., ::-1].transpose(2, 0, 1))


def bench_median(frames: list[np.ndarray], warmup: int, repeats: int = 5) -> dict:
    """The background median of ``warmup`` frames: whole-stack np.median (as before) against WarmupMedian."""
    from vision_factory.models.tracknet_background import WarmupMedian

    frames = [frames[index % len(frames)] for index in range(warmup)]
    stacked, last, slowest, total = [], [], [], []
    for _ in range(repeats):
        start = time.perf_counter()
        before = np.median(np.stack(frames), axis=0).astype(np.uint8)  # the former warm-up median
        stacked.append(time.perf_counter() - start)
        median, per_frame = WarmupMedian(warmup), []
        for frame in frames:
            start = time.perf_counter()
            after = median.add(frame)
            per_frame.append(time.perf_counter() - start)
        if not np.array_equal(before, after):
            raise AssertionError("WarmupMedian differs from np.median")
        last.append(per_frame[-1])
        slowest.append(max(per_frame))
        total.append(sum(per_frame))
    ms = lambda samples: float(np.median(samples) * 1e3)  # noqa: E731
    result = {
        "warmup": warmup,
        "np_median_ms": ms(stacked),
        "last_frame_ms": ms(last),
        "slowest_frame_ms": ms(slowest),
        "whole_warmup_ms": ms(total),
    }
    result["last_frame_ratio"] = result["np_median_ms"] / result["last_frame_ms"]
    result["whole_warmup_ratio"] = result["np_median_ms"] / result["whole_warmup_ms"]
    return result


def _median_report(results: dict) -> str:
    width, height = results["size"]
    r = results["median"]
    return table(
        f"background median of a {r['warmup']}-frame warm-up at {width}x{height} (median ms of 5 runs; "
        "before: np.median of the stacked frames when the last arrives; after: WarmupMedian, as frames arrive)",
        ["np.median", "after: last frame", "slowest frame", "whole warm-up", "last-frame ratio", "whole ratio"],
        [
            [
                r["np_median_ms"],
                r["last_frame_ms"],
                r["slowest_frame_ms"],
                r["whole_warmup_ms"],
                r["last_frame_ratio"],
                r["whole_warmup_ratio"],
            ]
        ],
    )


def _node_split(log: Path) -> dict[str, float] | None:
    """The per-frame stage split the node logs when it stops."""
    text = log.read_text(errors="replace") if log.exists() else ""
    match = re.search(r"pre-processing ([\d.]+) ms, inference ([\d.]+) ms, post-processing ([\d.]+) ms", text)
    if not match:
        return None
    return dict(zip(("preprocess", "inference", "postprocess"), map(float, match.groups())))


def _memory_bandwidth_gbs() -> float:
    """A quick probe of this machine's state right now: copy bandwidth (GB/s) of 64 MiB."""
    source = np.ones(16 * 2**20, np.float32)
    target = np.empty_like(source)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        np.copyto(target, source)
        best = min(best, time.perf_counter() - start)
    return 2 * source.nbytes / best / 1e9  # read + write


def report(results: dict) -> str:
    env = results["environment"]
    width, height = results["size"]
    parts = [
        f"TrackNet benchmark: {width}x{height}, seq_len {results['seq_len']}, "
        f"{env['cpu_count']} CPU cores, onnxruntime {env['onnxruntime']} ({env['onnxruntime_device']}), "
        f"opencv {env['opencv']} ({env['opencv_threads']} threads), load avg {fmt(env['load_avg_1min'])}, "
        f"copy bandwidth {fmt(env['copy_bandwidth_gbs'], 1)} GB/s",
        "",
        table(
            "raw session.run per call (fixed input, after warm-up)",
            ["model bg_mode", "p50 ms", "p90 ms", "p99 ms", "max frames/s"],
            [[m, r["p50_ms"], r["p90_ms"], r["p99_ms"], r["max_fps"]] for m, r in results["session"].items()],
        ),
        "",
        table(
            f"TrackNetModuleONNX.push per {width}x{height} frame (stage ms per frame from stats; pipelined: "
            "prepare() of the next frame on a second thread, as the node does)",
            ["model bg_mode", "p50 ms", "p99 ms", "frames/s", "pre", "inference", "post", "median", "pipelined fps"],
            [
                [m, r["p50_ms"], r["p99_ms"], r["fps"], *r["stages_ms_per_frame"].values(), r["pipelined_fps"]]
                for m, r in results["module"].items()
            ],
        ),
        "",
        table(
            "pre-processing parts (median ms per call)",
            ["model bg_mode", "resize BGR", "bg difference", "resize diff", "whole feature"],
            [
                [
                    m,
                    r["preprocess_parts_ms"]["resize_bgr"],
                    r["preprocess_parts_ms"].get("background_difference"),
                    r["preprocess_parts_ms"].get("resize_difference"),
                    r["preprocess_parts_ms"]["feature"],
                ]
                for m, r in results["module"].items()
            ],
        ),
    ]
    if results["replay"]:
        parts += [
            "",
            table(
                f"tracknet node end to end (replay, rate={results['replay_rate']}, "
                f"max_in_flight {results['max_in_flight']}; "
                "latency and stage split "
                "in ms per frame; steady = without the window fill and the end-of-stream flush)",
                [
                    "model bg_mode",
                    "frames",
                    "replay fps",
                    "steady fps",
                    "lat p50",
                    "lat p99",
                    "steady p50",
                    "steady p99",
                    "node pre",
                    "node inf",
                    "node post",
                    "node CPU",
                    "player CPU",
                ],
                [
                    [
                        m,
                        f"{r['outputs']}/{r['frames_sent']}",
                        r["replay_fps"],
                        r["steady_fps"],
                        r["latency_ms_p50"],
                        r["latency_ms_p99"],
                        r["steady_latency_ms_p50"],
                        r["steady_latency_ms_p99"],
                        *((r["node_ms_per_frame"] or {}).get(k) for k in ("preprocess", "inference", "postprocess")),
                        r["node_cpu_ms_per_frame"],
                        r["player_cpu_ms_per_frame"],
                    ]
                    for m, r in results["replay"].items()
                ],
            ),
        ]
    if results.get("compare"):
        parts += ["", _compare_report(results)]
    if "median" in results:
        parts += ["", _median_report(results)]
    parts += [
        "",
        table(
            "ratios (goals: node/session >= 0.95, pre-processing < 5 ms per frame)",
            [
                "model bg_mode",
                "node/session (steady)",
                "node/session (replay fps)",
                "node overhead ms/frame",
                "module/session",
                "pipelined/session",
                "pre ms/frame",
            ],
            [
                [
                    m,
                    r.get("node_vs_session"),
                    r.get("node_replay_fps_vs_session"),
                    r.get("node_overhead_ms"),
                    r["module_vs_session"],
                    r["module_pipelined_vs_session"],
                    r["preprocess_ms"],
                ]
                for m, r in results["ratios"].items()
            ],
        ),
    ]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--frames", type=int, default=300, help="timed session runs and module pushes per bg_mode (default 300)"
    )
    parser.add_argument("--size", type=_size, default=(1280, 720), help="frame size WxH (default 1280x720)")
    parser.add_argument("--seq-len", type=int, default=8)
    parser.add_argument(
        "--bg-modes",
        type=_bg_modes,
        default=["subtract", ""],
        help="comma-separated: none (= ''), subtract, subtract_concat, concat (default subtract,none)",
    )
    parser.add_argument(
        "--replay-modes",
        type=_bg_modes,
        default=None,
        help="bg_modes replayed through the node (default: the first of --bg-modes)",
    )
    parser.add_argument("--replay-frames", type=int, default=150, help="frames in the replayed bag (default 150)")
    parser.add_argument(
        "--max-in-flight",
        type=int,
        default=None,
        help="replay's window of unanswered frames (default seq_len + 4: enough to keep the node "
        "busy; more only adds queueing latency)",
    )
    parser.add_argument(
        "--replay-rate",
        type=float,
        default=None,
        help="play the bag at this multiple of its 30 fps instead of as fast as the node keeps up "
        "(e.g. 1.0 for real-time latency)",
    )
    parser.add_argument("--no-replay", action="store_true", help="skip the ROS node (no rclpy needed)")
    parser.add_argument("--threads", type=int, default=0, help="ONNX Runtime intra_op_threads, 0 = its default")
    parser.add_argument("--warmup", type=int, default=20, help="untimed session runs first (default 20)")
    parser.add_argument(
        "--backbone-widths",
        type=_widths,
        default=[0, 16],
        help="models: 0 = the light synthetic model (a few ms), W > 0 = the same model plus a U-Net with "
        "TrackNetV3's layer shapes at base width W (TrackNetV3: 64) (default 0,16)",
    )
    parser.add_argument(
        "--heavy-frames", type=int, default=60, help="timed session runs and module pushes for W > 0 (default 60)"
    )
    parser.add_argument(
        "--median-warmup", type=int, default=30, help="frames in the background-median warm-up timed (default 30)"
    )
    parser.add_argument("--median-only", action="store_true", help="time only the background median")
    parser.add_argument(
        "--baseline-code",
        type=Path,
        help="a checkout of the code before a change: its node replayed against this checkout's (see --rounds)",
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="alternate before/after replays with --baseline-code (default 3)"
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--work-dir", type=Path, help="keep models, bags and replay outputs here (default: a temp dir)")
    args = parser.parse_args(argv)

    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    from vision_factory.tools.synthetic import BallClip, build_tracknet_model

    width, height = args.size
    if args.max_in_flight is None:
        args.max_in_flight = args.seq_len + 4
    replay_modes = [] if args.no_replay else (args.replay_modes if args.replay_modes is not None else args.bg_modes[:1])
    temp = None if args.work_dir else tempfile.TemporaryDirectory(prefix="bench_tracknet_")
    work = (args.work_dir or Path(temp.name)).resolve()  # absolute: --baseline-code replays run from there
    work.mkdir(parents=True, exist_ok=True)
    clip = BallClip(num_frames=60, width=width, height=height)
    frames = list(clip.frames())
    median = bench_median(frames, args.median_warmup)
    if args.median_only:
        results = {"size": [width, height], "environment": environment(args.threads), "median": median}
        print(_median_report(results))
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))
        return 0

    results: dict = {
        "size": [width, height],
        "seq_len": args.seq_len,
        "frames": args.frames,
        "max_in_flight": args.max_in_flight,
        "replay_rate": args.replay_rate,
        "environment": {**environment(args.threads), "copy_bandwidth_gbs": _memory_bandwidth_gbs()},
        "session": {},
        "module": {},
        "replay": {},
        "ratios": {},
        "median": median,
        "baseline_code": str(args.baseline_code) if args.baseline_code else None,
        "compare": {},
    }
    for width in args.backbone_widths:
        timed = args.frames if width == 0 else args.heavy_frames
        for mode in dict.fromkeys(args.bg_modes + replay_modes):
            key = _key(width, mode)
            model = build_tracknet_model(
                work / f"tracknet_{_model_label(width)}_{_label(mode)}_{args.seq_len}.onnx",
                args.seq_len,
                mode,
                backbone_width=width,
            )
            if mode in args.bg_modes:
                print(f"session  {key} ...", file=sys.stderr, flush=True)
                results["session"][key] = bench_session(model, timed, args.warmup, args.threads)
                print(f"module   {key} ...", file=sys.stderr, flush=True)
                results["module"][key] = bench_module(model, mode, frames, clip, timed, args.seq_len, args.threads)
            if mode in replay_modes:
                print(f"replay   {key} ({args.replay_frames} frames) ...", file=sys.stderr, flush=True)
                results["replay"][key] = bench_replay(
                    model,
                    mode,
                    clip,
                    args.replay_frames,
                    args.seq_len,
                    args.threads,
                    args.max_in_flight,
                    work,
                    args.replay_rate,
                )
                if args.baseline_code is not None:
                    print(f"compare  {key} ({args.rounds} rounds, before/after) ...", file=sys.stderr, flush=True)
                    results["compare"][key] = _compare_code(model, mode, clip, args, work, timed)
    for key, session in results["session"].items():
        session_fps = session["max_fps"]
        module = results["module"][key]
        ratios = {
            "module_vs_session": module["fps"] / session_fps,
            "module_pipelined_vs_session": module["pipelined_fps"] / session_fps,
            "preprocess_ms": module["stages_ms_per_frame"]["preprocess"],
        }
        if key in results["replay"]:
            ratios["node_vs_session"] = results["replay"][key]["steady_fps"] / session_fps
            # What the node adds to each frame beyond session.run; node/session ~ p50 / (p50 + this).
            ratios["node_overhead_ms"] = 1000.0 / results["replay"][key]["steady_fps"] - session["p50_ms"]
            ratios["node_replay_fps_vs_session"] = results["replay"][key]["replay_fps"] / session_fps
        results["ratios"][key] = ratios
    results["environment"]["load_avg_1min_end"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    print(report(results))  # results are keyed by "model bg_mode", bg_mode "" written as "none"
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
        print(f"\nwrote {args.json}")
    if temp is not None:
        temp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
