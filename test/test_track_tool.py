"""vision-factory track: a real detector and the tracker over real frames, the tracks in MOTChallenge format.

The frames: scikit-image's astronaut photo pasted onto its coffee photo, moved right by STEP pixels a frame; the
detector: NudeNet's (PyPI), which finds her face (test_real_models.py: box 175,70-280,190 in the photo, read by
eye). The face's box in each frame is therefore known (the photo's box plus the shift) without any model's output.
(The fall detector's person class flips between Normal and Fall on these composites, so its tracks, per class,
would not say much about the tool.)
"""

from __future__ import annotations

import re

import cv2
import numpy as np
import pytest
import skimage.data
from conftest import SHARED, pypi_model
from support.cli import run_cli

from vision_factory.tools.mot import iou_ltwh
from vision_factory.tools.mot_files import read_mot
from vision_factory.tools.track import track

NUDENET_MODEL = ("nudenet", "3.4.2", "nudenet/320n.onnx")
OPTIONS = {"--imgsz": 320}
REID_MODEL = SHARED / "models" / "mobilenetv2-reid-embedder.onnx"
FACE = (175, 70, 280, 190)  # in the astronaut photo, x1, y1, x2, y2 (test_real_models.py)
FRAMES, STEP, TOP = 8, 24, 40
LINE = re.compile(r"^\d+,\d+,-?\d+\.\d{2},-?\d+\.\d{2},\d+\.\d{2},\d+\.\d{2},\d\.\d{4},-1,-1,-1$")


def _frames(folder, count: int = FRAMES):
    """The frame files, in order, and the person's box in each as x, y, w, h."""
    person = skimage.data.astronaut()[..., ::-1]
    canvas = cv2.resize(skimage.data.coffee()[..., ::-1], (900, 600))
    paths, boxes = [], []
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(count):
        left = 44 + STEP * index
        frame = canvas.copy()
        frame[TOP : TOP + 512, left : left + 512] = person
        paths.append(folder / f"frame_{index:03d}.png")
        cv2.imwrite(str(paths[-1]), frame)
        x1, y1, x2, y2 = FACE
        boxes.append((x1 + left, y1 + TOP, x2 - x1, y2 - y1))
    return paths, np.asarray(boxes, float)


@pytest.fixture(scope="module")
def frames(tmp_path_factory):
    return _frames(tmp_path_factory.mktemp("frames"))


@pytest.fixture(scope="module")
def detector_model():
    return pypi_model(*NUDENET_MODEL)


def _track(model, sources, out, **options):
    return track("yolo", model, "onnx:cpu", sources, out, OPTIONS, **options)


def _check_one_stable_track(tracks_file, boxes):
    lines = tracks_file.read_text().splitlines()
    assert all(LINE.match(line) for line in lines), lines
    tracks = read_mot(tracks_file)
    person = np.array([iou_ltwh(boxes[frame - 1], box)[0, 0] for frame, box in zip(tracks.frames, tracks.boxes)])
    on_person = person > 0.5  # the face box was read by eye, generously
    # The person is found and tracked in every frame (frames from 1), always with one ID, the stream's first.
    assert sorted(tracks.frames[on_person].tolist()) == list(range(1, len(boxes) + 1))
    assert set(tracks.ids[on_person].tolist()) == {1}
    assert ((tracks.scores > 0) & (tracks.scores <= 1)).all()
    return tracks


