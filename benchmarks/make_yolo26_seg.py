#!/usr/bin/env python3
r"""An architecture-true end-to-end YOLO26 segmentation export and what Ultralytics' own ``predict`` returns on it:
test/data/yolo_heads/yolo26n-seg-e2e.onnx and seg_reference.json, read by test/test_yolo_heads.py without PyTorch
(the sibling of benchmarks/make_yolo_heads.py, whose helpers it uses).

- ``yolo26n-seg-e2e.onnx``: built by Ultralytics from its own ``yolo26-seg.yaml`` (thin: width 0.0625, depth 0.33,
  so 16 prototype channels inside Proto26 and 32 mask coefficients; three classes named as the shapes), seeded random
  weights (PyTorch's default init of every layer from seed 0, batch-norm statistics from 32 shapes-seg-val images:
  the same detections on every run; the file's bytes differ by the export date in its metadata), exported by
  Ultralytics with ``nms=False`` (its NMS-free head: ``[1, 300, 6 + 32]`` rows and the prototypes
  ``[1, 32, 40, 40]``) at 160.
- Reference: ``YOLO(file, task="segment").predict(image, conf=CONF[image], imgsz=160, retina_masks=True)`` (masks at
  the frame's size, Ultralytics' ``process_mask_native``) on three real images, one of them letterboxed in width
  and one in height: each detection's box, score, class and mask (uncompressed COCO RLE).

Run it in the scratch venv (Ultralytics and PyTorch, never the project's venv). As the committed files were made:

    YOLO_OFFLINE=1 YOLO_CONFIG_DIR=/tmp/ultra_e2eseg /work/wt/export_venv/bin/python benchmarks/make_yolo26_seg.py

(/work/wt/export_venv: Python 3.11, torch 2.14.1 and torchvision 0.29.1 from this machine's disk, CPU use,
ultralytics 8.4.190, onnx, onnxruntime, onnxslim; the versions are written into seg_reference.json.)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_yolo_heads import SEED, SIZE, calibrate, default_shared, image_entry, photo, sha256, versions  # noqa: E402
from ultralytics_seg_reference import run_lengths  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
NAMES = {0: "circle", 1: "square", 2: "triangle"}
# Random weights score high almost everywhere: thresholds per image that keep tens of rows.
CONF = {"grace_hopper.jpg": 0.6, "000001.jpg": 0.6, "grace_hopper_wide.png": 0.6}
FILE = "yolo26n-seg-e2e.onnx"
SHAPES_IMAGE = "data/shapes-seg-val/images/000001.jpg"


def images(shared: Path, work: Path) -> dict[str, tuple[Path, str]]:
    """The reference images: a photo (portrait: letterboxed in width), a shapes-seg-val image (square) and a
    wide crop of the photo (rows 100..399) (letterboxed in height), each with the source the test finds it by."""
    wide = work / "grace_hopper_wide.png"
    cv2.imwrite(str(wide), cv2.imread(str(photo()))[100:400])  # rows 100..399: 512 x 300, lossless
    return {
        "grace_hopper.jpg": (photo(), "matplotlib:sample_data/grace_hopper.jpg"),
        "000001.jpg": (shared / SHAPES_IMAGE, f"shared:{SHAPES_IMAGE}"),
        "grace_hopper_wide.png": (wide, "crop:matplotlib:sample_data/grace_hopper.jpg:100:400"),
    }


def seg_model(out: Path, shared: Path) -> dict:
    import torch
    import yaml
    from ultralytics import YOLO
    from ultralytics.utils import ROOT as UL_ROOT

    work = Path(tempfile.mkdtemp())
    cfg = yaml.safe_load((UL_ROOT / "cfg" / "models" / "26" / "yolo26-seg.yaml").read_text())
    cfg["scales"], cfg["nc"] = {"n": [0.33, 0.0625, 1024]}, len(NAMES)
    (work / "yolo26n-seg.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    torch.manual_seed(SEED)  # what calibrate() does not reset (Proto26's transposed conv) seeded too
    model = YOLO(str(work / "yolo26n-seg.yaml"), task="segment")
    model.model.names = dict(NAMES)
    calibrate(model.model, shared)
    here = Path.cwd()
    os.chdir(work)  # a model built from a YAML exports into the working directory
    try:
        exported = Path(model.export(format="onnx", imgsz=SIZE, opset=17, simplify=False, nms=False)).resolve()
    finally:
        os.chdir(here)
    target = out / FILE
    target.write_bytes(exported.read_bytes())
    loaded = YOLO(str(target), task="segment")
    cases = []
    for name, (path, source) in images(shared, work).items():
        frame = cv2.imread(str(path))
        result = loaded.predict(frame, conf=CONF[name], imgsz=SIZE, retina_masks=True, verbose=False)[0]
        boxes = result.boxes
        masks = result.masks.data.numpy() > 0.5 if result.masks is not None else np.zeros((0, *frame.shape[:2]))
        detections = [
            {
                "xyxy": [round(v, 3) for v in box],
                "score": round(score, 5),
                "class_id": int(class_id),
                "mask": {"size": list(mask.shape), "counts": run_lengths(mask)},
            }
            for box, score, class_id, mask in zip(boxes.xyxy.tolist(), boxes.conf.tolist(), boxes.cls.tolist(), masks)
        ]
        entry = image_entry(path, source) | {"pixels_sha256": sha256_bytes(frame.tobytes())}
        cases.append({"image": name, **entry, "conf": CONF[name], "detections": detections})
    return {"file": target.name, "sha256": sha256(target), "task": "segment", "cases": cases}


def sha256_bytes(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "test" / "data" / "yolo_heads")
    parser.add_argument("--shared", type=Path, default=default_shared())
    args = parser.parse_args()
    os.environ.setdefault("YOLO_OFFLINE", "1")
    os.environ.setdefault("YOLO_CONFIG_DIR", str(Path(tempfile.gettempdir()) / "ultra_config"))
    args.out.mkdir(parents=True, exist_ok=True)
    reference = {
        "generator": "benchmarks/make_yolo26_seg.py",
        "versions": versions(),
        "models": [seg_model(args.out, args.shared)],
    }
    (args.out / "seg_reference.json").write_text(json.dumps(reference) + "\n")


if __name__ == "__main__":
    main()
