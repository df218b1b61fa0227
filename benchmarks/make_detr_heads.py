#!/usr/bin/env python3
r"""Architecture-true test models for the DETR heads, and what the exporting projects' own post-processing returns on
them: test/data/detr_heads/ (the ONNX files and reference.json), read by test/test_detr_heads.py without PyTorch.

- ``rtdetr-hf.onnx``: Hugging Face transformers' ``RTDetrForObjectDetection`` from a small seeded config (ResNet
  backbone of 8-64 channels, one block a stage; d_model 16, 2 decoder layers, 300 queries, 5 classes), exported with
  ``torch.onnx.export`` as ``pixel_values`` [1, 3, 320, 320] -> ``logits`` [1, 300, 5], ``pred_boxes`` [1, 300, 4].
  Reference: transformers' own image processor with its PIL backend (``RTDetrImageProcessorPil``: resize to 320x320
  with PIL's bilinear filter, rescale 1/255, no normalisation; the torchvision backend, transformers 5's default,
  resizes a few pixel values differently, which moves these random models' scores by up to 1e-3) and
  ``post_process_object_detection(threshold, target_sizes)`` (sigmoid, top-k over queries x classes) on ONNX
  Runtime's outputs for the same file.
- ``dfine-hf.onnx``: ``DFineForObjectDetection`` likewise (an HGNetV2 backbone of 8-64 channels), same interface;
  D-FINE's checkpoints use the same image processor (RTDetrImageProcessor).
- ``detr-hf.onnx``: ``DetrForObjectDetection`` (the original DETR) from a small seeded config: a transformers
  ResNet backbone (``use_timm_backbone=False``; timm's resnet50 is the default) of 8-64 channels, d_model 16, one
  encoder and two decoder layers, 100 queries, 5 classes plus DETR's "no object": ``logits`` [1, 100, 6],
  ``pred_boxes`` [1, 100, 4], metadata ``model_type: detr`` (the config's) added to the file. Its weights drawn with
  init_std 1.0 (the config's 0.02 gives every query the same box and scores to 1e-5). Reference: DETR's own image
  processor (``DetrImageProcessorPil`` at 320x320: PIL bilinear, 1/255, ImageNet mean and std) and its
  ``post_process_object_detection`` (softmax, the best class but "no object" of each query, above the threshold).
  ``--only detr-hf.onnx`` remakes this file alone (as it was made; the other files and their entries kept).
- ``rfdetr-renamed.onnx``: not RF-DETR's own model (its code needs a training stack and DINOv2 backbone not
  installable offline): rtdetr-hf.onnx with RF-DETR's export names (``input``; ``dets``, ``labels``). Reference:
  rfdetr 1.11.2's own ONNX Runtime reading (``rfdetr.export._runtime``: ``preprocess_to_nchw`` and
  ``decode_detections``, every class slot kept as PostProcess keeps them), from its wheel unpacked
  (``pip download rfdetr==1.11.2 --no-deps``, unzip; ``--rfdetr-source``).
- ``rtdetr-hf-deploy.onnx``: the RT-DETR repository's deploy export style (its tools/export_onnx.py: the model and
  its RTDETRPostProcessor in one graph): inputs ``images`` and ``orig_target_sizes`` [1, 2] (width, height), outputs
  ``labels``, ``boxes`` (x1, y1, x2, y2 in original-image pixels), ``scores``; here the RT-DETR model above wrapped
  with that post-processor's arithmetic (sigmoid, top-300 over queries x classes, boxes x the sizes). Reference: the
  repository's own deploy reading (PIL resize to 320x320 bilinear, ToTensor, the outputs above ``threshold``).
- ``rtdetr-ul.onnx``: Ultralytics' own RT-DETR from its ``rtdetr-l.yaml`` thinned (every channel count / 16, one
  repeat a block; decoder hidden 16, 2 layers, 300 queries; 3 classes), seeded, exported by Ultralytics
  (``format=onnx``, 320, simplified as by default): [1, 300, 6] rows cx, cy, w, h (normalised), score, class
  (Ultralytics 8.4's head selects the top 300 over queries x classes inside the graph). Reference:
  ``RTDETR(file).predict(image, conf)`` (its RTDETRPredictor: stretch, no letterbox; rows above conf in the model's
  order; boxes x the frame size).
- ``rtdetr-ul-old.onnx``: the same model exported the way Ultralytics up to 8.3 wrote RT-DETR ([1, 300, 4 + nc]:
  cx, cy, w, h normalised and the sigmoid class scores of each query; the decoder's postprocess as 8.3's forward was,
  and without the ``head`` metadata key 8.4 adds). Reference: 8.3's RTDETRPredictor.postprocess (max score per query
  above conf, model order, boxes x the frame size) on Ultralytics' own pre-processing of the frame.

Every model is seeded (torch.manual_seed(0)), its class heads re-drawn wider (``spread_scores``) so that random
queries score apart. Images: scikit-image's astronaut (512x512), coffee (400x600) and chelsea (300x451), read from
the project venv's skimage/data folder (--skimage-data). Run it in a scratch venv outside the repository, never in
the project's venv; as the committed files were made (Python 3.11, CPU only, nothing downloaded):

    python3.11 -m venv /work/wt/export_venv   # torch 2.14.1, torchvision 0.29.1, ultralytics 8.4.190,
                                              # transformers 5.24.0, onnx, onnxruntime, onnxslim, pillow
    YOLO_OFFLINE=1 HF_HUB_OFFLINE=1 YOLO_CONFIG_DIR=/tmp/ultra_detr /work/wt/export_venv/bin/python \
        benchmarks/make_detr_heads.py [--only detr-hf.onnx --only rfdetr-renamed.onnx]

The versions used are written into reference.json.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import importlib.metadata
import json
import os
import tempfile
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SEED = 0
SIZE = 320  # every model's input
SPREAD = {"rtdetr": 0.1, "dfine": 0.5, "ultralytics": 0.5, "detr": 1.0}  # the class heads' weights (spread_scores)
DETR_QUERIES = 100  # DetrConfig's default
DETR_INIT_STD = 1.0  # DetrConfig's 0.02 makes every query's box and scores the same to 1e-5
THIN = 16  # Ultralytics' rtdetr-l.yaml channel counts divided by this
NAMES = ["person", "cat", "cup", "rocket", "face"]  # the Hugging Face models' 5 classes
UL_NAMES = {0: "person", 1: "cat", 2: "cup"}
IMAGES = ("astronaut.png", "coffee.png", "chelsea.png")
# Random weights score alike almost everywhere: thresholds that keep some tens of detections per image.
# (Each clear of every score by 2e-4 and more.)
THRESHOLDS = {
    "rtdetr-hf.onnx": 0.7497,
    "dfine-hf.onnx": 0.5266,
    "rtdetr-hf-deploy.onnx": 0.7497,
    "detr-hf.onnx": 0.6,
    "rfdetr-renamed.onnx": 0.72,
}
UL_CONF = {"rtdetr-ul.onnx": 0.8019, "rtdetr-ul-old.onnx": 0.8019}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def default_skimage_data() -> Path:
    found = sorted(glob.glob("/work/main/.venv/lib/python3*/site-packages/skimage/data"))
    return Path(found[0]) if found else Path("skimage/data")


def record(boxes, scores, labels) -> list[dict]:
    return [
        {"xyxy": [round(float(v), 3) for v in box], "score": round(float(score), 6), "class_id": int(label)}
        for box, score, label in zip(boxes, scores, labels)
    ]


def image_cases(images: Path) -> list[tuple[str, Path]]:
    return [(name, images / name) for name in IMAGES]


def hf_config(kind: str):
    from transformers import DFineConfig, HGNetV2Config, RTDetrConfig, RTDetrResNetConfig

    labels = dict(enumerate(NAMES))
    common = dict(
        encoder_hidden_dim=16,
        encoder_ffn_dim=32,
        encoder_attention_heads=2,
        d_model=16,
        decoder_in_channels=[16, 16, 16],
        decoder_ffn_dim=32,
        decoder_layers=2,
        decoder_attention_heads=2,
        num_queries=300,
        id2label=labels,
        label2id={name: i for i, name in labels.items()},
    )
    if kind == "rtdetr":
        backbone = RTDetrResNetConfig(
            embedding_size=8,
            hidden_sizes=[8, 16, 32, 64],
            depths=[1, 1, 1, 1],
            layer_type="basic",
            out_features=["stage2", "stage3", "stage4"],
        )
        return RTDetrConfig(backbone_config=backbone, encoder_in_channels=[16, 32, 64], **common)
    backbone = HGNetV2Config(
        embedding_size=8,
        depths=[1, 1, 1, 1],
        hidden_sizes=[16, 32, 48, 64],
        stem_channels=[3, 8, 8],
        stage_in_channels=[8, 16, 32, 48],
        stage_mid_channels=[8, 8, 16, 16],
        stage_out_channels=[16, 32, 48, 64],
        stage_num_blocks=[1, 1, 1, 1],
        stage_numb_of_layers=[2, 2, 2, 2],
        out_features=["stage2", "stage3", "stage4"],
    )
    return DFineConfig(backbone_config=backbone, encoder_in_channels=[32, 48, 64], lqe_hidden_dim=16, **common)


def hf_model(kind: str):
    import torch
    from transformers import DFineForObjectDetection, RTDetrForObjectDetection

    torch.manual_seed(SEED)
    model_class = RTDetrForObjectDetection if kind == "rtdetr" else DFineForObjectDetection
    return spread_scores(model_class(hf_config(kind)).eval(), len(NAMES), SPREAD[kind])


def spread_scores(model, classes: int, spread: float):
    """The class heads (every Linear to ``classes`` outputs) drawn N(0, spread), biases 0, seeded: with their initial
    weights (a prior of 0.01, or tiny weights) every query scores the same to 1e-4 and the order of the detections
    would be chance; spread, it is clear by 1e-3 and more."""
    import torch

    generator = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.Linear) and module.out_features == classes:
                module.weight.copy_(torch.randn(module.weight.shape, generator=generator) * spread)
                module.bias.zero_()
    return model


class Outputs:
    """What post_process_object_detection reads of a model's outputs."""

    def __init__(self, logits, pred_boxes):
        self.logits, self.pred_boxes = logits, pred_boxes


