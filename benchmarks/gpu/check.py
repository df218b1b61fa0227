#!/usr/bin/env python3
"""The GPU checks, run by benchmarks/gpu/run.sh on a lent NVIDIA machine; every figure from one machine and run.

``baseline``: the machine's facts; TrackNetV3's own PyTorch network (its repository's model.py, seeded weights:
no trained weights ship) timed per window on the GPU, fp32 and fp16 autocast, and exported to ONNX with its
output kept for parity; the test assets made (a TrackNetV3-width synthetic TrackNet, a ball clip with its truth).
``all``: onnxruntime-gpu's providers as they really start; the GPU tests (test/test_gpu.py and the provider and
TensorRT runner tests); `compare` verdicts of CPU against CUDA fp32 and fp16; raw output differences; `bench` of
onnx:cpu, onnx:cuda, onnx:tensorrt on each model in turn. It is a benchmark: it asserts nothing, and a step that
fails is recorded with its error and the next one runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tarfile
import time
import traceback
from functools import partial
from pathlib import Path

import numpy as np

RESULTS: dict = {}


def step(name: str):
    """Runs the decorated function now, recording its result or its error under ``name``."""

    def run(function):
        started = time.perf_counter()
        try:
            RESULTS[name] = function()
        except Exception as error:  # a benchmark: the next step runs whatever failed
            RESULTS[name] = {"error": f"{type(error).__name__}: {error}", "trace": traceback.format_exc()[-2000:]}
        print(f"== {name} ({time.perf_counter() - started:.1f} s): {json.dumps(RESULTS[name], default=str)[:1500]}")
        save()
        return function

    return run


def shell(*command: str, timeout: float = 170) -> dict:
    started = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        code, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as expired:
        code, output = "timeout", f"{expired.stdout or ''}{expired.stderr or ''}"
    except OSError as error:  # not installed there
        code, output = "not run", str(error)
    return {"command": " ".join(command), "rc": code, "s": round(time.perf_counter() - started, 1),
            "output": output[-3000:]}  # fmt: skip


def cli(*arguments: str, timeout: float = 170) -> dict:
    return shell(sys.executable, "-m", "vision_factory.cli", *arguments, timeout=timeout)


def save() -> None:
    ARGS.out.mkdir(parents=True, exist_ok=True)
    (ARGS.out / f"{ARGS.step}.json").write_text(json.dumps(RESULTS, indent=1, default=str))


def facts() -> dict:
    found = {"python": platform.python_version()}
    found["gpu"] = shell("nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
                         "--format=csv,noheader")["output"].strip()  # fmt: skip
    lscpu = shell("lscpu")["output"]
    found["cpu"] = next((line.split(":", 1)[1].strip() for line in lscpu.splitlines() if "Model name" in line), "")
    flags = next((line for line in lscpu.splitlines() if line.startswith("Flags")), "")
    found["cpu_flags"] = [flag for flag in ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_tile") if flag in flags]
    found["cores"] = os.cpu_count()
    import onnxruntime

    found["onnxruntime"] = f"{onnxruntime.__version__} from {Path(onnxruntime.__file__).parent}"
    found["available_providers"] = onnxruntime.get_available_providers()
    try:
        import torch

        found["torch"] = f"{torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}"
    except Exception as error:
        found["torch"] = str(error)
    return found


def tracknetv3_baseline() -> dict:
    """TrackNetV3's tracking network as its repository defines it, bg_mode concat (27 input channels: 8 frames and
    the background), 288x512, batch 1 as a stream runs it, seeded weights; per-window latency on the GPU."""
    import torch

    sys.path.insert(0, str(ARGS.store / "a"))
    from tracknetv3_model import TrackNet  # TrackNetV3's model.py, carried, never committed

    torch.manual_seed(0)
    model = TrackNet(27, 8).eval()
    window = torch.rand(1, 27, 288, 512, generator=torch.Generator().manual_seed(1))
    found = {"parameters": sum(p.numel() for p in model.parameters())}
    with torch.no_grad():
        np.save(ARGS.store / "tv3_input.npy", window.numpy())
        np.save(ARGS.store / "tv3_cpu_output.npy", model(window).numpy())
        try:
            torch.onnx.export(model, (window,), str(ARGS.store / "tv3.onnx"), input_names=["input"],
                              output_names=["output"], opset_version=17, dynamo=False)  # fmt: skip
            found["export"] = "torch.onnx.export (TorchScript exporter), opset 17"
        except Exception as error:
            found["export_error"] = str(error)[:500]
        gpu_model, gpu_window = model.cuda(), window.cuda()
        torch.backends.cudnn.benchmark = True
        for precision in ("fp32", "fp16"):
            with torch.autocast("cuda", dtype=torch.float16, enabled=precision == "fp16"):
                for _ in range(20):
                    out = gpu_model(gpu_window)
                torch.cuda.synchronize()
                times = []
                for _ in range(200):
                    started = time.perf_counter()
                    out = gpu_model(gpu_window)
                    torch.cuda.synchronize()
                    times.append((time.perf_counter() - started) * 1000)
            found[f"torch_cuda_{precision}_ms"] = {
                "p50": float(np.percentile(times, 50)), "p90": float(np.percentile(times, 90)),
                "p99": float(np.percentile(times, 99)),
            }  # fmt: skip
            np.save(ARGS.store / f"tv3_torch_cuda_{precision}.npy", out.float().cpu().numpy())
    return found


def assets() -> dict:
    import cv2

    from vision_factory.tools.bags import write_ball_csv
    from vision_factory.tools.synthetic import BallClip, build_tracknet_model

    build_tracknet_model(ARGS.store / "tracknet64.onnx", seq_len=8, bg_mode="concat", backbone_width=64)
    clip = BallClip(num_frames=80, width=1280, height=720)
    writer = cv2.VideoWriter(str(ARGS.store / "clip.avi"), cv2.VideoWriter_fourcc(*"MJPG"), 30, (1280, 720))
    for frame in clip.frames():
        writer.write(frame)
    writer.release()
    write_ball_csv(ARGS.store / "truth.csv", [(i, t.visibility, t.x, t.y) for i, t in enumerate(clip.truth)])
    return {"files": sorted(p.name for p in ARGS.store.iterdir() if p.is_file())}


def raw_parity() -> dict:
    """Raw outputs, CPU against CUDA (fp32 and the fp16 file), the largest absolute difference and its scale."""
    import onnxruntime

    def outputs(model: Path, providers: list[str], feed: dict) -> list[np.ndarray]:
        session = onnxruntime.InferenceSession(str(model), providers=providers)
        assert session.get_providers()[0] == providers[0], session.get_providers()
        return session.run(None, feed)

    rng = np.random.default_rng(0)
    found = {}
    shared = ARGS.store / "a" / "shared" / "models"
    cases = {
        "yolo11n-pose": (shared / "yolo11n-pose.onnx", ARGS.store / "pose_fp16.onnx", (1, 3, 640, 640)),
        "shapes-yolov8n-seg": (shared / "shapes-yolov8n-seg.onnx", None, (1, 3, 256, 256)),
        "reid-b16": (shared / "mobilenetv2-reid-embedder-b16.onnx", None, (16, 3, 224, 224)),
        "tracknetv3": (ARGS.store / "tv3.onnx", None, None),
    }
    for name, (model, half, shape) in cases.items():
        if not model.exists():
            found[name] = "no model"
            continue
        try:
            found[name] = _parity_case(name, model, half, shape, outputs, rng)
        except Exception as error:
            found[name] = f"{type(error).__name__}: {str(error)[:400]}"
    return found


def _parity_case(name, model, half, shape, outputs, rng) -> dict:
    import onnxruntime

    if True:
        session = onnxruntime.InferenceSession(str(model), providers=["CPUExecutionProvider"])
        feed_name = session.get_inputs()[0].name
        data = np.load(ARGS.store / "tv3_input.npy") if shape is None else rng.random(shape, dtype=np.float32)
        feed = {feed_name: data}
        cpu = outputs(model, ["CPUExecutionProvider"], feed)
        cuda = outputs(model, ["CUDAExecutionProvider"], feed)
        entry = {
            f"output{i}": {"max_abs_cuda_fp32": float(np.abs(a - b).max()), "max_abs_value": float(np.abs(a).max())}
            for i, (a, b) in enumerate(zip(cpu, cuda))
        }
        if name == "reid-b16":
            a, b = cpu[0], cuda[0]
            cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
            entry["cosine_min"] = float(cos.min())
        if name == "tracknetv3":
            torch_gpu = np.load(ARGS.store / "tv3_torch_cuda_fp32.npy")
            entry["max_abs_ort_cuda_vs_torch_cuda_fp32"] = float(np.abs(cuda[0] - torch_gpu).max())
            torch_cpu = np.load(ARGS.store / "tv3_cpu_output.npy")
            entry["max_abs_ort_cpu_vs_torch_cpu"] = float(np.abs(cpu[0] - torch_cpu).max())
        if half is not None and half.exists():
            fp16 = outputs(half, ["CUDAExecutionProvider"], feed)
            for i, (a, b) in enumerate(zip(cpu, fp16)):
                entry[f"output{i}"]["max_abs_cuda_fp16"] = float(np.abs(a - b).max())
    return entry


def provider_starts() -> dict:
    """What ONNX Runtime itself does when asked for TensorRT without TensorRT's libraries, and what ours does."""
    import onnxruntime

    from vision_factory.runtime.backends import load_target

    model = ARGS.store / "a" / "shared" / "models" / "shapes-yolov8n.onnx"
    found = {}
    options = onnxruntime.SessionOptions()
    for providers in (["CUDAExecutionProvider"], ["TensorrtExecutionProvider", "CUDAExecutionProvider"]):
        try:
            session = onnxruntime.InferenceSession(str(model), options, providers=providers)
            found[f"onnxruntime asked {providers}"] = session.get_providers()
        except Exception as error:
            found[f"onnxruntime asked {providers}"] = f"{type(error).__name__}: {str(error)[:400]}"
    for target in ("onnx:cpu", "onnx:cuda", "onnx:tensorrt"):
        try:
            found[f"vision_factory {target}"] = load_target(target, model).describe()
        except Exception as error:
            found[f"vision_factory {target}"] = f"{type(error).__name__}: {str(error)[:400]}"
    return found


