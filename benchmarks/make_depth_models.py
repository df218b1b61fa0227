#!/usr/bin/env python3
r"""Architecture-true depth test models, and what Hugging Face transformers' own depth pipeline returns on them:
test/data/depth/ (the ONNX files and reference.json), read by test/test_depth.py without PyTorch.

No trained depth weights ship on PyPI, so each model is transformers' own architecture from a small config with
seeded random weights (PyTorch's default init, then ``post_init``):
- ``depth-anything-relative.onnx``: ``DepthAnythingForDepthEstimation`` (a 4-layer DINOv2 backbone of hidden size
  32, patch 14; the DPT neck and head thinned) with ``depth_estimation_type="relative"``: relative inverse depth.
- ``depth-anything-metric.onnx``: the same with ``depth_estimation_type="metric"`` and ``max_depth`` 20 (V2's indoor
  head: sigmoid x max_depth, metres).
- ``dpt-relative.onnx``: a MiDaS-style relative model, ``DPTForDepthEstimation`` (a 4-layer ViT of hidden size 32,
  patch 16), its processor DPTImageProcessor's defaults (no aspect kept, mean and std 0.5) at size 64, exported at
  that fixed size (metadata ``model_type`` dpt, ``depth_kind`` relative).
- ``zoedepth-metric.onnx``: ``ZoeDepthForDepthEstimation`` as Intel/zoedepth-nyu is built (a BEiT backbone with
  relative position bias, here 4 layers of hidden size 32, patch 16, made for 96x96 and run at other sizes as the
  checkpoints are; the DPT neck, the relative head, one metric bin head of softplus bin centres and attractors), its
  metric head's last layers' weights scaled (``ZOE_GAINS``: random weights give a near-flat map), exported traced
  at another size than its processor's (metadata ``model_type`` zoedepth, ``image_size``; no ``depth_kind``: the
  architecture is metric only). Its processor is ZoeDepthImageProcessor as Intel/zoedepth-nyu-kitti's
  preprocessor_config.json sets it (reflect padding of int(sqrt(side / 2) * 3) on each side before the resize,
  keep aspect, multiple of 32, bilinear with align_corners on float values, mean and std 0.5) at size 96x128; its
  reference the pipeline's, one pass (post_process_depth_estimation without ``outputs_flipped``: the node runs no
  second flipped pass). 1.4 MB: most of it the TorchScript graph's 3728 nodes (BEiT's per-layer relative position
  bias, resized to each input's size, and the attractors), not weights.
Each is exported by ``torch.onnx.export`` (the TorchScript exporter, as Hugging Face Optimum does) with input
``pixel_values`` [1, 3, height, width] and output ``predicted_depth`` [1, height, width], height and width dynamic.
Depth Anything's head computes its interpolation size with int() of the traced patch counts, which would fix the
exported output size to the traced input's: the export replaces that forward with the same operations without
int() (``traceable_head``), and checks ONNX Runtime against PyTorch at a second size. The relative model records
what the node reads of a file (metadata ``model_type``, ``depth_kind``, ``image_size``); the metric one records
nothing, as Optimum's exports do: the node must be told.

An earlier attempt found ZoeDepth's export "not matching PyTorch even at the traced size": the export was right and
the PyTorch side wrong. ``torch.onnx.export`` puts the module it is given in eval mode while tracing and then back
in the mode it had; a wrapper made for the export is in training mode, so afterwards the model ran in training mode:
BEiT's stochastic depth (``drop_path_rate`` 0.1 by default; DINOv2's and ViT's is 0) dropped each residual branch at
random or scaled it by 1 / (1 - p): hidden states off by a relative 1e-3 from the second layer on (found comparing
each layer's output, ONNX Runtime against PyTorch; ONNX Runtime was self-consistent, PyTorch not). The wrapper is
now put in eval mode before the export; the Depth Anything and DPT files come out byte-identical (their backbones
have no stochastic layer). Nothing else needed patching: ONNX Runtime is within 4e-6 of the map's range of PyTorch
at the traced size and two others.

Depth Anything's image processor is the checkpoints' own (keep aspect, multiple of 14, PIL bicubic, ImageNet
mean/std), its size the small one the model was made for (transformers' default backend: torchvision, uint8,
antialiased). Reference: ``pipeline("depth-estimation", model, image_processor)`` (image processor + model +
``post_process_depth_estimation`` at the image's size) on real images (skimage.data), its ``predicted_depth`` (every
STRIDE-th row and column) written as .npy beside reference.json; and the same with transformers' PIL backend
(``DPTImageProcessorPil``, ``frames_pil``): the two backends' 8-bit resized images differ by one level in a few
pixels (37 of 23520 values for chelsea).

Run it in a scratch venv outside the repository, never in the project's venv. As the committed files were made
(Python 3.11, CPU only, nothing downloaded):

    /work/wt/export_venv/bin/python benchmarks/make_depth_models.py \\
        --images .venv/lib/python3.11/site-packages/skimage/data

The versions used are written into reference.json.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SEED = 0
IMAGES = ("chelsea", "coffee")  # skimage.data's PNG files: 300x451 and 400x600 RGB
STRIDE = 3  # the reference keeps every third row and column of each map (the committed files stay small)
DA_SIZE = 70  # the Depth Anything processor's size (5 x 14)
MAX_DEPTH = 20
DPT_SIZE = 64  # the DPT model's fixed input (4 x 16)
HEAD_GAIN = 20.0  # Depth Anything's last convolution's weights times this (random weights give a near-flat map)
ZOE_SIZE = (96, 128)  # the ZoeDepth processor's size (height, width; Intel/zoedepth-*: 384x512)
ZOE_GAINS = (400.0, 50.0)  # its log-binomial MLP's and seed bin regressor's last weights times these: maps of metres


def dinov2(size: int):
    from transformers import Dinov2Config

    return Dinov2Config(
        hidden_size=32,
        num_hidden_layers=4,
        num_attention_heads=2,
        intermediate_size=64,
        image_size=size,
        patch_size=14,
        out_indices=[1, 2, 3, 4],
        apply_layernorm=True,
        reshape_hidden_states=False,
    )


def randomised(model):
    """``model`` with every layer's weights at PyTorch's default (seeded) init: transformers' own init zeroes the
    heads' last layers, whose maps would then be constant."""
    import torch

    torch.manual_seed(SEED)
    for module in model.modules():
        if module is not model and hasattr(module, "reset_parameters"):
            module.reset_parameters()
    return model.eval()


