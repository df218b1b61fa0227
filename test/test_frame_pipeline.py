"""One frame pipeline per family (families/pipeline.py, ``Family.pipeline``), offline: what the node runs is what
the tools run. The same frames through the pipeline built from the node's parameter values and through a tool
(track, eval) give the same results; the new-stream rule of the detection node's tracker holds in the core."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
import skimage.data
from click.testing import CliRunner
from conftest import pypi_model

from vision_factory.cli import main
from vision_factory.families.pipeline import DetectionPipeline, StreamRule
from vision_factory.families.registry import FAMILIES, family
from vision_factory.parameters import with_defaults
from vision_factory.runtime.backends import load_target
from vision_factory.tools import ball_eval
from vision_factory.tools.bags import write_ball_csv, write_image_bag
from vision_factory.tools.synthetic import BallClip
from vision_factory.tools.track import build_pipelines, track_frames, tracked_frames

NUDENET_MODEL = ("nudenet", "3.4.2", "nudenet/320n.onnx")  # finds the astronaut's face (test_track_tool.py)
STEP = 24


def _load(path) -> object:
    return load_target("onnx:cpu", Path(path))


def _moving_face(count: int) -> list[np.ndarray]:
    """scikit-image's astronaut pasted onto its coffee photo, moved right by STEP pixels a frame."""
    person = skimage.data.astronaut()[..., ::-1]
    canvas = cv2.resize(skimage.data.coffee()[..., ::-1], (900, 600))
    frames = []
    for index in range(count):
        frame = canvas.copy()
        frame[40:552, 44 + STEP * index : 556 + STEP * index] = person
        frames.append(frame)
    return frames


def test_every_family_with_a_node_of_its_own_model_has_a_pipeline():
    assert {name for name, spec in FAMILIES.items() if spec.make_pipeline} == {
        "tracknet",
        "yolo",
        "yolo_pose",
        "fasterrcnn",
        "detr",
        "rtmpose",
        "depth",
        "open_vocab",
        "sam",
        "yolo_cls",
        "florence2",
    }
    with pytest.raises(ValueError, match="reid has no frame pipeline"):
        family("reid").pipeline({}, _load)


def test_the_stream_rule_starts_a_new_stream_on_a_new_size_or_a_stamp_back_in_time_not_on_a_gap():
    rule = StreamRule()
    assert rule.new_stream((480, 640), (5, 0)) == ""  # the first frame needs no reset
    assert rule.new_stream((480, 640), (500, 0)) == ""  # a gap alone
    assert rule.new_stream((480, 640), (4, 999)) == "a stamp went back in time"
    assert rule.new_stream((480, 640), (4, 999)) == ""
    assert rule.new_stream((720, 1280), (5, 0)) == "the frame size changed from 640x480 to 1280x720"
    assert rule.new_stream((720, 1280), None) == ""  # no stamp: not compared
    rule.reset()
    assert rule.new_stream((480, 640), (0, 0)) == ""


def test_the_detection_pipeline_tracks_as_the_track_tool_and_publishes_as_the_node(tmp_path):
    """yolo's pipeline from the node's values (tracking on) gives the track tool's tracks on the same frames;
    what it returns is what the node publishes: those above confidence_threshold or continuing a track."""
    model = pypi_model(*NUDENET_MODEL)
    frames = _moving_face(8)
    values = with_defaults(
        family("yolo").parameters, {"model_path": str(model), "image_size": 320, "tracking": True}, "yolo"
    )
    pipeline = family("yolo").pipeline(values, _load)
    assert isinstance(pipeline, DetectionPipeline) and pipeline.tracking is not None
    rows = []
    for number, frame in enumerate(frames, start=1):
        ((stamp, found),) = pipeline.push(frame, (number, 0))
        boxes = found.boxes
        assert stamp == (number, 0) and found.new_stream == "" and len(boxes.track_ids) == len(boxes)
        tracks = [boxes.track(row) for row in range(len(boxes))]
        assert all(score > values["confidence_threshold"] or t is not None for score, t in zip(boxes.scores, tracks))
        rows += [(number, t, *xyxy) for xyxy, t in zip(boxes.xyxy.tolist(), tracks) if t is not None]
    (tool,) = track_frames("yolo", model, "onnx:cpu", frames, {"--imgsz": 320}, [{}])
    assert rows, "the face is tracked"
    assert [(int(f), int(t)) for f, t in zip(tool.frames, tool.ids)] == [(f, t) for f, t, *_ in rows]
    xywh = np.array([(x1, y1, x2 - x1, y2 - y1) for _, _, x1, y1, x2, y2 in rows])
    np.testing.assert_allclose(tool.boxes, xywh, atol=1e-3)
    # each frame's detections given instead of the detector's (a perfect detector's, in a benchmark): the detector's
    # own, recorded, track as they did; the detector is not called
    pipelines = build_pipelines("yolo", model, "onnx:cpu", {"--imgsz": 320}, [{}])
    recorded = [pipelines[0].detector.detect(frame) for frame in frames]
    pipelines[0].detector = None
    given = [(n, int(t)) for n, _, (kept,) in tracked_frames(frames, pipelines, recorded) for t in kept.boxes.track_ids]
    assert given == [(f, t) for f, t, *_ in rows]

    # The node's new-stream rule: the stream played again (a stamp back in time) resets the tracks.
    ((_, again),) = pipeline.push(frames[0], (1, 0))
    assert again.new_stream == "a stamp went back in time"
    pipeline.reset()
    assert pipeline.push(frames[0], (1, 0))[0][1].new_stream == ""


