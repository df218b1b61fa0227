#!/usr/bin/env python3
r"""Architecture-true test models for the YOLO heads that have no real model on PyPI, and what the exporting
projects' own post-processing returns on them: test/data/yolo_heads/ (the ONNX files and reference.json), read by
test/test_yolo_heads.py without PyTorch.

    python benchmarks/make_yolo_heads.py --yolov5 /tmp/yolov5_src [--out test/data/yolo_heads]

- ``yolo26n-pose-e2e.onnx``: an end-to-end YOLO26 pose model ([1, 300, 6 + 17 x 3]) built by Ultralytics from its
  own ``yolo26-pose.yaml`` (thin: width 0.0625, depth 0.33; one class, person), seeded random weights (PyTorch's
  default init of every Conv, batch-norm statistics from 32 shapes-seg-val images so that the activations vary),
  exported by Ultralytics with ``nms=False`` (its NMS-free head) at 160. Reference: Ultralytics'
  ``YOLO(file).predict(image, conf=POSE_CONF[image])`` on two real images.
- ``yolov5n-thin.onnx``: a YOLOv5 objectness model ([1, N, 5 + 3]) built by YOLOv5's own ``models/yolo.py`` from its
  ``models/yolov5n.yaml`` (width 0.0625; three classes named as the shapes), seeded likewise, exported by YOLOv5's own
  ``export.export_onnx`` at 160 (its metadata: stride and names). Reference: what YOLOv5's ``detect.py`` does for an
  ONNX model (``letterbox(auto=False)``, ``DetectMultiBackend``, ``non_max_suppression(YOLOV5_CONF[image], 0.45)``,
  ``scale_boxes``; unrounded), on two real images.
- ``../shared/models/shapes-yolo26n.onnx`` (the trained end-to-end detector): Ultralytics' ``predict`` at conf 0.25 on
  three shapes-seg-val images, and its own ``val`` of the file on all of shapes-seg-val (box mAP50, mAP50-95; the
  COCO truth turned into YOLO labels in a temporary folder).

It needs Ultralytics and a checkout of YOLOv5 (a `fetch`ed ultralytics/yolov5, ``git archive`` into a folder): run
it in a scratch venv outside the repository, never in the project's venv. As the committed files were made
(Python 3.11, CPU only, nothing downloaded at run time):

    python3.11 -m venv /tmp/ul_venv
    /tmp/ul_venv/bin/pip install torch==2.14.1 torchvision==0.29.1   # from this machine's disk (CUDA build, CPU use)
    /tmp/ul_venv/bin/pip install ultralytics==8.4.190 onnx onnxruntime onnxslim pandas gitpython seaborn
    YOLO_OFFLINE=1 YOLO_CONFIG_DIR=/tmp/ultra_config /tmp/ul_venv/bin/python benchmarks/make_yolo_heads.py \
        --yolov5 /tmp/yolov5_src

The versions used are written into reference.json.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import sys
import tempfile
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SEED = 0
SIZE = 160  # the thin models' input
# Random weights score high almost everywhere: thresholds per image that keep tens of rows (NMS still busy).
POSE_CONF = {"grace_hopper.jpg": 0.999, "000001.jpg": 0.9}
YOLOV5_CONF = {"grace_hopper.jpg": 0.7, "000001.jpg": 0.3}
YOLOV5_IOU = 0.45  # detect.py's iou_thres default
E2E_CONF = 0.25
SHAPES_IMAGES = ("000001.jpg", "000004.jpg", "000007.jpg")
CALIBRATION = 32  # shapes-seg-val images that set the batch-norm statistics


def versions() -> dict[str, str]:
    """The versions a reference was made with (written into it): Ultralytics, PyTorch, ONNX Runtime, OpenCV, NumPy."""
    import onnxruntime
    import torch
    import ultralytics

    return {
        "ultralytics": ultralytics.__version__,
        "torch": torch.__version__,
        "torchvision": importlib.metadata.version("torchvision"),
        "onnxruntime": onnxruntime.__version__,
        "opencv": cv2.__version__,
        "numpy": np.__version__,
    }


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def default_shared() -> Path:
    for candidate in (os.environ.get("VISION_FACTORY_SHARED", ""), ROOT.parent / "shared", "/work/shared"):
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    return ROOT.parent / "shared"


def photo() -> Path:
    import matplotlib.cbook

    return Path(matplotlib.cbook.get_sample_data("grace_hopper.jpg", asfileobj=False))


def calibrate(model, shared: Path) -> None:
    """Seeded default init of every Conv, then batch-norm statistics from real images (cumulative average)."""
    import torch

    torch.manual_seed(SEED)
    for module in model.modules():
        if isinstance(module, torch.nn.Conv2d):
            module.reset_parameters()
        if isinstance(module, torch.nn.BatchNorm2d):
            module.reset_running_stats()
            module.momentum = None
    paths = sorted((shared / "data" / "shapes-seg-val" / "images").glob("*.jpg"))[:CALIBRATION]
    frames = [cv2.resize(cv2.imread(str(p)), (SIZE, SIZE))[..., ::-1] for p in paths]
    batch = torch.from_numpy(np.stack(frames).transpose(0, 3, 1, 2).copy()).float() / 255
    model.train()
    with torch.no_grad():
        model(batch)
    model.eval()


def ultralytics_record(result, keypoints: bool) -> list[dict]:
    boxes = result.boxes
    points = result.keypoints.data.tolist() if keypoints else [None] * len(boxes)
    out = []
    for box, score, class_id, kpts in zip(boxes.xyxy.tolist(), boxes.conf.tolist(), boxes.cls.tolist(), points):
        record = {"xyxy": [round(v, 3) for v in box], "score": round(score, 5), "class_id": int(class_id)}
        if kpts is not None:
            record["keypoints"] = [[round(x, 3), round(y, 3), round(c, 5)] for x, y, c in kpts]
        out.append(record)
    return out


def image_entry(path: Path, root: str) -> dict:
    return {"path": root, "sha256": sha256(path)}


def pose_model(out: Path, shared: Path) -> dict:
    import yaml
    from ultralytics import YOLO
    from ultralytics.utils import ROOT as UL_ROOT

    work = Path(tempfile.mkdtemp())
    cfg = yaml.safe_load((UL_ROOT / "cfg" / "models" / "26" / "yolo26-pose.yaml").read_text())
    cfg["scales"], cfg["nc"] = {"n": [0.33, 0.0625, 1024]}, 1
    (work / "yolo26n-pose.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    model = YOLO(str(work / "yolo26n-pose.yaml"), task="pose")
    model.model.names = {0: "person"}
    calibrate(model.model, shared)
    here = Path.cwd()
    os.chdir(work)  # a model built from a YAML exports into the working directory
    try:
        exported = Path(model.export(format="onnx", imgsz=SIZE, opset=17, simplify=False, nms=False)).resolve()
    finally:
        os.chdir(here)
    target = out / "yolo26n-pose-e2e.onnx"
    target.write_bytes(exported.read_bytes())
    loaded = YOLO(str(target), task="pose")
    images = {"grace_hopper.jpg": (photo(), "matplotlib:sample_data/grace_hopper.jpg")}
    images["000001.jpg"] = (
        shared / "data/shapes-seg-val/images/000001.jpg",
        "shared:data/shapes-seg-val/images/000001.jpg",
    )
    cases = []
    for name, (path, source) in images.items():
        result = loaded.predict(str(path), conf=POSE_CONF[name], imgsz=SIZE, verbose=False)[0]
        detections = ultralytics_record(result, True)
        cases.append({"image": name, **image_entry(path, source), "conf": POSE_CONF[name], "detections": detections})
    return {"file": target.name, "sha256": sha256(target), "task": "pose", "cases": cases}


def yolov5_model(out: Path, shared: Path, yolov5: Path) -> dict:
    import torch
    import yaml

    sys.path.insert(0, str(yolov5))
    from export import export_onnx  # YOLOv5's own
    from models.common import DetectMultiBackend
    from models.yolo import Detect, Model
    from utils.augmentations import letterbox
    from utils.general import non_max_suppression, scale_boxes

    cfg = yaml.safe_load((yolov5 / "models" / "yolov5n.yaml").read_text())
    cfg["width_multiple"], cfg["nc"] = 0.0625, 3
    torch.manual_seed(SEED)
    model = Model(cfg, ch=3, nc=3)
    model.names = {0: "circle", 1: "square", 2: "triangle"}
    calibrate(model, shared)
    for module in model.modules():  # as export.py's run() prepares the model
        if isinstance(module, Detect):
            module.inplace, module.dynamic, module.export = False, False, True
    image = torch.zeros(1, 3, SIZE, SIZE)
    model(image)
    target = out / "yolov5n-thin.onnx"
    export_onnx(model, image, target.with_suffix(".pt"), 17, False, False)
    backend = DetectMultiBackend(str(target), device=torch.device("cpu"))
    images = {"grace_hopper.jpg": (photo(), "matplotlib:sample_data/grace_hopper.jpg")}
    images["000001.jpg"] = (
        shared / "data/shapes-seg-val/images/000001.jpg",
        "shared:data/shapes-seg-val/images/000001.jpg",
    )
    cases = []
    for name, (path, source) in images.items():
        frame = cv2.imread(str(path))
        padded = letterbox(frame, SIZE, stride=32, auto=False)[0]  # detect.py's LoadImages for a non-PyTorch model
        tensor = torch.from_numpy(np.ascontiguousarray(padded.transpose(2, 0, 1)[::-1])).float()[None] / 255
        prediction = backend(tensor)
        (found,) = non_max_suppression(prediction, YOLOV5_CONF[name], YOLOV5_IOU, max_det=1000)
        found[:, :4] = scale_boxes(tensor.shape[2:], found[:, :4], frame.shape)
        detections = [
            {"xyxy": [round(v, 3) for v in row[:4]], "score": round(row[4], 5), "class_id": int(row[5])}
            for row in found.tolist()
        ]
        cases.append({"image": name, **image_entry(path, source), "conf": YOLOV5_CONF[name], "detections": detections})
    return {
        "file": target.name,
        "sha256": sha256(target),
        "iou": YOLOV5_IOU,
        "task": "detect",
        "cases": cases,
    }


def shapes_yolo26n(shared: Path) -> dict:
    from ultralytics import YOLO

    path = shared / "models" / "shapes-yolo26n.onnx"
    model = YOLO(str(path), task="detect")
    cases = []
    for name in SHAPES_IMAGES:
        image = shared / "data" / "shapes-seg-val" / "images" / name
        result = model.predict(str(image), conf=E2E_CONF, verbose=False)[0]
        source = f"shared:data/shapes-seg-val/images/{name}"
        detections = ultralytics_record(result, False)
        cases.append({"image": name, **image_entry(image, source), "conf": E2E_CONF, "detections": detections})
    metrics = validate(model, shared)
    return {"file": path.name, "sha256": sha256(path), "task": "detect", "cases": cases, **metrics}


def validate(model, shared: Path) -> dict:
    """Ultralytics' own val of the file on shapes-seg-val, its COCO truth written as YOLO labels."""
    data = shared / "data" / "shapes-seg-val"
    coco = json.loads((data / "annotations.json").read_text())
    categories = sorted(coco["categories"], key=lambda c: c["id"])
    index = {c["id"]: i for i, c in enumerate(categories)}
    work = Path(tempfile.mkdtemp())
    (work / "images").mkdir()
    (work / "labels").mkdir()
    images = {image["id"]: image for image in coco["images"]}
    lines: dict[int, list[str]] = {i: [] for i in images}
    for a in coco["annotations"]:
        image = images[a["image_id"]]
        x, y, w, h = a["bbox"]
        width, height = image["width"], image["height"]
        lines[a["image_id"]].append(
            f"{index[a['category_id']]} {(x + w / 2) / width} {(y + h / 2) / height} {w / width} {h / height}"
        )
    for i, image in images.items():
        (work / "images" / image["file_name"]).symlink_to(data / "images" / image["file_name"])
        (work / "labels" / image["file_name"]).with_suffix(".txt").write_text("\n".join(lines[i]) + "\n")
    names = "".join(f"  {i}: {c['name']}\n" for i, c in enumerate(categories))
    (work / "data.yaml").write_text(f"path: {work}\ntrain: images\nval: images\nnames:\n{names}")
    result = model.val(data=str(work / "data.yaml"), imgsz=256, batch=1, device="cpu", plots=False, verbose=False)
    return {"val_map50": round(float(result.box.map50), 4), "val_map": round(float(result.box.map), 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "test" / "data" / "yolo_heads")
    parser.add_argument("--shared", type=Path, default=default_shared())
    parser.add_argument("--yolov5", type=Path, required=True, help="a checkout of ultralytics/yolov5")
    args = parser.parse_args()
    os.environ.setdefault("YOLO_OFFLINE", "1")
    os.environ.setdefault("YOLO_CONFIG_DIR", str(Path(tempfile.gettempdir()) / "ultra_config"))
    args.out.mkdir(parents=True, exist_ok=True)
    commit = args.yolov5 / "COMMIT"
    reference = {
        "generator": "benchmarks/make_yolo_heads.py",
        "versions": versions() | {"yolov5": commit.read_text().strip() if commit.is_file() else ""},
        "models": [
            shapes_yolo26n(args.shared),
            pose_model(args.out, args.shared),
            yolov5_model(args.out, args.shared, args.yolov5),
        ],
    }
    (args.out / "reference.json").write_text(json.dumps(reference, indent=1) + "\n")


if __name__ == "__main__":
    main()
