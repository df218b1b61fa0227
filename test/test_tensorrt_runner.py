"""The TensorRT runner template, rendered into a package: real checks here, engine builds where a GPU is."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import logging
import shutil
import sys
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.real_models import REID_MODEL, SHARED

from vision_factory.generator.package import runner_context
from vision_factory.generator.render import render
from vision_factory.runtime.backends import backend
from vision_factory.tools.synthetic import build_inpaint_model

ROOT = Path(__file__).resolve().parent.parent
NEEDS_GPU = "needs an NVIDIA GPU with TensorRT and cuda-python"


def _gpu_available() -> bool:
    try:
        import tensorrt  # noqa: F401

        try:
            from cuda.bindings import runtime as cudart
        except ImportError:
            from cuda import cudart
    except ImportError:
        return False
    error, count = cudart.cudaGetDeviceCount()
    return int(error) == 0 and count > 0


needs_gpu = pytest.mark.skipif(not _gpu_available(), reason=NEEDS_GPU)


@contextlib.contextmanager
def _rendered(root: Path, package: str, model: Path | None = None) -> Iterator[Any]:
    """The rendered template (for ``model``: its inputs the runner's constants) as ``package.runtime.tensorrt_runner``
    under ``root``, next to copies of the modules it imports; its modules are forgotten after."""
    runtime = root / package / "runtime"
    runtime.mkdir(parents=True)
    (root / package / "__init__.py").write_text("")
    (runtime / "__init__.py").write_text("")
    shutil.copy(ROOT / "vision_factory" / "parameters.py", root / package / "parameters.py")
    shutil.copy(ROOT / "vision_factory" / "text.py", root / package / "text.py")  # runner.py escapes model text
    shutil.copy(ROOT / "vision_factory" / "runtime" / "runner.py", runtime / "runner.py")
    template = "runners/tensorrt.py.j2"
    (runtime / "tensorrt_runner.py").write_text(render(template, **runner_context(backend("tensorrt"), model)))
    sys.path.insert(0, str(root))
    try:
        yield importlib.import_module(f"{package}.runtime.tensorrt_runner")
    finally:
        sys.path.remove(str(root))
        for name in [name for name in sys.modules if name == package or name.startswith(f"{package}.")]:
            del sys.modules[name]


@pytest.fixture(scope="module")
def trt_module(tmp_path_factory):
    """The rendered template as ``pkg.runtime.tensorrt_runner``, for any model."""
    with _rendered(tmp_path_factory.mktemp("render"), "pkg") as module:
        yield module


@pytest.fixture(scope="module")
def inpaint_model(tmp_path_factory):
    return build_inpaint_model(tmp_path_factory.mktemp("trt_models") / "inpaint.onnx")


class ListHandler(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.fixture
def logged(request):
    """A logging.Logger whose messages are kept in ``logger.handlers[0].messages``."""
    logger = logging.getLogger(f"test_tensorrt.{request.node.name}")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger.handlers = [ListHandler()]
    return logger


def _key(trt_module, **changes):
    fields = dict(onnx_sha256="ab" * 32, tensorrt="10.3.0", gpu="NVIDIA H100", compute_capability="9.0")
    return trt_module.EngineKey(**{**fields, "precision": "fp32", **changes})


def test_renders_and_imports_without_tensorrt(trt_module):
    assert "templates/runners/tensorrt.py.j2: regenerate rather than edit" in trt_module.__doc__
    assert trt_module.TensorRtRunner.backend == "tensorrt"
    names = [parameter.name for parameter in trt_module.TensorRtRunner.PARAMETERS]
    assert names == ["precision", "engine_cache_dir", "device_id", "workspace_mb"]


def test_engine_key_digest_and_sidecar(trt_module):
    key = _key(trt_module)
    changes = dict(
        onnx_sha256="cd" * 32, tensorrt="10.4.0", gpu="NVIDIA L4", compute_capability="8.9", precision="fp16"
    )
    digests = {key.digest()} | {_key(trt_module, **{field: value}).digest() for field, value in changes.items()}
    assert len(digests) == 1 + len(changes)
    assert key.digest() == _key(trt_module).digest()
    sidecar = json.loads(json.dumps(asdict(key)))
    assert not key.mismatches(sidecar)
    assert key.mismatches({**sidecar, "tensorrt": "8.6.1"}) == ["built for TensorRT 8.6.1, now 10.3.0"]
    assert key.mismatches({**sidecar, "onnx_sha256": "00"}) == ["built from another ONNX file"]


def test_cached_engine_problem(trt_module, tmp_path):
    key = _key(trt_module)
    engine = tmp_path / "model-0123.engine"
    engine.write_bytes(b"engine")
    assert "sidecar model-0123.json is missing" in trt_module.cached_engine_problem(engine, key)
    engine.with_suffix(".json").write_text(json.dumps({**asdict(key), "tensorrt": "10.0.1"}))
    assert trt_module.cached_engine_problem(engine, key) == "built for TensorRT 10.0.1, now 10.3.0"
    engine.with_suffix(".json").write_text(json.dumps(asdict(key)))
    assert trt_module.cached_engine_problem(engine, key) is None


def test_static_input_shapes(trt_module):
    assert trt_module.static_input_shapes({"x": (-1, 16, 2), "y": (1, 16, 1)}) == {"x": (1, 16, 2), "y": (1, 16, 1)}
    with pytest.raises(ValueError, match=r"input 'image' \(1, 3, -1, -1\) on axis 2, 3.*static engines"):
        trt_module.static_input_shapes({"image": (1, 3, -1, -1)})


def test_onnx_metadata_without_onnx(trt_module, inpaint_model):
    import onnx

    expected = {entry.key: entry.value for entry in onnx.load(inpaint_model).metadata_props}
    assert trt_module.onnx_metadata(inpaint_model.read_bytes()) == expected
    assert expected["seq_len"] == "16"


def test_onnx_model_inputs_without_onnx(trt_module, inpaint_model, synthetic_models):
    """The inputs read from the file's protobuf are those the onnx package reads (initializers left out)."""
    from vision_factory.models.model_file import summarize
    from vision_factory.runtime.runner import model_inputs

    models = [inpaint_model, *synthetic_models.values(), *sorted((SHARED / "models").glob("*.onnx"))]
    for model in models:
        assert trt_module.onnx_model_inputs(model.read_bytes()) == model_inputs(summarize(model).inputs), model
    assert trt_module.onnx_model_inputs(REID_MODEL.read_bytes()) == (("images", (None, 3, 224, 224)),)


def test_a_runner_generated_for_a_model_refuses_another_before_building(tmp_path, synthetic_models, logged):
    """A TensorRT runner rendered for one model refuses a model of another input before anything else: before
    TensorRT is needed, and before minutes of building an engine for it."""
    with _rendered(tmp_path, "pkg_for_rgb", synthetic_models[""]) as module:
        assert module.MODEL_INPUTS == (("input", (1, 24, 288, 512)),)
        with pytest.raises(ValueError, match=r"takes input \[1, 8, 288, 512\], but this package was generated for a "):
            module.TensorRtRunner.load(synthetic_models["subtract"], {}, logged)


def test_settings_are_validated(trt_module, inpaint_model, logged):
    runner = trt_module.TensorRtRunner
    with pytest.raises(ValueError, match="fp32 or fp16"):
        runner.load(inpaint_model, {"precision": "int8"}, logged)
    with pytest.raises(ValueError, match="device_id"):
        runner.load(inpaint_model, {"device_id": -1}, logged)
    with pytest.raises(ValueError, match="workspace_mb"):
        runner.load(inpaint_model, {"workspace_mb": 0}, logged)
    with pytest.raises(ValueError, match="unknown TensorRT setting"):
        runner.load(inpaint_model, {"fp16": True}, logged)


def test_missing_tensorrt_names_the_install(trt_module, inpaint_model, logged):
    if importlib.util.find_spec("tensorrt") is not None:
        pytest.skip("tensorrt is installed here")
    with pytest.raises(RuntimeError, match="pip install tensorrt cuda-python.*NVIDIA GPU"):
        trt_module.TensorRtRunner.load(inpaint_model, {}, logged)


def test_build_engine_main_missing_model(trt_module, tmp_path, capsys):
    assert trt_module.build_engine_main(["--model", str(tmp_path / "missing.onnx")]) == 2
    assert "error: model file not found" in capsys.readouterr().err


@needs_gpu
def test_engine_matches_onnxruntime(trt_module, inpaint_model, tmp_path, logged):
    import onnxruntime

    runner = trt_module.TensorRtRunner.load(inpaint_model, {"engine_cache_dir": str(tmp_path)}, logged)
    try:
        assert [(i.name, i.shape, i.dtype) for i in runner.inputs] == [
            ("coords", (1, 16, 2), "float32"),
            ("mask", (1, 16, 1), "float32"),
        ]
        assert [(o.name, o.shape, o.dtype) for o in runner.outputs] == [("output", (1, 16, 2), "float32")]
        assert runner.metadata["model_name"] == "InpaintNet"
        assert runner.describe().startswith("TensorRT ") and "(fp32, engine inpaint-" in runner.describe()
        session = onnxruntime.InferenceSession(str(inpaint_model), providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(0)
        for _ in range(3):
            feeds = {
                "coords": rng.random((1, 16, 2), dtype=np.float32),
                "mask": (rng.random((1, 16, 1)) < 0.3).astype(np.float32),
            }
            (got,) = runner.run(feeds)
            (expected,) = session.run(None, feeds)
            np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-3)
        with pytest.raises(ValueError, match="must be float32"):
            runner.run({"coords": feeds["coords"].astype(np.float64), "mask": feeds["mask"]})
    finally:
        runner.close()
    assert any("built TensorRT engine" in message for message in logged.handlers[0].messages)


@needs_gpu
def test_engine_cache_hit_and_stale_sidecar(trt_module, inpaint_model, tmp_path, logged, capsys):
    messages = logged.handlers[0].messages
    assert trt_module.build_engine_main(["--model", str(inpaint_model), "--cache-dir", str(tmp_path)]) == 0
    engine_path = capsys.readouterr().out.strip()
    assert engine_path.endswith(".engine") and engine_path.startswith(str(tmp_path))

    runner = trt_module.TensorRtRunner.load(inpaint_model, {"engine_cache_dir": str(tmp_path)}, logged)
    runner.close()
    assert any(message.startswith("TensorRT engine loaded from") for message in messages)
    assert not any("built TensorRT engine" in message for message in messages)

    sidecar = tmp_path / (runner.engine_path.stem + ".json")
    sidecar.write_text(json.dumps({**json.loads(sidecar.read_text()), "tensorrt": "0.0.1"}))
    messages.clear()
    runner = trt_module.TensorRtRunner.load(inpaint_model, {"engine_cache_dir": str(tmp_path)}, logged)
    runner.close()
    assert any(
        "stale engine" in message and "built for TensorRT 0.0.1, now " in message and "rebuilding" in message
        for message in messages
    )
    assert any("built TensorRT engine" in message for message in messages)
    assert json.loads(sidecar.read_text())["tensorrt"] == runner.key.tensorrt
