"""The command line's own rclpy node, for the tools that watch and steer running nodes as ``ros2`` does (topics.py,
params.py, lifecycle.py), on the pip route too (no ros2cli): discovery waited for with a stated timeout, node and
topic names taken as a user types them (with or without the leading slash or the namespace), one that is not there
named with those that are (closest first), service calls asked again when unanswered, Ctrl-C honoured within a
tenth of a second (the node spins in steps of STEP_S, and rclpy's signal handlers are left out)."""

from __future__ import annotations

import difflib
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from ..text import untrusted

STEP_S = 0.1  # the longest the node spins at once: Ctrl-C is seen within it
AGAIN_S = 2.0  # an unanswered request that changes nothing if made twice is sent again after this long
SETTLE_S = 0.3  # after a service is seen, before the first request: its reply writer may match a moment later
QUIET_S = 1.0  # a listing waits, past its spin time, until discovery has found nothing new for this long
SHOWN_NAMES = 12  # names listed in a 'not found' message, closest first


def by_closeness(name: str, known: Iterable[str]) -> list[str]:
    """``known``, the names most like ``name`` first (difflib's ratio, ties in name order)."""
    return sorted(set(known), key=lambda other: (-difflib.SequenceMatcher(None, name, other).ratio(), other))


def listed(names: list[str], limit: int = SHOWN_NAMES) -> str:
    """``names`` (escaped: they come from the graph) as one bounded list."""
    shown = ", ".join(untrusted(name, 200) for name in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def full_name(namespace: str, name: str) -> str:
    return f"{namespace.rstrip('/')}/{name}"


def matching(given: str, names: Iterable[str], what: str) -> str | None:
    """The name of ``names`` (fully qualified) the user means by ``given``: itself with a leading slash; without
    one, the root's of that name, else the only one ending in /``given`` (in any namespace); None when none is
    (yet). Several such: a ValueError naming them."""
    names = set(names)
    wanted = given if given.startswith("/") else "/" + given
    if wanted in names or given.startswith("/"):
        return wanted if wanted in names else None
    ending = sorted(name for name in names if name.endswith(wanted))
    if len(ending) > 1:
        raise ValueError(f"{what} {untrusted(given)} could be any of {listed(ending)}: give the full name")
    return ending[0] if ending else None


class Graph:
    """A hidden rclpy node in a context of its own (the ROS domain of the environment), spun by its user.

    ``timeout``: seconds to wait for a node, a topic, a service or an answer before giving up with a message that
    says so (and names the option that sets it)."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self.context = rclpy.Context()
        # No rclpy signal handlers: Python's own makes Ctrl-C a KeyboardInterrupt, raised between two steps.
        rclpy.init(args=[], context=self.context, signal_handler_options=SignalHandlerOptions.NO)
        self.node = Node(
            f"_vision_factory_cli_{os.getpid()}",  # a leading underscore: hidden, as ros2cli's own node
            context=self.context,
            start_parameter_services=False,
            enable_rosout=False,
        )
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)

    def __enter__(self) -> Graph:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)

    def spin(self, seconds: float) -> None:
        """Spin for ``seconds`` (callbacks run, the graph is learnt)."""
        self.spin_until(lambda: False, seconds)

    def spin_until(self, condition: Callable[[], Any], seconds: float) -> bool:
        """Spin until ``condition()`` holds (True) or ``seconds`` have passed (False)."""
        deadline = time.monotonic() + seconds
        while not condition():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.executor.spin_once(timeout_sec=min(STEP_S, left))
        return True

    def learn(self, spin_s: float, seen: Callable[[], Any]) -> Any:
        """What ``seen()`` lists once the graph is learnt: after ``spin_s`` seconds, and then until it has not
        changed for QUIET_S (discovery of a loaded machine's nodes and topics comes in over seconds), at most
        ``spin_s`` more."""
        deadline, last, since = time.monotonic() + 2 * spin_s, None, time.monotonic()
        self.spin(spin_s)
        while True:
            now, found = time.monotonic(), seen()
            if found != last:
                last, since = found, now
            if now - since >= QUIET_S or now >= deadline:
                return found
            self.spin(STEP_S)

    @property
    def domain(self) -> str:
        return f"ROS_DOMAIN_ID {self.context.get_domain_id()}"

    # --- the graph -------------------------------------------------------------------------------------------------

    def nodes(self) -> list[str]:
        """The fully qualified names of the nodes seen, but hidden ones (a leading underscore: ros2cli's, ours)."""
        found = self.node.get_node_names_and_namespaces()
        return sorted({full_name(namespace, name) for name, namespace in found if not name.startswith("_")})

    def topics(self) -> dict[str, list[str]]:
        """Each topic seen, by fully qualified name, with its types."""
        return dict(sorted(self.node.get_topic_names_and_types()))

    def find_node(self, given: str) -> str:
        """The fully qualified name of the node ``given`` names (``matching``), waited for up to the timeout; else
        a ValueError naming it and the nodes seen, closest first."""
        return self._find(given, "node", self.nodes)

    def find_topic(self, given: str) -> tuple[str, list[str]]:
        """The topic ``given`` names (``matching``) and its types, waited for up to the timeout; else a ValueError
        naming it and the topics seen, closest first."""
        name = self._find(given, "topic", self.topics)
        return name, self.topics()[name]

    def _find(self, given: str, what: str, seen: Callable[[], Iterable[str]]) -> str:
        found: list[str] = []

        def there() -> bool:
            found[:] = [name] if (name := matching(given, seen(), what)) else []
            return bool(found)

        if self.spin_until(there, self.timeout):
            return found[0]
        names = list(seen())
        where = f"in {self.timeout:g} s (--timeout) on {self.domain}"
        if not names:
            raise ValueError(
                f"no {what} {untrusted(given)} seen {where}, nor any other: is the node running, on this "
                "ROS_DOMAIN_ID and with the same ROS_AUTOMATIC_DISCOVERY_RANGE?"
            )
        closest = by_closeness(given if given.startswith("/") else "/" + given, names)
        raise ValueError(f"no {what} {untrusted(given)} seen {where}; {what}s seen, closest first: {listed(closest)}")

    # --- services --------------------------------------------------------------------------------------------------

    def client(self, service_type: type, name: str) -> Any:
        """A client of the service ``name``, waited for up to the timeout (a ValueError saying so if not offered)."""
        client = self.node.create_client(service_type, name)
        if not self.spin_until(client.service_is_ready, self.timeout):
            raise ValueError(f"{untrusted(name)} is not offered: no answer in {self.timeout:g} s (--timeout)")
        self.spin(SETTLE_S)
        return client

    def call(self, client: Any, request: Any, again: bool = True) -> Any:
        """``client``'s answer to ``request``, sent again every AGAIN_S while unanswered when ``again`` (a request
        that changes nothing if made twice: a reply can be lost to DDS's service matching); a RuntimeError when no
        answer comes within the timeout."""
        deadline = time.monotonic() + self.timeout
        while True:
            future = client.call_async(request)
            left = deadline - time.monotonic()
            if self.spin_until(future.done, min(AGAIN_S, left) if again else left):
                return future.result()
            client.remove_pending_request(future)
            if time.monotonic() >= deadline:
                raise RuntimeError(f"{untrusted(client.service_name)} did not answer in {self.timeout:g} s (--timeout)")