def export_hf(model, target: Path) -> None:
    import torch

    class LogitsAndBoxes(torch.nn.Module):
        def __init__(self, detr):
            super().__init__()
            self.detr = detr

        def forward(self, pixel_values):
            out = self.detr(pixel_values=pixel_values)
            return out.logits, out.pred_boxes

    torch.onnx.export(
        LogitsAndBoxes(model),
        (torch.rand(1, 3, SIZE, SIZE),),
        str(target),
        input_names=["pixel_values"],
        output_names=["logits", "pred_boxes"],
        opset_version=17,
        dynamo=False,
    )


def hf_processor():
    from transformers.models.rt_detr.image_processing_pil_rt_detr import RTDetrImageProcessorPil

    return RTDetrImageProcessorPil(size={"height": SIZE, "width": SIZE})


def hf_reference(target: Path, images: Path, threshold: float) -> list[dict]:
    """transformers' own processor and post-processing on ONNX Runtime's outputs of the file."""
    import onnxruntime
    import torch
    from PIL import Image

    session = onnxruntime.InferenceSession(str(target), providers=["CPUExecutionProvider"])
    processor = hf_processor()
    cases = []
    for name, path in image_cases(images):
        image = Image.open(path).convert("RGB")
        pixels = processor(images=image, return_tensors="pt")["pixel_values"].numpy()
        logits, boxes = session.run(None, {"pixel_values": pixels})
        (found,) = processor.post_process_object_detection(
            Outputs(torch.from_numpy(logits), torch.from_numpy(boxes)),
            threshold=threshold,
            target_sizes=[(image.height, image.width)],
        )
        detections = record(found["boxes"].tolist(), found["scores"].tolist(), found["labels"].tolist())
        cases.append(case_entry(name, path, threshold, detections))
    return cases


