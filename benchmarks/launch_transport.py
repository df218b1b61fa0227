#!/usr/bin/env python3
"""What the launch files' Fast DDS profile costs and reaches: config/fastdds_node.xml against config/fastdds_shm.xml.

    python benchmarks/launch_transport.py cost                      # 1280x720 at 30 Hz, 300 frames, 2 rounds
    python benchmarks/launch_transport.py cost --rates 30,60 --frames 600 --rounds 3 --json cost.json
    python benchmarks/launch_transport.py hosts [--frames 100]      # root: two network namespaces

cost: a camera (test/support/camera_process.py: bgr8 frames, rclpy's default QoS) and a receiver (this script's
``receive``: a subscription with the node's default QoS, best effort, depth 5, that counts and keeps nothing) in
two processes on this machine, each on a transport:
  node      FASTDDS_DEFAULT_PROFILES_FILE=config/fastdds_node.xml (what a node applies to itself when nothing was
            set, ros/transport.py; what the launch files export by default): UDP into a 32 MiB buffer, TCP, no
            shared memory announced
  shm       FASTDDS_DEFAULT_PROFILES_FILE=config/fastdds_shm.xml: shared memory, UDP on loopback only
  defaults  FASTDDS_BUILTIN_TRANSPORTS=DEFAULT: Fast DDS defaults (a camera driver, a user's script)
Pairs, camera -> receiver: shm -> shm (the baseline: the launch files' profile before, exported in both shells),
shm -> node (the same camera, frames over UDP loopback into the node profile), defaults -> node, defaults -> shm.
Measured: frames in; the CPU of each process while streaming (the camera's sending loop; the receiver's first frame
to its last; time.process_time, every thread) as a share of one core and in ms per frame, and as a ratio to the
baseline's in the same round; the latency (receipt minus the frame's stamp: one clock). A round runs the pairs in
turn, then backwards (A B C D D C B A), so that other jobs' load falls on every pair alike.

hosts: two network namespaces joined by a veth pair stand in for two machines (each with its own network stack and
its own /dev/shm); the receiver on host A on each node-side transport (node, shm, defaults: fastdds_profile:=''),
a camera on Fast DDS defaults on host B, ROS_AUTOMATIC_DISCOVERY_RANGE unset (SUBNET) as between machines. Needs
root and iproute2; the namespaces are removed at the end (and at the start, if an earlier run left them).

ROS_DOMAIN_ID is ``--domain``, else one no test run or other benchmark here holds (test/support/domains.py).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pip_route_transport import CAMERA, ROOT, TRANSPORTS, VARIABLES
from report import environment, table

PROFILES = {"node": {"FASTDDS_DEFAULT_PROFILES_FILE": str(ROOT / "config" / "fastdds_node.xml")}}
PROFILES.update({name: TRANSPORTS[name] for name in ("shm", "defaults")})
COST_PAIRS = (("shm", "shm"), ("shm", "node"), ("defaults", "node"), ("defaults", "shm"))  # the first: baseline
HOSTS_PAIRS = (("defaults", "node"), ("defaults", "shm"), ("defaults", "defaults"))
HOSTS = ("vf_bench_host_a", "vf_bench_host_b")  # network namespaces: the receiver's host, the camera's
ADDRESSES = ("10.231.7.1/24", "10.231.7.2/24")
PRIVATE_SHM = 'mount -t tmpfs vf_bench_shm /dev/shm && exec "$@"'  # in `ip netns exec`'s own mount namespace


def transport_environment(name: str, work: Path, domain: int, subnet: bool = False) -> dict[str, str]:
    """This process' environment with transport ``name``'s variables and none of the others, in ``domain``."""
    env = {key: value for key, value in os.environ.items() if key not in VARIABLES}
    env.update(PROFILES[name], ROS_DOMAIN_ID=str(domain), ROS_HOME=str(work / "ros"), ROS_LOG_DIR=str(work / "log"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))
    if subnet:
        env.pop("ROS_AUTOMATIC_DISCOVERY_RANGE", None)
        env.pop("ROS_STATIC_PEERS", None)
    return env


def receive(argv: list[str]) -> int:
    """The receiver: count the frames of ``argv[0]`` until SIGINT, then print what it measured as JSON."""
    import rclpy
    from rclpy.executors import ExternalShutdownException
    from sensor_msgs.msg import Image

    from vision_factory.parameters import IMAGE_INPUT_PARAMETERS
    from vision_factory.ros.parameters import image_input

    _, qos = image_input({parameter.name: parameter.default for parameter in IMAGE_INPUT_PARAMETERS})
    rclpy.init()
    node = rclpy.create_node("transport_receiver")
    seen = {"count": 0, "latencies": [], "first": None, "last": None, "ids": []}

    def frame(message: Image) -> None:
        now, cpu = time.time(), time.process_time()
        stamp = message.header.stamp.sec + message.header.stamp.nanosec * 1e-9
        seen["count"] += 1
        seen["latencies"].append(now - stamp)
        seen["ids"].append(int(message.header.frame_id) if message.header.frame_id.isdigit() else -1)
        seen["first"] = seen["first"] or (now, cpu)
        seen["last"] = (now, cpu)

    node.create_subscription(Image, argv[0], frame, qos)
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):  # SIGINT: rclpy's handler, or Python's
        pass
    first, last = seen["first"], seen["last"]
    latencies = sorted(seen["latencies"])
    result = {
        "frames": seen["count"],
        "ids": seen["ids"],
        "wall_s": last[0] - first[0] if first else 0.0,
        "cpu_s": last[1] - first[1] if first else 0.0,
        "latency_ms_median": 1000 * statistics.median(latencies) if latencies else None,
        "latency_ms_p90": 1000 * latencies[int(0.9 * (len(latencies) - 1))] if latencies else None,
    }
    print(json.dumps(result), flush=True)
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


def run_pair(camera: str, receiver: str, size: str, rate: float, args, work: Path, places=(None, None)) -> dict:
    """One camera and one receiver, each on its transport; ``places``: the network namespaces of the receiver and of
    the camera (None: this one). What each measured, and the bytes that crossed the receiver's namespace's loopback."""
    width, height = size.split("x")
    receiving = [sys.executable, __file__, "receive", "/camera/image_raw"]
    sending = [sys.executable, str(CAMERA), "--width", width, "--height", height, "--rate", str(rate)]
    sending += ["--count", str(args.frames), "--wait", str(args.wait)]
    subnet = places[0] != places[1]  # two hosts: discovery as between machines, /dev/shm apart
    receiving, sending = (in_host(place, command, subnet) for place, command in zip(places, (receiving, sending)))
    loopback = loopback_bytes(places[0])
    receiver_process = subprocess.Popen(
        receiving, env=transport_environment(receiver, work, args.domain, subnet), stdout=subprocess.PIPE, text=True
    )
    try:
        sent = subprocess.run(
            sending,
            env=transport_environment(camera, work, args.domain, subnet),
            capture_output=True,
            text=True,
            timeout=args.frames / rate + args.wait + 60,
        )
        time.sleep(1.0)  # the last frames in flight
    finally:
        receiver_process.send_signal(signal.SIGINT)
        output, _ = receiver_process.communicate(timeout=60)
    got = json.loads(output.strip().splitlines()[-1])
    ids = set(got.pop("ids"))
    got["missing"] = [index for index in range(args.frames) if index not in ids][:50]  # the camera's frame indices
    words = sent.stdout.split()
    camera_cpu = float(words[words.index("cpu") + 1]) if "cpu" in words else None
    sending_s = args.frames / rate + 1.0  # camera_process's loop and its last second
    result = {"camera": camera, "receiver": receiver, "size": size, "rate": rate, "sent": 0, **got}
    result["camera_error"] = "" if sent.returncode == 0 else sent.stderr.strip()[-300:]
    if sent.returncode == 0:
        result["sent"] = int(words[-1])
    result["camera_cores"] = camera_cpu / sending_s if camera_cpu is not None else None
    result["camera_ms_per_frame"] = 1000 * camera_cpu / args.frames if camera_cpu is not None else None
    result["receiver_cores"] = got["cpu_s"] / got["wall_s"] if got["wall_s"] else None
    result["receiver_ms_per_frame"] = 1000 * got["cpu_s"] / (got["frames"] - 1) if got["frames"] > 1 else None
    frame = int(width) * int(height) * 3
    after = loopback_bytes(places[0])
    result["loopback_frames"] = (after - loopback) / frame / args.frames if after is not None else None
    return result


def in_host(place: str | None, command: list[str], own_shm: bool) -> list[str]:
    """``command`` run in network namespace ``place`` (None: as it is), with a /dev/shm of its own if ``own_shm``."""
    if place is None:
        return command
    return ["ip", "netns", "exec", place, *(["sh", "-c", PRIVATE_SHM, "sh"] if own_shm else []), *command]


def loopback_bytes(place: str | None) -> int | None:
    """The bytes received on network namespace ``place``'s loopback so far (None: not in a namespace of ours)."""
    if place is None:
        return None
    lines = subprocess.run(["ip", "netns", "exec", place, "cat", "/proc/net/dev"], capture_output=True, text=True)
    (line,) = [line for line in lines.stdout.splitlines() if line.strip().startswith("lo:")]
    return int(line.split(":", 1)[1].split()[0])


