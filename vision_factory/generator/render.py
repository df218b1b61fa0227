"""Jinja rendering with the conventions every template relies on."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import jinja2

from ..share import share_path

RENDERED_NOTE = "Rendered from vision_factory's templates/{template}: regenerate rather than edit."


def python_literal(value: Any) -> str:
    """A Python literal as ruff formats it (double-quoted strings)."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if value is None or isinstance(value, bool | int | float):
        return repr(value)
    raise TypeError(f"no literal for {type(value).__name__}")


def yaml_scalar(value: Any) -> str:
    """A YAML scalar that ROS reads back with the same type (1.0 stays a double)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return repr(value)


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(share_path("templates"))),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["py"] = python_literal
    env.filters["yaml"] = yaml_scalar
    return env


def render(template: str, **context: Any) -> str:
    """Render ``template`` (a path under templates/); ``rendered_note`` is provided."""
    note = RENDERED_NOTE.format(template=template)
    return environment().get_template(template).render(rendered_note=note, **context)