def case_entry(name: str, path: Path, threshold: float, detections: list[dict]) -> dict:
    return {
        "image": name,
        "path": f"skimage:{name}",
        "sha256": sha256(path),
        "conf": threshold,
        "detections": detections,
    }


def hf_models(out: Path, images: Path) -> list[dict]:
    entries = []
    for kind, file in (("rtdetr", "rtdetr-hf.onnx"), ("dfine", "dfine-hf.onnx")):
        target = out / file
        export_hf(hf_model(kind), target)
        cases = hf_reference(target, images, THRESHOLDS[file])
        entries.append({"file": file, "sha256": sha256(target), "head": "logits_boxes", "cases": cases})
    entries.append(deploy_model(out, images))
    return entries


def deploy_model(out: Path, images: Path) -> dict:
    """The RT-DETR repository's deploy export: model and RTDETRPostProcessor (use_focal_loss) in one graph."""
    import onnxruntime
    import torch
    import torchvision.transforms as T
    from PIL import Image

    class Deploy(torch.nn.Module):
        def __init__(self, detr, classes: int, queries: int):
            super().__init__()
            self.detr, self.classes, self.queries = detr, classes, queries

        def forward(self, images, orig_target_sizes):
            out = self.detr(pixel_values=images)
            cx, cy, w, h = out.pred_boxes.unbind(-1)
            boxes = torch.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], -1)
            boxes = boxes * orig_target_sizes.repeat(1, 2).unsqueeze(1)
            scores = torch.sigmoid(out.logits)
            scores, index = torch.topk(scores.flatten(1), self.queries, dim=-1)
            labels = index % self.classes
            index = index // self.classes
            boxes = boxes.gather(dim=1, index=index.unsqueeze(-1).repeat(1, 1, boxes.shape[-1]))
            return labels, boxes, scores

    model = hf_model("rtdetr")
    file = "rtdetr-hf-deploy.onnx"
    target = out / file
    torch.onnx.export(
        Deploy(model, len(NAMES), 300),
        (torch.rand(1, 3, SIZE, SIZE), torch.tensor([[SIZE, SIZE]])),
        str(target),
        input_names=["images", "orig_target_sizes"],
        output_names=["labels", "boxes", "scores"],
        opset_version=17,
        dynamo=False,
    )
    session = onnxruntime.InferenceSession(str(target), providers=["CPUExecutionProvider"])
    transform = T.Compose([T.Resize((SIZE, SIZE)), T.ToTensor()])  # the repository's references/deploy reading
    threshold = THRESHOLDS[file]
    cases = []
    for name, path in image_cases(images):
        image = Image.open(path).convert("RGB")
        pixels = transform(image)[None].numpy()
        sizes = np.array([[image.width, image.height]], np.int64)
        labels, boxes, scores = session.run(None, {"images": pixels, "orig_target_sizes": sizes})
        keep = scores[0] > threshold
        cases.append(case_entry(name, path, threshold, record(boxes[0][keep], scores[0][keep], labels[0][keep])))
    return {"file": file, "sha256": sha256(target), "head": "deploy", "cases": cases}


