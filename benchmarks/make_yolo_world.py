#!/usr/bin/env python3
r"""Architecture-true YOLO-World and YOLOE test exports, their CLIP text encoder and tokenizer, and what Ultralytics'
own ``predict`` (PyTorch) returns on them: test/data/yolo_world/ (read by test/test_yolo_world.py without PyTorch).

- ``tokenizer.json``: CLIP's byte-level BPE built here with the ``tokenizers`` library (open_vocab_export's
  ``write_clip_tokenizer``, the one OWL's test export uses: <|endoftext|> the highest id).
- ``text_encoder.onnx``: transformers' ``CLIPTextModelWithProjection`` from a small seeded config (width 32, one
  layer, 77 positions, projection_dim 512, the tokenizer's vocabulary and end id), exported with ``torch.onnx.export``:
  ``input_ids``, ``attention_mask`` [N, T] (both dynamic) -> ``text_embeds`` [N, 512] (before the L2 normalisation,
  which Ultralytics' ``CLIP.encode_text`` applies after the tower, and the family after the file).
- ``yolov8n-worldv2-baked.onnx``: Ultralytics' ``WorldModel`` from its own ``yolov8-worldv2.yaml`` (thin: depth
  0.33, width 0.0625), seeded random weights (PyTorch's default init from seed 0, batch-norm statistics from 32
  shapes-seg-val images; the DFL's fixed weights kept; the contrastive heads' bias and logit scale set so that scores
  spread: BIAS, GAIN), its classes set as ``set_classes`` leaves them without downloading CLIP: ``txt_feats`` the
  L2-normalised text embeddings of BAKED [1, 4, 512] from text_encoder.onnx's tower, the head's ``nc`` 4, ``names``
  the phrases; exported by Ultralytics' own ``export(format="onnx", imgsz=320)``: a plain YOLO head [1, 4 + 4, 2100].
- ``yoloe-11n-baked.onnx``: ``YOLOEModel`` from ``yoloe-11.yaml`` (depth 0.5, width 0.0625), seeded likewise, its
  classes set by its own ``set_classes(names, head.get_tpe(embeddings))``; Ultralytics' export fuses them into the
  head (the reprta block gone): [1, 4 + 4, 2100].
- ``yolov8n-worldv2-text.onnx``: the same YOLO-World model taking the text embeddings as an input:
  ``torch.onnx.export`` of a thin wrapper around Ultralytics' own ``WorldModel.predict(images, txt_feats=...)``, the
  head in Ultralytics' export mode (as its exporter sets it: conv and batch-norm fused, ``export``, ``format``
  'onnx'): ``images`` [1, 3, 320, 320], ``txt_feats`` [1, 8, 512] -> ``output0`` [1, 4 + 8, 2100]. K is fixed: the
  head reshapes by its ``nc`` (``WorldDetect.forward``: ``xi.view(bs, self.no, -1)``), a Python int the tracer keeps.
  Metadata as Ultralytics writes it (task detect, imgsz, stride), no names: the classes are the prompt's.
- ``yoloe-11n-text.onnx`` (with --yoloe-text; not committed: its reprta block, Residual(SwiGLUFFN(512, 512)), is
  6.3 MB of weights whatever the scale): ``images``, ``tpe`` [1, 8, 512] -> ``output0``, around
  ``YOLOEModel.predict(images, tpe=...)`` (reprta and the L2 normalisation inside the graph). Its parity with
  Ultralytics' predict is checked here (CHECK_PIXELS) and written into reference.json.

References, per image x prompt: Ultralytics 8.4's ``predict`` on the PyTorch model (``imgsz`` 320, a square
letterbox: ``rect=False``, as a fixed-size export takes a frame; NMS per class: ``agnostic_nms=False``, as Ultralytics
runs an exported file, where its YOLOE wrapper's own predict defaults to class-agnostic NMS; ``iou`` 0.7; ``conf``
per image ``threshold``'s) with the prompt's phrases as its classes: for the text-input files ``txt_feats`` / ``pe``
of exactly the prompt's phrases (the family pads to K by repeating the last phrase: the result of the real phrases
is the same, as each class is scored apart and YOLO-World's attention takes a max over the phrases), for the baked
ones the BAKED phrases. Recorded: xyxy, score, class_id; and each prompt's L2-normalised embeddings' first values
(the text side checked apart). ``onnx_check``: the text-input ONNX file fed as the family feeds it (text_encoder.onnx,
normalised, padded to K) through Ultralytics' own letterbox and NMS, each reference box's distance to the nearest of
its class (``onnx_check_px``, printed and recorded).

Images: scikit-image's astronaut, coffee and chelsea (RGB turned BGR, as the test reads them). Run it in the scratch
venv (Ultralytics, PyTorch, transformers), never the project's; as the committed files were made:

    YOLO_OFFLINE=1 YOLO_CONFIG_DIR=/tmp/ultra_world /work/export_venv/bin/python benchmarks/make_yolo_world.py

(/work/export_venv: Python 3.11, torch 2.14.1, ultralytics 8.4.190, transformers 5.24.0, tokenizers, onnx,
onnxruntime, scikit-image; the versions are written into reference.json.)
"""