FP16 = (("shapes", "yolo"), ("pose", "yolo_pose"), ("tracknet64", "tracknet"))  # (file name, family)
BOTH = ("--a", "onnx:cpu", "--b", "onnx:cuda")


def _every_output(path: Path, providers: list[str], feed: dict) -> tuple[dict, list[tuple[str, str]]]:
    """Every node's output of the model at ``path`` on ``feed`` (name -> float32 array), and (name, op) in order."""
    import onnx
    import onnxruntime
    from onnx import helper

    model = onnx.load(path)
    known = {output.name for output in model.graph.output}
    order = []
    for node in model.graph.node:
        for name in node.output:
            if name and name not in known:
                model.graph.output.append(helper.ValueInfoProto(name=name))
                known.add(name)
            order.append((name, node.op_type))
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=providers)
    assert session.get_providers()[0] == providers[0], session.get_providers()
    names = [output.name for output in session.get_outputs()]
    return {n: v.astype(np.float32) for n, v in zip(names, session.run(None, feed))}, order


def fp16_divergence() -> dict:
    """Where the fp16 TrackNet drifts on CUDA: every node's output on the input the node's pipeline really feeds
    (a ball clip's first full window), fp32 on the CPU against the fp16 file on CUDA and on the CPU."""
    from support.models import tracknet_windows  # test/support: the windows the tracknet pipeline feeds its model

    model, half = ARGS.store / "tracknet64.onnx", ARGS.store / "tracknet64_fp16.onnx"
    feed = {"input": tracknet_windows(model, frames=18)[0]}
    base, order = _every_output(model, ["CPUExecutionProvider"], feed)
    runs = {"fp16 cuda": (half, "CUDAExecutionProvider"), "fp16 cpu": (half, "CPUExecutionProvider")}
    runs["fp32 cuda"] = (model, "CUDAExecutionProvider")
    outputs = {name: _every_output(path, [provider], feed)[0] for name, (path, provider) in runs.items()}
    rows = []
    for name, op in order:
        row = {"node": name, "op": op, "absmax": float(np.abs(base[name]).max())}
        for run, values in outputs.items():
            if name in values and values[name].shape == base[name].shape:
                row[run] = float(np.abs(values[name] - base[name]).max())
        rows.append(row)
    heat = {run: values[order[-1][0]] for run, values in outputs.items()}
    peaks = {run: np.unravel_index(np.argmax(v[0, -1]), v.shape[2:]) for run, v in heat.items()}
    peaks["fp32 cpu"] = np.unravel_index(np.argmax(base[order[-1][0]][0, -1]), base[order[-1][0]].shape[2:])
    heat["fp32 cpu"] = base[order[-1][0]]
    ties = {run: int((v[0, -1] == v[0, -1].max()).sum()) for run, v in heat.items()}
    return {"input": {k: list(v.shape) for k, v in feed.items()},
            "peaks_last_heatmap": {k: [int(i) for i in v] for k, v in peaks.items()}, "pixels_at_the_max": ties,
            "nodes": [row for row in rows if not row["node"].startswith("unet")]}  # fmt: skip