def detr_model():
    """Hugging Face's DetrForObjectDetection from a small seeded config: a transformers ResNet backbone (not timm's,
    which the default config asks for) of 8-64 channels, one block a stage; d_model 16, one encoder and two decoder
    layers, 100 queries, 5 classes and DETR's "no object" class: logits [1, 100, 6]."""
    import torch
    from transformers import DetrConfig, DetrForObjectDetection, ResNetConfig

    backbone = ResNetConfig(
        embedding_size=8, hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1], layer_type="basic", out_features=["stage4"]
    )
    labels = dict(enumerate(NAMES))
    config = DetrConfig(
        use_timm_backbone=False,
        use_pretrained_backbone=False,
        backbone_config=backbone,
        d_model=16,
        encoder_layers=1,
        decoder_layers=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        num_queries=DETR_QUERIES,
        init_std=DETR_INIT_STD,
        id2label=labels,
        label2id={name: i for i, name in labels.items()},
    )
    torch.manual_seed(SEED)
    return spread_scores(DetrForObjectDetection(config).eval(), len(NAMES) + 1, SPREAD["detr"])


def detr_processor():
    """DETR's image processor (PIL backend) as a fixed-size export is fed: resized to the export's 320 x 320 (PIL
    bilinear), rescaled 1/255, normalised with ImageNet's mean and std (its defaults, kept)."""
    from transformers.models.detr.image_processing_pil_detr import DetrImageProcessorPil

    return DetrImageProcessorPil(size={"height": SIZE, "width": SIZE})


