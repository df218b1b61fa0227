"""The depth family (families/depth.py, models/depth.py, ros/depth_node.py) on architecture-true Depth Anything
exports (test/data/depth/, made by benchmarks/make_depth_models.py with transformers' own classes): recognition,
the maps against transformers' own depth pipeline, the refusal of a file that does not say metric or relative, and
the node over real DDS (REP-118 metres, relative depth, camera_info, points). Real ONNX Runtime sessions."""

from __future__ import annotations

import itertools
import json
import logging
from pathlib import Path

import cv2
import numpy as np
import onnx
import pytest
import skimage.data
from builtin_interfaces.msg import Time
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import CameraInfo, Image, PointCloud2, PointField
from std_msgs.msg import Header
from support.cli import run_cli
from support.ros_harness import PATIENCE_S, NodeProcess, Probe

from vision_factory.cli import main
from vision_factory.families.registry import family
from vision_factory.models.model_file import recognise, summarize
from vision_factory.results.dense import DenseMap, depth_metrics
from vision_factory.ros.depth_node import point_cloud
from vision_factory.ros.messages import bgr_to_message
from vision_factory.runtime.onnx_runner import OnnxRunner
from vision_factory.tools.bags import read_framed, read_messages
from vision_factory.tools.bench import measure
from vision_factory.tools.replay import replay

DATA = Path(__file__).resolve().parent / "data" / "depth"
REFERENCE = json.loads((DATA / "reference.json").read_text())
RELATIVE = DATA / "depth-anything-relative.onnx"  # metadata: model_type, depth_kind relative, image_size 70x70
METRIC = DATA / "depth-anything-metric.onnx"  # no metadata, as Optimum's exports
ZOEDEPTH = DATA / "zoedepth-metric.onnx"  # metadata: model_type zoedepth, image_size 96x128 (no depth_kind)
LOG = logging.getLogger("test")


def _load(path):
    return OnnxRunner.load(path, {}, LOG)


def _values(model: Path, **given) -> dict:
    from vision_factory.parameters import with_defaults

    spec = family("depth")
    return with_defaults(spec.parameters, {"model_path": str(model), **given}, "depth")


def _frame(name: str) -> np.ndarray:
    return np.ascontiguousarray(getattr(skimage.data, name)()[..., ::-1])  # BGR, as a node's frame


def test_depth_anything_exports_are_recognised_from_their_output_and_metadata():
    relative = recognise(summarize(RELATIVE))
    assert relative.family == "depth", relative.reason
    assert relative.details["depth_kind"] == "relative" and relative.details["image_size"] == (70, 70)
    metric = recognise(summarize(METRIC))
    assert metric.family == "depth" and metric.details["depth_kind"] is None, metric.reason
    assert "no depth_kind" in metric.reason


def _map_model(path: Path, output: str, shape: list, metadata: dict | None = None) -> Path:
    """A model of one image in and one map out (the map: the image's mean), named and shaped as asked."""
    nodes = [helper.make_node("ReduceMean", ["image", "axes"], [output], keepdims=1)]
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    if len(shape) == 3:
        nodes = [
            helper.make_node("ReduceMean", ["image", "axes"], ["mean"], keepdims=0),
        ]
        nodes.append(helper.make_node("Identity", ["mean"], [output]))
    graph = helper.make_graph(
        nodes,
        "map",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, *shape[-2:]])],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, shape)],
        [axes],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    if metadata:
        helper.set_model_props(model, metadata)
    onnx.save(model, path)
    return path


def test_a_map_without_depths_name_or_metadata_is_not_called_depth_nor_tracknet(tmp_path):
    """One [1, 1, 288, 512] or [1, 288, 512] map out is any per-pixel model's (TrackNet's size, seq_len 1): without
    the name predicted_depth or depth metadata it is not depth (nor TrackNet); with them it is depth, even where
    YOLO's rule would read [1, 288, 512] as rows."""
    for shape in ([1, 1, 288, 512], [1, 288, 512]):
        plain = _map_model(tmp_path / f"plain{len(shape)}.onnx", "map", shape)
        assert recognise(summarize(plain)).family not in ("depth", "tracknet")
        named = _map_model(tmp_path / f"named{len(shape)}.onnx", "predicted_depth", shape)
        assert recognise(summarize(named)).family == "depth"
    tagged = _map_model(tmp_path / "tagged.onnx", "out", [1, 1, 288, 512], {"depth_kind": "metric"})
    assert recognise(summarize(tagged)).family == "depth"


@pytest.mark.parametrize(
    "model", sorted(name for name, made in REFERENCE["models"].items() if made["processor"].startswith("DPT"))
)
def test_maps_match_transformers_depth_pipeline(model):
    """Our pre-processing (PIL bicubic, keep aspect, multiple of 14, ImageNet mean/std), the model and the bicubic
    resize back (post_process_depth_estimation) against transformers' pipeline: within 1e-5 of the map's range with
    its PIL backend; with its default torchvision backend, whose 8-bit resize differs from PIL's by one level in a
    few pixels (37 of 23520 values for chelsea), within 1e-3 of the range."""
    recorded = REFERENCE["models"][model]
    kind = recorded["config"]["depth_kind"]
    says = "depth_kind" in recorded["metadata"]  # else, as Optimum's exports, the node is told
    given = {} if says else {"depth_kind": kind, "processor_size": "70x70"}
    estimator = family("depth").pipeline(_values(DATA / model, **given), _load).model
    assert estimator.depth_kind == kind and estimator.unit == ("m" if kind == "metric" else "relative")
    for frames, tolerance in (("frames_pil", 1e-5), ("frames", 1e-3)):
        for frame in recorded[frames]:
            image = _frame(frame["image"])
            assert list(estimator.prepare(image).shape) == frame["model_input"]
            found = estimator.infer(image).dense
            assert found.values.shape == tuple(frame["size"]) and found.values.dtype == np.float32
            expected = np.load(DATA / frame["depth"])
            stride = frame["stride"]
            sampled = found.values[::stride, ::stride]
            span = frame["max"] - frame["min"]
            assert np.abs(sampled - expected).max() <= tolerance * span, (frames, frame["image"])


