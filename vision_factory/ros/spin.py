"""How a node command runs an inference node (ros/inference_node.py): until SIGINT/SIGTERM or its shutdown
transition, then shut down with the frames already accepted still answered."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.signals import SignalHandlerOptions

from ..text import untrusted
from .inference_node import START_UP_ERRORS, InferenceNode
from .transport import choose_transport

try:  # rclpy's C++ executor (Jazzy and later): 0.3-0.6 ms less CPU per frame (benchmarks/README.md)
    from rclpy.experimental import EventsExecutor as _Executor
except ImportError:  # older rclpy
    _Executor = SingleThreadedExecutor


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def spin(make_node: Callable[[], InferenceNode], name: str, args: list[str] | None = None) -> int:
    """Run a node until SIGINT/SIGTERM or its shutdown transition, then shut it down (pending frames answered);
    2 when it cannot start (the reason is logged). With autostart it is configured and activated first."""
    # The Fast DDS transport, before ROS starts: the package's node profile unless the user chose one.
    transport = choose_transport(os.environ)
    # Our own signal handling, so that pending results are still published on SIGINT/SIGTERM.
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    if transport:
        rclpy.logging.get_logger(name).info(transport)
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        node = make_node()  # with autostart, configured and activated (or raises why not)
    except START_UP_ERRORS as exc:
        # The reason can quote the model file (names, metadata) and parameters: one line, of bounded length.
        rclpy.logging.get_logger(name).fatal(f"cannot start: {untrusted(exc, 2000)}")
        rclpy.try_shutdown()
        return 2
    executor = _Executor()  # one executor: rclpy.spin_once would re-add the node every call
    executor.add_node(node)
    # From here a signal only asks the loop to end: raised inside a callback (a timer's, say), it would be logged
    # as that callback's fatal exception (seen in CI: a traceback on SIGTERM).
    stopping = threading.Event()
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda signum, frame: stopping.set())
    try:
        while rclpy.ok() and not node.finalized and not stopping.is_set():  # lifecycle shutdown ends it too
            executor.spin_once(timeout_sec=0.2)  # returns often, so the signal handlers run
    finally:
        if not node.finalized:
            node.trigger_shutdown()  # answers the frames already accepted (close())
        node.destroy_node()
        rclpy.try_shutdown()
    return 0