from __future__ import annotations

import argparse
import copy
import importlib.metadata
import json
import math
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_yolo_cls_obb import IMAGES, export, frame, restore_dfl  # noqa: E402
from make_yolo_heads import SEED, calibrate, default_shared, sha256, versions  # noqa: E402
from open_vocab_export import write_clip_tokenizer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SIZE = 320  # the exports' input side
K = 8  # the text-input exports' phrases
WIDTH = 512  # CLIP ViT-B/32's text embedding, YOLO-World's and YOLOE's
BIAS, GAIN = -2.0, 0.2  # the contrastive heads' bias and exp(logit_scale): scores spread from 0.1 to 0.99
KEEP = 20  # boxes an image keeps after NMS at its threshold: from KEEP to 4 KEEP
BAKED = ["a person", "a cat", "a cup of coffee", "a flag"]
PROMPTS = [
    ["a photo of a cat", "a photo of a dog"],
    ["an astronaut", "a flag", "a rocket"],
    ["a cup of coffee", "a spoon", "a plate", "a remote control"],
]
CHECK_PIXELS = 2.0


def tokenize(tokenizer, phrases: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Each phrase a row: [<|startoftext|> phrase <|endoftext|>] padded with 0 to the longest, mask 1 on its tokens."""
    rows = [tokenizer.encode(phrase).ids for phrase in phrases]
    ids = np.zeros((len(rows), max(map(len, rows))), np.int64)
    mask = np.zeros_like(ids)
    for i, row in enumerate(rows):
        ids[i, : len(row)], mask[i, : len(row)] = row, 1
    return ids, mask


def text_encoder(out: Path, vocab: dict[str, int]):
    """The seeded CLIP text tower with projection, exported; the torch module."""
    import torch
    from transformers import CLIPTextConfig, CLIPTextModelWithProjection

    torch.manual_seed(SEED)
    config = CLIPTextConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        max_position_embeddings=77,
        projection_dim=WIDTH,
        bos_token_id=vocab["<|startoftext|>"],
        eos_token_id=vocab["<|endoftext|>"],
        pad_token_id=0,
    )
    model = CLIPTextModelWithProjection(config).eval()

    class Tower(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):
            return self.model(input_ids=input_ids, attention_mask=attention_mask).text_embeds

    ids = torch.tensor([[vocab["<|startoftext|>"], 5, 6, vocab["<|endoftext|>"]]] * 2)
    axes = {"input_ids": {0: "phrases", 1: "tokens"}, "attention_mask": {0: "phrases", 1: "tokens"}}
    export_traced(
        Tower().eval(),
        (ids, torch.ones_like(ids)),
        out / "text_encoder.onnx",
        ["input_ids", "attention_mask"],
        ["text_embeds"],
        axes | {"text_embeds": {0: "phrases"}},
    )
    return model


def export_traced(module, args, target: Path, inputs, outputs, axes=None) -> None:
    import warnings

    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            args,
            str(target),
            opset_version=17,
            dynamo=False,
            input_names=inputs,
            output_names=outputs,
            dynamic_axes=axes,
        )


def embeddings(model, tokenizer, phrases: list[str]):
    """[1, N, 512] L2-normalised, as Ultralytics' CLIP.encode_text gives them (the tower's text_embeds / its norm)."""
    import torch

    ids, mask = tokenize(tokenizer, phrases)
    with torch.no_grad():
        embeds = model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask)).text_embeds
    return (embeds / embeds.norm(p=2, dim=-1, keepdim=True)).reshape(1, len(phrases), WIDTH)


def build(kind: str, work: Path, shared: Path):
    """The thin YOLO-World (world) or YOLOE (yoloe) model, seeded and calibrated, its scores lively."""
    import torch
    import yaml
    from ultralytics import YOLO
    from ultralytics.utils import ROOT as UL_ROOT

    folder, name, scale = {
        "world": ("v8", "yolov8-worldv2.yaml", [0.33, 0.0625, 1024]),
        "yoloe": ("11", "yoloe-11.yaml", [0.5, 0.0625, 1024]),
    }[kind]
    cfg = yaml.safe_load((UL_ROOT / "cfg" / "models" / folder / name).read_text())
    cfg["scales"], cfg["nc"] = {"n": scale}, K
    path = work / name.replace("-worldv2", "n-worldv2").replace("yoloe-11", "yoloe-11n")  # its scale, as YOLO reads it
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    torch.manual_seed(SEED)
    model = YOLO(str(path))
    placeholder = torch.nn.functional.normalize(torch.randn(1, K, WIDTH), dim=-1)
    if kind == "world":
        model.model.txt_feats = placeholder
    else:
        model.model.pe = placeholder
    calibrate(model.model, shared)
    restore_dfl(model.model)
    with torch.no_grad():
        for module in model.model.modules():
            if type(module).__name__ == "BNContrastiveHead":
                module.bias.fill_(BIAS)
                module.logit_scale.fill_(math.log(GAIN))
    return model


def set_classes(model, kind: str, phrases: list[str], feats) -> None:
    """The classes as set_classes leaves them, with embeddings computed here (no CLIP download)."""
    import torch

    names = dict(enumerate(phrases))
    if kind == "world":
        model.model.txt_feats = feats
        model.model.model[-1].nc = len(phrases)
        model.model.names = names
    else:
        with torch.no_grad():
            model.model.set_classes(phrases, model.model.model[-1].get_tpe(feats))
    if model.predictor is not None:
        model.predictor.model.names = names
    model.predictor = None  # a new predictor (the model fused again from these classes)


def threshold(model, image: str) -> float:
    """A confidence threshold keeping KEEP to 4 KEEP boxes after NMS, in the widest gap between their scores (NMS
    keeps a box by the boxes scoring above it alone, so the boxes above a threshold are those found at a lower one);
    the gap is recorded (``margin``): a box within the test's tolerance of it may be found on one side only."""
    scores = sorted(
        model.predict(frame(image), imgsz=SIZE, conf=0.001, rect=False, agnostic_nms=False, verbose=False)[
            0
        ].boxes.conf.tolist()
    )[::-1]
    if len(scores) <= KEEP:
        return 0.001
    ranks = range(KEEP, min(4 * KEEP, len(scores)))
    rank = max(ranks, key=lambda rank: scores[rank - 1] - scores[rank])  # the widest gap among them
    return round((scores[rank - 1] + scores[rank]) / 2, 5)


