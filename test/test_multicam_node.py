"""Nodes serving several cameras (the ``cameras`` parameter) over real DDS: each camera's frames answered on its
own topics with its own headers, by one model; a silent camera and a camera of stale frames beside them; each
camera's stream state its own (a TrackNet window per camera)."""

from __future__ import annotations

import itertools
import json
import logging
import re
import time
from pathlib import Path

import cv2
import numpy as np
import pytest
from conftest import pypi_model
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import PointStamped
from rclpy.parameter import Parameter as RosParameter
from rclpy.parameter_client import AsyncParameterClient
from sensor_msgs.msg import Image
from std_msgs.msg import Float64, Header
from support.data import RIG_START_NS, _photo_frames, _red_spots, _walk, camera_rig
from support.generated import generate_and_install, site_packages
from support.models import SHAPES_MODEL, spot_finder
from support.real_models import FALL_MODEL, NUDENET_MODEL, REID_MODEL
from support.ros_harness import PATIENCE_S, Lifecycle, NodeProcess, Probe
from test_tracking_node import _header, _offline, _track_node_case
from vision_msgs.msg import Detection2DArray

from vision_factory.families.registry import family
from vision_factory.models.ball_stream import BallStream
from vision_factory.models.tracknet import TrackNetModuleONNX
from vision_factory.results.boxes import Boxes
from vision_factory.ros.messages import bgr_to_message
from vision_factory.runtime.onnx_runner import OnnxRunner
from vision_factory.tools.bags import BagError, read_messages, write_image_bag, write_messages
from vision_factory.tools.bench import node_frames, node_params, run_bench
from vision_factory.tools.bench_cameras import cameras_vs_nodes, lines
from vision_factory.tools.replay import replay
from vision_factory.tools.replay_frames import first_images, parse_cameras, played, read_cameras
from vision_factory.tools.synthetic import BallClip

LOG = logging.getLogger("test")
DAY_S = 86400


def _message(frame: np.ndarray, camera: str, sec: int, nanosec: int = 0) -> Image:
    header = Header(frame_id=f"{camera}_optical")
    header.stamp.sec, header.stamp.nanosec = sec, nanosec
    return bgr_to_message(frame, header)


def _status(diagnostics: list, name: str) -> DiagnosticStatus | None:
    found = [status for array in diagnostics for status in array.status if status.name == name]
    return found[-1] if found else None


def _value(status: DiagnosticStatus, key: str) -> str:
    return next(item.value for item in status.values if item.key == key)


