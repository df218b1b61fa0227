"""camera_infos.py's keeper: each camera's camera_info for an image, the one of the image's stamp, else the newest
received; bounded per camera whatever arrives. Real sensor_msgs/CameraInfo messages, no ROS context."""

from __future__ import annotations

import pytest
from builtin_interfaces.msg import Time
from sensor_msgs.msg import CameraInfo
from std_msgs.msg import Header

from vision_factory.camera_infos import CameraInfos
from vision_factory.streaming import PAIRING_WINDOW


def _info(sec: int, nanosec: int = 0, width: int = 640) -> CameraInfo:
    return CameraInfo(header=Header(stamp=Time(sec=sec, nanosec=nanosec)), width=width, height=480)


def test_an_image_gets_the_camera_info_of_its_stamp_even_when_newer_ones_came():
    infos = CameraInfos()
    first, second, third = _info(10, width=320), _info(11, width=640), _info(11, 5, width=1280)
    for info in (first, second, third):
        infos.keep(info)
    assert infos.for_stamp(Time(sec=10)) is first
    assert infos.for_stamp(Time(sec=11)) is second
    assert infos.for_stamp(Time(sec=11, nanosec=5)) is third


def test_without_one_of_its_stamp_an_image_gets_the_newest_received_not_the_latest_stamp():
    """A static camera_info (an old stamp, published once, or latched) serves every image; of several, the newest
    received, whatever their stamps say."""
    infos = CameraInfos()
    assert infos.for_stamp(Time(sec=5)) is None  # none came yet
    latched = _info(0)
    infos.keep(latched)
    assert infos.for_stamp(Time(sec=1000)) is latched
    newer_stamp, received_last = _info(900), _info(3)
    infos.keep(newer_stamp)
    infos.keep(received_last)
    assert infos.for_stamp(Time(sec=1000)) is received_last


def test_a_stamp_received_again_replaces_its_message_and_becomes_the_newest():
    infos = CameraInfos()
    old, other, again = _info(7, width=320), _info(8), _info(7, width=800)
    for info in (old, other, again):
        infos.keep(info)
    assert infos.for_stamp(Time(sec=7)) is again
    assert infos.for_stamp(Time(sec=99)) is again
    assert len(infos) == 2


def test_each_camera_keeps_its_own():
    infos = CameraInfos(("front", "rig/left"))
    front, left = _info(3, width=320), _info(3, width=1280)
    infos.keep(front, "front")
    assert infos.for_stamp(Time(sec=3), "rig/left") is None  # another camera's is never used
    infos.keep(left, "rig/left")
    assert infos.for_stamp(Time(sec=3), "front") is front and infos.for_stamp(Time(sec=3), "rig/left") is left
    assert infos.for_stamp(Time(sec=4), "front") is front and infos.for_stamp(Time(sec=4), "rig/left") is left
    with pytest.raises(KeyError):
        infos.keep(_info(3), "rear")  # a camera the node does not serve


def test_memory_is_bounded_per_camera_the_oldest_received_forgotten_first():
    infos = CameraInfos(("a", "b"))
    sent = [_info(sec) for sec in range(10 * PAIRING_WINDOW)]
    for info in sent:
        infos.keep(info, "a")
    infos.keep(_info(1), "b")
    assert len(infos) == PAIRING_WINDOW + 1
    assert infos.for_stamp(Time(sec=0), "a") is sent[-1]  # forgotten: the newest serves it
    oldest_kept = len(sent) - PAIRING_WINDOW
    assert infos.for_stamp(Time(sec=oldest_kept), "a") is sent[oldest_kept]
    assert infos.for_stamp(Time(sec=oldest_kept - 1), "a") is sent[-1]
    small = CameraInfos(window=2)
    for info in sent[:5]:
        small.keep(info)
    assert len(small) == 2 and small.for_stamp(Time(sec=3)) is sent[3] and small.for_stamp(Time(sec=2)) is sent[4]
    with pytest.raises(ValueError, match="keep at least one"):
        CameraInfos(window=0)
