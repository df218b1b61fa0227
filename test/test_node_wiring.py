"""A family's node wiring as data (families/family.py): one output table per node shape, read by the node (its
publishers) and by `vision-factory models` and the generated README (their descriptions)."""

from __future__ import annotations

import pytest

from vision_factory.families.family import (
    DEBUG_IMAGE,
    IMAGE,
    IMAGE_INPUTS,
    NODE_ROS_DEPENDENCIES,
    Input,
    NodeWiring,
    Output,
)
from vision_factory.families.registry import FAMILIES, NODE_FAMILIES


def test_an_output_says_its_type_what_it_carries_and_when_it_is_published():
    markers = Output("track_markers", "visualization_msgs/msg/MarkerArray", ", a path", on_demand=True, when="tracking")
    assert markers.description == (
        "track_markers (visualization_msgs/MarkerArray, a path, with tracking on, when subscribed)"
    )
    assert not markers.published({"tracking": False}) and markers.published({"tracking": True})
    labels = Output("labels", "vision_msgs/msg/LabelInfo", ": the class map", latched=True)
    assert labels.description == "labels (vision_msgs/LabelInfo, transient local: the class map)"
    assert labels.published({})


def test_a_node_publishes_each_topic_once():
    image = Output("debug_image", "sensor_msgs/msg/Image")
    with pytest.raises(ValueError, match="publishes a topic twice"):
        NodeWiring("some_node", IMAGE_INPUTS, (image, image), NODE_ROS_DEPENDENCIES)


def test_a_node_whose_outputs_depend_on_a_parameter_has_that_parameter():
    for name, spec in NODE_FAMILIES.items():
        assert spec.node.outputs[0].message == spec.result.message, name
        parameters = {parameter.name for parameter in spec.node_parameters}
        for output in spec.node.outputs:
            assert not output.when or output.when in parameters, (name, output.topic)
    assert FAMILIES["reid"].node is None and FAMILIES["reid"].outputs == ()


def test_an_input_says_its_type_what_it_carries_and_when_it_is_subscribed():
    """Inputs are a table too (issue 22): described from it by `models` and the README, subscribed from it."""
    assert IMAGE.description == "image (sensor_msgs/Image) or image/compressed (sensor_msgs/CompressedImage)"
    people = Input("person_detections", "vision_msgs/msg/Detection2DArray", when=("person_source", "topic"))
    assert people.description == "person_detections (vision_msgs/Detection2DArray, with person_source topic)"
    assert people.subscribed({"person_source": "topic"}) and not people.subscribed({"person_source": "detector"})
    paired = Input("detections", "vision_msgs/msg/Detection2DArray", ", paired with the image of the same stamp")
    assert paired.description == ("detections (vision_msgs/Detection2DArray, paired with the image of the same stamp)")
    node = NodeWiring("some_node", (IMAGE, people), (DEBUG_IMAGE,), NODE_ROS_DEPENDENCIES)
    assert node.paired({"person_source": "topic"}) is people and node.paired({"person_source": "detector"}) is None
    with pytest.raises(ValueError, match="first input must be the images"):
        NodeWiring("some_node", (people,), (DEBUG_IMAGE,), NODE_ROS_DEPENDENCIES)


def test_the_nodes_that_pair_their_images_say_with_what():
    """The track node always pairs its images with another node's detections, the sam node with another node's boxes,
    rtmpose with person_source topic only, the depth node reads camera_info beside them (with camera_info on: the one
    of the image's stamp, else the newest; no image waits for it), the rest never: each node's subscriptions come
    from these tables (ros/inference_node.py)."""
    for name, spec in NODE_FAMILIES.items():
        defaults = {parameter.name: parameter.default for parameter in spec.node_parameters}
        paired = spec.node.paired(defaults)
        expected = {"track": "detections", "depth": "camera_info", "sam": "boxes"}.get(name)
        assert (paired.topic if paired else None) == expected, name
        for topic in spec.node.inputs:
            assert not topic.when or topic.when[0] in defaults, (name, topic.topic)
    topic_source = {**{p.name: p.default for p in FAMILIES["rtmpose"].node_parameters}, "person_source": "topic"}
    assert FAMILIES["rtmpose"].node.paired(topic_source).topic == "person_detections"