def traceable_head(self, hidden_states, patch_height, patch_width):
    """DepthAnythingDepthEstimationHead.forward without its int() of the traced patch counts, which would fix the
    exported model's output size to the traced input's (the TorchScript tracer's warning); the same operations."""
    from torch import nn

    predicted_depth = self.conv1(hidden_states[self.head_in_index])
    size = (patch_height * self.patch_size, patch_width * self.patch_size)
    predicted_depth = nn.functional.interpolate(predicted_depth, size, mode="bilinear", align_corners=True)
    predicted_depth = self.activation1(self.conv2(predicted_depth))
    predicted_depth = self.activation2(self.conv3(predicted_depth)) * self.max_depth
    return predicted_depth.squeeze(dim=1)


def depth_anything(kind: str):
    import torch
    from transformers import DepthAnythingConfig, DepthAnythingForDepthEstimation

    torch.manual_seed(SEED)
    config = DepthAnythingConfig(
        backbone_config=dinov2(DA_SIZE),
        reassemble_hidden_size=32,
        neck_hidden_sizes=[8, 16, 32, 32],
        fusion_hidden_size=16,
        head_hidden_size=8,
        depth_estimation_type=kind,
        max_depth=MAX_DEPTH if kind == "metric" else 1,
    )
    model = randomised(DepthAnythingForDepthEstimation(config))
    model.head.forward = types.MethodType(traceable_head, model.head)
    with torch.no_grad():  # a head whose map varies across the image: relative inverse depth above 0 (its ReLU)
        model.head.conv3.weight.mul_(HEAD_GAIN)
        model.head.conv3.bias.fill_(1.0 if kind == "relative" else 0.0)
    return model


def depth_anything_processor(backend: str = "torchvision"):
    from transformers import DPTImageProcessor, DPTImageProcessorPil

    # LiheYoung/depth-anything-*-hf and depth-anything/Depth-Anything-V2-*-hf's preprocessor_config.json, but size
    return {"torchvision": DPTImageProcessor, "pil": DPTImageProcessorPil}[backend](
        do_resize=True,
        size={"height": DA_SIZE, "width": DA_SIZE},
        keep_aspect_ratio=True,
        ensure_multiple_of=14,
        resample=3,  # PIL bicubic
        do_rescale=True,
        rescale_factor=1 / 255,
        do_normalize=True,
        image_mean=[0.485, 0.456, 0.406],
        image_std=[0.229, 0.224, 0.225],
        do_pad=False,
    )