def test_one_detector_node_answers_each_camera_on_its_own_topics(tmp_path):
    """Three cameras of different frame sizes and rates, a fourth silent, a fifth whose frames are a day old: the
    live cameras' frames answered on <camera>/detections with their own headers, as the offline pipeline detects
    them (the model takes a dynamic batch: frames of several cameras go into one run); the stale camera's skipped,
    the silent camera's status says so."""
    model = pypi_model(*NUDENET_MODEL)  # a YOLO of dynamic batch and input size
    photos = _photo_frames()
    cameras = {
        "front": [photos[0], photos[2], photos[0], photos[2], photos[0], photos[2]],  # 512x512, the fastest
        "left": [cv2.resize(photos[1], (320, 240)), cv2.resize(photos[3], (320, 240))],  # smaller, a third the rate
        "rig/right": [photos[4], photos[5], photos[4]],  # 1024x512, half the rate
    }
    params = {
        "model_path": str(model),
        "cameras": "[front, left, rig/right, silent, stale]",
        "qos_reliability": "reliable",
        "qos_depth": "50",
        "queue_size": "50",  # every frame answered: the test compares each with the offline pipeline
        "max_frame_age": str(3600 * 1000),  # an hour: only the stale camera's day-old frames are over it
        "silence_timeout": "1.0",
    }
    node = NodeProcess(tmp_path, params, module="vision_factory.yolo_onnx_node")
    probe = Probe()
    try:
        answers = {
            camera: probe.subscribe(Detection2DArray, f"/t/{camera}/detections", late=True) for camera in cameras
        }
        others = {
            camera: probe.subscribe(Detection2DArray, f"/t/{camera}/detections", late=True)
            for camera in ("silent", "stale")
        }
        diagnostics = probe.subscribe(DiagnosticArray, "/diagnostics")
        publishers = {camera: probe.publisher(Image, f"/t/{camera}/image") for camera in (*cameras, "stale")}
        ready = lambda: all(p.get_subscription_count() > 0 for p in publishers.values()) and probe.matched()  # noqa: E731
        assert probe.spin_until(ready, PATIENCE_S), node.log()
        now = int(time.time())
        sent: dict[str, list[tuple[int, int]]] = {camera: [] for camera in cameras}
        for tick in range(6):  # front every tick, rig/right every second tick, left every third
            for camera, frames in cameras.items():
                every = 6 // len(frames)
                if tick % every == 0:
                    stamp = (now, 1000 * tick + len(camera))
                    publishers[camera].publish(_message(frames[tick // every], camera.replace("/", "_"), *stamp))
                    sent[camera].append(stamp)
            publishers["stale"].publish(_message(photos[0], "stale", now - DAY_S, tick))
        done = lambda: all(len(answers[c]) >= len(f) for c, f in cameras.items())  # noqa: E731
        assert probe.spin_until(done, PATIENCE_S), (node.log(), {c: len(a) for c, a in answers.items()})

        def statuses_say_so() -> bool:
            stale, silent = _status(diagnostics, "yolo: camera stale"), _status(diagnostics, "yolo: camera silent")
            return (
                stale is not None
                and _value(stale, "frames stale") == "6"
                and silent is not None
                and silent.level == DiagnosticStatus.WARN
            )

        assert probe.spin_until(statuses_say_so, PATIENCE_S), node.log()
        main = _status(diagnostics, "yolo: inference")
        assert _value(main, "cameras") == "front, left, rig/right, silent, stale"
        runs = _value(main, "batch sizes run (frames: runs)")
        LOG.info("batch sizes run: %s", runs)
        assert sum(int(size) * int(count.split()[0]) for size, count in (p.split(": ") for p in runs.split(", "))) == 11
        for camera in cameras:
            status = _status(diagnostics, f"yolo: camera {camera}")
            assert _value(status, "frames answered") == str(len(cameras[camera]))
            assert _value(status, "frames stale") == "0"
    finally:
        probe.close()
        node.stop()
    assert all(not messages for messages in others.values())  # the silent and the stale cameras: no answer
    values = family("yolo").values_from_model(model)
    pipeline = family("yolo").pipeline(values, lambda path: OnnxRunner.load(path, {}, LOG))
    found = {}
    for camera, frames in cameras.items():
        got = sorted(answers[camera], key=lambda m: m.header.stamp.nanosec)
        assert [(m.header.stamp.sec, m.header.stamp.nanosec) for m in got] == sent[camera]
        assert {m.header.frame_id for m in got} == {f"{camera.replace('/', '_')}_optical"}
        for message, frame in zip(got, frames):
            published, ((_, expected),) = Boxes.from_message(message), pipeline.push(frame)
            assert published.labels == expected.boxes.labels
            assert np.allclose(published.xyxy, expected.boxes.xyxy, atol=1e-3)
            assert np.allclose(published.scores, expected.boxes.scores, atol=1e-4)
        found[camera] = sum(len(m.detections) for m in got)
    assert found["front"] > 0 and found["rig/right"] > 0  # faces: the comparison compares something
    assert "stale frame" in node.log()


def test_tracknet_keeps_a_window_per_camera(tmp_path, synthetic_models):
    """Two cameras' ball clips, their frames interleaved on one node: each camera's answers are those of a
    BallStream of its own frames alone (one shared window would mix the two clips)."""
    clips = {
        "court_a": BallClip(num_frames=16, width=640, height=360, seed=3),
        "court_b": BallClip(num_frames=16, width=480, height=270, seed=7),
    }
    params = {
        "model_path": str(synthetic_models[""]),
        "bg_mode": "''",
        "heatmap_threshold": "0.0",
        "cameras": "court_a, court_b",
        "qos_reliability": "reliable",
        "qos_depth": "50",
        "queue_size": "50",
        "flush_timeout": "0.5",
    }
    node = NodeProcess(tmp_path, params)
    probe = Probe()
    try:
        balls = {camera: probe.subscribe(PointStamped, f"/t/{camera}/ball", late=True) for camera in clips}
        publishers = {camera: probe.publisher(Image, f"/t/{camera}/image") for camera in clips}
        ready = lambda: all(p.get_subscription_count() > 0 for p in publishers.values()) and probe.matched()  # noqa: E731
        assert probe.spin_until(ready, PATIENCE_S), node.log()
        for index in range(16):
            for camera, clip in clips.items():
                publishers[camera].publish(_message(clip.frame(index), camera, 100 + index))
        done = lambda: all(len(balls[camera]) >= 16 for camera in clips)  # noqa: E731
        assert probe.spin_until(done, PATIENCE_S), (node.log(), {c: len(b) for c, b in balls.items()})
    finally:
        probe.close()
        node.stop()
    for camera, clip in clips.items():
        stream = BallStream(TrackNetModuleONNX(synthetic_models[""], 8, ""))
        outputs = [o for i, f in enumerate(clip.frames()) for o in stream.push(f, 100 + i)] + stream.flush()
        expected = [(sec, int(r.ball.visible), float(r.ball.x), float(r.ball.y)) for sec, r in outputs]
        got = sorted((m.header.stamp.sec, int(m.point.z > 0), m.point.x, m.point.y) for m in balls[camera])
        assert got == expected
        assert {m.header.frame_id for m in balls[camera]} == {f"{camera}_optical"}


def test_bench_measures_one_node_of_several_cameras_against_one_node_each(tmp_path):
    """`bench --node --cameras N`'s measure (tools/bench_cameras.py): every set-up answers every camera, each node's
    answers counted by its own receiving process equal what the node logs it published (else the measure is
    refused), and the report holds what the table prints (no figure asserted: those are benchmarks/README.md's)."""
    params, _ = node_params("yolo", SHAPES_MODEL, 1, {})
    frame = next(iter(node_frames("yolo", 1)))
    report = cameras_vs_nodes("yolo", params, frame, 2, seconds=4.0, rate=4.0, work=tmp_path, workers=2, rounds=1)
    for setup in ("one_node", "one_node_workers", "nodes"):
        assert len(report[setup]["camera_fps"]) == 2 and all(fps > 0 for fps in report[setup]["camera_fps"])
        assert report[setup]["rss_mib"] > 0 and report[setup]["cpu_cores"] > 0
    counts = [count for setup in ("one_node", "one_node_workers", "nodes") for count in report[setup]["counts"]]
    assert len(counts) == 4  # one node, one node with workers, two nodes
    for count in counts:
        received, published = re.search(r"received (\d+), published (\d+)", count).groups()
        assert received == published and int(received) > 0, count
    assert report["memory_ratio"] > 0 and report["fps_ratio"] > 0
    text = "\n".join(lines("onnx:cpu", report))
    assert "1 node / 2 nodes: memory" in text and "answers counted, each node" in text


def test_bench_cameras_needs_the_node():
    with pytest.raises(ValueError, match="--cameras needs --node"):
        run_bench(SHAPES_MODEL, "onnx:cpu", model_type="yolo", cameras=2)


def test_a_camera_named_twice_stops_the_node_naming_it(tmp_path):
    node = NodeProcess(
        tmp_path,
        {"model_path": str(SHAPES_MODEL), "cameras": "[front, left, front]"},
        module="vision_factory.yolo_onnx_node",
    )
    assert node.wait(timeout=PATIENCE_S) == 2
    node.stop()
    assert "cannot start: camera front is named twice in cameras: give each camera once" in node.log()


def _camera_node(tmp_path, params: dict, name: str, output: str, cameras=("a", "b"), partner: str | None = None):
    """A node of family ``name`` serving ``cameras`` (reliable), with, for a node that pairs its images, each
    camera's ``partner`` topic; and a probe matched with it: (node, probe, each camera's ``output`` received, its
    image publisher, its partner publisher if any)."""
    given = {**params, "cameras": f"[{', '.join(cameras)}]", "qos_reliability": "reliable"}
    node = NodeProcess(tmp_path, given, module=f"vision_factory.{name}_onnx_node")
    probe = Probe()
    try:
        answers = {camera: probe.subscribe(Detection2DArray, f"/t/{camera}/{output}") for camera in cameras}
        images = {camera: probe.publisher(Image, f"/t/{camera}/image") for camera in cameras}
        partners = {}
        if partner is not None:
            partners = {camera: probe.publisher(Detection2DArray, f"/t/{camera}/{partner}") for camera in cameras}
        publishers = [*images.values(), *partners.values()]
        ready = lambda: all(p.get_subscription_count() > 0 for p in publishers) and probe.matched()  # noqa: E731
        assert probe.spin_until(ready, PATIENCE_S), node.log()
    except BaseException:
        probe.close()
        node.stop()
        raise
    return node, probe, answers, images, partners


def test_each_camera_has_its_own_tracker(tmp_path):
    """Two cameras with tracking on, their frames interleaved: each camera's track IDs are those of the offline
    pipeline over that camera's frames alone (IDs from 1 on each; one shared tracker would carry one camera's tracks
    into the other's frames)."""
    if not REID_MODEL.is_file():
        pytest.skip(f"{REID_MODEL} is not there (shared models, see ../shared/models/README)")
    frames = {"a": _walk(), "b": [frame[:, ::-1].copy() for frame in _walk()]}  # b: the people the other way
    params = {"model_path": str(pypi_model(*FALL_MODEL)), "tracking": True, "reid_model_path": str(REID_MODEL)}
    node, probe, published, publishers, _ = _camera_node(tmp_path, params, "yolo", "detections")
    try:
        for index in range(len(frames["a"])):
            for camera, camera_frames in frames.items():
                publishers[camera].publish(bgr_to_message(camera_frames[index], _header(index)))
                # one at a time: the node's queue must not drop a frame, the tracker needs them all
                answers = published[camera]
                assert probe.spin_until(lambda answers=answers, count=index + 1: len(answers) >= count, PATIENCE_S)
    finally:
        probe.close()
        node.stop()
    for camera, camera_frames in frames.items():
        assert published[camera] == _offline(params, camera_frames), node.log()
        assert any(detection.id == "1" for detection in published[camera][0].detections)


def test_inference_workers_run_cameras_together_each_camera_in_order(tmp_path):
    """inference_workers 2 over three tracking cameras, every camera's frames sent at once: two cameras' frames are
    in the model together, yet each camera's answers are those of the offline pipeline over its frames alone, in
    order (its tracker saw its frames one at a time, in order: a worker taking a camera another holds would break
    its track IDs)."""
    walk = _walk()
    frames = {"a": walk, "b": [frame[:, ::-1].copy() for frame in walk], "c": walk[::-1]}
    params = {"model_path": str(pypi_model(*FALL_MODEL)), "tracking": True}
    # queue_size 50: every frame answered (the trackers need them all)
    given = {**params, "inference_workers": 2, "qos_depth": 50, "queue_size": 50}
    node, probe, published, publishers, _ = _camera_node(tmp_path, given, "yolo", "detections", tuple(frames))
    try:
        for index in range(len(walk)):
            for camera, camera_frames in frames.items():
                publishers[camera].publish(bgr_to_message(camera_frames[index], _header(index)))
        done = lambda: all(len(published[c]) >= len(walk) for c in frames)  # noqa: E731
        assert probe.spin_until(done, PATIENCE_S), (node.log(), {c: len(a) for c, a in published.items()})
    finally:
        probe.close()
        node.stop()
    assert "inference_workers 2: frames of up to 2 cameras in the model at once" in node.log()
    for camera, camera_frames in frames.items():
        assert published[camera] == _offline(params, camera_frames), (camera, node.log())


def test_the_track_node_pairs_and_tracks_each_cameras_detections_on_its_own(tmp_path):
    """The track node (images paired with another node's detections by stamp) with cameras [a, b]: each camera's
    images pair with its own <camera>/detections, and its tracks are the offline tracker's over that camera's
    frames alone (the same stamps on both cameras: a pairing across cameras would mix them)."""
    walk = _walk()
    cases = {"a": _track_node_case(walk), "b": _track_node_case([frame[:, ::-1].copy() for frame in walk])}
    node, probe, tracks, images, found = _camera_node(tmp_path, cases["a"][2], "track", "tracks", partner="detections")
    try:
        for index in range(len(walk)):
            for camera, (frames, inputs, _, _) in cases.items():
                pair = ((images[camera], bgr_to_message(frames[index], _header(index))), (found[camera], inputs[index]))
                for publisher, message in pair[:: 1 if index % 2 else -1]:  # either order per stamp
                    publisher.publish(message)
                answers = tracks[camera]
                assert probe.spin_until(lambda a=answers, n=index + 1: len(a) >= n, PATIENCE_S), node.log()
    finally:
        probe.close()
        node.stop()
    for camera, (_, _, _, expected) in cases.items():
        assert tracks[camera] == expected, (camera, node.log())


def test_rtmpose_poses_each_cameras_people_of_its_own_detections_topic(tmp_path):
    """rtmpose with person_source topic and cameras [a, b]: each camera's images pair with its own
    <camera>/person_detections (same stamps on both cameras), and each person's keypoints land on that camera's
    red spot (spot_finder puts every keypoint there; b's spots are mirrored: a pairing across cameras would put
    them on the other side)."""
    frames = {"a": _red_spots(_photo_frames()[:3])}
    frames["b"] = [frame[:, ::-1].copy() for frame in frames["a"]]
    width = frames["a"][0].shape[1]
    params = {"model_path": str(spot_finder(tmp_path / "spot.onnx")), "person_source": "topic", "queue_size": 4}
    node, probe, poses, images, people = _camera_node(tmp_path, params, "rtmpose", "poses", partner="person_detections")
    try:
        for index in range(3):
            for camera, camera_frames in frames.items():
                box = (100, 150, 260, 300) if camera == "a" else (width - 260, 150, width - 100, 300)
                header = _header(index)
                message = Boxes([box], [0.9], [-1], ["person"]).to_message(header)
                pair = ((images[camera], bgr_to_message(camera_frames[index], header)), (people[camera], message))
                for publisher, sent in pair[:: 1 if index % 2 else -1]:
                    publisher.publish(sent)
        done = lambda: all(len(poses[camera]) >= 3 for camera in frames)  # noqa: E731
        assert probe.spin_until(done, PATIENCE_S), node.log()
    finally:
        probe.close()
        node.stop()
    for camera in frames:
        for index, message in enumerate(sorted(poses[camera], key=lambda m: m.header.stamp.sec)):
            assert message.header.stamp.sec == _header(index).stamp.sec
            (person,) = message.detections
            x, y = 150 + 5 * index, 200 + 7 * index
            spot = (x, y) if camera == "a" else (width - 1 - x, y)
            assert len(person.results) > 1  # the person's class, then its keypoints
            for result in person.results[1:]:
                assert (result.pose.pose.position.x, result.pose.pose.position.y) == pytest.approx(spot, abs=3)


def test_replay_plays_several_cameras_through_one_node_in_recorded_time_order(tmp_path):
    """Two cameras' image topics in one bag (30 and 10 frames/s) and a third camera's bag: played into one yolo node
    serving the three, in their recorded time order; each camera's answers (OUT/<camera>/detections.json) are the
    offline pipeline's on its own frames, every frame answered."""
    model = pypi_model(*NUDENET_MODEL)
    photos = _photo_frames()
    frames = {
        "front": [photos[0], photos[2], photos[0], photos[2], photos[0], photos[2]],
        "left": [cv2.resize(photos[1], (320, 240)), cv2.resize(photos[3], (320, 240))],
        "right": [photos[4], photos[5], photos[4]],
    }
    start = RIG_START_NS
    rig, right = camera_rig(tmp_path, frames)
    sources = parse_cameras(["front=/front/image_raw", "left=/left/image_raw", f"right={right}"], rig)
    result = replay(rig, tmp_path / "out", "yolo", {"model_path": str(model)}, cameras=sources)
    assert result.missing_frames == {"front": [], "left": [], "right": []}, open(result.node_log).read()
    assert result.frames_sent == {camera: len(camera_frames) for camera, camera_frames in frames.items()}
    times = {  # bag time of each camera's frames: front 30/s from start, left 10/s from +10 ms, right 15/s from +5 ms
        "front": [start + round(i * 1e9 / 30) for i in range(6)],
        "left": [start + 10**7 + round(i * 1e9 / 10) for i in range(2)],
        "right": [start + 5 * 10**6 + round(i * 1e9 / 15) for i in range(3)],
    }
    assert result.order == [camera for _, camera in sorted((t, c) for c, ts in times.items() for t in ts)]
    values = family("yolo").values_from_model(model)
    pipeline = family("yolo").pipeline(values, lambda path: OnnxRunner.load(path, {}, LOG))
    for camera, camera_frames in frames.items():
        records = json.loads(Path(result.answers[camera]).read_text())
        assert [record["frame"] for record in records] == list(range(len(camera_frames)))
        for record, frame in zip(records, camera_frames):
            ((_, expected),) = pipeline.push(frame)
            assert [d["class_name"] for d in record["detections"]] == list(expected.boxes.labels)
            xyxy = np.reshape([d["xyxy"] for d in record["detections"]], (-1, 4))
            assert np.allclose(xyxy, expected.boxes.xyxy, atol=1e-3)


def test_replay_cameras_refuses_a_malformed_camera(tmp_path):
    bag = write_image_bag(tmp_path / "bag", [np.zeros((4, 4, 3), np.uint8)])
    with pytest.raises(ValueError, match="write NAME=TOPIC"):
        parse_cameras(["front"], bag)
    with pytest.raises(ValueError, match=r"/nowhere is neither an image topic of .* \(it has /camera/image_raw\)"):
        parse_cameras(["front=/nowhere"], bag)
    with pytest.raises(ValueError, match="camera front is named twice"):
        parse_cameras(["front=/camera/image_raw", f"front={bag}"], bag)


def test_replay_plays_every_cameras_frames_in_recorded_time_order_read_as_played(tmp_path):
    """What replay plays of several cameras (tools/replay_frames.py), without a node: each camera's frames merged in
    their bag times' order, each message's bytes its camera's own frame; a silent camera plays nothing, no warm-up
    image either."""
    frames = {
        "front": [np.full((4, 4, 3), value, np.uint8) for value in (10, 11, 12, 13, 14, 15)],
        "left": [np.full((2, 3, 3), value, np.uint8) for value in (20, 21)],
        "right": [np.full((4, 6, 3), value, np.uint8) for value in (30, 31, 32)],
    }
    rig, right = camera_rig(tmp_path, frames)
    silent = write_image_bag(tmp_path / "silent", [])
    cameras = read_cameras(parse_cameras(["front=/front/image_raw", "left=/left/image_raw", f"right={right}",
                                          f"side={silent}"], rig))  # fmt: skip
    assert [len(camera.stamps) for camera in cameras] == [6, 2, 3, 0]
    start = RIG_START_NS  # front 30/s from start, left 10/s from +10 ms, right 15/s from +5 ms (camera_rig)
    times = {
        0: [start + round(i * 1e9 / 30) for i in range(6)],
        1: [start + 10**7 + round(i * 1e9 / 10) for i in range(2)],
        2: [start + 5 * 10**6 + round(i * 1e9 / 15) for i in range(3)],
    }
    expected = sorted((t, camera, index) for camera, ts in times.items() for index, t in enumerate(ts))
    got = list(played(cameras))
    assert [item[:3] for item in got] == expected
    bags = {0: (rig, "/front/image_raw"), 1: (rig, "/left/image_raw"), 2: (right, "/camera/image_raw")}
    recorded = {camera: [m.data for m in read_messages(*where)] for camera, where in bags.items()}
    assert all(data == recorded[camera][index] for _, camera, index, data in got)
    assert [(camera.name, data) for camera, data in first_images(cameras)] == [
        (name, recorded[camera][0]) for camera, name in enumerate(("front", "left", "right"))
    ]


def test_replay_refuses_cameras_it_could_not_tell_apart_or_feed_to_one_node(tmp_path):
    """A camera whose frames repeat a stamp (its answers could not be told apart), named; cameras of raw and
    compressed images (one node reads one input_transport)."""
    image = np.zeros((4, 4, 3), np.uint8)
    once = write_image_bag(tmp_path / "once", [image])
    twice = write_messages(tmp_path / "twice", [*read_messages(once, "/camera/image_raw")] * 2)
    with pytest.raises(
        BagError, match=r"image headers of camera back in .*twice:/camera/image_raw repeat their stamps"
    ):
        read_cameras(parse_cameras([f"front={once}", f"back={twice}"], once))
    packed = write_image_bag(tmp_path / "packed", [image], compressed="png")
    with pytest.raises(BagError, match="raw and compressed: one node reads one input_transport"):
        read_cameras(parse_cameras([f"front={once}", f"back={packed}"], once))


def test_a_generated_package_serves_several_cameras(tmp_path, monkeypatch):
    """A generated yolo package on ONNX Runtime, installed as colcon installs it and run as its own executable
    (nothing of vision_factory on its path), takes cameras too: each camera's answers are the offline pipeline's."""
    executable = generate_and_install("yolo", "onnx", "gen_multicam", tmp_path)
    model = pypi_model(*NUDENET_MODEL)
    photos = _photo_frames()
    frames = {"front": photos[:3], "back": [photos[4], photos[5]]}
    bags = {
        camera: write_image_bag(tmp_path / camera, camera_frames, fps=10, frame_id=camera)
        for camera, camera_frames in frames.items()
    }
    sources = parse_cameras([f"{camera}={bag}" for camera, bag in bags.items()], bags["front"])
    monkeypatch.setenv("PYTHONPATH", str(site_packages(tmp_path / "install")))
    result = replay(
        bags["front"],
        tmp_path / "out",
        "yolo",
        {"model_path": str(model)},
        executable=[str(executable)],
        cameras=sources,
    )
    assert result.missing_frames == {"front": [], "back": []}, open(result.node_log).read()
    values = family("yolo").values_from_model(model)
    pipeline = family("yolo").pipeline(values, lambda path: OnnxRunner.load(path, {}, LOG))
    for camera, camera_frames in frames.items():
        records = json.loads(Path(result.answers[camera]).read_text())
        for record, frame in zip(records, camera_frames, strict=True):
            ((_, expected),) = pipeline.push(frame)
            assert [d["class_name"] for d in record["detections"]] == list(expected.boxes.labels)
            xyxy = np.reshape([d["xyxy"] for d in record["detections"]], (-1, 4))
            assert np.allclose(xyxy, expected.boxes.xyxy, atol=1e-3)
    listening = next(line for line in open(result.node_log) if "listening on" in line)
    assert "/front/image, " in listening and "/back/image, publishing" in listening, listening
    assert "/front/detections, " in listening and listening.rstrip().endswith("/back/detections"), listening


def test_cameras_are_read_at_configure_and_each_has_its_debug_topics(tmp_path):
    """A node's cameras through its lifecycle: configured with [front, left] it answers each on its own topics and
    publishes each camera's latency and frame age on ~/debug/<camera>/; after cleanup, cameras set to [rear] and
    configured again, it answers rear alone (front's topic is no longer served)."""
    params = {"autostart": "false", "model_path": str(SHAPES_MODEL), "cameras": "[front, left]"}
    node = NodeProcess(tmp_path, {**params, "qos_reliability": "reliable"}, module="vision_factory.yolo_onnx_node")
    probe = Probe()
    frame = cv2.resize(_photo_frames()[0], (320, 240))
    try:
        lifecycle = Lifecycle(probe, "/t/yolo")
        answers = {camera: probe.subscribe(Detection2DArray, f"/t/{camera}/detections") for camera in ("front", "left")}
        images = {camera: probe.publisher(Image, f"/t/{camera}/image") for camera in CAMERAS_LIFE}
        debug = {
            (camera, name): probe.subscribe(Float64, f"/t/yolo/debug/{camera}/{name}")
            for camera in ("front", "left")
            for name in ("pipeline_latency_ms", "frame_age_ms")
        }
        assert lifecycle.set("configure") and lifecycle.set("activate"), node.log()
        listening = lambda *cameras: all(images[c].get_subscription_count() > 0 for c in cameras)  # noqa: E731
        assert probe.spin_until(lambda: listening("front", "left") and probe.matched(), PATIENCE_S), node.log()
        assert images["rear"].get_subscription_count() == 0
        for index, camera in enumerate(("front", "left", "front")):
            images[camera].publish(_message(frame, camera, 10 + index))
            answered = lambda count=index + 1: sum(map(len, answers.values())) >= count  # noqa: E731
            assert probe.spin_until(answered, PATIENCE_S), node.log()
        assert [m.header.stamp.sec for m in answers["front"]] == [10, 12]
        assert [m.header.stamp.sec for m in answers["left"]] == [11]
        # The ~/debug/ figures are on demand: a camera's frame goes again, stamped anew, until its answer and both
        # its figures came (the node may have handled its frames before its writers counted our readers).
        for camera, stamps in (("front", itertools.count(30)), ("left", itertools.count(60))):
            figures = {f"{camera}/{name}": debug[(camera, name)] for name in ("pipeline_latency_ms", "frame_age_ms")}

            def send(camera=camera, stamps=stamps) -> Header:
                message = _message(frame, camera, next(stamps))
                images[camera].publish(message)
                return message.header

            probe.answered(send, {f"/t/{camera}/detections": answers[camera], **figures}, node)

        assert lifecycle.set("deactivate") and lifecycle.set("cleanup"), node.log()
        parameters = AsyncParameterClient(probe.node, "/t/yolo")
        assert probe.spin_until(lambda: parameters.services_are_ready(), PATIENCE_S)
        changed = probe.answer(lambda: parameters.set_parameters([RosParameter("cameras", value=["rear"])]))
        assert changed.results[0].successful
        assert lifecycle.set("configure") and lifecycle.set("activate"), node.log()
        answers["rear"] = probe.subscribe(Detection2DArray, "/t/rear/detections")
        rear_reader = probe.subscriptions[-1]
        served = lambda: listening("rear") and not listening("front") and rear_reader.get_publisher_count() > 0  # noqa: E731
        assert probe.spin_until(served, PATIENCE_S), node.log()
        images["rear"].publish(_message(frame, "rear", 20))
        assert probe.spin_until(lambda: len(answers["rear"]) == 1, PATIENCE_S), node.log()
        assert answers["rear"][0].header.frame_id == "rear_optical"
        assert lifecycle.set("shutdown")
        assert node.wait() == 0
    finally:
        probe.close()
        node.stop()
    assert "Traceback" not in node.log()


CAMERAS_LIFE = ("front", "left", "rear")