def cost(args, work: Path) -> list[dict]:
    places = (HOSTS[0], HOSTS[0]) if args.isolated else (None, None)
    if args.isolated:
        make_hosts(1)
    runs = []
    try:
        for round_index in range(args.rounds):
            for rate in args.rates:
                order = [*COST_PAIRS, *reversed(COST_PAIRS)]
                done = []
                for camera, receiver in order:
                    done.append(run_pair(camera, receiver, args.size, rate, args, work, places))
                    show(done[-1])
                baseline = [r for r in done if (r["camera"], r["receiver"]) == COST_PAIRS[0]]
                for result in done:
                    result["round"] = round_index
                    for side in ("camera", "receiver"):
                        values = [r[f"{side}_ms_per_frame"] for r in baseline if r[f"{side}_ms_per_frame"]]
                        mine = result[f"{side}_ms_per_frame"]
                        result[f"{side}_vs_baseline"] = mine / statistics.mean(values) if mine and values else None
                runs += done
    finally:
        if args.isolated:
            remove_hosts()
    return runs


def show(result: dict) -> None:
    print(
        f"{result['camera']:>8} -> {result['receiver']:<8} {result['size']} {result['rate']:g} Hz: "
        f"{result['frames']} of {result['sent']} in; camera {fmt(result['camera_ms_per_frame'])} ms/frame, receiver "
        f"{fmt(result['receiver_ms_per_frame'])} ms/frame; latency median {fmt(result['latency_ms_median'])} ms"
        f"{'; missing ' + str(result['missing'][:20]) if result['missing'] else ''}"
        f"{' camera: ' + result['camera_error'] if result['camera_error'] else ''}",
        flush=True,
    )


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def ip(*arguments: str, check: bool = True) -> None:
    subprocess.run(["ip", *arguments], check=check, capture_output=True, text=True)


