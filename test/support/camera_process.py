"""A camera stand-in in its own process, as a user's rclpy script or a camera driver would be: publishes ``--count``
bgr8 frames of ``--width`` x ``--height`` at ``--rate`` on ``--topic`` with rclpy's default QoS (reliable, keep last
10) or best effort (sensor data), on whatever Fast DDS transport its environment gives it; then prints
``cpu S`` (the CPU seconds of its sending, the second after it included) and ``sent N`` last. Each frame's
header.frame_id is its index.

    python test/support/camera_process.py --width 1280 --height 720 --rate 30 --count 100

It waits for a subscriber (``--wait`` seconds at most), then ``--settle`` seconds more (discovery is not
symmetric: the subscriber may not know this publisher yet when this publisher sees it).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Mapping

import numpy as np
import rclpy
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import Image

from vision_factory.ros.transport import BUILTIN_VARIABLE, PROFILE_VARIABLES

RELIABLE = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)  # rclpy's default for a depth of 10
QOS = {"reliable": RELIABLE, "best_effort": qos_profile_sensor_data}
# For NodeProcess's env: a process on Fast DDS defaults (no profile, no builtin transports chosen), as the README's
# pip-only commands start it.
NO_TRANSPORT_CHOSEN: dict[str, str | None] = dict.fromkeys((*PROFILE_VARIABLES, BUILTIN_VARIABLE))


def send(
    topic: str,
    width: int,
    height: int,
    rate: float,
    count: int,
    reliability: str = "reliable",
    environ: Mapping[str, str] | None = None,
) -> int:
    """Run this camera in its own process with no Fast DDS transport chosen (Fast DDS defaults, as a user's script
    or a camera driver), in ``environ`` (default: this process' environment) otherwise: the frames it sent; a
    failure names its error."""
    environ = os.environ if environ is None else environ
    environment = {key: value for key, value in environ.items() if key not in NO_TRANSPORT_CHOSEN}
    command = [sys.executable, __file__, "--topic", topic, "--width", str(width), "--height", str(height)]
    command += ["--rate", str(rate), "--count", str(count), "--reliability", reliability]
    done = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=count / rate + 300)
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout.split()[-1])


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topic", default="/camera/image_raw")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=720)
    parser.add_argument("--rate", type=float, default=30.0, help="frames per second")
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--reliability", choices=sorted(QOS), default="reliable")
    parser.add_argument("--wait", type=float, default=120.0, help="seconds to wait for a subscriber at most")
    parser.add_argument("--settle", type=float, default=2.0, help="seconds after a subscriber matched")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    options = arguments(argv)
    rclpy.init()
    node = rclpy.create_node("camera")
    publisher = node.create_publisher(Image, options.topic, QOS[options.reliability])
    deadline = time.monotonic() + options.wait
    while publisher.get_subscription_count() == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if publisher.get_subscription_count() == 0:
        print(f"no subscriber on {options.topic} in {options.wait:g} s", file=sys.stderr)
        return 1
    time.sleep(options.settle)
    width, height = options.width, options.height
    pixels = np.random.default_rng(0).integers(0, 256, (height, width, 3), dtype=np.uint8).tobytes()
    message = Image(height=height, width=width, encoding="bgr8", step=3 * width, data=pixels)
    start, cpu = time.monotonic(), time.process_time()  # every thread's: Fast DDS sends from its own too
    for index in range(options.count):
        delay = start + index / options.rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        message.header.stamp = node.get_clock().now().to_msg()
        message.header.frame_id = str(index)
        publisher.publish(message)
    time.sleep(1.0)  # a reliable publisher repairs what was lost meanwhile
    print(f"cpu {time.process_time() - cpu:.4f}")
    print(f"sent {options.count}", flush=True)
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