def dpt():
    """A MiDaS-style relative model: DPTForDepthEstimation (a 4-layer ViT of hidden size 32, patch 16), exported at
    its processor's fixed size (DPTImageProcessor's defaults: no aspect kept, mean and std 0.5)."""
    import torch
    from transformers import DPTConfig, DPTForDepthEstimation

    torch.manual_seed(SEED)
    config = DPTConfig(
        hidden_size=32,
        num_hidden_layers=4,
        num_attention_heads=2,
        intermediate_size=64,
        image_size=DPT_SIZE,
        patch_size=16,
        backbone_out_indices=[0, 1, 2, 3],
        neck_hidden_sizes=[8, 16, 32, 32],
        fusion_hidden_size=16,
        head_in_index=-1,
    )
    model = randomised(DPTForDepthEstimation(config))
    with torch.no_grad():  # a map that varies across the image, above 0 (the head's ReLU)
        model.head.head[-2].weight.mul_(HEAD_GAIN)
        model.head.head[-2].bias.fill_(1.0)
    return model


def dpt_processor(backend: str = "torchvision"):
    from transformers import DPTImageProcessor, DPTImageProcessorPil

    kind = {"torchvision": DPTImageProcessor, "pil": DPTImageProcessorPil}[backend]
    return kind(size={"height": DPT_SIZE, "width": DPT_SIZE})  # DPTImageProcessor's defaults but size


def zoedepth():
    """ZoeDepthForDepthEstimation as Intel/zoedepth-nyu is built (BEiT with relative position bias, the DPT neck,
    the relative head, one metric bin head: softplus bin centres and attractors), thinned."""
    import torch
    from transformers import BeitConfig, ZoeDepthConfig, ZoeDepthForDepthEstimation

    torch.manual_seed(SEED)
    backbone = BeitConfig(
        image_size=ZOE_SIZE[0],
        patch_size=16,
        num_hidden_layers=4,
        hidden_size=32,
        intermediate_size=64,
        num_attention_heads=2,
        use_relative_position_bias=True,
        reshape_hidden_states=False,
        out_features=["stage1", "stage2", "stage3", "stage4"],
    )
    config = ZoeDepthConfig(
        backbone_config=backbone,
        neck_hidden_sizes=[8, 16, 32, 32],
        fusion_hidden_size=16,
        num_relative_features=8,
        bottleneck_features=16,
        bin_embedding_dim=16,
        num_attractors=[4, 4, 2, 1],
        bin_configurations=[{"n_bins": 16, "min_depth": 0.001, "max_depth": 10.0}],
    )
    model = randomised(ZoeDepthForDepthEstimation(config))
    with torch.no_grad():  # per-pixel bin centres and distributions that differ: a map of metres that varies
        model.metric_head.conditional_log_binomial.mlp[2].weight.mul_(ZOE_GAINS[0])
        model.metric_head.seed_bin_regressor.conv2.weight.mul_(ZOE_GAINS[1])
    return model


def zoedepth_processor():
    from transformers import ZoeDepthImageProcessor

    # Intel/zoedepth-nyu-kitti's preprocessor_config.json (ZoeDepthImageProcessor's defaults, multiple 32), but size
    return ZoeDepthImageProcessor(
        do_pad=True,
        do_resize=True,
        size={"height": ZOE_SIZE[0], "width": ZOE_SIZE[1]},
        keep_aspect_ratio=True,
        ensure_multiple_of=32,
        resample=2,  # PIL bilinear: torch's bilinear, align_corners True
        do_rescale=True,
        rescale_factor=1 / 255,
        do_normalize=True,
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
    )


def export(
    model,
    path: Path,
    size: tuple[int, int],
    metadata: dict[str, str],
    dynamic: bool = True,
    other_size: tuple[int, int] | None = None,
) -> None:
    """``model`` as ONNX at ``path`` by the TorchScript exporter (as Optimum exports), traced at ``size``, height and
    width dynamic; checked against PyTorch at a second size (``other_size``, else 28 rows more and 14 columns less).
    """
    import onnx
    import onnxruntime
    import torch

    class Depth(torch.nn.Module):  # the predicted_depth alone, as Optimum's depth-estimation export gives it
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, pixel_values):
            return self.inner(pixel_values=pixel_values).predicted_depth

    sample = torch.randn(1, 3, *size)
    axes = (
        {"pixel_values": {2: "height", 3: "width"}, "predicted_depth": {1: "height", 2: "width"}} if dynamic else None
    )
    torch.onnx.export(  # eval: the exporter leaves the wrapper (and so the model) in the mode it had
        Depth(model).eval(),
        (sample,),
        str(path),
        input_names=["pixel_values"],
        output_names=["predicted_depth"],
        dynamic_axes=axes,
        opset_version=17,
        dynamo=False,
    )
    proto = onnx.load(str(path))
    del proto.metadata_props[:]
    for key, value in metadata.items():
        proto.metadata_props.add(key=key, value=value)
    onnx.save(proto, str(path))
    other_size = other_size or ((size[0] + 28, size[1] - 14) if dynamic else size)
    other = torch.randn(1, 3, *other_size)
    with torch.no_grad():
        expected = model(pixel_values=other).predicted_depth.numpy()
    found = onnxruntime.InferenceSession(str(path)).run(None, {"pixel_values": other.numpy()})[0]
    assert found.shape == expected.shape and np.allclose(found, expected, rtol=1e-4, atol=1e-5), (
        found.shape,
        expected.shape,
    )
    assert np.abs(found - expected).max() <= 1e-4 * (expected.max() - expected.min())