@pytest.mark.parametrize(
    "model", sorted(name for name, made in REFERENCE["models"].items() if made["processor"].startswith("DPT"))
)
def test_the_fast_resize_filter_stays_near_transformers_maps(model):
    """resize_filter fast (OpenCV's filters in place of the processor's antialiased bicubic: the area filter for
    these frames shrunk 4x, bilinear for a 1280x720 frame shrunk 1.4x): a different 8-bit input, whose maps stay
    near transformers' (measured on these random-weight models, which amplify input differences more than trained
    ones: at most 2 % of the map's range, 0.3 % on average)."""
    recorded = REFERENCE["models"][model]
    says = "depth_kind" in recorded["metadata"]
    given = {} if says else {"depth_kind": recorded["config"]["depth_kind"], "processor_size": "70x70"}
    exact = family("depth").pipeline(_values(DATA / model, **given), _load).model
    fast = family("depth").pipeline(_values(DATA / model, resize_filter="fast", **given), _load).model
    for frame in recorded["frames_pil"]:
        image = _frame(frame["image"])
        assert not np.array_equal(fast.prepare(image), exact.prepare(image))  # the other filter ran
        found = fast.infer(image).dense
        assert found.values.shape == tuple(frame["size"])
        difference = np.abs(found.values[:: frame["stride"], :: frame["stride"]] - np.load(DATA / frame["depth"]))
        span = frame["max"] - frame["min"]
        assert difference.max() <= 0.05 * span and difference.mean() <= 0.005 * span, (frame["image"], span)
    # A camera's 1280x720 frame at Depth Anything's own size (518: shrunk 1.4x, OpenCV's bilinear) against exact's
    # maps (transformers', the test above): at most 4 % of the range here, 0.14 % on average
    given = {**given, "processor_size": "518x518", "depth_kind": recorded["config"]["depth_kind"]}
    exact = family("depth").pipeline(_values(DATA / model, **given), _load).model
    fast = family("depth").pipeline(_values(DATA / model, resize_filter="fast", **given), _load).model
    frame = cv2.resize(_frame("coffee"), (1280, 720), interpolation=cv2.INTER_AREA)
    expected, found = exact.infer(frame).dense.values, fast.infer(frame).dense.values
    span = np.nanmax(expected) - np.nanmin(expected)
    difference = np.abs(found - expected)
    assert np.nanmax(difference) <= 0.06 * span and np.nanmean(difference) <= 0.004 * span


@pytest.mark.parametrize("frame_id", ["", "c", "abc", "camera_optical", "caméra/é"])
def test_a_maps_serialized_message_is_rclpys_to_the_field(frame_id):
    """to_cdr (what depth_node publishes: the map's bytes copied once) reads back, with rclpy's own deserializer,
    as to_message's Image, and is as long as rclpy's serialization of it (the padding before each field, as CDR
    aligns it; rclpy leaves the padding's bytes as they were, so the bytes are compared field by field)."""
    rng = np.random.default_rng(3)
    for sec, shape in ((0, (1, 1)), (-7, (3, 5)), (2**31 - 1, (720, 1280))):
        header = Header(stamp=Time(sec=sec, nanosec=999_999_999), frame_id=frame_id)
        result = DenseMap(rng.normal(size=shape).astype(np.float32), "m", "depth")
        result.values[0, 0] = np.nan
        serialized, message = result.to_cdr(header), result.to_message(header)
        assert len(serialized) == len(serialize_message(message))
        read = deserialize_message(serialized, Image)
        assert read.header == header and read.encoding == "32FC1" and read.step == 4 * shape[1]
        assert np.array_equal(DenseMap.from_message(read, "m", "depth").values, result.values, equal_nan=True)


def test_the_point_cloud_reads_back_with_rclpy_as_the_pinhole_points_of_the_map():
    """depth_node's cloud, serialized by itself (images.xyz_cloud_cdr): rclpy's deserializer reads an organised
    PointCloud2 of x, y, z float32 fields whose points are (u - cx) z / fx, (v - cy) z / fy, z, NaN where the depth
    is, as long as rclpy's own serialization of that message."""
    rng = np.random.default_rng(5)
    depth = rng.uniform(0.5, 8.0, (48, 64)).astype(np.float32)
    depth[3, 7] = np.nan
    info = CameraInfo(width=64, height=48, k=[50.0, 0, 31.5, 0, 55.0, 23.5, 0, 0, 1])
    header = Header(stamp=Time(sec=12, nanosec=34), frame_id="camera_optical")
    cloud = deserialize_message(point_cloud(header, depth, info), PointCloud2)
    assert cloud.header == header and (cloud.height, cloud.width) == (48, 64)
    assert [(f.name, f.offset, f.datatype, f.count) for f in cloud.fields] == [
        ("x", 0, PointField.FLOAT32, 1),
        ("y", 4, PointField.FLOAT32, 1),
        ("z", 8, PointField.FLOAT32, 1),
    ]
    assert (cloud.point_step, cloud.row_step, cloud.is_bigendian, cloud.is_dense) == (12, 12 * 64, False, False)
    points = np.frombuffer(bytes(cloud.data), "<f4").reshape(48, 64, 3)
    v, u = np.mgrid[0:48, 0:64]
    assert np.allclose(points[..., 0], (u - 31.5) * depth / 50.0, rtol=1e-6, equal_nan=True)
    assert np.allclose(points[..., 1], (v - 23.5) * depth / 55.0, rtol=1e-6, equal_nan=True)
    assert np.array_equal(points[..., 2], depth, equal_nan=True)
    assert len(point_cloud(header, depth, info)) == len(serialize_message(cloud))


def _within(values: np.ndarray, frame: dict, bound: float) -> bool:
    """``values`` (a whole map) on the reference's grid within ``bound`` of the reference's range of it."""
    expected = np.load(DATA / frame["depth"])
    sampled = values[:: frame["stride"], :: frame["stride"]]
    return sampled.shape == expected.shape and np.abs(sampled - expected).max() <= bound * (frame["max"] - frame["min"])


