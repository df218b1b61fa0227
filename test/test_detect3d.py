"""Detections in 3D (models/lift3d.py): synthetic scenes of flat objects at known 3D positions in front of a wall
(test/support/depth_scenes.py), their depth in both encodings (16UC1 millimetres, 32FC1 metres) at another size and
through other intrinsics than the colour image's, with holes: every 3D centre within 1 % of its range, sizes
within 1 %; and the inputs refused, each with its kind and fix."""

from __future__ import annotations

import numpy as np
import pytest
from support.depth_scenes import COLOUR, DEPTH, WALL, Flat, detections, encode, holes, render

from vision_factory.camera_infos import CameraInfoError, Intrinsics
from vision_factory.models.lift3d import (
    LiftError,
    check_camera_frame,
    depth_intrinsics,
    depth_metres,
    lift,
)
from vision_factory.results.boxes import Boxes
from vision_factory.results.frame import FrameResult
from vision_factory.results.masks import InstanceMask, Masks

# Depths in whole millimetres: 16UC1 holds them exactly.
SCENE = [
    Flat("box", (-0.35, 0.12, 1.5), 0.4, 0.5),
    Flat("sign", (0.42, -0.21, 2.3), 0.3, 0.3),
    Flat("far", (0.05, 0.3, 3.2), 0.6, 0.2),
]
RING = Flat("ring", (0.1, -0.05, 1.2), 0.4, 0.4, inner=0.14)  # its box's core sees the wall through its hole


def _read(depth: np.ndarray, encoding: str) -> np.ndarray:
    data, step = encode(depth, encoding)
    return depth_metres(encoding, depth.shape[1], depth.shape[0], step, data)


def _assert_lifted(box, item: Flat) -> None:
    truth = np.array(item.centre)
    error = np.linalg.norm(np.subtract(box.centre, truth))
    assert error <= 0.01 * np.linalg.norm(truth), (item.name, box.centre, item.centre)
    assert box.size[:2] == pytest.approx((item.width, item.height), rel=0.01), item.name
    assert 0 <= box.size[2] <= 0.01 * item.centre[2], item.name  # a flat object: no depth extent


@pytest.mark.parametrize("encoding", ["16UC1", "32FC1"])
@pytest.mark.parametrize("depth_camera", [COLOUR, DEPTH], ids=["same size", "other size and intrinsics"])
def test_centres_and_sizes_of_objects_at_known_positions(encoding, depth_camera):
    depth, _ = render(SCENE, depth_camera)
    metres = _read(holes(depth, 0.3), encoding)  # 30 % of the pixels without depth: 0 in 16UC1, NaN in 32FC1
    k = depth_intrinsics(COLOUR, None if depth_camera is COLOUR else DEPTH, (depth_camera.width, depth_camera.height))
    boxes = lift(detections(SCENE), metres, COLOUR, k)
    for box, item in zip(boxes, SCENE, strict=True):
        _assert_lifted(box, item)


@pytest.mark.parametrize("encoding", ["16UC1", "32FC1"])
def test_a_mask_measures_the_object_where_the_box_core_sees_through_it(encoding):
    """A ring's box core is its hole (the wall behind, 4 m): its mask finds the ring at 1.2 m."""
    depth, _ = render([RING], DEPTH)
    metres = _read(depth, encoding)
    (without_mask,) = lift(detections([RING]), metres, COLOUR, DEPTH)
    assert without_mask.centre[2] == pytest.approx(WALL)
    (with_mask,) = lift(detections([RING], masks=True), metres, COLOUR, DEPTH)
    _assert_lifted(with_mask, RING)


def test_the_background_beside_a_mask_edge_and_holes_are_left_out():
    """Half the ring's mask is dilated onto the wall (a mask's edge off by pixels): still the ring's depth."""
    depth, _ = render([RING], DEPTH)
    found = detections([RING], masks=True)
    bits = found.masks.masks[0].bits.copy()
    bits[:, 1:] |= bits[:, :-1]
    bits[:, 2:] |= bits[:, :-2]  # three pixels wider to the right: a sliver of wall in the samples
    found.masks = Masks([InstanceMask(0, 0, bits, COLOUR.width, COLOUR.height)])
    (box,) = lift(found, holes(depth, 0.2, seed=3).astype(np.float32), COLOUR, DEPTH)
    _assert_lifted(box, RING)


