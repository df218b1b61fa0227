"""What each backend can really run on here: versions, providers and devices, or why not.

Each probe takes its backend's name and install hint, from its entry of the table (runtime/backends.py).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

from .runner import PROBE_MODEL


@dataclass
class BackendStatus:
    name: str
    installed: bool
    version: str = ""
    targets: list[str] = field(default_factory=list)  # providers / devices that really run
    notes: list[str] = field(default_factory=list)  # what is listed but cannot run, and why


def onnxruntime_status(name: str, install_hint: str) -> BackendStatus:
    try:
        ort = importlib.import_module("onnxruntime")
    except ImportError:
        return BackendStatus(name, False, notes=[install_hint])
    status = BackendStatus(name, True, ort.__version__)
    options = ort.SessionOptions()
    options.log_severity_level = 4
    from .providers import REMOTE_PROVIDERS

    for provider in ort.get_available_providers():
        if provider in REMOTE_PROVIDERS:
            status.notes.append(f"{provider} is not a place to run: {REMOTE_PROVIDERS[provider]}")
            continue
        try:
            session = ort.InferenceSession(PROBE_MODEL, options, providers=[provider])
            running = session.get_providers()[0]
        except Exception as exc:  # a provider listed by the build whose libraries or device are missing
            running, reason = None, str(exc).splitlines()[0][:160]
        else:
            reason = f"falls back to {running}"
        if running == provider:
            status.targets.append(provider)
        else:
            status.notes.append(f"{provider} is listed but cannot run: {reason}")
    return status


def openvino_status(name: str, install_hint: str) -> BackendStatus:
    try:
        ov = importlib.import_module("openvino")
    except ImportError:
        return BackendStatus(name, False, notes=[install_hint])
    core = ov.Core()
    targets = [f"{device} ({core.get_property(device, 'FULL_DEVICE_NAME')})" for device in core.available_devices]
    return BackendStatus(name, True, ov.__version__, targets + ["AUTO"])


def tensorrt_status(name: str, install_hint: str) -> BackendStatus:
    from .tensorrt_runner import _cudart, _tensorrt

    try:
        trt = _tensorrt()
    except RuntimeError as exc:  # its message names the fix (the runner's own hint: it is standalone)
        return BackendStatus(name, False, notes=[str(exc)])
    status = BackendStatus(name, True, trt.__version__)
    try:
        cudart = _cudart()
    except RuntimeError as exc:
        status.notes.append(str(exc))
        return status
    error, count = cudart.cudaGetDeviceCount()
    if int(error) != 0 or count == 0:
        status.notes.append(f"no CUDA device ({error})")
        return status
    for index in range(count):
        error, properties = cudart.cudaGetDeviceProperties(index)
        name = properties.name.decode() if isinstance(properties.name, bytes) else str(properties.name)
        status.targets.append(f"GPU {index}: {name.rstrip(chr(0))} (sm {properties.major}.{properties.minor})")
    return status