def _two_sizes(folder: Path) -> tuple[Path, int, int]:
    """A bag of a ball clip whose frames change size mid-stream (a camera reconfigured): 1280x720, then 640x360."""
    first = BallClip(num_frames=24, width=1280, height=720, seed=4)
    second = BallClip(num_frames=24, width=640, height=360, seed=5)
    bag = write_image_bag(folder / "bag", [*first.frames(), *second.frames()])
    return bag, first.num_frames, second.num_frames


def test_eval_runs_the_node_pipeline_through_a_frame_size_change(tmp_path, synthetic_models):
    """eval's ball path is the node's BallStream: a frame size change mid-stream skips seq_len - 1 frames and
    restarts the stream at the new size (the bare tracker eval ran before failed on the first such frame); its
    predictions are those of the tracknet pipeline built from the node's values, frame for frame."""
    model = synthetic_models["subtract"]
    bag, first, second = _two_sizes(tmp_path)
    run = ball_eval.track(model, bag, "onnx:cpu", None, 0.5)
    assert len(run.predictions) == first + second

    values = family("tracknet").values_from_model(model)
    stream = family("tracknet").pipeline(values, _load)
    frames = [*BallClip(num_frames=24, width=1280, height=720, seed=4).frames()]
    frames += [*BallClip(num_frames=24, width=640, height=360, seed=5).frames()]
    answered, skipped = {}, 0
    for index, frame in enumerate(frames):
        try:
            answered.update(stream.push(frame, index))
        except ValueError:
            skipped += 1
    answered.update(stream.flush())
    assert skipped == values["seq_len"] - 1 and stream.restarts == 1
    expected = [_row(i, answered[i].ball) if i in answered else (i, 0, 0.0, 0.0) for i in range(len(frames))]
    assert run.predictions == expected
    assert any(visible for _, visible, _, _ in run.predictions[first + values["seq_len"] :])  # seen after the restart


def test_eval_with_inpaintnet_is_the_node_pipeline_with_it(tmp_path, synthetic_models):
    """With --inpaint-model, eval answers every frame as the node's pipeline with InpaintNet does (the node's
    inpaint_model_path); eval.json names the InpaintNet model."""
    clip = BallClip(num_frames=40, width=1280, height=720, seed=4)
    bag = write_image_bag(tmp_path / "bag", clip.frames())
    model, inpaint = synthetic_models["subtract"], synthetic_models["inpaint"]
    run = ball_eval.track(model, bag, "onnx:cpu", None, 0.5, inpaint_model=inpaint)
    values = family("tracknet").values_from_model(model, inpaint_model_path=str(inpaint))
    stream = family("tracknet").pipeline(values, _load)
    assert stream.refiner is None
    answered = {}
    for index, frame in enumerate(clip.frames()):
        answered.update(stream.push(frame, index))
    answered.update(stream.flush())
    assert stream.refiner is not None  # InpaintNet ran
    assert sorted(answered) == list(range(clip.num_frames))
    assert run.predictions == [_row(i, answered[i].ball) for i in range(clip.num_frames)]

    truth = write_ball_csv(tmp_path / "truth.csv", [(i, t.visibility, t.x, t.y) for i, t in enumerate(clip.truth)])
    out = tmp_path / "eval"
    arguments = ["--data", str(truth), "--model", str(model), "--source", str(bag), "--inpaint-model", str(inpaint)]
    result = CliRunner().invoke(main, ["eval", "--model-type", "tracknet", "--out", str(out), *arguments])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "eval.json").read_text())["inpaint_model"] == str(inpaint)


def _row(frame: int, ball) -> tuple[int, int, float, float]:
    """A ball as a row of eval's predictions: Frame, Visibility, X, Y."""
    return (frame, int(ball.visible), float(ball.x), float(ball.y))