def tracknetv3_fp16() -> dict:
    """TrackNetV3's own network (seeded) converted to fp16 by `quantize`'s converter: its heatmaps on CUDA and on
    the CPU against fp32 on the CPU."""
    from vision_factory.tools.quantize_backends import onnx_fp16

    onnx_fp16(ARGS.store / "tv3.onnx", ARGS.store / "tv3_fp16.onnx")
    feed = {"input": np.load(ARGS.store / "tv3_input.npy")}
    base = _every_output(ARGS.store / "tv3.onnx", ["CPUExecutionProvider"], feed)[0]["output"]
    found = {"absmax": float(np.abs(base).max())}
    for run, provider in (("fp16 cuda", "CUDAExecutionProvider"), ("fp16 cpu", "CPUExecutionProvider")):
        values = _every_output(ARGS.store / "tv3_fp16.onnx", [provider], feed)[0]["output"]
        found[run] = {"max_abs": float(np.abs(values - base).max()), "mean_abs": float(np.abs(values - base).mean()),
                      "above_0.5_disagree": int(((values > 0.5) != (base > 0.5)).sum())}  # fmt: skip
    return found


def main_tests() -> None:
    """A later run: the GPU tests on the code as it is now, and the fp16 TrackNet (its tail float32) timed."""
    store = ARGS.store
    tests = ("test/test_gpu.py", "test/test_providers.py", "test/test_backends.py", "test/test_tensorrt_runner.py")
    step("facts")(facts)
    step("tests")(lambda: shell(sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *tests))
    half = ("--precision", "fp16", "--out", str(store / "tracknet64_fp16.onnx"), "--speed-runs", "1")
    step("fp16")(partial(cli, "quantize", "--model-type", "tracknet", "--model", str(store / "tracknet64.onnx"), *half))
    for name in ("tracknet64", "tracknet64_fp16"):
        arguments = (str(store / f"{name}.onnx"), "--model-type", "tracknet", "--backends", "onnx:cuda")
        step(f"bench {name}")(
            partial(bench, (*arguments, "--runs", "100", "--warmup", "10"), Path("/tmp/gpu_work") / name)
        )