def test_zoedepth_is_recognised_as_metric_and_its_maps_match_transformers_depth_pipeline():
    """A ZoeDepth export (BEiT backbone, metric bins head; metadata model_type zoedepth, no depth_kind): metric, as
    the architecture is; its maps (reflection padding, keep aspect to a multiple of 32, bilinear with align_corners,
    mean and std 0.5; the map resized to the padded frame, the padding cut off) within 1e-4 of the range of
    transformers' pipeline's (ZoeDepthImageProcessor, one pass: no flipped second pass). Told relative, refused."""
    found = recognise(summarize(ZOEDEPTH))
    assert found.family == "depth" and found.details["model_type"] == "zoedepth", found.reason
    assert found.details["depth_kind"] == "metric" and found.details["image_size"] == (96, 128), found.reason
    estimator = family("depth").pipeline(_values(ZOEDEPTH), _load).model
    assert estimator.depth_kind == "metric" and estimator.unit == "m"
    for frame in REFERENCE["models"][ZOEDEPTH.name]["frames"]:
        image = _frame(frame["image"])
        assert list(estimator.prepare(image).shape) == frame["model_input"]
        found = estimator.infer(image).dense.values
        assert found.shape == tuple(frame["size"]) and found.dtype == np.float32
        assert _within(found, frame, 1e-4), frame["image"]
    with pytest.raises(ValueError, match="zoedepth model's depth is metric only"):
        family("depth").pipeline(_values(ZOEDEPTH, depth_kind="relative"), _load)


def test_a_model_that_does_not_say_metric_or_relative_is_refused_without_depth_kind():
    with pytest.raises(ValueError, match="does not say whether its depth is metric .* set depth_kind"):
        family("depth").pipeline(_values(METRIC), _load)


def test_metric_depth_beyond_max_depth_is_nan():
    estimator = (
        family("depth")
        .pipeline(_values(METRIC, depth_kind="metric", processor_size="70x70", max_depth=6.0), _load)
        .model
    )
    found = estimator.infer(_frame("chelsea")).dense.values
    unlimited = family("depth").pipeline(_values(METRIC, depth_kind="metric", processor_size="70x70"), _load).model
    full = unlimited.infer(_frame("chelsea")).dense.values
    assert np.isfinite(full).all() and (full > 6).any() and (full <= 6).any()
    assert np.array_equal(np.isnan(found), full > 6)
    assert np.array_equal(found[full <= 6], full[full <= 6])