def predictions(model, image: str, conf: float) -> list[dict]:
    boxes = model.predict(frame(image), imgsz=SIZE, conf=conf, rect=False, agnostic_nms=False, verbose=False)[0].boxes
    return [
        {"xyxy": [round(v, 3) for v in box], "score": round(score, 5), "class_id": int(class_id)}
        for box, score, class_id in zip(boxes.xyxy.tolist(), boxes.conf.tolist(), boxes.cls.tolist())
    ]


def baked(kind: str, out: Path, work: Path, shared: Path, tower, tokenizer) -> dict:
    model = build(kind, work, shared)
    set_classes(model, kind, BAKED, embeddings(tower, tokenizer, BAKED))
    name = "yolov8n-worldv2-baked.onnx" if kind == "world" else "yoloe-11n-baked.onnx"
    target = export(copy.deepcopy(model), work, out / name, imgsz=SIZE, simplify=False)
    cases = []
    for image in IMAGES:
        conf = threshold(model, image)
        cases.append({"image": image, "conf": conf, "detections": predictions(model, image, conf)})
    return {"file": name, "sha256": sha256(target), "kind": kind, "phrases": BAKED, "cases": cases}


def with_text_module(model, kind: str, k: int):
    """A thin wrapper around Ultralytics' own forward with the text embeddings [1, k, 512] an input (``predict(images,
    txt_feats=...)`` / ``tpe=...``), the model prepared as Ultralytics' exporter prepares it; and that input's name."""
    import torch
    from ultralytics.nn.modules import C2f, Detect

    net = copy.deepcopy(model.model).eval()
    net.fuse(verbose=False)  # conv and batch norm, as the exporter; YOLOE's head keeps its text branch (no pe given)
    for module in net.modules():
        if isinstance(module, Detect):  # as Ultralytics' exporter leaves the head
            module.dynamic, module.export, module.format, module.shape = False, True, "onnx", None
            module.nc = k
        elif isinstance(module, C2f):
            module.forward = module.forward_split
    text_input = "txt_feats" if kind == "world" else "tpe"

    class WithText(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = net

        def forward(self, images, feats):
            return self.net.predict(images, **{text_input: feats})

    return WithText().eval(), text_input


def with_text(kind: str, out: Path, work: Path, shared: Path, tower, tokenizer) -> dict:
    """The export taking the text embeddings, and Ultralytics' predict of each prompt on the PyTorch model."""
    import torch

    model = build(kind, work, shared)
    module, text_input = with_text_module(model, kind, K)
    name = f"{'yolov8n-worldv2' if kind == 'world' else 'yoloe-11n'}-text.onnx"
    target = out / name
    dummy = torch.nn.functional.normalize(torch.randn(1, K, WIDTH), dim=-1)
    export_traced(module, (torch.zeros(1, 3, SIZE, SIZE), dummy), target, ["images", text_input], ["output0"])
    add_metadata(target, kind)
    cases = []
    for phrases in PROMPTS:
        feats = embeddings(tower, tokenizer, phrases)
        set_classes(model, kind, phrases, feats)
        for image in IMAGES:
            conf = threshold(model, image)
            detections = predictions(model, image, conf)
            cases.append({"image": image, "phrases": phrases, "conf": conf, "detections": detections})
    return {"file": name, "sha256": sha256(target), "kind": kind, "input": text_input, "cases": cases}


def add_metadata(target: Path, kind: str) -> None:
    """The metadata Ultralytics' exporter writes, without names (the prompt's phrases are the classes)."""
    import onnx

    graph = onnx.load(str(target))
    description = "Ultralytics YOLOv8n-worldv2" if kind == "world" else "Ultralytics YOLOE-11n"
    for key, value in {
        "description": f"{description}, text embeddings as an input (benchmarks/make_yolo_world.py)",
        "task": "detect",
        "stride": "32",
        "batch": "1",
        "imgsz": f"[{SIZE}, {SIZE}]",
    }.items():
        graph.metadata_props.add(key=key, value=value)
    onnx.save(graph, str(target))


def onnx_check(entry: dict, out: Path, tokenizer) -> float:
    """The largest distance from a reference box to the nearest box of its class that the ONNX text-input file gives
    (text_encoder.onnx's embeddings normalised and padded to K by the last phrase; Ultralytics' letterbox, NMS and
    scaling: its predictor cannot feed a second input); inf where a class has none."""
    import onnxruntime
    import torch
    from ultralytics.data.augment import LetterBox
    from ultralytics.utils.nms import non_max_suppression
    from ultralytics.utils.ops import scale_boxes

    session = onnxruntime.InferenceSession(str(out / entry["file"]), providers=["CPUExecutionProvider"])
    encoder = onnxruntime.InferenceSession(str(out / "text_encoder.onnx"), providers=["CPUExecutionProvider"])
    worst = 0.0
    for case in entry["cases"]:
        ids, mask = tokenize(tokenizer, case["phrases"])
        embeds = encoder.run(None, {"input_ids": ids, "attention_mask": mask})[0]
        embeds = embeds / np.linalg.norm(embeds, axis=-1, keepdims=True)
        feats = np.concatenate([embeds, np.repeat(embeds[-1:], K - len(embeds), 0)])[None].astype(np.float32)
        image = frame(case["image"])
        letter = LetterBox((SIZE, SIZE), auto=False)(image=image)
        tensor = np.ascontiguousarray(letter[..., ::-1].transpose(2, 0, 1))[None].astype(np.float32) / 255
        output = session.run(None, {"images": tensor, entry["input"]: feats})[0][:, : 4 + len(case["phrases"])]
        found = non_max_suppression(torch.from_numpy(output), case["conf"], 0.7)[0]
        found[:, :4] = scale_boxes((SIZE, SIZE), found[:, :4], image.shape)
        for want in case["detections"]:
            same = found[found[:, 5] == want["class_id"]]
            if len(same):
                worst = max(worst, float((same[:, :4] - torch.tensor(want["xyxy"])).abs().max(1).values.min()))
            else:
                worst = math.inf
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "test" / "data" / "yolo_world")
    parser.add_argument("--shared", type=Path, default=default_shared())
    parser.add_argument("--yoloe-text", action="store_true", help="also the YOLOE tpe export (7 MB), checked")
    args = parser.parse_args()
    os.environ.setdefault("YOLO_OFFLINE", "1")
    os.environ.setdefault("YOLO_CONFIG_DIR", str(Path(tempfile.gettempdir()) / "ultra_world"))
    from tokenizers import Tokenizer

    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp())
    vocab = write_clip_tokenizer(args.out)
    (args.out / "tokenizer_config.json").unlink()  # OWL's (16 tokens): the family reads tokenizer.json alone
    tokenizer = Tokenizer.from_file(str(args.out / "tokenizer.json"))
    tower = text_encoder(args.out, vocab)
    models = [
        baked("world", args.out, work, args.shared, tower, tokenizer),
        baked("yoloe", args.out, work, args.shared, tower, tokenizer),
        with_text("world", args.out, work, args.shared, tower, tokenizer),
    ]
    models[-1]["onnx_check_px"] = round(onnx_check(models[-1], args.out, tokenizer), 4)
    if args.yoloe_text:
        models.append(with_text("yoloe", args.out, work, args.shared, tower, tokenizer))
        models[-1]["onnx_check_px"] = round(onnx_check(models[-1], args.out, tokenizer), 4)
    for entry in models:
        print(entry["file"], [len(case["detections"]) for case in entry["cases"]], entry.get("onnx_check_px"))
    texts = {}
    for phrases in [BAKED, *PROMPTS]:
        texts[" . ".join(phrases)] = embeddings(tower, tokenizer, phrases)[0, :, :8].numpy().round(6).tolist()
    reference = {
        "generator": "benchmarks/make_yolo_world.py",
        "versions": versions()
        | {name: importlib.metadata.version(name) for name in ("transformers", "tokenizers", "scikit-image")},
        "imgsz": SIZE,
        "k": K,
        "text_encoder_sha256": sha256(args.out / "text_encoder.onnx"),
        "embeddings_first8": texts,
        "models": models,
    }
    (args.out / "reference.json").write_text(json.dumps(reference, indent=1) + "\n")


if __name__ == "__main__":
    main()