def main_again() -> None:
    """The second run: the fixed tests, and where fp16 drifts."""
    store = ARGS.store
    models = store / "a" / "shared" / "models"
    tests = ("test/test_gpu.py", "test/test_providers.py", "test/test_backends.py", "test/test_tensorrt_runner.py")
    step("facts")(facts)
    step("tests")(lambda: shell(sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *tests))
    files = {"tracknet64": store / "tracknet64.onnx", "pose": models / "yolo11n-pose.onnx"}
    for suffix, tail in (("", "--float-tail"), ("_notail", "--no-float-tail")):
        half = ("--precision", "fp16", tail, "--out", str(store / f"tracknet64_fp16{suffix}.onnx"), "--speed-runs", "1")
        step(f"fp16{suffix}")(
            partial(cli, "quantize", "--model-type", "tracknet", "--model", str(files["tracknet64"]), *half)
        )
    step("fp16 divergence")(fp16_divergence)
    step("tracknetv3 fp16")(tracknetv3_fp16)
    clip = ("--source", str(store / "clip.avi"), "--data", str(store / "truth.csv"))
    for index, name in enumerate(("tracknet64_fp16", "tracknet64_fp16_notail")):
        arguments = (
            "--model-type",
            "tracknet",
            "--model",
            str(files["tracknet64"]),
            "--model-b",
            str(store / f"{name}.onnx"),
        )
        out = Path("/tmp/gpu_work") / "compare" / str(index)
        step(f"compare cpu fp32 vs cuda {name}")(partial(cli, "compare", *arguments, *clip, *BOTH, "--out", str(out)))