def test_a_box_whose_core_has_no_valid_depth_gets_no_3d_box():
    depth, _ = render(SCENE, DEPTH)
    x1, y1, x2, y2 = SCENE[1].box(DEPTH)
    depth[int(y1) : int(np.ceil(y2)), int(x1) : int(np.ceil(x2))] = np.nan  # the sign's depth all missing
    boxes = lift(detections(SCENE), _read(depth, "16UC1"), COLOUR, DEPTH)
    assert boxes[1] is None
    _assert_lifted(boxes[0], SCENE[0])
    _assert_lifted(boxes[2], SCENE[2])


def test_a_box_with_too_little_valid_depth_gets_none_never_a_box_at_zero():
    """yolo_ros #117: a box from missing depth ends up at the camera. Here 5 % valid (under MIN_VALID): none."""
    depth, _ = render(SCENE[:1], DEPTH)
    sparse = holes(depth, 0.95, seed=1)
    (box,) = lift(detections(SCENE[:1]), _read(sparse, "16UC1"), COLOUR, DEPTH)
    assert box is None
    (box,) = lift(detections(SCENE[:1]), _read(sparse, "16UC1"), COLOUR, DEPTH, min_valid=0.01)
    _assert_lifted(box, SCENE[0])


def test_a_box_outside_the_depth_image_or_smaller_than_a_depth_pixel():
    depth = _read(render(SCENE, DEPTH)[0], "32FC1")
    outside = (700.0, 10.0, 760.0, 40.0)
    tiny = np.add(SCENE[0].box(), (90, 120, -90, -120))  # a 0.2 px box at its centre
    found = FrameResult(COLOUR.width, COLOUR.height, Boxes([outside, tiny], [0.5, 0.5], [0, 0], ["x", "x"]))
    gone, small = lift(found, depth, COLOUR, DEPTH)
    assert gone is None
    assert small.centre[2] == pytest.approx(SCENE[0].centre[2])


def test_depth_units_come_from_the_encoding():
    """16UC1 1500 is 1.5 m, 32FC1 1.5 is 1.5 m (yolo_ros #105: one divisor for both); 0 and NaN are no depth."""
    millimetres = np.array([[1500, 0, 65535]], "<u2")
    assert depth_metres("16UC1", 3, 1, 6, millimetres.tobytes()).tolist()[0][:1] == [1.5]
    assert np.isnan(depth_metres("16UC1", 3, 1, 6, millimetres.tobytes())[0, 1])
    metres = np.array([[1.5, np.nan, 0.0, -1.0, np.inf]], "<f4")
    read = depth_metres("32FC1", 5, 1, 20, metres.tobytes())
    assert read[0, 0] == np.float32(1.5) and np.isnan(read[0, 1:]).all()
    big = depth_metres("16UC1", 1, 1, 2, np.array([[1500]], ">u2").tobytes(), bigendian=True)
    assert big[0, 0] == np.float32(1.5)
    padded = np.zeros((2, 4), "<u2")  # step 8 bytes for 3 pixels of 2
    padded[:, :3] = 2000
    assert (depth_metres("16UC1", 3, 2, 8, padded.tobytes()) == np.float32(2.0)).all()


@pytest.mark.parametrize("encoding", ["mono16", "rgb8", "16SC1", "32FC3", "bgr8\n\x1b[31m"])
def test_another_encoding_is_refused(encoding):
    with pytest.raises(LiftError, match="16UC1 \\(millimetres\\) or 32FC1 \\(metres\\)") as refused:
        depth_metres(encoding, 2, 2, 8, bytes(16))
    assert refused.value.kind == "depth encoding"
    assert "\n" not in str(refused.value) and "\x1b" not in str(refused.value)


def test_a_short_depth_image_is_refused():
    with pytest.raises(LiftError, match="needs step >= 8 and 16 bytes") as refused:
        depth_metres("16UC1", 4, 2, 8, bytes(15))
    assert refused.value.kind == "malformed depth image"


@pytest.mark.parametrize(
    "k", [[0.0] * 9, [525, 0, 320, 0, 0, 240, 0, 0, 1], [float("nan"), 0, 320, 0, 525, 240, 0, 0, 1]]
)
def test_camera_info_without_a_focal_length_is_refused(k):
    with pytest.raises(CameraInfoError, match="not calibrated") as refused:
        Intrinsics.from_camera_info(k, 640, 480, "depth_camera_info")
    assert refused.value.kind == "depth_camera_info without focal length"


def test_camera_info_of_no_size_or_with_binning_is_refused():
    k = [525, 0, 319.5, 0, 525, 239.5, 0, 0, 1]
    assert Intrinsics.from_camera_info(k, 640, 480) == Intrinsics(525, 525, 319.5, 239.5, 640, 480)
    with pytest.raises(CameraInfoError, match="0x480"):
        Intrinsics.from_camera_info(k, 0, 480)
    with pytest.raises(CameraInfoError, match="binning") as refused:
        Intrinsics.from_camera_info(k, 640, 480, binning=(2, 2))
    assert refused.value.kind == "camera_info with binning or roi"


