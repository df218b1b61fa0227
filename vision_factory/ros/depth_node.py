"""depth_node: a depth map per image from a monocular depth model (families/depth.py), on any backend.

Subscribes  image (sensor_msgs/Image) or image/compressed (sensor_msgs/CompressedImage); with camera_info on (the
            default) also camera_info (sensor_msgs/CameraInfo): for each image the one of its header stamp, else the
            newest received (camera_infos.py's rule); with cameras, each camera's <camera>/camera_info for its images
Publishes   families/depth.py's output table:
            depth           sensor_msgs/Image 32FC1 in metres, a metric model's (REP-118: NaN where invalid)
            relative_depth  sensor_msgs/Image 32FC1, a relative model's relative inverse depth (larger is nearer,
                            scale and shift unknown: never metres)
            depth/camera_info  the maps' intrinsics: the image's camera_info, scaled to the map's size if they differ
            points          sensor_msgs/PointCloud2 (x, y, z float32 metres, organised as the map, NaN where
                            invalid), metric models with a camera_info, computed only while subscribed
            debug_image     the map colour-mapped, while subscribed
Each map is the size of its image and carries its header (stamp and frame_id: the camera's optical frame).
A camera_info that cannot place a pixel (a focal length of 0, NaN or infinite: an uncalibrated camera; a principal
point not finite; a size of 0; binning or roi set) is refused as detect_3d_node refuses it (camera_infos.py's
Intrinsics, one check): the map is published, depth/camera_info and points are not, each kind reported once and
counted. Values the model should not give (models/depth.py's out_of_range) are published as NaN, reported so too.

A managed (lifecycle) node as every node (ros/inference_node.py): queue, freshness (max_frame_age), lazy,
diagnostics and QoS as the others.
"""

from __future__ import annotations

import cv2
import numpy as np
from sensor_msgs.msg import CameraInfo

from ..camera_infos import CameraInfoError, CameraInfos, Intrinsics
from ..cameras import camera_topic
from ..families.depth import CAMERA_INFO, MAP_INFO, map_topic
from ..families.family import Family
from ..images import ImageFormatError, xyz_cloud_cdr
from ..runtime.runner import Runner
from .cameras import wanted
from .inference_node import InferenceNode
from .messages import bgr_to_message
from .spin import spin


def scaled_camera_info(info: CameraInfo, header, width: int, height: int) -> CameraInfo:
    """``info`` for an image of ``width`` x ``height`` (its own size scaled: focal lengths and principal point),
    with ``header``."""
    sx, sy = width / info.width, height / info.height
    k, p = np.array(info.k, np.float64).reshape(3, 3), np.array(info.p, np.float64).reshape(3, 4)
    k[0] *= sx
    k[1] *= sy
    p[0] *= sx
    p[1] *= sy
    return CameraInfo(
        header=header,
        height=height,
        width=width,
        distortion_model=info.distortion_model,
        d=list(info.d),
        k=k.ravel().tolist(),
        r=list(info.r),
        p=p.ravel().tolist(),
    )


def point_cloud(header, depth: np.ndarray, info: CameraInfo) -> bytes:
    """The organised cloud of a metric map, serialized (images.xyz_cloud_cdr): each pixel (u, v) at depth z is
    x = (u - cx) z / fx, y = (v - cy) z / fy in the optical frame (pinhole, from K: the image is taken as rectified);
    NaN where the depth is. ``info``'s K is one Intrinsics.of takes (focal lengths finite and positive)."""
    fx, _, cx, _, fy, cy = info.k[:6]
    u = (np.arange(depth.shape[1], dtype=np.float32) - np.float32(cx)) / np.float32(fx)
    v = (np.arange(depth.shape[0], dtype=np.float32) - np.float32(cy)) / np.float32(fy)
    depth = np.asarray(depth, "<f4")
    points = cv2.merge([depth * u[None, :], depth * v[:, None], depth])  # x, y, z interleaved
    return xyz_cloud_cdr(header, points, dense=bool(np.isfinite(depth).all()))  # x, y are NaN where z is


