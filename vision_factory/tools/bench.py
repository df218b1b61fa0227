"""vision-factory bench: one model on several backends, each measured in its own process.

A target is ``backend[:option]`` as runtime/backends.py reads it (``onnx:cpu``, ``openvino:GPU``,
``tensorrt:fp16``). Each runs in a fresh worker process, so load time and peak memory are its
own; a target that cannot run here is reported with the reason instead of being skipped.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..families.registry import SINGLE_MODEL, family
from ..files import output_folder, write_text
from ..models.model_file import folder_model
from ..progress import Progress, counted
from ..runtime.backends import load_target, parse_targets
from ..runtime.providers import ProviderUnavailable
from ..runtime.runner import fixed_dim
from ..text import shown_path
from . import bench_prompted
from .bags import write_image_bag
from .bench_pipelines import (
    detection_frame,
    detection_pipeline,
    map_feeds,
    map_pipeline,
    maps,
    stream_pipeline,
    stride_values,
)
from .commands import CommandReport
from .synthetic import BallClip

MODEL_TYPES = SINGLE_MODEL  # the families whose per-frame pipeline runs from the one model


@dataclass
class BenchResult:
    target: str
    available: bool
    reason: str = ""  # why it could not run
    runs_on: str = ""  # the runner's own description
    load_ms: float = 0.0
    first_inference_ms: float = 0.0
    p50_ms: float = 0.0
    p90_ms: float = 0.0
    p99_ms: float = 0.0
    mean_ms: float = 0.0
    throughput_fps: float = 0.0  # sequential runs per second
    peak_rss_mb: float = 0.0  # the worker process's peak resident memory
    pipeline: dict[str, float] = field(default_factory=dict)  # --model-type: per-frame stages
    node: dict[str, float] = field(default_factory=dict)  # --node: the ROS node end to end
    cameras: dict[str, Any] = field(default_factory=dict)  # --cameras N: one node of N cameras against N nodes
    latencies_ms: list[float] = field(default_factory=list, repr=False)

    def summary(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("latencies_ms")
        return data


def _percentile_summary(latencies_ms: list[float]) -> dict[str, float]:
    values = np.asarray(latencies_ms)
    return {
        "p50_ms": float(np.percentile(values, 50)),
        "p90_ms": float(np.percentile(values, 90)),
        "p99_ms": float(np.percentile(values, 99)),
        "mean_ms": float(values.mean()),
        "throughput_fps": float(1000.0 / values.mean()),
    }


def _random_feeds(runner) -> dict[str, np.ndarray]:
    """Random inputs of each input's shape; a dynamic batch is 1, other dynamic dimensions are an error."""
    rng = np.random.default_rng(0)
    feeds = {}
    for tensor in runner.inputs:
        shape = [fixed_dim(d) for d in tensor.shape]
        shape[:1] = [shape[0] or 1] if shape else []
        if None in shape:
            raise ValueError(
                f"input {tensor.name} {list(tensor.shape)} has dynamic dimensions: bench needs fixed sizes"
            )
        feeds[tensor.name] = rng.random(shape).astype(tensor.dtype)
    return feeds


def measure(
    model: Path,
    target: str,
    runs: int,
    warmup: int,
    model_type: str | None,
    stride: int = 1,
    prompts: dict | None = None,
) -> BenchResult:
    """Load, first run, then ``runs`` timed runs after ``warmup``; in this process (a bench worker). ``prompts``: a
    prompted family's prompt parameter values (tools/bench_prompted.py's prompt_values)."""
    start = time.perf_counter()
    try:
        runner = load_target(target, folder_model(model))  # a model folder: its main graph, the others with it
        load_ms = 1000 * (time.perf_counter() - start)
        if bench_prompted.prompted(model_type):  # the model on its prompt's inputs, its other files loaded
            detector = bench_prompted.prompted_detector(runner, model, target, model_type, prompts or {})
            feeds = bench_prompted.prompted_feeds(detector, model_type, detection_frame())
        else:
            feeds = map_feeds(runner, model, model_type) if maps(model_type) else _random_feeds(runner)
    except ProviderUnavailable as exc:  # its own fix names the node's parameter; bench has options instead
        fix = "install the matching onnxruntime package (onnxruntime-gpu for CUDA and TensorRT)"
        return BenchResult(target, False, reason=f"{exc.problem}; {fix}, or leave {target} out of --backends")
    except (RuntimeError, ValueError) as exc:
        return BenchResult(target, False, reason=str(exc))
    result = BenchResult(target, True, runs_on=runner.describe(), load_ms=load_ms)
    start = time.perf_counter()
    runner.run(feeds)
    result.first_inference_ms = 1000 * (time.perf_counter() - start)
    for _ in range(warmup):
        runner.run(feeds)
    for _ in range(runs):
        start = time.perf_counter()
        runner.run(feeds)
        result.latencies_ms.append(1000 * (time.perf_counter() - start))
    for name, value in _percentile_summary(result.latencies_ms).items():
        setattr(result, name, value)
    if model_type is not None and _streamed(model_type):
        _, result.pipeline = stream_pipeline(runner, model, model_type, runs, stride)
    elif maps(model_type):
        result.pipeline = map_pipeline(runner, model, model_type, runs)
    elif bench_prompted.prompted(model_type):
        result.pipeline = bench_prompted.prompted_pipeline(detector, model_type, detection_frame(), runs)
    elif model_type is not None:
        result.pipeline = detection_pipeline(runner, model, model_type, runs)
    result.peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return result