def test_track_writes_motchallenge_lines_with_a_stable_id(frames, detector_model, tmp_path):
    paths, boxes = frames
    out = tmp_path / "run"
    result = _track(detector_model, paths, out, save=True)
    assert result.tracks == out / "tracks.txt" and result.frames == FRAMES
    tracks = _check_one_stable_track(result.tracks, boxes)
    assert result.boxes == len(tracks) and not result.reid
    video = cv2.VideoCapture(str(result.video))
    shown = []
    while (read := video.read())[0]:
        shown.append(read[1])
    assert len(shown) == FRAMES and shown[0].shape == (600, 900, 3)
    # Boxes are drawn: the frame differs from its source along the person's box edge.
    source = cv2.imread(str(paths[0]))
    x, y, w, h = boxes[0].astype(int)
    assert np.abs(shown[0][y + h // 2, x - 3 : x + 4].astype(int) - source[y + h // 2, x - 3 : x + 4]).max() > 60


def test_an_earlier_run_is_refused_unless_force(frames, detector_model, tmp_path):
    paths, boxes = frames
    out = tmp_path / "run"
    _track(detector_model, paths[:3], out)
    (out / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="earlier run .*tracks.txt.*--force"):
        _track(detector_model, paths, out)
    assert len(read_mot(out / "tracks.txt").frames) >= 3  # untouched
    _track(detector_model, paths, out, force=True)
    _check_one_stable_track(out / "tracks.txt", boxes)
    assert (out / "notes.txt").read_text() == "mine"  # only the run's own files are replaced


def test_track_with_reid_keeps_the_id(frames, detector_model, tmp_path):
    if not REID_MODEL.is_file():
        pytest.skip(f"the shared re-id model is not here: {REID_MODEL}")
    paths, boxes = frames
    result = _track(detector_model, paths, tmp_path / "run", tracking_options={"--reid": REID_MODEL})
    assert result.reid
    _check_one_stable_track(result.tracks, boxes)


def test_track_command_end_to_end(frames, detector_model, tmp_path):
    paths, boxes = frames
    out = tmp_path / "cli"
    args = (
        "track",
        "--model-type",
        "yolo",
        "--model",
        str(detector_model),
        *map(str, paths),
        "--out",
        str(out),
        "--imgsz",
        "320",
    )
    done = run_cli(*args, "--track-buffer", "10")
    assert done.returncode == 0, done.stderr
    assert '"frames": 8' in done.stdout
    _check_one_stable_track(out / "tracks.txt", boxes)
    again = run_cli(*args)
    assert again.returncode != 0 and "earlier run" in again.stderr and "--force" in again.stderr
    assert "Traceback" not in again.stderr


@pytest.mark.parametrize(
    "extra, message",
    [
        (("--track-buffer", "-1"), "track_buffer must be an integer in 0..10000, not -1"),
        (("--track-low-threshold", "0.9"), "low (0.9) <= high (0.5)"),
        (("--reid", "no_such_reid.onnx"), "no_such_reid.onnx"),
        (("--track-buffer", "many"), "'many' is not a valid integer"),
        (("--iou", "0.5", "--model-type", "fasterrcnn"), "fasterrcnn models take no iou_threshold"),
    ],
)
def test_bad_options_are_clear_errors(frames, detector_model, tmp_path, extra, message):
    paths, _ = frames
    done = run_cli("track", "--model-type", "yolo", "--model", str(detector_model), str(paths[0]), "--out",
                   str(tmp_path / "bad"), "--imgsz", "320", *extra)  # fmt: skip
    assert done.returncode == 2 if "valid integer" in message or "iou" in message else done.returncode == 1
    assert message in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "bad" / "tracks.txt").exists()


def test_a_video_goes_alone(frames, detector_model, tmp_path):
    paths, _ = frames
    video = tmp_path / "clip.mp4"
    first = cv2.imread(str(paths[0]))
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"mp4v"), 10, first.shape[1::-1])
    writer.write(first)
    writer.release()
    with pytest.raises(ValueError, match="one video or one bag at a time"):
        _track(detector_model, [video, paths[0]], tmp_path / "run")
    result = _track(detector_model, [video], tmp_path / "run")
    assert result.frames == 1 and result.boxes >= 1  # the person, tracked from the stream's first frame


def test_frames_of_another_size_are_refused(frames, detector_model, tmp_path):
    paths, _ = frames
    small = tmp_path / "small.png"
    cv2.imwrite(str(small), cv2.imread(str(paths[0]))[:300, :400])
    with pytest.raises(ValueError, match="frame 2 is 400x300, the stream's first 900x600"):
        _track(detector_model, [paths[0], small], tmp_path / "run")


