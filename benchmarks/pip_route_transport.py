#!/usr/bin/env python3
"""How many of a camera's frames reach a node started as the README's pip-only route starts it, by transport.

    python benchmarks/pip_route_transport.py                        # the whole matrix: 120 runs, 30-40 minutes
    python benchmarks/pip_route_transport.py --nodes pip --cameras defaults --sizes 1280x720 --rates 30
    python benchmarks/pip_route_transport.py --json out.json [--frames 100] [--model M.onnx] [--domain 42]

Per run: ``yolo_node --ros-args -p model_path:=MODEL -r image:=/camera/image_raw`` in its own process (its
console script, or ``python -m vision_factory.yolo_onnx_node`` where it is not on PATH), and a camera in another
(test/support/camera_process.py: ``--frames`` bgr8 frames at a rate, rclpy's default QoS or best effort). Counted:
the frames the camera sent, the frames the node says came (its closing line's "frames in" and "never arrived"),
and the node's answers this process received (against the node's own "outputs"). Not timed: a count; beside it
the node process' CPU time per frame that came (start-up and model included: compare rows of one camera setting).

Transports (``--nodes`` for the node's process, ``--cameras`` for the camera's; each process gets the variables
of its transport and none of the others):
  pip         nothing set: the node applies config/fastdds_node.xml to itself (ros/transport.py); for the camera
              the same as defaults (a camera is not a vision_factory node)
  defaults    FASTDDS_BUILTIN_TRANSPORTS=DEFAULT: Fast DDS defaults, which the node left alone (the pip route
              before the node chose its own transport)
  shm         FASTDDS_DEFAULT_PROFILES_FILE=config/fastdds_shm.xml (what the launch files set)
  large_data  FASTDDS_BUILTIN_TRANSPORTS=LARGE_DATA (Fast DDS's own large-data mode: data over TCP or shared
              memory; rmw_fastrtps ignores it where ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST, so there it is the
              defaults)
  pip_stock   (node only) config/fastdds_node.xml with the receive buffer Linux grants where net.core.rmem_max is
              Ubuntu's default, 212992 bytes: the pip route on a machine whose rmem_max was never raised

ROS_AUTOMATIC_DISCOVERY_RANGE is left as the shell has it (the report says which). ROS_DOMAIN_ID is ``--domain``,
else one that no test run or other benchmark on this machine holds (test/support/domains.py, as the tests claim
theirs): another process on /camera/image_raw or /detections in the same domain would be counted.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench_detection import shared_dir  # the shared models and data, found as the tests find them
from report import environment, table

from vision_factory.streaming import closing_counts

ROOT = Path(__file__).resolve().parent.parent
CAMERA = ROOT / "test" / "support" / "camera_process.py"
VARIABLES = ("FASTDDS_DEFAULT_PROFILES_FILE", "FASTRTPS_DEFAULT_PROFILES_FILE", "FASTDDS_BUILTIN_TRANSPORTS")
TRANSPORTS = {
    "pip": {},
    "defaults": {"FASTDDS_BUILTIN_TRANSPORTS": "DEFAULT"},
    "shm": {"FASTDDS_DEFAULT_PROFILES_FILE": str(ROOT / "config" / "fastdds_shm.xml")},
    "large_data": {"FASTDDS_BUILTIN_TRANSPORTS": "LARGE_DATA"},
}
STOCK_RMEM_MAX = 212992  # Ubuntu's default net.core.rmem_max: what the node's 32 MiB request gets there


def stock_profile(work: Path) -> Path:
    """config/fastdds_node.xml asking only the receive buffer a stock rmem_max grants (pip_stock)."""
    text = (ROOT / "config" / "fastdds_node.xml").read_text()
    path = work / "stock" / "fastdds_node.xml"  # the node profile's name: the node's advice reads it as such
    path.parent.mkdir(exist_ok=True)
    path.write_text(re.sub(r"(<receiveBufferSize>)\d+(</receiveBufferSize>)", rf"\g<1>{STOCK_RMEM_MAX}\g<2>", text))
    return path


def transport_environment(name: str, ros_home: Path, domain: int) -> dict[str, str]:
    environment = {key: value for key, value in os.environ.items() if key not in VARIABLES}
    if name == "pip_stock":
        environment["FASTDDS_DEFAULT_PROFILES_FILE"] = str(stock_profile(ros_home.parent))
    environment.update(TRANSPORTS.get(name, {}), ROS_DOMAIN_ID=str(domain), ROS_HOME=str(ros_home))
    environment["ROS_LOG_DIR"] = str(ros_home / "log")
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return environment


def node_command(model: Path) -> list[str]:
    """The README's pip-only command."""
    script = shutil.which("yolo_node")
    start = [script] if script else [sys.executable, "-m", "vision_factory.yolo_onnx_node"]
    return [*start, "--ros-args", "-p", f"model_path:={model}", "-r", "image:=/camera/image_raw"]