def _measure_in_worker(model: Path, target: str, *arguments: Any) -> BenchResult:
    """``measure(model, target, *arguments)`` in a fresh worker process (its arguments as JSON)."""
    given = json.dumps([str(model), target, *arguments])
    done = subprocess.run([sys.executable, "-m", "vision_factory.tools.bench", given], capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return BenchResult(target, False, reason=f"the bench worker failed: {last}")
    data = json.loads(done.stdout.strip().splitlines()[-1])
    return BenchResult(**data)


def _streamed(model_type: str) -> bool:
    """Whether the family's answers come in a stream (its result kind's ``streamed``: tracknet's ball) rather than
    one per frame: its pipeline is timed over a synthetic ball clip."""
    return family(model_type).result.streamed


def node_frames(model_type: str, count: int):
    """``count`` 1280x720 frames for the node: a synthetic ball clip (a streamed family: tracknet), else the
    detectors' photo and its mirror image in turn."""
    if _streamed(model_type):
        return BallClip(num_frames=count, width=1280, height=720).frames()
    frame = detection_frame()
    return (frame if index % 2 == 0 else frame[:, ::-1].copy() for index in range(count))


def _node(
    model: Path, result: BenchResult, bag: Path, work_dir: Path, stride: int, model_type: str, prompts: dict
) -> dict[str, float]:
    """The ``model_type`` node on this target, fed over DDS by a replay, against the raw runtime.

    ONNX Runtime targets run this package's node; other backends run a package generated for
    them into ``work_dir``, so what is measured is what ``generate`` ships.
    """
    from ..generator.package import node_module_name
    from ..generator.writing import write_package
    from .replay import replay

    target = parse_targets(result.target)[0]
    executable = None
    if target.backend.name != "onnx":
        package = f"vf_bench_{model_type}_{target.backend.name}"
        write_package(model_type, target.backend.name, package, work_dir / "generated", force=True)
        module = node_module_name(family(model_type), target.backend)
        executable = [
            sys.executable,
            "-c",
            f"import sys; sys.path.insert(0, {str(work_dir / 'generated' / package)!r}); "
            f"from {package}.{module} import main; sys.exit(main())",
        ]

    params, held_back = node_params(model_type, model, stride, target.settings, prompts)
    out = work_dir / f"node_{result.target.replace(':', '_')}_stride{stride}"
    replayed = replay(bag, out, node=model_type, params=params, executable=executable)
    steady_fps = replayed.steady_fps(held_back=held_back)
    return {
        "frames": replayed.frames_sent,
        "steady_fps": steady_fps,  # without the first window's fill and the end-of-stream flush wait
        "replay_fps": replayed.fps,  # every frame over the whole replay, those waits included
        "latency_p50_ms": replayed.latency_ms_p50,
        "latency_p99_ms": replayed.latency_ms_p99,
        "node_over_session": steady_fps / result.throughput_fps,
        # the node's own per-frame times, from its ~/debug/ topics (ros/monitor.py)
        **{f"node_{name}": value for name, value in replayed.node_times_ms.items() if name != "frames"},
    }


def _cameras(
    model: Path, model_type: str, stride: int, cameras: int, seconds: float, rate: float, work_dir: Path, prompts: dict
) -> dict[str, Any]:
    """--cameras: one node of ``cameras`` cameras against as many single-camera nodes (tools/bench_cameras.py)."""
    from .bench_cameras import cameras_vs_nodes

    params, _ = node_params(model_type, model, stride, {}, prompts)
    frame = next(iter(node_frames(model_type, 1)))
    return cameras_vs_nodes(model_type, params, frame, cameras, seconds, rate, work_dir / "cameras")


def node_params(
    model_type: str, model: Path, stride: int, settings: dict[str, str], prompts: dict | None = None
) -> tuple[dict[str, str], int]:
    """The ``model_type`` node's parameters for ``model`` (those its model file, ``stride`` and the ``prompts``
    values set apart from the node's defaults, and the target's ``settings``), and the frames it holds back until
    the stream ends."""
    spec = family(model_type)
    values = spec.values_from_model(model, "bench", **stride_values(stride), **(prompts or {}))
    defaults = {parameter.name: parameter.default for parameter in spec.parameters}
    params = {name: str(value) for name, value in values.items() if value != defaults[name]}
    return {spec.model_parameter: str(model), **params, **settings}, spec.held_back(values)


def run_bench(
    model: Path,
    targets: str,
    runs: int = 100,
    warmup: int = 10,
    model_type: str | None = None,
    node: bool = False,
    log: Callable[[str], None] | None = None,
    stride: int = 1,
    cameras: int = 1,
    camera_seconds: float = 15.0,
    camera_rate: float = 15.0,
    progress: Progress | None = None,
    prompts: dict | None = None,
) -> list[BenchResult]:
    """Every target measured in its own worker; with ``node``, also the ROS node for each onnx target.
    ``stride``: tracknet's, the model once every ``stride`` frames in the pipeline and the node. ``cameras`` over 1
    (with ``node``): also one node serving that many cameras against as many single-camera nodes, each camera fed
    ``camera_rate`` frames/s for ``camera_seconds`` (tools/bench_cameras.py), on ONNX Runtime's CPU target.
    ``log`` gets a line as each measure begins, ``progress`` (progress.py) the backends measured. ``prompts``: a
    prompted family's prompt options (tools/predict.py's PROMPTED, by option), checked here at once on onnx:cpu."""
    if not folder_model(Path(model)).is_file():  # a model folder: the file it is recognised by
        raise ValueError(f"model file not found: {shown_path(model)}")
    if model_type is not None and model_type not in MODEL_TYPES:
        raise ValueError(f"--model-type {model_type} is not one of {', '.join(MODEL_TYPES)}")
    if node and model_type is None:
        raise ValueError(f"--node needs --model-type (the family whose node runs: {', '.join(MODEL_TYPES)})")
    if cameras > 1 and not node:
        raise ValueError("--cameras needs --node (it measures the family's ROS node serving several cameras)")
    if stride != 1:
        windowed = [name for name in MODEL_TYPES if any(p.name == "stride" for p in family(name).parameters)]
        if model_type not in windowed:
            raise ValueError(
                f"--stride needs --model-type {' or '.join(windowed)} (the family whose model runs over windows)"
            )
        family(model_type).values_from_model(Path(model), "bench", stride=stride)  # checks the stride
    prompts = bench_prompted.prompt_values(model_type, prompts)
    if bench_prompted.prompted(model_type):  # its tokenizer or decoder found, its prompt taken, before any worker
        if node and family(model_type).boxes_prompt is not None:
            raise ValueError(f"{model_type}'s node segments another node's boxes: --node feeds none (use replay)")
        bench_prompted.check(Path(model), model_type, prompts)
    results = []
    with tempfile.TemporaryDirectory(prefix="vf_bench_") as scratch:
        work_dir = Path(scratch)
        bag = None
        frames = max(60, runs)
        if node:  # one clip for every target
            bag = write_image_bag(work_dir / "clip", node_frames(model_type, frames))
        labels = [target.label for target in parse_targets(targets)]
        for label in counted(labels, progress, "bench: backends"):
            if log:
                log(f"measuring {label} ...")
            result = _measure_in_worker(Path(model), label, runs, warmup, model_type, stride, prompts)
            if bag is not None and result.available:
                if log:
                    log(f"replaying {frames} frames through the {model_type} node on {label} ...")
                result.node = _node(Path(model), result, bag, work_dir, stride, model_type, prompts)
            if cameras > 1 and result.available and parse_targets(label)[0].backend.name == "onnx":
                if log:
                    log(f"{cameras} cameras through one {model_type} node, then through {cameras} nodes ...")
                result.cameras = _cameras(
                    Path(model), model_type, stride, cameras, camera_seconds, camera_rate, work_dir, prompts
                )
            results.append(result)
    return results


def bench(
    model: Path,
    targets: str,
    runs: int,
    warmup: int,
    model_type: str | None,
    node: bool,
    out_dir: Path,
    log: Callable[[str], None] | None = None,
    stride: int = 1,
    cameras: int | None = None,
    progress: Progress | None = None,
    prompts: dict | None = None,
) -> CommandReport:
    """`bench`: ``run_bench``, its table, OUT/bench.json and the latency plot OUT/bench.png. ``cameras``: --cameras
    (None: one camera, no multi-camera measure)."""
    output_folder(out_dir, option="--out")
    cameras = cameras or 1
    results = run_bench(
        model, targets, runs, warmup, model_type, node, log, stride, cameras, progress=progress, prompts=prompts
    )
    report = {
        "model": str(model),
        "runs": runs,
        "warmup": warmup,
        "stride": stride,
        "cameras": cameras,
        "results": [r.summary() for r in results],
    }
    write_text(out_dir / "bench.json", json.dumps(report, indent=2) + "\n", [model])
    files = {"json": out_dir / "bench.json", "plot": plot(results, out_dir / "bench.png", model)}
    return CommandReport(table(results) + "\n", files)


def table(results: list[BenchResult]) -> str:
    header = ["target", "load ms", "first ms", "p50 ms", "p90 ms", "p99 ms", "runs/s", "peak MB", "runs on"]
    rows = []
    for r in results:
        if r.available:
            numbers = [r.load_ms, r.first_inference_ms, r.p50_ms, r.p90_ms, r.p99_ms, r.throughput_fps, r.peak_rss_mb]
            rows.append([r.target, *(f"{value:.1f}" for value in numbers), r.runs_on])
        else:
            rows.append([r.target, *["-"] * 7, f"unavailable: {r.reason}"])
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header) - 1)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip([*row[:-1]], widths)) + "  " + row[-1]
        for row in [header, *rows]
    ]
    for r in results:
        if "postprocess_ms" in r.pipeline:  # a frame's stages (a generating model's are bench_prompted's lines)
            p = r.pipeline
            post = f"post {p['postprocess_ms']:.2f} ms"
            if "head" in p:  # a YOLO model: what its post-processing is
                post += " (" + ("rows, no NMS" if p["head"] == "end2end" else "decode and NMS")
                post += f" {p['decode_ms']:.2f} ms, masks {p['masks_ms']:.2f} ms)" if "masks_ms" in p else ")"
            lines.append(
                f"{r.target} pipeline per {p['frame_size']} frame: pre {p['preprocess_ms']:.2f} ms, "
                f"inference {p['inference_ms']:.2f} ms, {post} -> {p['fps']:.1f} frames/s"
                + (
                    f" (stride {p['stride']}: the model once every {p['stride']} frames)"
                    if p.get("stride", 1) > 1
                    else ""
                )
            )
        if r.node:
            lines.append(
                f"{r.target} node over DDS: steady {r.node['steady_fps']:.1f} frames/s (first answer to the last "
                f"before the end-of-stream flush; {r.node['replay_fps']:.1f} over the whole replay, with the waits), "
                f"latency p50 {r.node['latency_p50_ms']:.0f} ms; "
                f"node (steady) / raw runtime throughput {r.node['node_over_session']:.2f}"
            )
            if "node_processing_p50_ms" in r.node:
                lines.append(
                    f"{r.target} node's own times per frame (~/debug/): processing p50 "
                    f"{r.node['node_processing_p50_ms']:.2f} ms, p99 {r.node['node_processing_p99_ms']:.2f} ms; "
                    f"pre {r.node['node_preprocess_ms']:.2f} ms, inference {r.node['node_inference_ms']:.2f} ms, "
                    f"post {r.node['node_postprocess_ms']:.2f} ms (medians)"
                )
        lines += bench_prompted.lines(r.target, r.pipeline)
        if r.cameras:
            from .bench_cameras import lines as camera_lines

            lines += camera_lines(r.target, r.cameras)
    return "\n".join(lines)


def plot(results: list[BenchResult], path: Path, model: Path) -> Path:
    """Latency distribution per available target, as a PNG."""
    from .plots import pyplot, save_figure

    plt = pyplot()
    measured = [r for r in results if r.available]
    figure, axes = plt.subplots(figsize=(2 + 1.6 * max(1, len(measured)), 4.5))
    if measured:
        axes.boxplot([r.latencies_ms for r in measured], showfliers=True)
        axes.set_xticks(range(1, len(measured) + 1), [r.target for r in measured])
    axes.set_ylabel("latency per run (ms)")
    axes.set_title(f"{model.name}: {len(measured[0].latencies_ms) if measured else 0} runs per backend")
    axes.grid(axis="y", alpha=0.3)
    return save_figure(figure, path, [model])


if __name__ == "__main__":  # a bench worker: one target, result as JSON on the last line
    model_path, target_label, run_count, warmup_count, family_name, stride_frames, prompt = json.loads(sys.argv[1])
    outcome = measure(Path(model_path), target_label, run_count, warmup_count, family_name, stride_frames, prompt)
    print(json.dumps(asdict(outcome)))
