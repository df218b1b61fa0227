"""The ROS-free parts of an inference node's stream (vision_factory/streaming.py), without DDS: the bounded queue,
the staleness rule, the problem log and the pairing of images with their partners by stamp; the closing counts a
node logs, and a measure's check of its answers against them."""

from __future__ import annotations

import threading

import pytest
from sensor_msgs.msg import Image
from vision_msgs.msg import Detection2DArray

from vision_factory.streaming import (
    CLOSING,
    PAIRING_WINDOW,
    FrameQueue,
    Pairing,
    ProblemLog,
    closing_counts,
    stale_age_ms,
)
from vision_factory.tools.answers import checked, refuse_disagreement


def _image(sec: int, nanosec: int = 0) -> Image:
    msg = Image()
    msg.header.stamp.sec, msg.header.stamp.nanosec = sec, nanosec
    return msg


def _detections(sec: int, nanosec: int = 0) -> Detection2DArray:
    msg = Detection2DArray()
    msg.header.stamp.sec, msg.header.stamp.nanosec = sec, nanosec
    return msg


def test_a_full_queue_drops_the_oldest_and_keeps_the_newest():
    queue = FrameQueue(size=2)
    assert queue.put("a") is None and queue.put("b") is None
    assert queue.put("c") == "a"  # the oldest makes room
    assert queue.put("d") == "b"
    assert len(queue) == 2
    assert queue.take() == "c" and queue.take() == "d"
    assert queue.take() is None  # empty, no wait


def test_drain_empties_the_queue_oldest_first():
    queue = FrameQueue(size=3)
    for item in (1, 2, 3, 4):
        queue.put(item)
    assert queue.drain() == [2, 3, 4]
    assert len(queue) == 0 and queue.drain() == []


def test_take_waits_for_an_item_put_by_another_thread():
    queue = FrameQueue(size=1)
    taking = threading.Event()
    got = []

    def consumer():
        taking.set()
        got.append(queue.take(timeout=30))

    thread = threading.Thread(target=consumer)
    thread.start()
    taking.wait()
    queue.put("frame")
    thread.join()
    assert got == ["frame"]


def test_each_kind_of_problem_is_logged_once_and_counted():
    log = ProblemLog(period=60)
    first = log.count("stale frame", "skipping frame", "the frame is 900 ms old", skipped=True)
    assert first == (
        "skipping frame (stale frame): the frame is 900 ms old (logged once per kind; counts follow every 60 s "
        "while more come, and at stop)"
    )
    assert log.count("stale frame", "skipping frame", "the frame is 950 ms old", skipped=True) is None
    assert log.count("jpeg warning", "frame answered despite a problem", "corrupt", skipped=False) is not None
    assert log.count("jpeg warning", "frame answered despite a problem", "corrupt", skipped=False) is None
    assert log.counts == {"stale frame": 2, "jpeg warning": 2}
    assert log.skipped == 2  # the answered ones are counted, not skipped


def test_the_summary_comes_only_when_new_problems_came_and_at_the_end():
    log = ProblemLog(period=60)
    assert log.summary() is None and log.summary(final=True) is None  # nothing ever went wrong: no line
    log.count("stale frame", "skipping frame", "", skipped=True)
    assert log.summary() == "frames with problems so far, by kind: stale frame: 1"
    assert log.summary() is None  # nothing new since
    log.count("ValueError", "skipping frame", "", skipped=True)
    log.count("stale frame", "skipping frame", "", skipped=True)
    assert log.summary() == "frames with problems so far, by kind: stale frame: 2, ValueError: 1"
    assert log.summary(final=True) == "frames with problems in all, by kind: stale frame: 2, ValueError: 1"


def test_problems_counted_from_two_threads_are_all_counted():
    log = ProblemLog(period=60)
    firsts = []

    def count():
        for _ in range(2000):
            line = log.count("stale frame", "skipping frame", "", skipped=True)
            if line is not None:
                firsts.append(line)

    threads = [threading.Thread(target=count) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert log.counts == {"stale frame": 4000} and log.skipped == 4000
    assert len(firsts) == 1


def test_a_frame_is_stale_when_older_than_max_frame_age():
    frame = _image(10, 500_000_000)  # 10.5 s
    now = 11 * 1_000_000_000  # 500 ms later
    assert stale_age_ms(frame, now, 0) is None  # 0: no limit
    assert stale_age_ms(frame, now, 500) is None  # as old as allowed
    assert stale_age_ms(frame, now, 499) == 500.0
    assert stale_age_ms((frame, _detections(10, 500_000_000)), now, 100) == 500.0  # a pair: the image's age


def test_an_image_and_its_partner_pair_by_stamp_in_either_order():
    pairing = Pairing()
    image, detections = _image(1), _detections(1)
    assert pairing.image(image) == (None, 0)
    assert pairing.partner(_detections(2)) == (None, 0)  # another stamp: kept, not paired
    assert pairing.partner(detections) == ((image, detections), 0)
    later_image, later_detections = _image(3, 7), _detections(3, 7)
    assert pairing.partner(later_detections) == (None, 0)
    assert pairing.image(later_image) == ((later_image, later_detections), 0)  # always (image, partner)
    assert not pairing.images and list(pairing.partners) == [(2, 0)]


def test_images_whose_partner_never_comes_fall_out_of_the_window_and_are_counted():
    pairing = Pairing()
    for sec in range(PAIRING_WINDOW):
        assert pairing.image(_image(sec)) == (None, 0)
    assert pairing.image(_image(PAIRING_WINDOW)) == (None, 1)  # the oldest image fell out
    assert pairing.partner(_detections(0))[0] is None  # too late for its image
    for sec in range(100, 100 + PAIRING_WINDOW):
        assert pairing.partner(_detections(sec)) == (None, 0)  # partners falling out are not unpaired images
    assert len(pairing.partners) == PAIRING_WINDOW
    assert pairing.clear() == PAIRING_WINDOW  # the images still waiting
    assert not pairing.images and not pairing.partners


def test_a_measure_whose_answers_differ_from_the_nodes_own_counts_is_refused():
    """tools/answers.py: each node's answers received are set against its closing line (CLOSING, what
    InferenceNode.counts logs); a node that published more than was received, or that logged no closing counts (it
    did not stop cleanly), refuses the measure, naming the node and both counts."""
    closing = "[INFO] [1.0] [yolo]: " + CLOSING.format(
        frames_in=120, dropped=74, skipped=0, outputs=46, never_arrived=0
    )
    agreeing = checked("cam0", 46, "started\n" + closing + "\n")
    assert agreeing.agrees and agreeing.frames_in == 120
    refuse_disagreement([agreeing])  # nothing to refuse
    lost, unfinished = checked("cam1", 31, closing), checked("cam2", 12, "started, then killed")
    with pytest.raises(RuntimeError, match=r"refused: cam1: received 31, published 46 .*; cam2: received 12, no clos"):
        refuse_disagreement([agreeing, lost, unfinished])
    two = "frames in 3, dropped 1, skipped 0, outputs 2, never arrived 0\n"
    two += "frames in 9, dropped 1, skipped 2, outputs 6, never arrived 4"
    assert closing_counts(two) == {
        "frames_in": 9,
        "dropped": 1,
        "skipped": 2,
        "outputs": 6,
        "never_arrived": 4,
    }  # the last
    older = "frames in 9, dropped 1, skipped 2, outputs 6; per frame: pre-processing 1.20 ms"  # before it was counted
    assert closing_counts(older) == {"frames_in": 9, "dropped": 1, "skipped": 2, "outputs": 6, "never_arrived": 0}
    assert closing_counts("frames in 9, dropped 1") is None