def detr_entry(out: Path, images: Path) -> dict:
    """``detr-hf.onnx``: logits (softmax over the classes and "no object") and pred_boxes, metadata ``model_type``
    (the transformers config's) recorded; reference: DETR's own processor and post_process_object_detection."""
    import onnx
    import onnxruntime
    import torch
    from PIL import Image

    file = "detr-hf.onnx"
    target = out / file
    export_hf(detr_model(), target)
    model = onnx.load(str(target))
    model.metadata_props.add(key="model_type", value="detr")
    onnx.save(model, str(target))
    session = onnxruntime.InferenceSession(str(target), providers=["CPUExecutionProvider"])
    processor = detr_processor()
    threshold = THRESHOLDS[file]
    cases = []
    for name, path in image_cases(images):
        image = Image.open(path).convert("RGB")
        pixels = processor(images=image, return_tensors="pt")["pixel_values"].numpy()
        logits, boxes = session.run(None, {"pixel_values": pixels})
        (found,) = processor.post_process_object_detection(
            Outputs(torch.from_numpy(logits), torch.from_numpy(boxes)),
            threshold=threshold,
            target_sizes=[(image.height, image.width)],
        )
        detections = record(found["boxes"].tolist(), found["scores"].tolist(), found["labels"].tolist())
        cases.append(case_entry(name, path, threshold, detections))
    return {"file": file, "sha256": sha256(target), "head": "logits_boxes_softmax", "cases": cases}


def rfdetr_source(source: Path):
    """rfdetr's own ONNX Runtime pre-processing and decoding (``rfdetr.export._runtime``: numpy, no PyTorch model),
    imported from its unpacked wheel without the package's ``__init__`` (which needs its training stack)."""
    import sys
    import types

    package = types.ModuleType("rfdetr")
    package.__path__ = [str(source / "rfdetr")]
    sys.modules.setdefault("rfdetr", package)
    from rfdetr.export._runtime.decode import decode_detections
    from rfdetr.export._runtime.preprocess import preprocess_to_nchw

    return preprocess_to_nchw, decode_detections


def rfdetr_entry(out: Path, images: Path, source: Path) -> dict:
    """``rfdetr-renamed.onnx``: NOT a model made by RF-DETR's code (its training stack and DINOv2 backbone are not
    installable offline here) but rtdetr-hf.onnx with RF-DETR's export names: input ``input``, outputs ``dets``
    [1, 300, 4] (cx, cy, w, h normalised) and ``labels`` [1, 300, 5] (logits). Reference: rfdetr's own ONNX Runtime
    reading of such a file (``preprocess_to_nchw``: bilinear, half-pixel, no antialias, ImageNet mean and std;
    ``decode_detections`` with every class slot kept, as ``RFDETR.predict``'s PostProcess keeps them: sigmoid, the
    top Q of queries x classes, above the threshold, boxes x the frame size clipped to it)."""
    import onnx
    import onnxruntime
    from PIL import Image

    preprocess_to_nchw, decode_detections = rfdetr_source(source)
    file = "rfdetr-renamed.onnx"
    model = onnx.load(str(out / "rtdetr-hf.onnx"))
    renames = {"pixel_values": "input", "logits": "labels", "pred_boxes": "dets"}
    for node in model.graph.node:
        node.input[:] = [renames.get(name, name) for name in node.input]
        node.output[:] = [renames.get(name, name) for name in node.output]
    for value in [*model.graph.input, *model.graph.output]:
        value.name = renames.get(value.name, value.name)
    outputs = sorted(model.graph.output, key=lambda value: value.name != "dets")  # RF-DETR's order: dets, labels
    del model.graph.output[:]
    model.graph.output.extend(outputs)
    target = out / file
    onnx.save(model, str(target))
    session = onnxruntime.InferenceSession(str(target), providers=["CPUExecutionProvider"])
    threshold = THRESHOLDS[file]
    cases = []
    for name, path in image_cases(images):
        with Image.open(path) as image:
            pixels = preprocess_to_nchw(image.convert("RGB"), SIZE, SIZE, 3)
            size = image.size
        dets, labels = session.run(["dets", "labels"], {"input": pixels})
        found = decode_detections(dets[0], labels[0], size, threshold=threshold, background_class_id=None)
        cases.append(case_entry(name, path, threshold, record(found.xyxy, found.confidence, found.class_id)))
    return {"file": file, "sha256": sha256(target), "head": "rfdetr", "cases": cases}