def _camera_info(width: int, height: int, header, focal: float = 0.9) -> CameraInfo:
    fx, fy, cx, cy = focal * width, (focal - 0.1) * width, width / 2 + 3, height / 2 - 5
    return CameraInfo(
        header=header,
        width=width,
        height=height,
        distortion_model="plumb_bob",
        d=[0.0] * 5,
        k=[fx, 0.0, cx, 0.0, fy, cy, 0.0, 0.0, 1.0],
        r=[1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
        p=[fx, 0.0, cx, 0.0, 0.0, fy, cy, 0.0, 0.0, 0.0, 1.0, 0.0],
    )


def _run_depth_node(tmp_path, params: dict, image: np.ndarray, map_topic: str):
    """The node started on ``params``; a camera_info of twice the image's size and the image published (again,
    stamped anew, until the node has answered one on ``map_topic``, depth/camera_info and, for metres, the
    on-demand points). Those answers of one stamp (by topic), everything on points and on the other map topic,
    and the node's log."""
    node = NodeProcess(tmp_path, {**params, "qos_reliability": "reliable"}, module="vision_factory.depth_onnx_node")
    probe = Probe()
    try:
        other = "/t/depth" if map_topic != "/t/depth" else "/t/relative_depth"
        wrong, clouds = probe.subscribe(Image, other), probe.subscribe(PointCloud2, "/t/points")
        answers = {map_topic: probe.subscribe(Image, map_topic)}
        answers["/t/depth/camera_info"] = probe.subscribe(CameraInfo, "/t/depth/camera_info")
        if "relative" not in map_topic:
            answers["/t/points"] = clouds
        images, info_publisher = probe.publisher(Image, "/t/image"), probe.publisher(CameraInfo, "/t/camera_info")
        ready = lambda: images.get_subscription_count() > 0 and info_publisher.get_subscription_count() > 0  # noqa: E731
        assert probe.spin_until(lambda: ready() and probe.matched(), PATIENCE_S), node.log()
        height, width = image.shape[:2]
        stamps = itertools.count(100)

        def send() -> Header:  # the camera_info first: the node pairs a frame with the latest it has
            header = Header(stamp=Time(sec=next(stamps)), frame_id="camera_optical")
            info_publisher.publish(_camera_info(2 * width, 2 * height, header))
            probe.spin_until(lambda: False, 0.2)
            images.publish(bgr_to_message(image, header))
            return header

        header, answered = probe.answered(send, answers, node)
        probe.spin_until(lambda: False, 0.5)
    finally:
        probe.close()
        node.stop()
    assert all(message.header.stamp == header.stamp for message in answered.values())
    return answered, clouds, wrong, node.log()


def test_depth_node_publishes_rep118_metres_its_camera_info_and_points(tmp_path):
    """A metric model: depth 32FC1 metres with the image's header (transformers' map), depth/camera_info the input's
    scaled to the map's size, points the pinhole back-projection of the map; nothing on relative_depth."""
    image = _frame("chelsea")
    params = {"model_path": str(METRIC), "depth_kind": "metric", "processor_size": "70x70"}
    params["camera_info"] = "true"
    answered, _, wrong, log = _run_depth_node(tmp_path, {**params}, image, "/t/depth")
    assert not wrong, log
    message, info, cloud = answered["/t/depth"], answered["/t/depth/camera_info"], answered["/t/points"]
    assert message.encoding == "32FC1" and message.header.frame_id == "camera_optical"
    assert (message.height, message.width) == image.shape[:2]
    depth = DenseMap.from_message(message, "m", "depth").values
    frame = REFERENCE["models"][METRIC.name]["frames_pil"][0]
    expected = np.load(DATA / frame["depth"])
    assert np.abs(depth[:: frame["stride"], :: frame["stride"]] - expected).max() <= 1e-5 * (
        frame["max"] - frame["min"]
    )
    height, width = image.shape[:2]
    fx, fy, cx, cy = 0.9 * 2 * width / 2, 0.8 * 2 * width / 2, (width + 3) / 2, (height - 5) / 2
    assert (info.width, info.height) == (width, height)
    assert np.allclose(np.array(info.k).reshape(3, 3)[:2], [[fx, 0, cx], [0, fy, cy]])
    points = np.frombuffer(bytes(cloud.data), "<f4").reshape(height, width, 3)
    v, u = np.mgrid[0:height, 0:width]
    assert np.allclose(points[..., 2], depth)
    assert np.allclose(points[..., 0], (u - cx) * depth / fx, rtol=1e-5, atol=1e-5)
    assert np.allclose(points[..., 1], (v - cy) * depth / fy, rtol=1e-5, atol=1e-5)


def test_depth_node_refuses_a_camera_info_that_cannot_place_a_pixel_and_sends_no_points_from_it(tmp_path):
    """A camera_info of focal lengths 0 (an uncalibrated camera), then one of an infinite principal point: the cloud
    from them had x, y inf or NaN and numpy's RuntimeWarnings reached the log. Each is refused once by kind, naming
    the camera_info topic, as detect_3d_node refuses it; the maps are still published, no depth/camera_info or
    points from them."""
    image = _frame("coffee")
    height, width = image.shape[:2]
    params = {"model_path": str(METRIC), "depth_kind": "metric", "processor_size": "70x70"}
    node = NodeProcess(tmp_path, {**params, "qos_reliability": "reliable"}, module="vision_factory.depth_onnx_node")
    probe = Probe()
    try:
        maps, infos = probe.subscribe(Image, "/t/depth"), probe.subscribe(CameraInfo, "/t/depth/camera_info")
        clouds = probe.subscribe(PointCloud2, "/t/points")
        images, info_publisher = probe.publisher(Image, "/t/image"), probe.publisher(CameraInfo, "/t/camera_info")
        ready = lambda: images.get_subscription_count() > 0 and info_publisher.get_subscription_count() > 0  # noqa: E731
        assert probe.spin_until(lambda: ready() and probe.matched(), PATIENCE_S), node.log()
        stamps = itertools.count(100)
        inf = float("inf")
        bad = {
            "/t/camera_info without focal length": [0.0] * 9,
            "/t/camera_info without principal point": [500.0, 0.0, inf, 0.0, 500.0, 200.0, 0.0, 0.0, 1.0],
        }
        for kind, k in bad.items():
            for _ in range(int(PATIENCE_S / 2)):  # until the node has refused it: camera_info may come after an image
                header = Header(stamp=Time(sec=next(stamps)), frame_id="camera_optical")
                info = _camera_info(width, height, header)
                info.k = k
                info_publisher.publish(info)
                probe.spin_until(lambda: False, 0.2)
                images.publish(bgr_to_message(image, header))
                if probe.spin_until(lambda kind=kind: f"({kind}):" in node.log(), 2.0):
                    break
            assert f"({kind}):" in node.log(), node.log()
        assert probe.spin_until(lambda: len(maps) >= 2, PATIENCE_S), node.log()
        probe.spin_until(lambda: False, 1.0)
    finally:
        probe.close()
        node.stop()
    log = node.log()
    assert not clouds and not infos, log
    assert "RuntimeWarning" not in log and "Traceback" not in log
    for kind in bad:
        assert log.count(f"({kind}):") == 1, log
    assert "/t/camera_info's K has focal lengths fx 0, fy 0: the camera is not calibrated" in log
    assert "/t/camera_info's K has a NaN or infinite value (cx inf, cy 200)" in log and "more characters" not in log


def _scaled_k(info: CameraInfo, width: int, height: int) -> np.ndarray:
    """The first two rows of ``info``'s K for an image of ``width`` x ``height``: focal lengths and principal point
    scaled by the sizes' ratios."""
    k = np.array(info.k, np.float64).reshape(3, 3)[:2]
    return k * np.array([[width / info.width], [height / info.height]])


def _assert_points(cloud: PointCloud2, depth: np.ndarray, k: np.ndarray) -> None:
    """``cloud`` is ``depth`` back-projected through the pinhole of K's rows ``k``."""
    (fx, _, cx), (_, fy, cy) = k
    height, width = depth.shape
    assert (cloud.height, cloud.width) == (height, width)
    points = np.frombuffer(bytes(cloud.data), "<f4").reshape(height, width, 3)
    v, u = np.mgrid[0:height, 0:width]
    assert np.allclose(points[..., 2], depth)
    assert np.allclose(points[..., 0], (u - cx) * depth / fx, rtol=1e-5, atol=1e-5)
    assert np.allclose(points[..., 1], (v - cy) * depth / fy, rtol=1e-5, atol=1e-5)


def test_with_cameras_each_cameras_maps_carry_its_own_camera_info_and_points(tmp_path):
    """Two cameras of different image sizes and intrinsics (front's camera_info of twice its image's size, rig/left's
    of its size and another focal length) on one node: each camera's depth/camera_info is its own camera_info scaled
    to its maps, and its points are its maps back-projected through that; never the other camera's."""
    images = {"front": _frame("chelsea"), "rig/left": _frame("coffee")}  # 451x300 and 600x400
    sizes = {"front": 2, "rig/left": 1}  # the camera_info's size, in image sizes
    focal = {"front": 0.9, "rig/left": 0.5}
    params = {"model_path": str(METRIC), "depth_kind": "metric", "processor_size": "70x70"}
    params |= {"cameras": "[front, rig/left]", "qos_reliability": "reliable"}
    node = NodeProcess(tmp_path, params, module="vision_factory.depth_onnx_node")
    probe = Probe()
    try:
        maps = {camera: probe.subscribe(Image, f"/t/{camera}/depth", late=True) for camera in images}
        infos = {camera: probe.subscribe(CameraInfo, f"/t/{camera}/depth/camera_info", late=True) for camera in images}
        clouds = {camera: probe.subscribe(PointCloud2, f"/t/{camera}/points") for camera in images}
        publishers = {camera: probe.publisher(Image, f"/t/{camera}/image") for camera in images}
        info_publishers = {camera: probe.publisher(CameraInfo, f"/t/{camera}/camera_info") for camera in images}
        ready = lambda: all(  # noqa: E731
            p.get_subscription_count() > 0 for p in (*publishers.values(), *info_publishers.values())
        )
        assert probe.spin_until(lambda: ready() and probe.matched(), PATIENCE_S), node.log()
        done = lambda: all(maps[c] and infos[c] and clouds[c] for c in images)  # noqa: E731
        for index in range(20):  # again until each camera's points came (published only once the node sees us)
            for camera, image in images.items():
                height, width = image.shape[:2]
                header = Header(stamp=Time(sec=100 + index), frame_id=f"{camera.replace('/', '_')}_optical")
                size = sizes[camera]
                info_publishers[camera].publish(_camera_info(size * width, size * height, header, focal[camera]))
                probe.spin_until(lambda: False, 0.2)
                publishers[camera].publish(bgr_to_message(image, header))
            if probe.spin_until(done, PATIENCE_S / 10):
                break
        assert done(), node.log()
    finally:
        probe.close()
        node.stop()
    for camera, image in images.items():
        height, width = image.shape[:2]
        cloud = clouds[camera][-1]
        message = next(m for m in maps[camera] if m.header.stamp == cloud.header.stamp)
        info = next(i for i in infos[camera] if i.header.stamp == cloud.header.stamp)
        assert info.header.frame_id == message.header.frame_id == f"{camera.replace('/', '_')}_optical"
        assert (info.width, info.height) == (width, height)
        size, f = sizes[camera], focal[camera]
        fx, fy, cx, cy = f * width, (f - 0.1) * width, width / 2 + 3 / size, height / 2 - 5 / size  # at its size
        expected = np.array([[fx, 0, cx], [0, fy, cy]])
        assert np.allclose(np.array(info.k).reshape(3, 3)[:2], expected), camera
        _assert_points(cloud, DenseMap.from_message(message, "m", "depth").values, expected)


def _stamp(message) -> tuple[int, int]:
    return message.header.stamp.sec, message.header.stamp.nanosec


def test_each_map_carries_the_camera_info_of_its_own_stamp(tmp_path):
    """Two camera_infos of different intrinsics and stamps, both received before the two images of those stamps:
    each image's depth/camera_info is the one of its stamp (not the newest for both), scaled to the map."""
    image = _frame("coffee")
    height, width = image.shape[:2]
    params = {"model_path": str(RELATIVE), "qos_reliability": "reliable", "queue_size": "4"}
    node = NodeProcess(tmp_path, params, module="vision_factory.depth_onnx_node")
    probe = Probe()
    try:
        infos = probe.subscribe(CameraInfo, "/t/depth/camera_info")
        images, info_publisher = probe.publisher(Image, "/t/image"), probe.publisher(CameraInfo, "/t/camera_info")
        ready = lambda: images.get_subscription_count() > 0 and info_publisher.get_subscription_count() > 0  # noqa: E731
        assert probe.spin_until(lambda: ready() and probe.matched(), PATIENCE_S), node.log()
        headers = [Header(stamp=Time(sec=200 + n), frame_id="camera_optical") for n in (0, 1)]
        sent = {
            _stamp(info): info
            for info in (_camera_info(2 * width, 2 * height, h, focal) for h, focal in zip(headers, (0.9, 0.5)))
        }
        second = _scaled_k(sent[(201, 0)], width, height)

        def both_received() -> bool:
            """Whether an image of a stamp of neither (300, 301, ...) was answered with the second camera_info, the
            newest: camera_info is reliable and in order, so the first came before it (known without a sleep)."""
            return any(
                i.header.stamp.sec >= 300 and np.allclose(np.array(i.k).reshape(3, 3)[:2], second) for i in infos
            )

        for index in range(int(PATIENCE_S / 5)):
            for info in sent.values():
                info_publisher.publish(info)
            images.publish(bgr_to_message(image, Header(stamp=Time(sec=300 + index), frame_id="camera_optical")))
            if probe.spin_until(both_received, 5.0):
                break
        assert both_received(), node.log()
        for header in headers:
            images.publish(bgr_to_message(image, header))
        answered = lambda: sent.keys() <= {_stamp(i) for i in infos}  # noqa: E731
        assert probe.spin_until(answered, PATIENCE_S), node.log()
    finally:
        probe.close()
        node.stop()
    for stamp, info in sent.items():
        published = next(i for i in infos if _stamp(i) == stamp)
        assert (published.width, published.height) == (width, height)
        assert np.allclose(np.array(published.k).reshape(3, 3)[:2], _scaled_k(info, width, height)), stamp


def test_depth_node_publishes_a_zoedepth_models_metres(tmp_path):
    """A ZoeDepth export, told nothing: metres on depth (transformers' pipeline's map within 1e-4 of its range) and
    points; nothing on relative_depth."""
    image = _frame("coffee")
    answered, _, wrong, log = _run_depth_node(tmp_path, {"model_path": str(ZOEDEPTH)}, image, "/t/depth")
    assert not wrong, log
    message = answered["/t/depth"]  # with its depth/camera_info and points of the same stamp
    assert message.encoding == "32FC1" and (message.height, message.width) == image.shape[:2]
    assert answered["/t/points"].header.stamp == message.header.stamp
    depth = DenseMap.from_message(message, "m", "depth").values
    assert _within(depth, REFERENCE["models"][ZOEDEPTH.name]["frames"][1], 1e-4)


def test_depth_node_publishes_a_relative_models_map_as_relative_depth_never_metres(tmp_path):
    image = _frame("coffee")
    answered, clouds, wrong, log = _run_depth_node(tmp_path, {"model_path": str(RELATIVE)}, image, "/t/relative_depth")
    assert not wrong and not clouds, log  # no metres, no points from a relative map
    assert "relative inverse depth on relative_depth" in log, log
    depth = DenseMap.from_message(answered["/t/relative_depth"], "relative", "depth").values
    frame = REFERENCE["models"][RELATIVE.name]["frames_pil"][1]
    expected = np.load(DATA / frame["depth"])
    assert np.abs(depth[:: frame["stride"], :: frame["stride"]] - expected).max() <= 1e-5 * (
        frame["max"] - frame["min"]
    )


def test_predict_writes_metres_as_npy_and_millimetres_and_refuses_a_file_that_does_not_say(tmp_path):
    """`predict --model-type depth`: the map as transformers gives it, in metres (.npy float32) and as a depth
    camera's 16-bit millimetres (_mm.png); without --depth-kind a file without depth_kind metadata is refused, the
    error naming the option."""
    image = tmp_path / "chelsea.png"
    cv2.imwrite(str(image), _frame("chelsea"))
    arguments = ["predict", "--model-type", "depth", "--model", str(METRIC), str(image)]
    refused = CliRunner().invoke(main, arguments)
    assert refused.exit_code != 0 and "--depth-kind" in refused.output and "Traceback" not in refused.output
    given = [*arguments, "--depth-kind", "metric", "--processor-size", "70x70", "--format", "json"]
    done = CliRunner().invoke(main, [*given, "--save", str(tmp_path / "maps")])
    assert done.exit_code == 0, done.output
    record = json.loads(done.output.splitlines()[-1])
    assert record["unit"] == "m" and record["kind"] == "depth" and record["valid"] == 300 * 451
    frame = REFERENCE["models"][METRIC.name]["frames_pil"][0]
    expected = np.load(DATA / frame["depth"])
    saved = np.load(tmp_path / "maps" / "chelsea.npy")
    assert np.abs(saved[:: frame["stride"], :: frame["stride"]] - expected).max() <= 1e-5 * (
        frame["max"] - frame["min"]
    )
    millimetres = cv2.imread(str(tmp_path / "maps" / "chelsea_mm.png"), cv2.IMREAD_UNCHANGED)
    assert millimetres.dtype == np.uint16 and np.array_equal(millimetres, np.round(saved.astype(np.float64) * 1000))


def test_eval_scores_predicted_maps_against_truth_maps_by_absrel_and_delta1(tmp_path):
    """`eval --model-type depth --predictions FOLDER --data FOLDER`: the maps predict saved against truth maps, the
    left 200 columns 1.3 x the prediction (AbsRel 0.3 / 1.3, not within delta1) and the rest equal to it."""
    image = tmp_path / "chelsea.png"
    cv2.imwrite(str(image), _frame("chelsea"))
    arguments = ["predict", "--model-type", "depth", "--model", str(METRIC), str(image), "--depth-kind", "metric"]
    assert CliRunner().invoke(main, [*arguments, "--save", str(tmp_path / "maps")]).exit_code == 0
    predicted = np.load(tmp_path / "maps" / "chelsea.npy")
    truth = predicted.astype(np.float64).copy()
    truth[:, :200] *= 1.3
    (tmp_path / "truth").mkdir()
    np.save(tmp_path / "truth" / "chelsea.npy", truth.astype(np.float32))
    arguments = ["eval", "--model-type", "depth", "--data", str(tmp_path / "truth")]
    done = CliRunner().invoke(main, [*arguments, "--predictions", str(tmp_path / "maps"), "--out", str(tmp_path / "e")])
    assert done.exit_code == 0, done.output
    scored = json.loads((tmp_path / "e" / "eval.json").read_text())
    share = 200 / predicted.shape[1]
    assert scored["AbsRel"] == pytest.approx(0.3 / 1.3 * share, rel=1e-5)
    assert scored["delta1"] == pytest.approx(1 - share, rel=1e-6)
    valid = np.isfinite(predicted) & (predicted > 0)
    assert valid.all()  # the metric test model gives every pixel a depth: every pixel counts
    squared = (0.3 * predicted[:, :200].astype(np.float64)) ** 2  # the left columns' error; the rest is 0
    assert scored["RMSE"] == pytest.approx(np.sqrt(squared.sum() / predicted.size), rel=1e-5)
    assert "RMSE" in done.output


def test_quantize_calibrates_on_the_depth_processors_input_and_reports_the_relative_difference(tmp_path):
    """`quantize --model-type depth`: INT8 calibrated on frames through the family's own pre-processing (the
    processor's keep-aspect size, [1, 3, 70, 112] for these images), the metadata kept, and the accuracy loss the
    mean depth difference over the mean depth of compare's run over --data."""
    images = tmp_path / "images"
    images.mkdir()
    for name in ("chelsea", "coffee"):
        cv2.imwrite(str(images / f"{name}.png"), _frame(name))
    out = tmp_path / "int8.onnx"
    arguments = ["quantize", "--model-type", "depth", "--model", str(RELATIVE), "--calibration", str(images)]
    done = CliRunner().invoke(main, [*arguments, "--out", str(out), "--data", str(images), "--backend", "onnx"])
    assert done.exit_code == 0, done.output
    found = recognise(summarize(out))
    assert found.family == "depth" and found.details["depth_kind"] == "relative", found.reason
    (report,) = (tmp_path / "int8_quantize").glob("compare_*.json")
    outputs = json.loads(report.read_text())["outputs"]
    assert outputs["valid_in_one"] == 0 and 0 < outputs["relative_difference"] < 0.05
    assert "accuracy loss: mean relative depth difference" in done.output


def test_bench_times_a_dynamic_depth_model_on_its_processors_input_for_a_1280x720_frame():
    """bench needs fixed sizes; a depth model's are its processor's for the frame: 1280x720 at size 70 keeps the
    height (70) and scales the width to 124.4, the nearest multiple of 14 being 126."""
    result = measure(RELATIVE, "onnx:cpu", runs=2, warmup=1, model_type="depth")
    assert result.available, result.reason
    assert result.pipeline["input"] == [1, 3, 70, 126] and result.pipeline["frame_size"] == "1280x720"
    assert len(result.latencies_ms) == 2 and result.pipeline["preprocess_ms"] > 0


def test_eval_aligns_a_relative_map_by_scale_and_shift_in_inverse_depth(tmp_path):
    """A relative map that is an affine function of the truth's inverse depth (0.3 / depth + 0.05) scores exactly
    once aligned (AbsRel 0, delta1 1), and poorly as it is."""
    rng = np.random.default_rng(3)
    truth = rng.uniform(1.0, 10.0, (40, 60))
    for folder, values in (("truth", truth), ("maps", 0.3 / truth + 0.05)):
        (tmp_path / folder).mkdir()
        np.save(tmp_path / folder / "frame.npy", values.astype(np.float32))
    arguments = ["eval", "--model-type", "depth", "--data", str(tmp_path / "truth")]
    done = CliRunner().invoke(main, [*arguments, "--predictions", str(tmp_path / "maps"), "--out", str(tmp_path / "e")])
    assert done.exit_code == 0, done.output
    scored = json.loads((tmp_path / "e" / "eval.json").read_text())
    assert scored["aligned_AbsRel"] < 1e-5 and scored["aligned_delta1"] == 1.0
    assert scored["AbsRel"] > 0.9 and scored["delta1"] == 0.0


def test_depth_metrics_are_each_images_then_their_mean():
    """Two images of different sizes, one scored perfectly and one 10 % too far everywhere: the metrics are the
    mean of the two images' (AbsRel 0.05, RMSE half of the second's, delta1 1), whatever their pixel counts; pixels
    of no truth (NaN, 0) and an image of no valid pixel at all do not count."""
    near = np.full((10, 10), 2.0)
    far = np.full((30, 40), 4.0)
    far[0, 0], far[0, 1] = np.nan, 0.0  # no truth there
    empty = np.full((5, 5), np.nan)
    scored = depth_metrics([near, far * 1.1, np.ones((5, 5))], [near, far, empty])
    assert scored["AbsRel"] == pytest.approx(0.05)
    assert scored["RMSE"] == pytest.approx(0.4 / 2)
    assert scored["delta1"] == 1.0


def test_depth_node_refuses_to_start_on_a_file_that_does_not_say_metric_or_relative(tmp_path):
    node = NodeProcess(tmp_path, {"model_path": str(METRIC)}, module="vision_factory.depth_onnx_node")
    assert node.wait(60) == 2, node.log()
    node.stop()
    assert "cannot start: model_path" in node.log() and "set depth_kind" in node.log(), node.log()


def test_verify_finds_the_depth_node_gives_the_models_maps(tmp_path):
    """`verify`: a bag of two frames through depth_node over DDS, each answer's map (on a 4-pixel grid) against the
    pipeline offline, on ONNX Runtime CPU: equal."""
    frames = tmp_path / "frames"
    frames.mkdir()
    for name in ("chelsea", "coffee"):
        cv2.imwrite(str(frames / f"{name}.png"), _frame(name))
    assert CliRunner().invoke(main, ["bag", str(frames), "--out", str(tmp_path / "bag")]).exit_code == 0
    arguments = ["verify", str(tmp_path / "bag"), "--model-type", "depth", "--model", str(METRIC)]
    arguments += ["-p", "depth_kind:=metric", "-p", "processor_size:=70x70", "--out", str(tmp_path / "verify")]
    done = run_cli(*arguments)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "verify" / "verify.json").read_text())
    assert report["verdict"] == "pass", done.stdout
    assert "2 of 2 answered frames within" in done.stdout and "largest difference 0 px" in done.stdout


