"""ros/transport.py without ROS: which Fast DDS transport a node chooses for itself before rclpy starts, the profile
it applies, and what its warnings say about frames lost on the way. (Over real DDS: test_new_user.py's pip route,
test_monitor.py's lost frames; benchmarks/pip_route_transport.py counts every combination.)"""

from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree

import pytest

from vision_factory.ros import transport
from vision_factory.ros.transport import advice, choose_transport, config_profile, receive_buffer
from vision_factory.share import share_path

NODE_PROFILE = str(share_path("config", "fastdds_node.xml"))
SHARED_MEMORY = str(share_path("config", "fastdds_shm.xml"))
FRAME = 1280 * 720 * 3 + 64  # a 1280x720 bgr8 frame's message


def test_a_node_with_no_transport_chosen_applies_the_packages_udp_profile(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no DEFAULT_FASTDDS_PROFILES.xml here
    environ = {"ROS_DOMAIN_ID": "7"}
    line = choose_transport(environ)
    assert environ == {"ROS_DOMAIN_ID": "7", "FASTDDS_DEFAULT_PROFILES_FILE": NODE_PROFILE}
    assert config_profile("fastdds_node.xml") == NODE_PROFILE
    assert line == (
        "Fast DDS: frames received over UDP into a 32.0 MiB buffer, or TCP from a LARGE_DATA publisher "
        f"({NODE_PROFILE}; no profile was set: export FASTDDS_DEFAULT_PROFILES_FILE to choose another)"
    )
    environ = {"RMW_IMPLEMENTATION": "rmw_fastrtps_dynamic_cpp"}
    assert choose_transport(environ) and environ["FASTDDS_DEFAULT_PROFILES_FILE"] == NODE_PROFILE


@pytest.mark.parametrize(
    "chosen",
    [
        {"FASTDDS_DEFAULT_PROFILES_FILE": SHARED_MEMORY},
        {"FASTDDS_DEFAULT_PROFILES_FILE": ""},  # set, empty: Fast DDS defaults chosen
        {"FASTRTPS_DEFAULT_PROFILES_FILE": "/etc/old.xml"},
        {"FASTDDS_BUILTIN_TRANSPORTS": "LARGE_DATA"},
        {"RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"},  # not Fast DDS: its variables mean nothing
    ],
)
def test_a_transport_the_user_chose_is_kept(chosen, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    environ = dict(chosen)
    assert choose_transport(environ) == ""
    assert environ == chosen


def test_a_profile_in_the_working_directory_is_a_choice_too(tmp_path, monkeypatch):
    """Fast DDS loads DEFAULT_FASTDDS_PROFILES.xml from the working directory by itself (unless SKIP_DEFAULT_XML)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "DEFAULT_FASTDDS_PROFILES.xml").write_text("<dds/>")
    environ: dict[str, str] = {}
    assert choose_transport(environ) == "" and environ == {}
    environ = {"SKIP_DEFAULT_XML": "1"}
    assert choose_transport(environ) and environ["FASTDDS_DEFAULT_PROFILES_FILE"] == NODE_PROFILE


def test_the_node_profile_receives_over_udp_and_tcp_and_announces_no_shared_memory():
    """What makes a camera on Fast DDS defaults send over UDP (benchmarks/pip_route_transport.py measures it): UDPv4
    and TCPv4 transports (TCP: what a publisher in Fast DDS's LARGE_DATA mode sends data over), no builtin ones, data
    locators of those two only (rmw_fastrtps adds a shared-memory transport under
    ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST; it must not be offered for data)."""
    root = ElementTree.parse(NODE_PROFILE).getroot()
    namespace = {"dds": "http://www.eprosima.com"}
    kinds = [element.text for element in root.iterfind(".//dds:transport_descriptor/dds:type", namespace)]
    assert kinds == ["UDPv4", "TCPv4"]
    participant = root.find(".//dds:participant", namespace)
    assert participant.get("is_default_profile") == "true"
    assert participant.find(".//dds:useBuiltinTransports", namespace).text == "false"
    locators = participant.find(".//dds:defaultUnicastLocatorList", namespace)
    assert [child.tag.split("}")[1] for locator in locators for child in locator] == ["udpv4", "tcpv4"]
    assert receive_buffer() == 32 * 2**20


def test_advice_on_the_node_profile_names_the_receive_buffer_and_rmem_max():
    environ = {"FASTDDS_DEFAULT_PROFILES_FILE": NODE_PROFILE}
    small = advice(FRAME, [], environ, limit=212992)  # Ubuntu's default net.core.rmem_max
    assert small.startswith(
        "this node receives over UDP into a 0.2 MiB buffer (net.core.rmem_max caps it), too small for frames of "
        "2.6 MiB: raise it, sudo sysctl -w net.core.rmem_max=33554432; or export "
        f"FASTDDS_DEFAULT_PROFILES_FILE={SHARED_MEMORY} in the publisher's shell and in this node's"
    )
    roomy = advice(FRAME, ["/usb_cam"], environ, limit=8 * 2**20)
    assert roomy == (
        "this node receives over UDP into a 8.0 MiB buffer (net.core.rmem_max caps it); /usb_cam offers reliable "
        "delivery, which repairs lost fragments: -p qos_reliability:=reliable; or export "
        f"FASTDDS_DEFAULT_PROFILES_FILE={SHARED_MEMORY} in the publisher's shell and in this node's (shared memory "
        "both ways)"
    )
    assert "too small" not in advice(0, [], environ, limit=212992)  # no frame came: no size to compare


def test_advice_reads_the_receive_buffer_of_the_profile_the_node_runs_with(tmp_path):
    """A node profile of its own (benchmarks/pip_route_transport.py's pip_stock asks what a stock rmem_max grants):
    its buffer is named, and more rmem_max would not help."""
    mine = tmp_path / "fastdds_node.xml"
    mine.write_text(Path(NODE_PROFILE).read_text().replace("33554432", "212992"))
    text = advice(FRAME, [], {"FASTDDS_DEFAULT_PROFILES_FILE": str(mine)}, limit=8 * 2**20)
    assert text.startswith(
        "this node receives over UDP into a 0.2 MiB buffer (net.core.rmem_max caps it), too small for frames of "
        "2.6 MiB: raise it, its receiveBufferSize; or export"
    )


@pytest.mark.parametrize(
    "environ, fix",
    [
        ({"FASTDDS_DEFAULT_PROFILES_FILE": SHARED_MEMORY}, "start this node with FASTDDS_DEFAULT_PROFILES_FILE unset"),
        ({"FASTDDS_BUILTIN_TRANSPORTS": "DEFAULT"}, "start this node with FASTDDS_BUILTIN_TRANSPORTS unset"),
    ],
)
def test_advice_on_a_chosen_transport_names_it_and_the_way_back_to_the_node_profile(environ, fix):
    text = advice(FRAME, ["/a", "/b"], environ, limit=None)
    chosen = next(iter(environ.items()))
    assert text.startswith(
        f"this node runs with {chosen[0]}={chosen[1]}: a publisher on Fast DDS defaults sends frames of 2.6 MiB "
        f"through its own 512 KB shared-memory segment to a node that offers shared memory, which loses them; {fix} "
        "(it then receives over UDP into a large buffer, config/fastdds_node.xml); /a, /b offer reliable delivery"
    )


def test_a_node_profile_that_is_missing_leaves_fast_dds_defaults_and_says_so(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(transport, "NODE_PROFILE", "no_such_profile.xml")
    environ: dict[str, str] = {}
    line = choose_transport(environ)
    assert environ == {}
    assert line.startswith("Fast DDS defaults: the package's no_such_profile.xml is not at ")
    assert line.endswith("(reinstall vision_factory)")
