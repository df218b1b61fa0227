"""ONNX Runtime's CUDA and TensorRT providers on a real NVIDIA GPU: what runs is what was asked for, a provider
that cannot start is refused at load, and CUDA's outputs stay within what `verify` allows a GPU backend.

These run where onnxruntime-gpu lists CUDA and an NVIDIA GPU answers the driver (benchmarks/gpu/ runs them on a
lent GPU machine); elsewhere each skips with the reason. No process, no DDS: the unit tier carries them.
"""

from __future__ import annotations

import ctypes
import importlib.util

import cv2
import numpy as np
import pytest
from support.models import spot_finder, tracknet_windows, wrap_yolo
from support.real_models import PHOTOS, POSE_MODEL, SHAPES_IMAGES
from support.results import detections_of

from vision_factory.families.registry import family
from vision_factory.parameters import with_defaults
from vision_factory.runtime.backends import load_target
from vision_factory.runtime.providers import ProviderConfig, ProviderUnavailable, create_session
from vision_factory.tools.quantize import quantize
from vision_factory.tools.synthetic import build_tracknet_model
from vision_factory.tools.verify import tolerance_for

SHAPES_MODEL = SHAPES_IMAGES.parent.parent.parent / "models" / "shapes-yolov8n.onnx"


def _gpu_count() -> int:
    """NVIDIA GPUs the driver answers for (0 without a driver): read through libcuda, no process started."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    count = ctypes.c_int(0)
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return 0
    return count.value


def _cuda_reason() -> str:
    """Why the CUDA tests cannot run here; "" when they can."""
    if importlib.util.find_spec("onnxruntime") is None:
        return "needs onnxruntime-gpu"
    import onnxruntime

    if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        return "needs onnxruntime-gpu (this ONNX Runtime has no CUDAExecutionProvider)"
    if _gpu_count() == 0:
        return "needs an NVIDIA GPU (onnxruntime-gpu is installed, but the driver finds no GPU)"
    return ""


needs_cuda = pytest.mark.skipif(bool(_cuda_reason()), reason=_cuda_reason() or "runs")


def _tensorrt_libraries() -> bool:
    try:
        ctypes.CDLL("libnvinfer.so.10")
    except OSError:
        return False
    return True


@needs_cuda
def test_cuda_runs_what_was_asked_for():
    session = create_session(SHAPES_MODEL, ProviderConfig.create("cuda"))
    assert session.get_providers()[0] == "CUDAExecutionProvider"
    runner = load_target("onnx:cuda", SHAPES_MODEL)
    assert "CUDAExecutionProvider" in runner.describe()


@needs_cuda
@pytest.mark.skipif(_tensorrt_libraries(), reason="TensorRT's libraries are installed here: the provider can start")
def test_tensorrt_provider_without_its_libraries_is_refused_at_load_not_run_elsewhere():
    """onnxruntime-gpu lists TensorrtExecutionProvider whether or not TensorRT is installed; without libnvinfer
    ONNX Runtime would run the model on the next provider in the list. The node must say so at load instead."""
    with pytest.raises(ProviderUnavailable, match="TensorrtExecutionProvider"):
        create_session(SHAPES_MODEL, ProviderConfig.create("tensorrt"))
    fallback = create_session(SHAPES_MODEL, ProviderConfig.create("tensorrt", fallback="cpu"))
    assert "TensorrtExecutionProvider" not in fallback.get_providers()


def _detections(model_type: str, model, target: str, images: list[np.ndarray], **given) -> list[list]:
    spec = family(model_type)
    values = with_defaults(spec.parameters, {"model_path": str(model), **given}, spec.name)
    pipeline = spec.pipeline(values, lambda path: load_target(target, path))
    return [detections_of(result) for image in images for _, result in pipeline.push(image)]


def _largest_difference(a: list, b: list) -> tuple[float, float]:
    """Largest box/keypoint coordinate difference (px) and score difference of detections paired in order; the
    two lists must pair one to one (same count, same classes)."""
    assert [d["class_id"] for d in a] == [d["class_id"] for d in b]
    px = score = 0.0
    for one, other in zip(a, b, strict=True):
        points = [np.asarray(one["xyxy"]), np.asarray(other["xyxy"])]
        if one.get("keypoints") is not None:
            kp = [np.asarray(d["keypoints"]) for d in (one, other)]
            points = [np.concatenate([p, k[:, :2].ravel()]) for p, k in zip(points, kp)]
            score = max(score, float(np.abs(kp[0][:, 2] - kp[1][:, 2]).max()))
        px = max(px, float(np.abs(points[0] - points[1]).max()))
        score = max(score, abs(one["score"] - other["score"]))
    return px, score


@needs_cuda
@pytest.mark.parametrize("model_type", ["yolo", "yolo_pose", "fasterrcnn", "rtmpose"])
def test_cuda_detections_are_the_cpus_within_verifys_gpu_tolerance(model_type, tmp_path):
    shapes = [cv2.imread(str(path)) for path in sorted(SHAPES_IMAGES.glob("*.jpg"))[:10]]
    given: dict = {}
    if model_type == "yolo":
        model, images = SHAPES_MODEL, shapes
    elif model_type == "yolo_pose":
        model, images = POSE_MODEL, [photo[0] for photo in PHOTOS.values()]
    elif model_type == "fasterrcnn":  # the shapes detector with its decoding and NMS inside (a detection API layout)
        model, images = wrap_yolo(tmp_path / "wrapped.onnx", style="torchvision"), shapes
    else:  # the shapes detector finds the circles, a SimCC model poses each
        model, images = spot_finder(tmp_path / "spots.onnx"), shapes
        given = {"person_detector_path": str(SHAPES_MODEL), "person_class": "circle"}
    cpu = _detections(model_type, model, "onnx:cpu", images, **given)
    cuda = _detections(model_type, model, "onnx:cuda", images, **given)
    tolerance = tolerance_for("onnx:cuda")
    assert sum(map(len, cpu)) > 0
    for on_cpu, on_cuda in zip(cpu, cuda, strict=True):
        px, score = _largest_difference(on_cpu, on_cuda)
        assert px <= tolerance.px and score <= tolerance.score


@needs_cuda
def test_an_fp16_tracknet_on_cuda_puts_each_heatmap_peak_where_fp32_does(tmp_path):
    # The first run on an H200 found the fp16 file's sigmoid rounded to float16 on CUDA: the peak, the ball, moved by
    # up to 4 heatmap pixels (F1 0.93 -> 0.23). quantize now keeps the float tail float32 up to the output.
    model = build_tracknet_model(tmp_path / "tracknet.onnx", seq_len=8, bg_mode="concat")
    half = tmp_path / "tracknet_fp16.onnx"
    quantize("tracknet", model, None, half, "onnx", "fp16", speed_runs=1)
    fp32, fp16 = load_target("onnx:cpu", model), load_target("onnx:cuda", half)
    moved = []
    for window in tracknet_windows(model):
        for map_a, map_b in zip(fp32.run({"input": window})[0][0], fp16.run({"input": window})[0][0]):
            if map_a.max() > 0.5:
                peaks = [np.array(np.unravel_index(np.argmax(m), m.shape)) for m in (map_a, map_b)]
                moved.append(int(np.abs(peaks[0] - peaks[1]).max()))
    assert moved and max(moved) <= 1, moved