def _bag_of_two_frames(tmp_path) -> Path:
    frames = tmp_path / "frames"
    frames.mkdir()
    for name in ("chelsea", "coffee"):
        cv2.imwrite(str(frames / f"{name}.png"), _frame(name))
    assert CliRunner().invoke(main, ["bag", str(frames), "--out", str(tmp_path / "bag")]).exit_code == 0
    return tmp_path / "bag"


def test_replay_of_a_relative_model_records_its_maps_on_relative_depth(tmp_path):
    """`replay --node depth` of a relative model (its file says so): every frame answered on the topic the node
    publishes a relative model's maps on (relative_depth), each map the pipeline's offline on the bag's frame."""
    bag = _bag_of_two_frames(tmp_path)
    result = replay(bag, tmp_path / "replay", "depth", {"model_path": str(RELATIVE)})
    assert result.frames_sent == 2 and result.outputs == 2 and result.missing_frames == [], Path(
        result.node_log
    ).read_text()
    estimator = family("depth").pipeline(_values(RELATIVE), _load).model
    frames = [frame for _, frame in read_framed(bag)]
    messages = [deserialize_message(raw.data, Image) for raw in read_messages(result.output_bag, "/relative_depth")]
    assert len(messages) == 2
    for message, frame in zip(messages, frames):
        expected = estimator.infer(frame).dense.values
        values = DenseMap.from_message(message, "relative", "depth").values
        assert values.shape == expected.shape
        assert np.abs(values - expected).max() <= 1e-6 * (expected.max() - expected.min())
    assert len(json.loads((tmp_path / "replay" / family("depth").result.file).read_text())) == 2