def test_depth_of_another_size_without_its_intrinsics_is_refused():
    with pytest.raises(LiftError, match="no depth_camera_info says how they align") as refused:
        depth_intrinsics(COLOUR, None, (DEPTH.width, DEPTH.height))
    assert refused.value.kind == "depth size without its camera_info"
    with pytest.raises(LiftError, match="not this depth image's") as refused:
        depth_intrinsics(COLOUR, DEPTH, (640, 480))
    assert depth_intrinsics(COLOUR, None, (640, 480)) == COLOUR
    assert depth_intrinsics(COLOUR, DEPTH, (424, 240), "cam_optical", "cam_optical") == DEPTH


def test_depth_in_another_optical_frame_is_refused():
    """yolo_ros #105's camera: depth from another sensor than the colour image, unregistered."""
    with pytest.raises(LiftError, match="needs registering") as refused:
        depth_intrinsics(COLOUR, DEPTH, (424, 240), "rgb_optical_frame", "depth_optical_frame")
    assert refused.value.kind == "depth not registered"


def _slanted(camera, centre, width, height, angle):
    """Depth of a rectangle turned by ``angle`` about the vertical axis through ``centre`` (its near edge left),
    over the wall, through ``camera``; and its 2D box in the colour image (the corners' extremes)."""
    ray_x, ray_y = np.meshgrid(
        (np.arange(camera.width) - camera.cx) / camera.fx, (np.arange(camera.height) - camera.cy) / camera.fy
    )
    along, normal = np.array([np.cos(angle), 0.0, np.sin(angle)]), np.array([-np.sin(angle), 0.0, np.cos(angle)])
    reach = float(normal @ centre) / (normal[0] * ray_x + normal[2])  # z of the ray's point on the rectangle's plane
    points = np.stack([ray_x * reach, ray_y * reach, reach], -1) - centre
    on = (np.abs(points @ along) <= width / 2) & (np.abs(points[..., 1]) <= height / 2)
    depth = np.where(on, reach, WALL)
    corners = [centre + s * along * width / 2 + np.array([0, t * height / 2, 0]) for s in (-1, 1) for t in (-1, 1)]
    u = [COLOUR.fx * x / z + COLOUR.cx + 0.5 for x, _, z in corners]
    v = [COLOUR.fy * y / z + COLOUR.cy + 0.5 for _, y, z in corners]
    return depth, (min(u), min(v), max(u), max(v))


@pytest.mark.parametrize("encoding", ["16UC1", "32FC1"])
def test_a_slanted_surface_has_its_depth_extent_and_centre(encoding):
    """A 0.5 m wide board turned 25 degrees: its depth runs over 0.21 m; the box's centre is the board's centre and
    its depth extent the visible surface's (the 5th to 95th percentile: 90 % of it, under the mask)."""
    centre, width, angle = np.array([0.2, -0.1, 2.0]), 0.5, np.radians(25)
    depth, box = _slanted(DEPTH, centre, width, 0.3, angle)
    colour_depth, _ = _slanted(COLOUR, centre, width, 0.3, angle)
    mask = InstanceMask(0, 0, colour_depth < WALL, COLOUR.width, COLOUR.height)
    extent = width * np.sin(angle)
    board = FrameResult(COLOUR.width, COLOUR.height, Boxes([box], [0.9], [0], ["board"]))
    (found,) = lift(board.with_parts(masks=Masks([mask])), _read(depth, encoding), COLOUR, DEPTH)
    assert np.linalg.norm(np.subtract(found.centre, centre)) <= 0.01 * np.linalg.norm(centre), found.centre
    assert 0.85 * extent <= found.size[2] <= extent, (found.size[2], extent)
    (core,) = lift(board, _read(depth, encoding), COLOUR, DEPTH)
    assert abs(core.centre[2] - centre[2]) <= 0.01 * np.linalg.norm(centre)
    assert core.size[2] < found.size[2]  # the core sees the middle of the board only


def test_camera_info_of_another_camera_is_refused():
    check_camera_frame("cam_optical", "cam_optical")
    check_camera_frame("", "cam_optical")  # a frame not said: taken as the camera_info's
    with pytest.raises(LiftError, match="remap camera_info") as refused:
        check_camera_frame("rgb_optical_frame", "ir_optical_frame")
    assert refused.value.kind == "camera_info of another camera"
