#!/usr/bin/env python3
r"""Ultralytics' own segmentation ``predict`` on the shapes-seg model: the reference for test/test_masks.py.

    python benchmarks/ultralytics_seg_reference.py [--out test/data/ultralytics_seg_reference.json]

For each of the first IMAGES images of ../shared/data/shapes-seg-val it runs
``YOLO(model, task="segment").predict(path, conf=0.25, iou=0.7, retina_masks=True)`` (the masks at the source
frame's size: Ultralytics' ``process_mask_native``) and writes each detection's box (xyxy, frame pixels, rounded to
0.01), score (0.001), class id and mask as an uncompressed COCO run-length encoding (column-major, runs of 0 then
1 ...), with the SHA-256 of the model file and of each image's decoded BGR pixels, so that the test knows it runs
the very same model on the very same pixels. The test compares without PyTorch.

It needs Ultralytics, which the project does not depend on: run it in a scratch venv outside the repository. How
the committed JSON was made (Python 3.11, CPU, nothing downloaded at run time):

    python3.11 -m venv /tmp/ul_venv
    /tmp/ul_venv/bin/pip install torch==2.13.0
    /tmp/ul_venv/bin/pip install ultralytics onnxruntime==1.32.0   # it brought torch 2.14.1, torchvision 0.29.1
    YOLO_OFFLINE=1 YOLO_CONFIG_DIR=/tmp/ul_config /tmp/ul_venv/bin/python benchmarks/ultralytics_seg_reference.py

(recorded with ultralytics 8.4.190, torch 2.14.1, onnxruntime 1.32.0, numpy 2.4.6, opencv-python 5.0.0.93: the
script writes the versions it ran with into the JSON.) ``--shared DIR`` (default: $VISION_FACTORY_SHARED,
../shared, /work/shared).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import platform
import tempfile
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MODEL = "models/shapes-yolov8n-seg.onnx"
DATA = "data/shapes-seg-val/images"
IMAGES = 12
CONF, IOU = 0.25, 0.7


def default_shared() -> Path:
    for candidate in (os.environ.get("VISION_FACTORY_SHARED", ""), ROOT.parent / "shared", "/work/shared"):
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    return ROOT.parent / "shared"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def run_lengths(mask: np.ndarray) -> list[int]:
    """COCO's uncompressed RLE counts of a bool mask: column-major, alternating runs starting with zeros."""
    flat = np.asarray(mask, bool).ravel(order="F")
    changes = np.flatnonzero(np.diff(flat.astype(np.int8))) + 1
    edges = np.concatenate([[0], changes, [flat.size]])
    counts = np.diff(edges).tolist()
    return ([0] + counts) if flat.size and flat[0] else counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "test" / "data" / "ultralytics_seg_reference.json")
    parser.add_argument("--shared", type=Path, default=default_shared())
    args = parser.parse_args()
    os.environ.setdefault("YOLO_OFFLINE", "1")
    os.environ.setdefault("YOLO_CONFIG_DIR", str(Path(tempfile.gettempdir()) / "ultra_config"))
    from ultralytics import YOLO
    from ultralytics.utils import SETTINGS

    SETTINGS.update({"sync": False})  # no analytics or crash reports
    model_path = args.shared / MODEL
    model = YOLO(str(model_path), task="segment")
    images = sorted((args.shared / DATA).glob("*.jpg"))[:IMAGES]
    record = {
        "model": MODEL,
        "model_sha256": sha256(model_path.read_bytes()),
        "predict": {"conf": CONF, "iou": IOU, "retina_masks": True},
        "versions": {
            name: importlib.metadata.version(name)
            for name in ("ultralytics", "torch", "onnxruntime", "numpy", "opencv-python")
        }
        | {"python": platform.python_version()},
        "images": {},
    }
    for path in images:
        frame = cv2.imread(str(path))
        result = model.predict(frame, conf=CONF, iou=IOU, retina_masks=True, verbose=False)[0]
        masks = result.masks.data.cpu().numpy() > 0.5 if result.masks is not None else np.zeros((0, 1, 1), bool)
        assert masks.shape[1:] in ((0, 0), frame.shape[:2]) or not len(masks), masks.shape
        detections = []
        for box, score, class_id, mask in zip(
            result.boxes.xyxy.tolist(), result.boxes.conf.tolist(), result.boxes.cls.tolist(), masks
        ):
            detections.append(
                {
                    "xyxy": [round(v, 2) for v in box],
                    "score": round(score, 3),
                    "class_id": int(class_id),
                    "mask": {"size": list(frame.shape[:2]), "counts": run_lengths(mask)},
                }
            )
        record["images"][path.name] = {"pixels_sha256": sha256(frame.tobytes()), "detections": detections}
    args.out.write_text(json.dumps(record, separators=(",", ":")) + "\n")
    print(f"{args.out}: {sum(len(i['detections']) for i in record['images'].values())} detections")


if __name__ == "__main__":
    main()