def test_replay_reports_and_writes_a_metric_models_maps_with_their_kind_and_unit(tmp_path):
    """`replay --node depth` of a metric model: replay.json names the answers' file (dense.json, the kind's), whose
    record of each frame says what the map measures and in what (depth, m) and its range, the map's as published
    (before: dense.json was listed nowhere and written with an empty kind and unit)."""
    bag = _bag_of_two_frames(tmp_path)
    params = {"model_path": str(METRIC), "depth_kind": "metric", "processor_size": "70x70"}
    result = replay(bag, tmp_path / "replay", "depth", params)
    assert result.missing_frames == [], Path(result.node_log).read_text()
    summary = json.loads((tmp_path / "replay" / "replay.json").read_text())
    assert summary["answers"] == result.answers == str(tmp_path / "replay" / "dense.json")
    records = json.loads(Path(result.answers).read_text())
    maps = [deserialize_message(raw.data, Image) for raw in read_messages(result.output_bag, "/depth")]
    assert [record["frame"] for record in records] == [0, 1] and len(maps) == 2
    for record, message in zip(records, maps):
        values = DenseMap.from_message(message, "m", "depth").values
        assert (record["kind"], record["unit"]) == ("depth", "m")
        assert (record["width"], record["height"]) == (values.shape[1], values.shape[0])
        assert record["valid"] == np.isfinite(values).sum() and record["max"] == float(np.nanmax(values))


