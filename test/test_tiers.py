"""The test tiers (test/support/tiers.py): what a test reaches decides its tier, and the guard under which unit
tests run refuses what a unit test must not start."""

from __future__ import annotations

import os
import socket
import subprocess

import pytest
import rclpy
from support import tiers
from support.cli import run_cli
from support.ros_harness import Probe

from vision_factory.streaming import FrameQueue


def _starts_the_cli():
    return run_cli("--help")


def _through_a_helper():
    return _starts_the_cli()


def _talks_over_dds():
    probe = Probe()
    probe.close()


def _pure():
    queue = FrameQueue(size=1)
    return queue.put(1)


def _creates_a_context():
    rclpy.init()


def test_what_a_function_reaches_decides_its_tier():
    reach = tiers.Reach()
    assert reach.of(_pure) == set()
    assert reach.of(_starts_the_cli) == {"subprocess"}
    assert reach.of(_through_a_helper) == {"subprocess"}  # followed through the helpers it calls
    assert "dds" in reach.of(_talks_over_dds)
    assert reach.of(_creates_a_context) == {"dds"}


def test_the_guard_refuses_a_ros_context_a_process_and_a_connection():
    with pytest.MonkeyPatch.context() as patch:
        tiers.guard(patch)
        for start in (
            rclpy.init,
            lambda: subprocess.run(["true"]),
            lambda: os.system("true"),
            lambda: socket.create_connection(("127.0.0.1", 9), timeout=1),
        ):
            with pytest.raises(AssertionError, match="a unit test must not"):
                start()
    assert subprocess.run(["true"]).returncode == 0  # undone after


def test_each_test_is_marked_with_its_tier(request):
    assert request.node.get_closest_marker("unit") is not None  # it starts nothing: it runs under the guard
    guard_test = globals()["test_the_guard_refuses_a_ros_context_a_process_and_a_connection"]  # by name: not reached
    assert tiers.Reach().of(guard_test) == {"dds", "network", "subprocess"}
