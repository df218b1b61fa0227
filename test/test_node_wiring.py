"""A family's node wiring as data (families/family.py): one output table per node shape, read by the node (its
publishers) and by `vision-factory models` and the generated README (their descriptions)."""

from __future__ import annotations

import pytest

from vision_factory.families.family import IMAGE_INPUTS, NODE_ROS_DEPENDENCIES, NodeWiring, Output
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
