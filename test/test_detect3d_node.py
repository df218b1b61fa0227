"""detect_3d_node over real DDS: a probe publishes a scene's Detection2DArray, its depth (16UC1 and 32FC1, at the
colour image's size and at another with its own camera_info) and camera_info, and reads Detection3DArray and the
box markers; the 3D centres within 1 % of their range. Bad input (depth of another size without its camera_info,
an unsupported encoding, a camera_info without focal length) is refused, each kind logged once, counted in
/diagnostics, and never a traceback."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import Header
from support.depth_scenes import COLOUR, DEPTH, Flat, detections, encode, holes, render
from support.nodes import _latest
from support.ros_harness import PATIENCE_S, NodeProcess, Probe
from vision_msgs.msg import Detection2DArray, Detection3DArray
from visualization_msgs.msg import Marker, MarkerArray

from vision_factory.models.lift3d import Intrinsics
from vision_factory.results.boxes import Boxes
from vision_factory.results.masks import label_image

FRAME = "camera_color_optical_frame"
SCENE = [
    Flat("box", (-0.35, 0.12, 1.5), 0.4, 0.5),
    Flat("sign", (0.42, -0.21, 2.3), 0.3, 0.3),  # its depth is missing: no 3D box
    Flat("far", (0.05, 0.3, 3.2), 0.6, 0.2),
]
IDS = [7, 8, 9]  # track IDs, as a tracking detector's
STATUS = "detect_3d: inference"


def _header(stamp: int) -> Header:
    header = Header(frame_id=FRAME)
    header.stamp.sec, header.stamp.nanosec = 1000 + stamp, 250
    return header


def _info(camera: Intrinsics, stamp: int, focal: bool = True) -> CameraInfo:
    k = [camera.fx, 0.0, camera.cx, 0.0, camera.fy, camera.cy, 0.0, 0.0, 1.0] if focal else [0.0] * 9
    return CameraInfo(header=_header(stamp), width=camera.width, height=camera.height, k=k)


def _depth(camera: Intrinsics, encoding: str, stamp: int) -> Image:
    depth, _ = render(SCENE, camera)
    x1, y1, x2, y2 = SCENE[1].box(camera)
    depth[int(y1) : int(np.ceil(y2)), int(x1) : int(np.ceil(x2))] = np.nan
    depth = holes(depth, 0.25, seed=stamp)
    if encoding not in ("16UC1", "32FC1"):  # an image of another encoding: bytes of its size
        data, step = bytes(3 * camera.width * camera.height), 3 * camera.width
    else:
        data, step = encode(depth, encoding)
    return Image(
        header=_header(stamp), width=camera.width, height=camera.height, encoding=encoding, step=step, data=data
    )


class Scene:
    """The probe's side: publishers of the node's inputs, readers of its outputs and /diagnostics."""

    def __init__(self, probe: Probe):
        self.probe = probe
        self.answers = probe.subscribe(Detection3DArray, "/t/detections_3d")
        self.markers = probe.subscribe(MarkerArray, "/t/box_markers")
        self.diagnostics = probe.subscribe(DiagnosticArray, "/diagnostics")
        self.detections = probe.publisher(Detection2DArray, "/t/detections")
        self.depth = probe.publisher(Image, "/t/depth")
        self.info = probe.publisher(CameraInfo, "/t/camera_info")
        self.depth_info = probe.publisher(CameraInfo, "/t/depth_camera_info")
        self.stamps = itertools.count(1)
        self.drawn: list[MarkerArray] = []  # the box markers of each answer

    def ready(self) -> bool:
        publishers = (self.detections, self.depth, self.info, self.depth_info)
        return all(p.get_subscription_count() > 0 for p in publishers) and self.probe.matched()

    def send(
        self,
        camera: Intrinsics,
        encoding: str,
        info: CameraInfo | None = None,
        depth_info: bool = False,
        more: Boxes | None = None,
    ) -> int:
        """One frame: the camera_info(s) as a driver sends them with each frame, the depth, then the detections (and
        ``more`` after them, ids 100, 101, ...)."""
        stamp = next(self.stamps)
        self.info.publish(info or _info(COLOUR, stamp))
        if depth_info:
            self.depth_info.publish(_info(camera, stamp))
        self.depth.publish(_depth(camera, encoding, stamp))
        boxes = Boxes.join([detections(SCENE).boxes, more]) if more is not None else detections(SCENE).boxes
        ids = IDS + [100 + index for index in range(len(boxes) - len(IDS))]
        found = detections(SCENE).with_parts(boxes=boxes.tracked(ids))
        self.detections.publish(found.to_message(_header(stamp)))
        return stamp

    def answered(self, *frame, **given) -> Detection3DArray:
        """The answer to ``send(*frame, **given)``, sent again with a fresh stamp until it and its box markers of one
        stamp come: the node keeps the latest camera_info, which DDS may deliver after the first frame's depth and
        detections, and draws the markers (on demand) only once its writer counts our reader. The markers go to
        ``drawn``."""
        answers = {"/t/detections_3d": self.answers, "/t/box_markers": self.markers}
        _, answered = self.probe.answered(lambda: _header(self.send(*frame, **given)), answers)
        self.drawn.append(answered["/t/box_markers"])
        return answered["/t/detections_3d"]

    def problems(self, kind: str) -> int:
        status = _latest(self.diagnostics, STATUS)
        values = {value.key: value.value for value in status.values} if status else {}
        return int(values.get(f"problem: {kind}", 0))

    def refused(self, kind: str, *frame, **given) -> None:
        """Frames sent until the node has refused two of them as ``kind`` (its /diagnostics says so)."""
        for _ in range(int(PATIENCE_S / 2)):
            if self.problems(kind) >= 2:
                return
            self.send(*frame, **given)
            self.probe.spin_until(lambda: self.problems(kind) >= 2, 2.0)
        raise AssertionError(f"never refused as {kind}")


def _assert_exact(answer: Detection3DArray, stamp_sec: int | None = None) -> None:
    assert answer.header.frame_id == FRAME
    assert [d.id for d in answer.detections] == ["7", "9"]  # the sign has no depth: left out
    for detection, item in zip(answer.detections, (SCENE[0], SCENE[2])):
        position = detection.bbox.center.position
        found = np.array([position.x, position.y, position.z])
        assert np.linalg.norm(found - item.centre) <= 0.01 * np.linalg.norm(item.centre), (item.name, found)
        size = detection.bbox.size
        assert abs(size.x - item.width) <= 0.01 * item.width and abs(size.y - item.height) <= 0.01 * item.height
        assert detection.bbox.center.orientation.w == 1.0
        (result,) = detection.results
        assert result.hypothesis.class_id == item.name
        assert result.pose.pose.position.z == position.z
        assert detection.header == answer.header


def test_detections_in_3d_over_dds_and_bad_input_refused_once_per_kind(tmp_path):
    node = NodeProcess(tmp_path, {"qos_reliability": "reliable"}, module="vision_factory.detect_3d_node")
    probe = Probe()
    try:
        scene = Scene(probe)
        assert probe.spin_until(scene.ready, PATIENCE_S), node.log()
        # Depth registered to the colour image at its size: camera_info alone aligns them.
        _assert_exact(scene.answered(COLOUR, "16UC1"))
        # Depth of another size, and no camera_info of its own yet: refused.
        scene.refused("depth size without its camera_info", DEPTH, "16UC1")
        scene.refused("depth encoding", COLOUR, "rgb8")
        # With its depth_camera_info, both encodings.
        for encoding in ("16UC1", "32FC1"):
            _assert_exact(scene.answered(DEPTH, encoding, depth_info=True))
        for drawn in scene.drawn:  # each answer's box markers
            assert drawn.markers[0].action == Marker.DELETEALL
            cubes = [m for m in drawn.markers if m.type == Marker.CUBE]
            assert [round(m.pose.position.z, 3) for m in cubes] == [1.5, 3.2]
        bad = _info(COLOUR, 0, focal=False)
        scene.refused("camera_info without focal length", DEPTH, "32FC1", info=bad, depth_info=True)
        assert scene.problems("detection without depth") >= 3  # the sign, in every answered frame
    finally:
        probe.close()
        node.stop()
    log = node.log()
    assert "Traceback" not in log and "more characters" not in log  # every reason and fix in full
    for kind in ("depth size without its camera_info", "depth encoding", "camera_info without focal length"):
        assert log.count(f"({kind}):") == 1, kind  # the first of each kind, with its fix
    assert "no depth_camera_info says how they align" in log and "calibrate it" in log
    assert "16UC1 (millimetres) or 32FC1 (metres)" in log


def test_a_nan_or_infinite_box_costs_no_other_detection_its_3d_box(tmp_path):
    """Detections of a NaN and of an infinite box among the scene's: those get no 3D box, reported once by kind and
    counted; the others are lifted as ever (the whole frame was lost: math.ceil(nan) in lift)."""
    nan, inf = float("nan"), float("inf")
    bad = Boxes([(nan, 10, 50, 50), (10, 10, inf, 50)], [0.9, 0.8], [0, 0], ["ghost", "ghost"])
    node = NodeProcess(tmp_path, {"qos_reliability": "reliable"}, module="vision_factory.detect_3d_node")
    probe = Probe()
    try:
        scene = Scene(probe)
        assert probe.spin_until(scene.ready, PATIENCE_S), node.log()
        for encoding in ("16UC1", "32FC1"):
            _assert_exact(scene.answered(COLOUR, encoding, more=bad))
        assert probe.spin_until(lambda: scene.problems("non-finite box in detections") >= 2, PATIENCE_S)
        assert scene.problems("detection without depth") >= 2  # the sign, counted apart
    finally:
        probe.close()
        node.stop()
    log = node.log()
    assert "Traceback" not in log and log.count("(non-finite box in detections):") == 1, log
    assert "2 of 5 detections in detections with a NaN or infinite box: left out, the others kept; its publisher" in log


def _exact(answer: Detection3DArray) -> bool:
    try:
        _assert_exact(answer)
    except AssertionError:
        return False
    return True


def test_each_frame_is_lifted_with_the_camera_info_of_its_own_stamp(tmp_path):
    """The colour camera zooms between two frames: the camera_infos of both stamps (different focal lengths) come
    before either frame's depth and detections; each frame is lifted with the camera_info of its stamp (with the
    newest for both, the first frame's boxes would be off by the zoom)."""
    zoomed = Intrinsics(fx=1.5 * COLOUR.fx, fy=1.5 * COLOUR.fy, cx=COLOUR.cx, cy=COLOUR.cy, width=640, height=480)
    node = NodeProcess(tmp_path, {"qos_reliability": "reliable"}, module="vision_factory.detect_3d_node")
    probe = Probe()
    try:
        scene = Scene(probe)
        assert probe.spin_until(scene.ready, PATIENCE_S), node.log()

        def send(stamp: int, camera: Intrinsics) -> None:
            scene.depth.publish(_depth(camera, "32FC1", stamp))
            found = detections(SCENE)
            boxes = replace(found.boxes, xyxy=[item.box(camera) for item in SCENE]).tracked(IDS)
            scene.detections.publish(found.with_parts(boxes=boxes).to_message(_header(stamp)))

        cameras = {1: COLOUR, 2: zoomed}  # the camera_info of each stamp

        def both_received() -> bool:
            """Whether a zoomed frame of a stamp of neither (500, 501, ...) was lifted exactly, with the newest
            camera_info: camera_info is reliable and in order, so the first came before it (known without a sleep)."""
            return any(a.header.stamp.sec >= 1500 and _exact(a) for a in scene.answers)

        for index in range(int(PATIENCE_S / 5)):
            for stamp, camera in cameras.items():
                scene.info.publish(_info(camera, stamp))
            send(500 + index, zoomed)
            if probe.spin_until(both_received, 5.0):
                break
        assert both_received(), node.log()
        for stamp, camera in cameras.items():
            send(stamp, camera)
        answered = lambda: {1001, 1002} <= {a.header.stamp.sec for a in scene.answers}  # noqa: E731
        assert probe.spin_until(answered, PATIENCE_S), node.log()
        for stamp in cameras:
            _assert_exact(next(a for a in scene.answers if a.header.stamp.sec == 1000 + stamp))
    finally:
        probe.close()
        node.stop()


