#!/usr/bin/env python3
r"""Architecture-true Ultralytics classify and OBB exports, and what Ultralytics' own ``predict`` returns on them:
test/data/yolo_tasks/ (the ONNX files and reference.json), read by test/test_yolo_tasks.py without PyTorch (the
sibling of benchmarks/make_yolo_heads.py, whose helpers it uses).

- ``yolo11n-cls.onnx``: built by Ultralytics from its own ``yolo11-cls.yaml`` (thin: depth 0.5, width 0.0625; ten
  classes), seeded random weights (PyTorch's default init from seed 0, batch-norm statistics from 32 shapes-seg-val
  images; the classifier's Linear scaled by CLS_GAIN so that its probabilities spread out instead of sitting near a
  tenth each), exported at 64 (``[1, 3, 64, 64]`` in, the softmax ``[1, 10]`` out).
- ``yolo11n-obb.onnx``: from ``yolo11-obb.yaml`` (thin: depth 0.5, width 0.0625; three classes), seeded likewise,
  exported at 160 (``[1, 4 + 3 + 1, 525]``: cx, cy, w, h, class scores, angle); its DFL's fixed weights kept.
- ``yolo11n-obb-dynamic.onnx``: the same model exported with ``dynamic=True`` and no onnxslim (``simplify=False``):
  its output's channel dimension is symbolic, its metadata says task obb and three names.
- Reference: ``YOLO(file, task=TASK).predict(image, imgsz=SIZE, conf=CONF[image])`` on real images of skimage.data
  (astronaut, coffee, chelsea: square, wide, wide), as each is read by skimage (RGB) turned BGR: classify's top-5
  classes and scores; OBB's boxes (cx, cy, w, h, angle in radians: ``result.obb.xywhr``), scores and classes.

Run it in the scratch venv (Ultralytics and PyTorch, never the project's venv). As the committed files were made:

    YOLO_OFFLINE=1 YOLO_CONFIG_DIR=/tmp/ultra_tasks /work/export_venv/bin/python benchmarks/make_yolo_cls_obb.py

(/work/export_venv: Python 3.11, torch 2.14.1 and torchvision 0.29.1, CPU use, ultralytics 8.4.190, onnx,
onnxruntime, onnxslim, scikit-image; the versions are written into reference.json.)
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_yolo_heads import SEED, calibrate, default_shared, sha256, versions  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CLS_NAMES = {i: name for i, name in enumerate("airplane car bird cat deer dog frog horse ship truck".split())}
OBB_NAMES = {0: "plane", 1: "ship", 2: "vehicle"}
CLS_SIZE, OBB_SIZE = 64, 160
CLS_GAIN = 8.0  # the classifier's Linear weights times this: probabilities that differ between images
IMAGES = ("astronaut", "coffee", "chelsea")  # skimage.data
# Ultralytics' default threshold: tens of rotated boxes per image after its NMS (hundreds before)
OBB_CONF = {"astronaut": 0.25, "coffee": 0.25, "chelsea": 0.25}


def frame(name: str) -> np.ndarray:
    import skimage.data

    return np.ascontiguousarray(getattr(skimage.data, name)()[..., ::-1])  # RGB -> BGR, as the test reads it


def build(cfg_name: str, task: str, names: dict, work: Path, shared: Path):
    import torch
    import yaml
    from ultralytics import YOLO
    from ultralytics.utils import ROOT as UL_ROOT

    cfg = yaml.safe_load((UL_ROOT / "cfg" / "models" / "11" / cfg_name).read_text())
    cfg["scales"], cfg["nc"] = {"n": [0.5, 0.0625, 1024]}, len(names)
    (work / cfg_name.replace("11-", "11n-")).write_text(yaml.safe_dump(cfg, sort_keys=False))
    torch.manual_seed(SEED)
    model = YOLO(str(work / cfg_name.replace("11-", "11n-")), task=task)
    model.model.names = dict(names)
    calibrate(model.model, shared)
    restore_dfl(model.model)
    return model


def restore_dfl(model) -> None:
    """The DFL's fixed weights (0, 1, ..., reg_max - 1: a distance's expectation over its bins) again, which
    calibrate's init of every Conv2d replaced (a YOLO26 head has no DFL; a YOLO11 head's would give boxes of
    negative sizes)."""
    import torch
    from ultralytics.nn.modules.block import DFL

    for module in model.modules():
        if isinstance(module, DFL):
            bins = module.conv.weight.shape[1]
            module.conv.weight.data[:] = torch.arange(bins, dtype=torch.float).view(1, bins, 1, 1)


def export(model, work: Path, target: Path, **options) -> Path:
    here = Path.cwd()
    os.chdir(work)  # a model built from a YAML exports into the working directory
    try:
        exported = Path(model.export(format="onnx", opset=17, **options)).resolve()
    finally:
        os.chdir(here)
    target.write_bytes(exported.read_bytes())
    exported.unlink()
    return target


def classify(out: Path, shared: Path, work: Path) -> dict:
    import torch
    from ultralytics import YOLO

    model = build("yolo11-cls.yaml", "classify", CLS_NAMES, work, shared)
    with torch.no_grad():
        model.model.model[-1].linear.weight.mul_(CLS_GAIN)
    target = export(model, work, out / "yolo11n-cls.onnx", imgsz=CLS_SIZE, simplify=False)
    loaded = YOLO(str(target), task="classify")
    cases = []
    for name in IMAGES:
        probs = loaded.predict(frame(name), imgsz=CLS_SIZE, verbose=False)[0].probs
        top5 = [int(i) for i in probs.top5]
        scores = [round(float(probs.data[i]), 6) for i in top5]
        cases.append({"image": name, "top5": top5, "scores": scores})
    return {"file": target.name, "sha256": sha256(target), "task": "classify", "imgsz": CLS_SIZE, "cases": cases}


def obb(out: Path, shared: Path, work: Path) -> list[dict]:
    from ultralytics import YOLO

    model = build("yolo11-obb.yaml", "obb", OBB_NAMES, work, shared)
    fixed = export(model, work, out / "yolo11n-obb.onnx", imgsz=OBB_SIZE, simplify=False)
    dynamic = export(model, work, out / "yolo11n-obb-dynamic.onnx", imgsz=OBB_SIZE, simplify=False, dynamic=True)
    found = []
    for target in (fixed, dynamic):
        loaded = YOLO(str(target), task="obb")
        cases = []
        for name in IMAGES:
            result = loaded.predict(frame(name), imgsz=OBB_SIZE, conf=OBB_CONF[name], verbose=False)[0].obb
            detections = [
                {"xywhr": [round(v, 4) for v in box], "score": round(score, 6), "class_id": int(class_id)}
                for box, score, class_id in zip(result.xywhr.tolist(), result.conf.tolist(), result.cls.tolist())
            ]
            cases.append({"image": name, "conf": OBB_CONF[name], "detections": detections})
        found.append({"file": target.name, "sha256": sha256(target), "task": "obb", "imgsz": OBB_SIZE, "cases": cases})
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "test" / "data" / "yolo_tasks")
    parser.add_argument("--shared", type=Path, default=default_shared())
    args = parser.parse_args()
    os.environ.setdefault("YOLO_OFFLINE", "1")
    os.environ.setdefault("YOLO_CONFIG_DIR", str(Path(tempfile.gettempdir()) / "ultra_config"))
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp())
    reference = {
        "generator": "benchmarks/make_yolo_cls_obb.py",
        "versions": versions() | {"scikit-image": importlib.metadata.version("scikit-image")},
        "models": [classify(args.out, args.shared, work), *obb(args.out, args.shared, work)],
    }
    (args.out / "reference.json").write_text(json.dumps(reference, indent=1) + "\n")


if __name__ == "__main__":
    main()