def make_hosts(count: int) -> None:
    """``count`` network namespaces (HOSTS), each with its loopback up and an address on a veth link, multicast
    routed over it (Fast DDS's discovery): two are joined by one veth pair; one holds both ends of its pair."""
    remove_hosts()
    for host in HOSTS[:count]:
        ip("netns", "add", host)
    ends = HOSTS[:2] if count == 2 else (HOSTS[0], HOSTS[0])
    ip("link", "add", "vf_bench_a", "netns", ends[0], "type", "veth", "peer", "name", "vf_bench_b", "netns", ends[1])
    for host, link, address in zip(ends, ("vf_bench_a", "vf_bench_b"), ADDRESSES):
        ip("-n", host, "link", "set", "lo", "up")
        ip("-n", host, "link", "set", link, "up")
        if count == 2 or link == "vf_bench_a":  # one address per namespace
            ip("-n", host, "addr", "add", address, "dev", link)
            ip("-n", host, "route", "add", "224.0.0.0/4", "dev", link)


def remove_hosts() -> None:
    for host in HOSTS:
        ip("netns", "del", host, check=False)  # its veth ends go with it


def hosts(args, work: Path) -> list[dict]:
    make_hosts(2)
    try:
        runs = []
        for camera, receiver in HOSTS_PAIRS:
            runs.append(run_pair(camera, receiver, args.size, args.rates[0], args, work, HOSTS))
            show(runs[-1])
        return runs
    finally:
        remove_hosts()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["receive"]:
        return receive(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("cost", "hosts"))
    parser.add_argument("--size", default="1280x720")
    parser.add_argument("--rates", default="30", help="frames/s, comma-separated (hosts: the first)")
    parser.add_argument("--frames", type=int, default=300, help="frames per run")
    parser.add_argument("--rounds", type=int, default=2, help="cost: rounds of A B C D D C B A")
    parser.add_argument("--wait", type=float, default=60.0, help="seconds the camera waits for a subscriber")
    parser.add_argument("--isolated", action="store_true", help="cost: both processes in a network namespace")
    parser.add_argument("--domain", type=int, help="default: a free one (see above)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    args.rates = [float(rate) for rate in args.rates.split(",") if rate.strip()]
    if (args.mode == "hosts" or args.isolated) and os.geteuid() != 0:
        print(f"{'hosts' if args.mode == 'hosts' else '--isolated'} needs root (network namespaces) and iproute2")
        return 2
    if args.domain is None:
        sys.path.insert(0, str(ROOT / "test"))
        from support.domains import claim_domain

        args.domain = claim_domain()
    work = Path(tempfile.mkdtemp(prefix="launch_transport_"))
    runs = (cost if args.mode == "cost" else hosts)(args, work)
    header = ["camera", "receiver", "Hz", "sent", "frames in", "camera ms/frame", "x base", "receiver ms/frame"]
    header += ["x base", "receiver cores", "latency median ms", "p90 ms", "loopback bytes / frame sent"]
    rows = [
        [r["camera"], r["receiver"], r["rate"], r["sent"], r["frames"], r["camera_ms_per_frame"]]
        + [r.get("camera_vs_baseline"), r["receiver_ms_per_frame"], r.get("receiver_vs_baseline")]
        + [r["receiver_cores"], r["latency_ms_median"], r["latency_ms_p90"], r["loopback_frames"]]
        for r in runs
    ]
    discovery = os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE", "unset (SUBNET)")
    where = "two hosts, discovery SUBNET" if args.mode == "hosts" else f"ROS_AUTOMATIC_DISCOVERY_RANGE {discovery}"
    where += ", in a network namespace" * args.isolated
    print()
    print(table(f"{args.mode}: {args.size} bgr8, {where}, load {os.getloadavg()[0]:.1f}", header, rows))
    if args.json:
        record = {"environment": environment(1), "load": os.getloadavg(), "mode": args.mode, "runs": runs}
        args.json.write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
