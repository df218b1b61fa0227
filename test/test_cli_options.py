"""The command line's options that mean a node parameter take that parameter's default and description from its
table (vision_factory/cli_support.py's parameter_option), so a default changed in a family module changes the tool's
too; an option of a node parameter's name not made so is left unset (None) and the tool gives each family its node's
default."""

from __future__ import annotations

import click

from vision_factory.cli import main
from vision_factory.cli_support import ParameterOption
from vision_factory.families.registry import FAMILIES
from vision_factory.tools.predict import FINDING, POSING, node_values

UNSET = (None, getattr(click.core, "UNSET", None))  # Click 8.3 marks an option without a default UNSET
# Every parameter of every family's node (and of the re-id model the tracker loads), by name.
NODE_PARAMETERS = {parameter.name for spec in FAMILIES.values() for parameter in spec.node_parameters}


def _options():
    for name, command in main.commands.items():
        for param in command.params:
            if isinstance(param, click.Option):
                yield name, param


def test_every_option_mirroring_a_node_parameter_has_its_default_and_description():
    mirrored = [(name, option) for name, option in _options() if isinstance(option, ParameterOption)]
    # eval, compare: median_warmup, heatmap_threshold; eval, bench: stride; reid-tune: reid_input_size; track: every
    # tracking parameter but tracking.
    assert {name for name, _ in mirrored} == {"eval", "compare", "bench", "reid-tune", "track"}
    for name, option in mirrored:
        parameter = option.parameter
        assert option.default == parameter.default, (name, option.opts)
        assert parameter.description in option.help, (name, option.opts)
        assert option.type.name == click.types.convert_type(type(parameter.default)).name or option.opts == ["--stride"]


def test_an_option_named_as_a_node_parameter_is_unset_unless_made_from_it(tmp_path):
    named = [
        (name, option)
        for name, option in _options()
        if option.name in NODE_PARAMETERS and not isinstance(option, ParameterOption)
    ]
    assert named  # predict and track's detector options, quantize's --input-size
    for name, option in named:
        assert option.default in UNSET, (name, option.opts, option.default)
    # Unset, predict's and track's detector options are each family's node defaults.
    for family in ("yolo", "fasterrcnn", "rtmpose"):
        spec = FAMILIES[family]
        values = node_values(family, tmp_path / "m.onnx", {}, FINDING | POSING)
        assert values == {p.name: p.default for p in spec.parameters} | {"model_path": str(tmp_path / "m.onnx")}