def reference(model, processor, name: str, images: Path, out: Path, suffix: str = "") -> list[dict]:
    import torch
    from PIL import Image
    from transformers import pipeline

    runner = pipeline("depth-estimation", model=model, image_processor=processor, device="cpu")
    records = []
    for image_name in IMAGES:
        image = Image.open(images / f"{image_name}.png").convert("RGB")  # what skimage.data.<name>() gives
        with torch.no_grad():
            found = runner(image)
            inputs = processor(images=image, return_tensors="pt")["pixel_values"]
            raw = model(pixel_values=inputs).predicted_depth[0].numpy()
        depth = found["predicted_depth"].numpy().astype(np.float32)
        saved = out / f"{name}_{image_name}{suffix}.npy"
        np.save(saved, np.ascontiguousarray(depth[::STRIDE, ::STRIDE]))
        records.append(
            {
                "image": image_name,
                "size": list(depth.shape),
                "depth": saved.name,
                "stride": STRIDE,
                "model_input": list(inputs.shape),
                "raw_min": float(raw.min()),
                "raw_max": float(raw.max()),
                "min": float(depth.min()),
                "max": float(depth.max()),
            }
        )
    return records


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "test" / "data" / "depth")
    parser.add_argument("--images", type=Path, required=True, help="skimage's data folder (skimage/data/)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    versions = {name: importlib.metadata.version(name) for name in ("torch", "transformers", "onnx", "pillow")}
    made = {}
    size = f"{DA_SIZE}x{DA_SIZE}"
    plans = (
        (
            "depth-anything-relative",
            lambda: depth_anything("relative"),
            depth_anything_processor,
            (DA_SIZE, DA_SIZE),
            {"model_type": "depth_anything", "depth_kind": "relative", "image_size": size},
        ),
        ("depth-anything-metric", lambda: depth_anything("metric"), depth_anything_processor, (DA_SIZE, DA_SIZE), {}),
        ("dpt-relative", dpt, dpt_processor, (DPT_SIZE, DPT_SIZE), {"model_type": "dpt", "depth_kind": "relative"}),
        (
            "zoedepth-metric",
            zoedepth,
            zoedepth_processor,
            ZOE_SIZE,
            {"model_type": "zoedepth", "image_size": f"{ZOE_SIZE[0]}x{ZOE_SIZE[1]}"},
        ),
    )
    for name, make, make_processor, input_size, metadata in plans:
        model, processor = make(), make_processor()
        path = args.out / f"{name}.onnx"
        if name.startswith("dpt"):  # fixed at its processor's size, as it resizes every frame to it
            export(model, path, input_size, metadata, dynamic=False)
        elif name.startswith("zoedepth"):  # traced at another size than the processor's (multiples of 32)
            export(
                model, path, (input_size[1], input_size[0]), metadata, other_size=(input_size[0], input_size[1] + 64)
            )
        else:  # traced at another size than the processor's: DINOv2 skips interpolating its position embeddings
            export(model, path, (input_size[0], input_size[1] + 3 * 14), metadata)
        made[path.name] = {
            "sha256": sha256(path),
            "metadata": metadata,
            "processor": type(processor).__name__,
            "processor_config": json.loads(processor.to_json_string()),
            "config": {
                "model_type": model.config.model_type,
                # ZoeDepth has no relative form: its metric head's bins are metres
                "depth_kind": getattr(model.config, "depth_estimation_type", None)
                or metadata.get("depth_kind", "metric" if model.config.model_type == "zoedepth" else None),
                "max_depth": getattr(model.config, "max_depth", None),
            },
            "frames": reference(model, processor, name, args.images, args.out),
        }
        if make_processor is not zoedepth_processor:  # its PIL backend computes the same float resize
            # the same with transformers' PIL backend (DPTImageProcessorPil): PIL's own bicubic resize
            made[path.name]["frames_pil"] = reference(model, make_processor("pil"), name, args.images, args.out, "_pil")
        print(path, path.stat().st_size, "bytes")
    (args.out / "reference.json").write_text(
        json.dumps({"versions": versions, "seed": SEED, "models": made}, indent=1) + "\n"
    )


if __name__ == "__main__":
    main()
