"""From an ONNX model to a ROS 2 perception package: inspect the model, recognise it, generate code."""

# What a generated package says about itself (package.xml, setup.py, README): the defaults, and the option of
# `vision-factory generate` that sets each.
ABOUT_DEFAULTS = {
    "maintainer": "Package maintainer",
    "maintainer_email": "maintainer@example.com",
    "license": "Apache-2.0",
}
ABOUT_OPTIONS = {"maintainer": "--maintainer", "maintainer_email": "--maintainer-email", "license": "--license"}
