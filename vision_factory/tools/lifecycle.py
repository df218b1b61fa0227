"""`vision-factory lifecycle get|set|list NODE`: what ``ros2 lifecycle`` does, over a managed node's lifecycle_msgs
services, on rclpy alone. A transition is checked against those the node offers in its state before it is asked
for; a failed one is shown with what the node logged meanwhile (its /rosout warnings and errors: ``cannot
configure: ...``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState, GetAvailableTransitions, GetState
from rcl_interfaces.msg import Log
from rclpy.qos import QoSProfile

from ..text import untrusted
from .ros_graph import Graph

Emit = Callable[[str], None]
LOG_WAIT_S = 0.5  # after a failed transition, how long the node's log lines are waited for
SHOWN_LOG_LINES = 10


def state_text(state: Any) -> str:
    """'active [3]', as ros2 lifecycle get says it."""
    return f"{untrusted(state.label, 60)} [{state.id}]"


class LifecycleClient:
    """The lifecycle services of one running managed node (found as Graph.find_node finds it)."""

    def __init__(self, graph: Graph, node: str):
        self.graph = graph
        self.node = graph.find_node(node)
        namespace, _, name = self.node.rpartition("/")
        get_state = f"{self.node}/get_state"

        def offered() -> set[str]:
            return {service for service, _ in graph.node.get_service_names_and_types_by_node(name, namespace or "/")}

        # A node's services are discovered over a moment after the node itself (seen: an active lifecycle node
        # called unmanaged when its other services had come first): get_state is waited for, up to the timeout.
        graph.spin_until(lambda: get_state in offered(), graph.timeout)
        services = offered()
        if services and get_state not in services:
            raise ValueError(
                f"{self.node} is not a managed (lifecycle) node: it offers no {self.node}/get_state service"
            )

    def state(self) -> Any:
        client = self.graph.client(GetState, f"{self.node}/get_state")
        return self.graph.call(client, GetState.Request()).current_state

    def transitions(self) -> list[Any]:
        """The TransitionDescriptions the node offers in its state."""
        client = self.graph.client(GetAvailableTransitions, f"{self.node}/get_available_transitions")
        return list(self.graph.call(client, GetAvailableTransitions.Request()).available_transitions)

    def change(self, label: str) -> bool:
        """Ask for the transition ``label`` once (it is not asked again: a second would be another transition)."""
        client = self.graph.client(ChangeState, f"{self.node}/change_state")
        request = ChangeState.Request(transition=Transition(label=label))
        return self.graph.call(client, request, again=False).success


def get_state(node: str, emit: Emit, timeout: float) -> None:
    with Graph(timeout) as graph:
        emit(state_text(LifecycleClient(graph, node).state()))


def list_transitions(node: str, emit: Emit, timeout: float) -> None:
    """Each transition the node offers now: 'LABEL [ID]: START -> GOAL'."""
    with Graph(timeout) as graph:
        for offered in LifecycleClient(graph, node).transitions():
            label = f"{untrusted(offered.transition.label, 60)} [{offered.transition.id}]"
            emit(f"{label}: {state_text(offered.start_state)} -> {state_text(offered.goal_state)}")


def set_state(node: str, transition: str, emit: Emit, timeout: float) -> None:
    """Trigger ``transition``: 'Transitioning successful' and the state reached (shutdown: the node's process
    ends), or a ValueError saying it failed, the state the node is in and what it logged meanwhile. A transition
    the node does not offer in its state is refused before asking, naming those it offers."""
    with Graph(timeout) as graph:
        client = LifecycleClient(graph, node)
        said: list[str] = []
        logger = client.node.lstrip("/").replace("/", ".")  # the node's logger name on /rosout

        def logged(entry: Log) -> None:
            if entry.name == logger and entry.level >= Log.WARN and len(said) < SHOWN_LOG_LINES:
                said.append(untrusted(entry.msg, 1000))

        # Made first, so that it has matched the node's /rosout writer by the time the transition is asked for.
        graph.node.create_subscription(Log, "/rosout", logged, QoSProfile(depth=100))
        offered = [description.transition.label for description in client.transitions()]
        if transition not in offered:
            state = state_text(client.state())
            offers = ", ".join(untrusted(label, 60) for label in offered)
            raise ValueError(
                f"{client.node} is {state}, where {untrusted(transition)} is not a transition: it offers {offers}"
            )
        asked = time.monotonic()
        if client.change(transition):
            emit("Transitioning successful" + ("" if transition == "shutdown" else f": {state_text(client.state())}"))
            return
        graph.spin(max(0.0, LOG_WAIT_S - (time.monotonic() - asked)))
        state = state_text(client.state())
    why = f"the node said: {'; '.join(said)}" if said else "the node logged no warning or error for it"
    raise ValueError(f"Transitioning failed: {client.node} is {state}; {why}")