class DepthNode(InferenceNode):
    def __init__(self, runner_class: type[Runner], family: Family, **kwargs):
        self.family = family
        super().__init__(family.name, family.node_parameters, runner_class, **kwargs)

    def configure(self) -> None:
        values = self.values
        self.pipeline = self.family.pipeline(values, self.load_runner)  # families/depth.py, as the tools run it
        self.estimator = estimator = self.pipeline.model
        self.metric = estimator.depth_kind == "metric"
        size = "x".join(map(str, estimator.processor.size[::-1]))
        self.get_logger().info(
            f"depth {values['model_path']}: {estimator.runner.describe()}; {estimator.depth_kind} "
            f"({'metres on depth' if self.metric else 'relative inverse depth on relative_depth'}), processor size "
            f"{size}, multiple of {estimator.processor.multiple}"
        )
        publishers = self.create_outputs(self.family.node.outputs)  # families/depth.py's table
        self.map_pub = publishers[map_topic(estimator.depth_kind)]
        self.info_pub, self.points_pub = publishers[MAP_INFO], publishers["points"]
        self.debug_pub = publishers["debug_image"]
        self.camera_infos = CameraInfos(self.cameras)  # each camera's, by stamp
        # each camera's camera_info topic, resolved: the name its refusals give
        self.info_topics = {
            camera: self.resolve_topic_name(camera_topic(camera, CAMERA_INFO.topic)) for camera in self.cameras
        }

    def retune(self, values, changed: set[str]):
        """Live parameters (node_live.py): the estimator again on the model loaded (processor size, resize filter,
        max depth), from the next frame."""
        pipeline = self.family.pipeline(values, self.load_runner)

        def apply() -> None:
            self.pipeline, self.estimator = pipeline, pipeline.model

        return apply

    def listen(self) -> None:
        topic = self.subscribe_images()
        if self.values["camera_info"]:
            for camera in self.cameras:  # "" (one camera): camera_info
                keep = lambda msg, camera=camera: self.camera_infos.keep(msg, camera)  # noqa: E731
                topic_of_camera = camera_topic(camera, CAMERA_INFO.topic)
                self._inputs.append(self.create_subscription(CameraInfo, topic_of_camera, keep, 10))
        published = self.resolved_outputs(map_topic(self.estimator.depth_kind))
        self.get_logger().info(f"listening on {topic}, publishing {published}")

    def process(self, camera: str, item) -> None:
        try:
            frame = self.to_bgr(item)
        except ImageFormatError as exc:
            self.skip_error(exc, camera)
            return
        header = item.header
        ((_, result),) = self.pipeline.push(frame, header)
        for kind, detail in result.problems.items():  # values the model should not give: published as NaN
            self.warn(kind, detail)
        dense = result.dense
        self.map_pub[camera].publish(dense.to_cdr(header))  # serialized here: the map copied once
        self.outputs += 1
        self.monitor.answered(header, camera)
        info = self.camera_infos.for_stamp(header.stamp, camera)  # this camera's, of this frame's stamp
        if info is not None and self._usable(camera, info):
            height, width = dense.values.shape
            scaled = scaled_camera_info(info, header, width, height)
            self.info_pub[camera].publish(scaled)
            if self.metric and wanted(self.points_pub[camera]):
                self.points_pub[camera].publish(point_cloud(header, dense.values, scaled))
        if wanted(self.debug_pub[camera]):
            self.debug_pub[camera].publish(bgr_to_message(dense.draw(), header))

    def _usable(self, camera: str, info: CameraInfo) -> bool:
        """Whether ``camera``'s ``info`` places its pixels (camera_infos.py's Intrinsics, as detect_3d_node checks
        it); else the kind of problem reported once, naming the camera_info topic, and counted."""
        try:
            Intrinsics.of(info, self.info_topics[camera])
        except CameraInfoError as exc:
            self.warn(exc.kind, str(exc))  # the map is published, depth/camera_info and points are not
            return False
        return True


def run(runner_class: type[Runner], args: list[str] | None, family: Family) -> int:
    """Run the node until SIGINT/SIGTERM; 2 when it cannot start (the reason is logged)."""
    return spin(lambda: DepthNode(runner_class, family), family.name, args)
