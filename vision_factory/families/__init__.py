"""Model families, one module each: what is specific to a family, in one place, with no ROS import.

A family module (tracknet.py, yolo.py, ...) holds the family's node parameters, how its node's
worker (a Detector, a BallStream) is built from their values, its output message, whether it
carries keypoints, its COCO IoU type, its recognition rule (kept beside its adapter in models/), its
one-line summary and its node's ROS wiring (a ``NodeWiring``: module, inputs, launch usage and the
table of its outputs, from which the node creates its publishers and `models` and READMEs describe
them), as one ``Family`` (family.py). registry.py lists the families;
every table of families (CLI choices, generator, eval, bench, replay) reads it.

This file imports nothing: a node imports only its own family's module, so a generated package
carries only its own family's code.
"""