def main_all() -> None:
    store, out = ARGS.store, Path("/tmp/gpu_work")
    models, data = store / "a" / "shared" / "models", store / "a" / "shared" / "data" / "shapes-val"
    files = {"shapes": models / "shapes-yolov8n.onnx", "pose": models / "yolo11n-pose.onnx"}
    files["tracknet64"] = store / "tracknet64.onnx"
    clip = ("--source", str(store / "clip.avi"), "--data", str(store / "truth.csv"))
    tests = ("test/test_gpu.py", "test/test_providers.py", "test/test_backends.py", "test/test_tensorrt_runner.py")

    step("facts")(facts)
    step("providers")(provider_starts)
    step("tests")(lambda: shell(sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *tests))
    for name, model_type in FP16:
        half = ("--precision", "fp16", "--out", str(store / f"{name}_fp16.onnx"), "--speed-runs", "1")
        step(f"fp16 {name}")(partial(cli, "quantize", "--model-type", model_type, "--model", str(files[name]), *half))
    step("raw parity")(raw_parity)
    compare = {
        "shapes cpu vs cuda": ("yolo", "shapes", False, ("--data", str(data))),
        "shapes cpu vs cuda fp16": ("yolo", "shapes", True, ("--data", str(data))),
        "tracknet64 cpu vs cuda": ("tracknet", "tracknet64", False, clip),
        "tracknet64 cpu vs cuda fp16": ("tracknet", "tracknet64", True, clip),
    }
    for index, (title, (model_type, name, half, source)) in enumerate(compare.items()):
        model_b = ("--model-b", str(store / f"{name}_fp16.onnx")) if half else ()
        arguments = ("--model-type", model_type, "--model", str(files[name]), *model_b, *source, *BOTH)
        step(f"compare {title}")(partial(cli, "compare", *arguments, "--out", str(out / "compare" / str(index))))
    cpu_cuda = "onnx:cpu,onnx:cuda"
    benches = {
        "pose": (files["pose"], "yolo_pose", cpu_cuda + ",onnx:tensorrt", 200),
        "pose_fp16": (store / "pose_fp16.onnx", "yolo_pose", "onnx:cuda", 200),
        "shapes": (files["shapes"], "yolo", cpu_cuda, 200),
        "tracknet64": (files["tracknet64"], "tracknet", cpu_cuda, 30),
        "tracknet64_fp16": (store / "tracknet64_fp16.onnx", "tracknet", "onnx:cuda", 100),
        "tracknetv3_export": (store / "tv3.onnx", "", cpu_cuda, 30),
        "seg": (models / "shapes-yolov8n-seg.onnx", "", cpu_cuda, 200),
        "reid_b16": (models / "mobilenetv2-reid-embedder-b16.onnx", "", cpu_cuda, 100),
    }
    for name, (model, model_type, targets, runs) in benches.items():
        family = ("--model-type", model_type) if model_type else ()
        arguments = (str(model), *family, "--backends", targets, "--runs", str(runs), "--warmup", "10")
        step(f"bench {name}")(partial(bench, arguments, out / "bench" / name))
    with tarfile.open(ARGS.out / "extra.tar.gz", "w:gz") as archive:
        for folder in ("compare", "bench"):
            if (out / folder).exists():
                archive.add(out / folder, arcname=folder)


def bench(arguments: tuple[str, ...], folder: Path) -> dict:
    run = cli("bench", *arguments, "--out", str(folder))
    result = folder / "bench.json"
    run["json"] = json.loads(result.read_text()) if result.exists() else None
    return run


def main() -> None:
    if ARGS.step == "again":
        main_again()
    elif ARGS.step == "tests":
        main_tests()
    elif ARGS.step == "baseline":
        step("facts")(facts)
        step("tracknetv3 pytorch")(tracknetv3_baseline)
        step("assets")(assets)
    else:
        main_all()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("baseline", "all", "again", "tests"))
    parser.add_argument("--store", type=Path, default=Path("/tmp/gpu"))
    parser.add_argument("--out", type=Path, default=Path("/tmp/gpu_out"))
    ARGS = parser.parse_args()
    main()
