#!/usr/bin/env python3
"""How often a frame sent once loses its on-demand answer, against test/support/ros_harness.py's Probe.answered.

    PYTHONPATH=. python benchmarks/on_demand_race.py [--rounds 20] [--json out.json]

One yolo node (a constant model: its one box, whatever the frame) in its own process. Each round, three ways, a
client makes readers of the node's detections and of its on-demand ~/debug_image (drawn only while the node's
writer counts a subscriber; the client's readers of the round before are gone), waits until its readers have
matched the node's writers and the node reads its image topic, then:

- ``once, new participant``: a fresh client (its own DDS participant, as a test's Probe) sends ONE frame, waits
  for its detections (kept for late readers, so they come), then up to ``--grace`` seconds more for its debug
  image. A debug image that never comes is a frame the node handled before its writer had learnt of the reader
  (discovery is not symmetric; nothing was published, so no QoS keeps it);
- ``once, known participant``: the same from one client kept for the run (the node knows its participant, so the
  new readers match on the client's side at once, and the node learns of them a moment later);
- ``answered, known participant``: Probe.answered from that client, which sends the frame again, stamped anew,
  until both answers of one stamp came.

``--stress N`` runs N busy processes on the node's CPU (the node pinned to it too), as a loaded CI machine starves
its threads. Printed: per way, rounds, rounds whose on-demand answer was missed, frames sent per round. A
measurement of this machine's discovery timing, not a test: nothing is asserted; test/test_on_demand.py asserts
that Probe.answered gets a reader that came last its answer, round after round.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "test"))


def one_round(probe, way: str, node, frame, first_sec: int, grace: float) -> tuple[bool, int]:
    """Readers of the node's detections and debug image made on ``probe`` now; the frame sent ``way``: whether both
    answers of one stamp came, and how many frames were sent."""
    from sensor_msgs.msg import Image
    from support.ros_harness import PATIENCE_S, stamp_of, stamped_anew
    from vision_msgs.msg import Detection2DArray

    for subscription in probe.subscriptions:  # the last round's readers: the node counts no subscriber
        probe.node.destroy_subscription(subscription)
    probe.subscriptions.clear()
    probe.received.clear()
    probe.spin_until(lambda: False, 1.0)  # for the node to learn they are gone (not known: a lost frame is counted)
    answers = {
        "/race/detections": probe.subscribe(Detection2DArray, "/race/detections"),
        "/race/debug_image": probe.subscribe(Image, "/race/debug_image"),
    }
    if "image" not in probe.publishers:
        probe.publishers["image"] = probe.publisher(Image, "/race/image")
    publisher = probe.publishers["image"]
    ready = lambda: publisher.get_subscription_count() > 0 and probe.matched()  # noqa: E731
    assert probe.spin_until(ready, PATIENCE_S), node.log_tail()
    send = stamped_anew(publisher, frame, first_sec=first_sec)
    if way.startswith("answered"):
        sent = []
        try:
            probe.answered(lambda: sent.append(send()) or sent[-1], answers, node)
            return True, len(sent)
        except AssertionError:
            return False, len(sent)
    stamp = send().stamp

    def came(topic: str) -> bool:
        return any(stamp_of(message) == stamp for message in answers[topic])

    assert probe.spin_until(lambda: came("/race/detections"), PATIENCE_S), node.log_tail()
    return probe.spin_until(lambda: came("/race/debug_image"), grace), 1


WAYS = ("once, new participant", "once, known participant", "answered, known participant")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--grace", type=float, default=3.0, help="seconds to wait for the debug image (once)")
    parser.add_argument(
        "--stress", type=int, default=0, help="busy processes sharing one CPU with the node (a loaded CI machine)"
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ.setdefault("FASTDDS_DEFAULT_PROFILES_FILE", str(ROOT / "config" / "fastdds_shm.xml"))
    os.environ.setdefault("ROS_DOMAIN_ID", str(random.Random().randrange(120, 200)))  # away from a test run's
    from support.models import _constant_model
    from support.nodes import _yolo_output
    from support.ros_harness import NodeProcess, Probe

    frame = np.full((240, 320, 3), 90, np.uint8)
    counts = {way: {"rounds": 0, "missed": 0, "sent": 0} for way in WAYS}
    with tempfile.TemporaryDirectory() as work:
        model = _constant_model(Path(work) / "m.onnx", _yolo_output())
        params = {"model_path": str(model), "qos_reliability": "reliable"}
        node = NodeProcess(Path(work), params, namespace="/race", module="vision_factory.yolo_onnx_node")
        known = Probe("race_known")
        known.publishers = {}
        burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.stress)]
        if burners:
            for pid in (node.process.pid, *(burner.pid for burner in burners)):
                os.sched_setaffinity(pid, {min(os.sched_getaffinity(0))})
        try:
            for index in range(args.rounds):
                for number, way in enumerate(WAYS):
                    probe = known
                    if way.endswith("new participant"):
                        probe = Probe(f"race_{index}")
                        probe.publishers = {}
                    try:
                        answered, sent = one_round(probe, way, node, frame, 1000 * (3 * index + number + 1), args.grace)
                    finally:
                        if probe is not known:
                            probe.close()
                    counts[way]["rounds"] += 1
                    counts[way]["missed"] += not answered
                    counts[way]["sent"] += sent
                print(f"round {index + 1}: {json.dumps(counts)}", flush=True)
        finally:
            for burner in burners:
                burner.kill()
                burner.wait()
            known.close()
            node.stop()
    for way, figures in counts.items():
        print(
            f"{way}: {figures['rounds']} rounds, on-demand answer missed in {figures['missed']},"
            f" frames sent per round {figures['sent'] / max(1, figures['rounds']):.2f}"
        )
    if args.json:
        args.json.write_text(json.dumps(counts, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