def test_a_bag_gives_the_tracks_of_its_frames(frames, detector_model, tmp_path):
    from vision_factory.tools.bags import write_image_bag

    paths, boxes = frames
    bag = tmp_path / "frames_bag"
    write_image_bag(bag, [cv2.imread(str(path)) for path in paths])
    from_bag = _track(detector_model, [bag], tmp_path / "bag")
    from_images = _track(detector_model, paths, tmp_path / "images")
    _check_one_stable_track(from_bag.tracks, boxes)
    assert from_bag.tracks.read_text() == from_images.tracks.read_text()  # bgr8 frames: the same pixels


def _camera_bags(frames, folder):
    """Two cameras' bags: the frames as they are, and six of them mirrored at half size (another stream, another
    size); each with the person's boxes."""
    from vision_factory.tools.bags import write_image_bag

    paths, boxes = frames
    images = [cv2.imread(str(path)) for path in paths]
    back = [cv2.resize(image[:, ::-1], (450, 300), interpolation=cv2.INTER_AREA) for image in images[:6]]
    write_image_bag(folder / "front_bag", images)
    write_image_bag(folder / "back_bag", back)
    width = images[0].shape[1]
    mirrored = np.column_stack([width - boxes[:6, 0] - boxes[:6, 2], boxes[:6, 1], boxes[:6, 2], boxes[:6, 3]]) / 2
    return {"front": (folder / "front_bag", boxes), "rig/back": (folder / "back_bag", mirrored)}


def test_several_cameras_each_tracked_on_its_own(frames, detector_model, tmp_path):
    """track --camera: each camera's frames through the node's pipeline with a tracker of its own: the person in
    each camera is one track of ID 1 (one tracker for both would number the second camera's person 2), in
    OUT/NAME/tracks.txt, the lines a single-camera run on that source writes."""
    from vision_factory.tools.track import parse_camera_sources, track_cameras

    cameras = _camera_bags(frames, tmp_path)
    items = [f"{name}={bag}" for name, (bag, _) in cameras.items()]
    runs = track_cameras("yolo", detector_model, "onnx:cpu", parse_camera_sources(items), tmp_path / "out", OPTIONS)
    assert list(runs) == ["front", "rig/back"]
    for name, (bag, boxes) in cameras.items():
        assert runs[name].tracks == tmp_path / "out" / name / "tracks.txt" and runs[name].frames == len(boxes)
        _check_one_stable_track(runs[name].tracks, boxes)
        alone = _track(detector_model, [bag], tmp_path / "alone" / name)
        assert runs[name].tracks.read_text() == alone.tracks.read_text()
    with pytest.raises(FileExistsError, match="earlier run"):
        track_cameras("yolo", detector_model, "onnx:cpu", parse_camera_sources(items), tmp_path / "out", OPTIONS)


def test_track_command_with_cameras(frames, detector_model, tmp_path):
    cameras = _camera_bags(frames, tmp_path)
    base = ("track", "--model-type", "yolo", "--model", str(detector_model), "--imgsz", "320", "--out")
    items = [arg for name, (bag, _) in cameras.items() for arg in ("--camera", f"{name}={bag}")]
    done = run_cli(*base, str(tmp_path / "cli"), *items)
    assert done.returncode == 0, done.stderr
    assert '"rig/back": {' in done.stdout and '"frames": 6' in done.stdout
    _check_one_stable_track(tmp_path / "cli" / "front" / "tracks.txt", cameras["front"][1])
    for extra, message in [
        (("--camera", "front"), "write NAME=SOURCE"),
        (("--camera", f"front={cameras['front'][0]}", "--camera", f"front={cameras['front'][0]}"), "named twice"),
        (("--camera", "front=no_such_bag"), "does not exist"),
        (("--camera", f"../x={cameras['front'][0]}"), "is not a relative ROS topic name"),
        ((str(cameras["front"][0]), "--camera", f"front={cameras['front'][0]}"), "not both"),
        ((), "not both"),
    ]:
        bad = run_cli(*base, str(tmp_path / "bad"), *extra)
        assert bad.returncode == 2 and message in bad.stderr and "Traceback" not in bad.stderr, (extra, bad.stderr)
    assert not (tmp_path / "bad").exists()