def run_once(listener, model: Path, node: str, camera: str, qos: str, size: str, rate: float, args, work: Path):
    """One node and one camera: the counts."""
    width, height = (int(part) for part in size.split("x"))
    log_path = work / f"node_{node}_{camera}_{qos}_{size}_{rate:g}.log"
    with log_path.open("w") as log:
        started = subprocess.Popen(
            node_command(model),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=transport_environment(node, work / "ros", args.domain),
        )
        try:
            answers_before = listener.count()
            sent = subprocess.run(
                [sys.executable, str(CAMERA), "--width", str(width), "--height", str(height), "--rate", str(rate)]
                + ["--count", str(args.frames), "--reliability", qos],
                env=transport_environment(camera, work / "ros", args.domain),
                capture_output=True,
                text=True,
                timeout=args.frames / rate + 300,
            )
            listener.settle()  # the last answers
        finally:
            started.send_signal(signal.SIGINT)
            cpu = node_cpu(started)
        listener.settle(quiet=0.5)
    text = log_path.read_text()
    closing = closing_counts(text) or dict.fromkeys(("frames_in", "dropped", "skipped", "outputs", "never_arrived"))
    frames_in, dropped, skipped, outputs, never = closing.values()
    sent_count = int(sent.stdout.split()[-1]) if sent.returncode == 0 and sent.stdout.strip() else 0
    return {
        "node": node,
        "camera": camera,
        "qos": qos,
        "size": size,
        "rate": rate,
        "sent": sent_count,
        "frames_in": frames_in,
        "never_arrived": never,
        "dropped": dropped,
        "outputs": outputs,
        "answers_received": listener.count() - answers_before,
        "node_cpu_s": cpu,
        "node_cpu_ms_per_frame_in": 1000 * cpu / frames_in if frames_in else None,
        "delivered": (frames_in / sent_count) if sent_count and frames_in is not None else None,
        "warned": "never reached this node" in text,
        "camera_error": sent.stderr.strip()[-300:] if sent.returncode else "",
        "log": str(log_path),
    }


def node_cpu(started: subprocess.Popen, timeout: float = 60.0) -> float:
    """The node's CPU seconds (user and system) once it has ended (killed after ``timeout`` s)."""
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(started.pid, os.WNOHANG)
        if pid:
            started.returncode = os.waitstatus_to_exitcode(status)
            return usage.ru_utime + usage.ru_stime
        if time.monotonic() > deadline:
            started.kill()
        time.sleep(0.1)


class Listener:
    """This process' reader of the node's answers (/detections), on its own transport (small messages), spinning in
    its own thread so that it takes each answer as it comes (a reader left unspun loses what overflows its history)."""

    def __init__(self):
        import rclpy
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from vision_msgs.msg import Detection2DArray

        self.rclpy = rclpy
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("pip_route_listener", context=self.context)
        self.answers = 0
        qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        self.node.create_subscription(Detection2DArray, "/detections", self._answer, qos)
        self.executor = rclpy.executors.SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()

    def _answer(self, _message) -> None:
        self.answers += 1

    def count(self) -> int:
        return self.answers

    def settle(self, quiet: float = 1.5, at_most: float = 30.0) -> None:
        """Wait until no answer came for ``quiet`` seconds (``at_most`` in all)."""
        end, last, since = time.monotonic() + at_most, self.answers, time.monotonic()
        while time.monotonic() < end and time.monotonic() - since < quiet:
            time.sleep(0.1)
            if self.answers != last:
                last, since = self.answers, time.monotonic()

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        self.rclpy.try_shutdown(context=self.context)


