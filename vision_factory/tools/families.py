"""`vision-factory models`: the model families as text, from the registry (each node's outputs from the table its
node creates them from: families/family.py's Output)."""

from __future__ import annotations

from ..families.registry import FAMILIES
from ..runtime.backends import BACKENDS


def describe_families() -> str:
    """Each family: its summary, node, inputs, prompts, outputs and backends (every family runs on every backend)."""
    lines = []
    for spec in FAMILIES.values():
        lines.append(f"{spec.name}: {spec.summary}")
        node = f"{spec.executable} (node name {spec.node_name})" if spec.has_node else "none (serves the tracker)"
        lines.append(f"  node:     {node}")
        lines += [f"  in:       {topic}" for topic in spec.inputs]
        lines += [f"  prompt:   {prompt}" for prompt in spec.prompt_lines]
        lines += [f"  out:      {topic}" for topic in spec.outputs]
        lines.append(f"  backends: {', '.join(BACKENDS)}")
    return "\n".join(lines)