def ultralytics_yaml(work: Path) -> Path:
    """Ultralytics' rtdetr-l.yaml, every channel count / THIN and one repeat a block, a thin decoder."""
    import yaml
    from ultralytics.utils import ROOT as UL_ROOT

    cfg = yaml.safe_load((UL_ROOT / "cfg" / "models" / "rt-detr" / "rtdetr-l.yaml").read_text())
    cfg["nc"] = len(UL_NAMES)
    for layer in cfg["backbone"] + cfg["head"]:
        module, args = layer[2], layer[3]
        layer[1] = 1
        if module in ("HGStem", "HGBlock"):
            layer[3] = [max(a // THIN, 4) if i < 2 else a for i, a in enumerate(args)]
        elif module in ("DWConv", "Conv", "RepC3"):
            layer[3] = [args[0] // THIN, *args[1:]]
        elif module == "AIFI":
            layer[3] = [args[0] // THIN, 2]
        elif module == "RTDETRDecoder":
            layer[3] = ["nc", 16, 300, 4, 2, 2, 32]  # nc, hidden, queries, points, heads, layers, ffn
    target = work / "rtdetr-l.yaml"
    target.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return target


def ultralytics_models(out: Path, images: Path) -> list[dict]:
    import torch
    from ultralytics import RTDETR
    from ultralytics.nn.modules.head import RTDETRDecoder

    work = Path(tempfile.mkdtemp())
    torch.manual_seed(SEED)
    model = RTDETR(str(ultralytics_yaml(work)))
    model.model.names = dict(UL_NAMES)
    spread_scores(model.model, len(UL_NAMES), SPREAD["ultralytics"])
    here = Path.cwd()
    os.chdir(work)
    try:
        exported = Path(model.export(format="onnx", imgsz=SIZE, opset=17, simplify=True)).resolve()
        new = out / "rtdetr-ul.onnx"
        new.write_bytes(exported.read_bytes())
        exported.unlink()
        original = RTDETRDecoder.postprocess
        RTDETRDecoder.postprocess = lambda self, boxes, scores: torch.cat([boxes, scores], -1)  # 8.3's forward
        try:
            exported = Path(model.export(format="onnx", imgsz=SIZE, opset=17, simplify=True)).resolve()
        finally:
            RTDETRDecoder.postprocess = original
    finally:
        os.chdir(here)
    old = out / "rtdetr-ul-old.onnx"
    drop_metadata(exported, old, "head")
    entries = []
    for target in (new, old):
        entries.append(ultralytics_entry(target, images))
    return entries


def drop_metadata(source: Path, target: Path, key: str) -> None:
    import onnx

    model = onnx.load(str(source))
    kept = [p for p in model.metadata_props if p.key != key]
    del model.metadata_props[:]
    model.metadata_props.extend(kept)
    onnx.save(model, str(target))


def ultralytics_entry(target: Path, images: Path) -> dict:
    import torch
    from ultralytics import RTDETR
    from ultralytics.data.augment import LetterBox

    conf = UL_CONF[target.name]
    cases = []
    if target.name == "rtdetr-ul.onnx":
        loaded = RTDETR(str(target))
        for name, path in image_cases(images):
            result = loaded.predict(str(path), conf=conf, imgsz=SIZE, verbose=False)[0]
            boxes = result.boxes
            detections = record(boxes.xyxy.tolist(), boxes.conf.tolist(), boxes.cls.tolist())
            cases.append(case_entry(name, path, conf, detections))
        return {"file": target.name, "sha256": sha256(target), "head": "ultralytics", "cases": cases}
    import onnxruntime

    session = onnxruntime.InferenceSession(str(target), providers=["CPUExecutionProvider"])
    stretch = LetterBox((SIZE, SIZE), auto=False, scale_fill=True)  # RTDETRPredictor's pre_transform
    for name, path in image_cases(images):
        frame = cv2.imread(str(path))
        fitted = stretch(image=frame)
        tensor = np.ascontiguousarray(fitted[..., ::-1].transpose(2, 0, 1))[None].astype(np.float32) / 255
        (preds,) = session.run(None, {session.get_inputs()[0].name: tensor})
        preds = torch.from_numpy(preds)
        # Ultralytics 8.3's RTDETRPredictor.postprocess, as it was
        nd = preds.shape[-1]
        bboxes, scores = preds.split((4, nd - 4), dim=-1)
        bbox = torch.cat([bboxes[0][:, :2] - bboxes[0][:, 2:] / 2, bboxes[0][:, :2] + bboxes[0][:, 2:] / 2], -1)
        max_score, cls = scores[0].max(-1, keepdim=True)
        idx = max_score.squeeze(-1) > conf
        pred = torch.cat([bbox, max_score, cls], dim=-1)[idx]
        oh, ow = frame.shape[:2]
        pred[..., [0, 2]] *= ow
        pred[..., [1, 3]] *= oh
        cases.append(
            case_entry(name, path, conf, record(pred[:, :4].tolist(), pred[:, 4].tolist(), pred[:, 5].tolist()))
        )
    return {"file": target.name, "sha256": sha256(target), "head": "ultralytics_scores", "cases": cases}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "test" / "data" / "detr_heads")
    parser.add_argument("--skimage-data", type=Path, default=default_skimage_data())
    parser.add_argument(
        "--only",
        action="append",
        choices=("detr-hf.onnx", "rfdetr-renamed.onnx"),
        help="(re)make this file alone (repeatable), its entry replaced in the existing reference.json, the rest kept",
    )
    parser.add_argument(
        "--rfdetr-source",
        type=Path,
        default=Path("/tmp/rfdetr_dl/x"),
        help="rfdetr's wheel unpacked (pip download rfdetr==1.11.2 --no-deps; unzip): its ONNX reading, the reference",
    )
    args = parser.parse_args()
    os.environ.setdefault("YOLO_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("YOLO_CONFIG_DIR", str(Path(tempfile.gettempdir()) / "ultra_detr"))
    args.out.mkdir(parents=True, exist_ok=True)
    import onnxruntime
    import PIL
    import torch
    import transformers
    import ultralytics

    makers = {
        "detr-hf.onnx": lambda: detr_entry(args.out, args.skimage_data),
        "rfdetr-renamed.onnx": lambda: rfdetr_entry(args.out, args.skimage_data, args.rfdetr_source),
    }
    if args.only:
        reference = json.loads((args.out / "reference.json").read_text())
        kept = [entry for entry in reference["models"] if entry["file"] not in args.only]
        reference["models"] = [*kept, *(makers[file]() for file in makers if file in args.only)]
        reference["versions"]["rfdetr (its ONNX reading)"] = "1.11.2"
        (args.out / "reference.json").write_text(json.dumps(reference, indent=1) + "\n")
        return
    reference = {
        "generator": "benchmarks/make_detr_heads.py",
        "versions": {
            "transformers": transformers.__version__,
            "ultralytics": ultralytics.__version__,
            "torch": torch.__version__,
            "torchvision": importlib.metadata.version("torchvision"),
            "onnxruntime": onnxruntime.__version__,
            "pillow": PIL.__version__,
            "opencv": cv2.__version__,
            "numpy": np.__version__,
            "rfdetr (its ONNX reading)": "1.11.2",
        },
        "models": [
            *hf_models(args.out, args.skimage_data),
            *ultralytics_models(args.out, args.skimage_data),
            *(make() for make in makers.values()),
        ],
    }
    (args.out / "reference.json").write_text(json.dumps(reference, indent=1) + "\n")


if __name__ == "__main__":
    main()