def model_path(given: Path | None, work: Path) -> Path:
    """``given``, else the shared shapes-yolov8n, else a constant model (test/support/models.py)."""
    if given is not None:
        return given
    shared = shared_dir(None) / "models" / "shapes-yolov8n.onnx"
    if shared.is_file():
        return shared
    sys.path.insert(0, str(ROOT / "test"))
    from support.models import _constant_model
    from support.nodes import _yolo_output

    return _constant_model(work / "constant.onnx", _yolo_output())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="pip,pip_stock,defaults,shm,large_data", help="the node's transports")
    parser.add_argument("--cameras", default="defaults,shm,large_data", help="the camera's transports")
    parser.add_argument("--qos", default="reliable,best_effort", help="the camera's reliability")
    parser.add_argument("--sizes", default="640x480,1280x720")
    parser.add_argument("--rates", default="10,30", help="frames/s")
    parser.add_argument("--frames", type=int, default=100, help="frames per run")
    parser.add_argument("--model", type=Path, help="default: shared shapes-yolov8n.onnx, else a constant model")
    parser.add_argument("--domain", type=int, help="default: a free one (see above)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    split = lambda text: [part.strip() for part in text.split(",") if part.strip()]  # noqa: E731
    nodes, cameras = split(args.nodes), [name if name != "pip" else "defaults" for name in split(args.cameras)]
    unknown = sorted(set(nodes + cameras) - set(TRANSPORTS) - {"pip_stock"})
    if unknown:
        print(f"unknown transport {', '.join(unknown)}: choose from {', '.join(TRANSPORTS)}")
        return 2
    if args.domain is None:
        sys.path.insert(0, str(ROOT / "test"))
        from support.domains import claim_domain

        args.domain = claim_domain()
    os.environ["ROS_DOMAIN_ID"] = str(args.domain)
    for variable in VARIABLES:  # this process (the answers' reader) on Fast DDS defaults
        os.environ.pop(variable, None)
    work = Path(tempfile.mkdtemp(prefix="pip_route_"))
    model = model_path(args.model, work)
    listener = Listener()
    runs = []
    matrix = itertools.product(nodes, dict.fromkeys(cameras), split(args.qos), split(args.sizes), split(args.rates))
    try:
        for node, camera, qos, size, rate in matrix:
            result = run_once(listener, model, node, camera, qos, size, float(rate), args, work)
            runs.append(result)
            delivered = result["delivered"]
            shown = "-" if delivered is None else f"{100 * delivered:.0f} %"
            print(
                f"node {node:10} camera {camera:10} {qos:11} {size:>8} {rate:>3} Hz: {result['frames_in']} of "
                f"{result['sent']} in ({shown}), never arrived {result['never_arrived']}, answers "
                f"{result['answers_received']} of the node's {result['outputs']}{' (warned)' * result['warned']}"
                f"{' camera: ' + result['camera_error'] if result['camera_error'] else ''}",
                flush=True,
            )
    finally:
        listener.close()
    header = ["node", "camera", "qos", "size", "Hz", "sent", "frames in", "%", "never arrived", "answers", "outputs"]
    header.append("node CPU ms/frame")
    rows = [
        [r["node"], r["camera"], r["qos"], r["size"], r["rate"], r["sent"], r["frames_in"]]
        + [None if r["delivered"] is None else round(100 * r["delivered"]), r["never_arrived"]]
        + [r["answers_received"], r["outputs"], r["node_cpu_ms_per_frame_in"]]
        for r in runs
    ]
    discovery = os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE") or "unset (SUBNET)"
    print()
    title = f"Frames delivered (ROS_AUTOMATIC_DISCOVERY_RANGE {discovery}, domain {args.domain}, model {model.name})"
    print(table(title, header, rows))
    pip = [r for r in runs if r["node"] == "pip" and r["camera"] == "defaults" and r["delivered"] is not None]
    for run in pip:
        print(
            f"pip route, camera on Fast DDS defaults, {run['qos']} {run['size']} at {run['rate']:g} Hz: "
            f"{run['frames_in']} of {run['sent']} frames reached the node ({100 * run['delivered']:.1f} %)"
        )
    if args.json:
        record = {"environment": environment(1), "discovery_range": discovery, "model": str(model), "runs": runs}
        args.json.write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