def test_verify_finds_the_depth_node_gives_a_relative_models_maps(tmp_path):
    """`verify` of a relative model: its node's answers are read from relative_depth, where it publishes them."""
    bag = _bag_of_two_frames(tmp_path)
    arguments = ["verify", str(bag), "--model-type", "depth", "--model", str(RELATIVE), "-p", "queue_size:=4"]
    done = run_cli(*arguments, "--out", str(tmp_path / "verify"))  # queue_size: a loaded machine drops no frame
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "verify" / "verify.json").read_text())
    assert report["verdict"] == "pass", done.stdout
    assert "2 of 2 answered frames within" in done.stdout and "largest difference 0 px" in done.stdout


def test_quantize_is_told_a_files_depth_kind_and_refuses_without(tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    cv2.imwrite(str(images / "chelsea.png"), _frame("chelsea"))
    arguments = ["quantize", "--model-type", "depth", "--model", str(METRIC), "--calibration", str(images)]
    arguments += ["--out", str(tmp_path / "int8.onnx"), "--data", str(images), "--speed-runs", "2"]
    refused = CliRunner().invoke(main, arguments)
    assert refused.exit_code != 0 and "--depth-kind" in refused.output and "Traceback" not in refused.output
    done = CliRunner().invoke(main, [*arguments, "--depth-kind", "metric"])
    assert done.exit_code == 0, done.output
    assert "accuracy loss: mean relative depth difference" in done.output


def _empty_map_model(path: Path, static: bool) -> Path:
    """A depth model (metadata relative, depth_anything) of one input [1, 3, 32, 32] whose output predicted_depth is
    an empty map: [1, 0, 0] in the file (``static``), or of a size the input's values decide (rows 0 to 0 times its
    largest value: no rows), which the file cannot say."""
    nodes = [helper.make_node("ReduceMean", ["pixel_values"], ["mean"], axes=[1], keepdims=0)]  # [1, 32, 32]
    if static:
        empty = numpy_helper.from_array(np.zeros((1, 0, 0), np.float32), "empty")
        nodes = [helper.make_node("Identity", ["empty"], ["predicted_depth"])]
        initializers, declared = [empty], [1, 0, 0]
    else:
        nodes += [
            helper.make_node("ReduceMax", ["pixel_values"], ["largest"], keepdims=0),
            helper.make_node("Mul", ["largest", "zero"], ["nothing"]),
            helper.make_node("Cast", ["nothing"], ["end"], to=TensorProto.INT64),
            helper.make_node("Reshape", ["end", "one"], ["ends"]),
            helper.make_node("Slice", ["mean", "starts", "ends", "axes"], ["predicted_depth"]),
        ]
        initializers = [
            numpy_helper.from_array(np.float32(0), "zero"),
            numpy_helper.from_array(np.array([1], np.int64), "one"),
            numpy_helper.from_array(np.array([0], np.int64), "starts"),
            numpy_helper.from_array(np.array([1], np.int64), "axes"),
        ]
        declared = ["batch", "height", "width"]
    graph = helper.make_graph(
        nodes,
        "empty_map",
        [helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("predicted_depth", TensorProto.FLOAT, declared)],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    helper.set_model_props(model, {"model_type": "depth_anything", "depth_kind": "relative"})
    onnx.save(model, path)
    return path


@pytest.mark.parametrize(
    "static, named",
    [
        (True, "the depth model's output predicted_depth [1, 0, 0] is empty: no depth map"),
        (False, "the depth model's output predicted_depth [batch, height, width] gave (1, 0, 32): an empty map"),
    ],
    ids=["static", "dynamic"],
)
def test_a_depth_model_whose_map_is_empty_is_named_not_a_resize_error(tmp_path, static, named):
    """A static empty output is refused as the model loads; a dynamic one that comes out empty, by the frame."""
    model = _empty_map_model(tmp_path / "empty.onnx", static)
    image = tmp_path / "frame.png"
    cv2.imwrite(str(image), np.full((48, 64, 3), 90, np.uint8))
    done = CliRunner().invoke(main, ["predict", "--model-type", "depth", "--model", str(model), str(image)])
    assert done.exit_code == 1 and isinstance(done.exception, SystemExit), (done.output, done.exception)
    assert done.output.startswith("Error: ") and named in done.output, done.output
    assert len(done.output.strip().splitlines()) == 1, done.output


def test_a_depth_node_of_a_model_whose_map_is_empty_says_so_and_exits(tmp_path):
    model = _empty_map_model(tmp_path / "empty.onnx", static=True)
    node = NodeProcess(tmp_path, {"model_path": str(model)}, module="vision_factory.depth_onnx_node")
    code = node.wait(30)
    node.stop()
    log = node.log()
    assert code == 2 and "cannot start" in log and "Traceback" not in log, log
    assert "the depth model's output predicted_depth [1, 0, 0] is empty: no depth map" in log, log