def test_the_launch_file_declares_the_topics_and_starts_the_node_as_autostart_says():
    import importlib.util
    from pathlib import Path
    from types import SimpleNamespace

    path = Path(__file__).resolve().parent.parent / "launch" / "detect_3d.launch.py"
    spec = importlib.util.spec_from_file_location("detect_3d_launch", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # The node's own subscriptions, each remapped by an argument.
    assert [topic for topic, *_ in module.TOPICS] == ["detections", "depth", "camera_info", "depth_camera_info"]
    actions = pytest.importorskip("launch_ros.actions", reason="launch_ros has no PyPI wheel: runs where ROS 2 is")
    arguments = {a.name: a for a in module.generate_launch_description().get_launch_arguments()}
    topics = ("detections_topic", "depth_topic", "camera_info_topic", "depth_camera_info_topic")
    assert set(topics) | {"namespace", "autostart", "input_transport"} == set(arguments)
    values = {name: "".join(str(part.text) for part in a.default_value) for name, a in arguments.items()}
    (started,) = module._start_node(SimpleNamespace(launch_configurations=values))
    assert type(started) is actions.Node and started.node_executable == "detect_3d_node"
    (waiting,) = module._start_node(SimpleNamespace(launch_configurations={**values, "autostart": "false"}))
    assert isinstance(waiting, actions.LifecycleNode)


def test_with_use_masks_each_detection_is_measured_under_its_mask(tmp_path):
    """A ring whose box core is its hole (the wall behind, 4 m): with the segmentation node's instance label image on
    masks (mono16, label 1 the first detection), its 3D box is the ring's, at 1.2 m; masks of another size are
    refused."""
    ring = Flat("ring", (0.1, -0.05, 1.2), 0.4, 0.4, inner=0.14)
    params = {"qos_reliability": "reliable", "use_masks": "true"}
    node = NodeProcess(tmp_path, params, module="vision_factory.detect_3d_node")
    probe = Probe()
    try:
        answers = probe.subscribe(Detection3DArray, "/t/detections_3d")
        diagnostics = probe.subscribe(DiagnosticArray, "/diagnostics")
        publishers = {
            name: probe.publisher(kind, f"/t/{name}")
            for name, kind in (
                ("detections", Detection2DArray),
                ("depth", Image),
                ("camera_info", CameraInfo),
                ("depth_camera_info", CameraInfo),
                ("masks", Image),
            )
        }
        ready = lambda: all(p.get_subscription_count() > 0 for p in publishers.values()) and probe.matched()  # noqa: E731
        assert probe.spin_until(ready, PATIENCE_S), node.log()
        depth, _ = render([ring], DEPTH)
        found = detections([ring], masks=True)
        found = found.with_parts(boxes=found.boxes.tracked([4]))
        labels = label_image(found.masks.masks, (COLOUR.height, COLOUR.width))

        def send(stamp: int, mask_size: Intrinsics = COLOUR) -> None:
            publishers["camera_info"].publish(_info(COLOUR, stamp))
            publishers["depth_camera_info"].publish(_info(DEPTH, stamp))
            data, step = encode(depth, "32FC1")
            depth_msg = Image(header=_header(stamp), width=DEPTH.width, height=DEPTH.height, encoding="32FC1")
            depth_msg.step, depth_msg.data = step, data
            publishers["depth"].publish(depth_msg)
            publishers["detections"].publish(found.to_message(_header(stamp)))
            shown = labels[: mask_size.height, : mask_size.width]
            publishers["masks"].publish(
                Image(
                    header=_header(stamp),
                    width=shown.shape[1],
                    height=shown.shape[0],
                    encoding="mono16",
                    step=2 * shown.shape[1],
                    data=np.ascontiguousarray(shown).astype("<u2").tobytes(),
                )
            )

        for stamp in range(1, int(PATIENCE_S / 5)):  # again until the node has the camera_infos (see Scene.answered)
            send(stamp)
            if probe.spin_until(lambda stamp=stamp: any(a.header.stamp.sec == 1000 + stamp for a in answers), 5.0):
                break
        (detection,) = answers[-1].detections
        position = detection.bbox.center.position
        found_centre = np.array([position.x, position.y, position.z])
        assert np.linalg.norm(found_centre - ring.centre) <= 0.01 * np.linalg.norm(ring.centre), found_centre
        assert detection.id == "4"
        small = Intrinsics(COLOUR.fx, COLOUR.fy, COLOUR.cx, COLOUR.cy, 320, 240)
        for stamp in range(100, 102):
            send(stamp, small)

        def refused() -> bool:
            status = _latest(diagnostics, STATUS)
            return status is not None and any(v.key == "problem: masks size" and v.value == "2" for v in status.values)

        assert probe.spin_until(refused, PATIENCE_S), node.log()
    finally:
        probe.close()
        node.stop()
    log = node.log()
    assert "Traceback" not in log and log.count("(masks size):") == 1


def test_a_vision_msgs_built_before_the_3d_messages_is_named_with_the_rebuild(tmp_path):
    """An environment whose vision_msgs was built from the older subset (2D only), stood in for by a package of
    those names: the node says to rebuild it, without a traceback."""
    old = tmp_path / "vision_msgs"
    (old / "msg").mkdir(parents=True)
    (old / "__init__.py").write_text("")
    (old / "msg" / "__init__.py").write_text(
        "".join(f"class {name}:\n    pass\n" for name in ("Detection2DArray", "ObjectHypothesisWithPose"))
    )
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "vision_factory.detect_3d_node"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=PATIENCE_S,
    )
    assert done.returncode == 1
    assert "vision-factory install-vision-msgs --force" in done.stderr and "Traceback" not in done.stderr
