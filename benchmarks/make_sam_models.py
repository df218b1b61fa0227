#!/usr/bin/env python3
r"""Architecture-true Segment Anything test models in the export layouts users have, and what transformers' own
processing returns on them: test/data/sam/ (the ONNX files and reference.json), read by test/test_sam.py without
PyTorch.

Every model is transformers' own ``SamModel`` (or ``Sam2Model``) from a small seeded configuration with the real
interface: a 1024 x 1024 input, 64 x 64 image embeddings, 256 x 256 low-resolution masks, 3 multimask outputs (and
SAM's single-mask one). Small: a ViT of width 16 and 2 layers (one windowed, one global), 32 embedding channels
(the real models have 256), a mask decoder of width 32; its weights re-drawn "lively" (benchmarks/sam_exports.py:
``liven``, every Linear and convolution N(0, 1/fan_in), every embedding N(0, 1); the positional encoding x
POSITION_SCALE; the mask decoder's attention SHARPEN times sharper), so that masks depend on the image and the
prompt (transformers' initialisation gives nearly the same mask everywhere; so lively, the masks of one image's
prompts overlap at IoU 0.35 on average, 0.8 at most, and cover 8-88% of it).

- ``hf-vision_encoder.onnx``: the Hugging Face / optimum / transformers.js split's encoder, ``pixel_values``
  [1, 3, 1024, 1024] -> ``image_embeddings`` [1, 32, 64, 64] and ``image_positional_embeddings`` [1, 32, 64, 64]
  (``get_image_embeddings`` and ``get_image_wide_positional_embeddings``, as optimum's SAM export gives them).
- ``hf-prompt_encoder_mask_decoder.onnx``: its decoder as optimum exports it: ``input_points`` [1, P, N, 2],
  ``input_labels`` [1, P, N], ``image_embeddings``, ``image_positional_embeddings`` -> ``iou_scores`` [1, P, 3],
  ``pred_masks`` [1, P, 3, 256, 256] (the prompt encoder pads each prompt's points with (0, 0) labelled -1 itself);
  P, the prompts of one run, is dynamic: all of a frame's point prompts in one run.
- ``hf-prompt_encoder_mask_decoder_boxes.onnx``: the same decoder taking ``input_boxes`` [1, B, 4] instead of
  points (transformers' decoder gives box corners their own embeddings; its points path has none for labels 2 and
  3, so a points-only export cannot take a box).
- ``meta-encoder.onnx``, ``meta-decoder.onnx``: Meta's segment-anything layout (its ``scripts/export_onnx_model.py``
  with ``SamOnnxModel``, default options, and the encoder as samexporter exports it: ``input_image`` ->
  ``image_embeddings``): the same SamModel wrapped with Meta's decoder signature, ``image_embeddings``,
  ``point_coords`` [1, N, 2], ``point_labels`` [1, N] (float; 1 foreground, 0 background, -1 padding, 2 and 3 a
  box's corners), ``mask_input`` [1, 1, 256, 256], ``has_mask_input`` [1], ``orig_im_size`` [2] (height, width) ->
  ``masks`` [1, 4, H, W] (in-graph post-processing as SamOnnxModel's ``mask_postprocessing``: up to 1024, the
  padding cut, to the original size), ``iou_predictions`` [1, 4], ``low_res_masks`` [1, 4, 256, 256]; output 0 the
  single-mask output, 1-3 the multimask ones. One prompt a run (the export fixes the batch at 1).
- ``sam2-encoder.onnx``, ``sam2-decoder.onnx``: SAM2's image predictor layout (samexporter's ``export_sam2.py``):
  transformers' ``Sam2Model`` (a Hiera of widths 8-64, 1, 1, 2, 1 blocks) wrapped as ``image`` ->
  ``high_res_feats_0`` [1, 4, 256, 256], ``high_res_feats_1`` [1, 8, 128, 128], ``image_embed`` [1, 32, 64, 64]
  (the no-memory embedding added); decoder ``image_embed``, ``high_res_feats_0``, ``high_res_feats_1``,
  ``point_coords`` [P, N, 2], ``point_labels`` [P, N], ``mask_input`` [P, 1, 256, 256], ``has_mask_input`` [P] ->
  ``masks`` [P, 3, 256, 256], ``iou_predictions`` [P, 3] (the padding point added inside; no ``orig_im_size``;
  the prompts are the batch, each with its own mask input, as samexporter's ``repeat_image=False``).

References, per file x image x prompt kind (three boxes, three single foreground points, each image's prompts in
one batch where the layout has a batch): transformers' ``SamProcessor`` with its PIL backend
(``SamImageProcessorPil``: the longest side to 1024 with PIL's bilinear filter, rescale 1/255, ImageNet mean and
std, zeros padded at the bottom and right; the prompts scaled per axis by the rounded size) and
``post_process_masks`` (bilinear up to 1024 x 1024, the padding cut, bilinear to the original size, > 0), on ONNX
Runtime's outputs of the same files; with 3 mask outputs the one of the highest predicted IoU (the raw IoU head
output, as transformers returns it). SAM2: ``Sam2Processor`` (its torchvision backend, the only one it has: resized
to 1024 x 1024, not padded) and its ``post_process_masks`` (bilinear to the original size, > 0). Each mask recorded
as its area, bounding box and its bits (row-major, numpy's packbits, zlib, base64; a mask two layouts give alike
stored once, by its digest), its IoU score to 6 decimals. The script also checks what the files are made of (said
on its output): the ONNX pipeline against the PyTorch model through the same processor (mask IoU >= 0.9992), and
Meta's in-graph masks against post_process_masks of its low-res ones (>= 0.9999). Meta's masks equal the HF split's
(the same model, a box's corners embedded alike): stored once.

Images: scikit-image's astronaut (512x512), coffee (400x600) and chelsea (300x451), read from the project venv's
skimage/data folder (--skimage-data). Run it in a scratch venv outside the repository, never in the project's
venv (Python 3.11, CPU only, nothing downloaded):

    python3.11 -m venv /work/export_venv   # torch 2.14.1, torchvision 0.29.1, transformers 5.24.0, onnx,
                                           # onnxruntime, pillow, scikit-image
    HF_HUB_OFFLINE=1 /work/export_venv/bin/python benchmarks/make_sam_models.py

The versions used are written into reference.json.
"""

from __future__ import annotations

import argparse
import base64
import glob
import hashlib
import importlib.metadata
import json
import os
import zlib
from pathlib import Path

import numpy as np
from sam_exports import export_hf, export_meta, export_sam2, sam2_model, sam_model

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ("astronaut.png", "coffee.png", "chelsea.png")
# The prompts of each image, in its pixels (x1, y1, x2, y2 boxes; x, y foreground points).
PROMPTS = {
    "astronaut.png": {
        "boxes": [[140.0, 20.0, 340.0, 240.0], [10.0, 250.0, 230.0, 500.0], [300.0, 280.0, 505.0, 505.0]],
        "points": [[250.0, 120.0], [100.0, 400.0], [420.0, 380.0]],
    },
    "coffee.png": {
        "boxes": [[150.0, 60.0, 450.0, 330.0], [10.0, 10.0, 200.0, 150.0], [420.0, 200.0, 590.0, 390.0]],
        "points": [[300.0, 200.0], [80.0, 60.0], [520.0, 300.0]],
    },
    "chelsea.png": {
        "boxes": [[100.0, 40.0, 350.0, 290.0], [0.0, 0.0, 120.0, 100.0], [330.0, 150.0, 450.0, 299.0]],
        "points": [[220.0, 150.0], [40.0, 40.0], [400.0, 250.0]],
    },
}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def default_skimage_data() -> Path:
    found = sorted(glob.glob("/work/main/.venv/lib/python3*/site-packages/skimage/data"))
    return Path(found[0]) if found else Path("skimage/data")


BITS: dict[str, str] = {}  # every mask recorded, by the SHA-256 of its packed bits (a mask two layouts share once)


def packed(mask: np.ndarray) -> str:
    """A bool mask's row-major bits packed (numpy's packbits), zlib-compressed, base64: its key in BITS."""
    data = base64.b64encode(zlib.compress(np.packbits(np.asarray(mask, bool).ravel()).tobytes(), 9)).decode()
    key = hashlib.sha256(data.encode()).hexdigest()[:16]
    BITS[key] = data
    return key


def unpacked(key: str, shape: tuple[int, int]) -> np.ndarray:
    bits = np.unpackbits(np.frombuffer(zlib.decompress(base64.b64decode(BITS[key])), np.uint8))
    return bits[: shape[0] * shape[1]].reshape(shape).astype(bool)


def mask_entry(mask: np.ndarray, score: float, index: int) -> dict:
    ys, xs = np.nonzero(mask)
    box = [int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1] if len(xs) else [0, 0, 0, 0]
    return {
        "mask_index": int(index),
        "iou_score": round(float(score), 6),
        "area": int(mask.sum()),
        "bbox": box,
        "bits": packed(mask),
    }


def session(path: Path):
    import onnxruntime

    return onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def best(masks, scores) -> list[tuple[np.ndarray, float, int]]:
    """Per prompt, the mask of the highest IoU score (masks [P, M, H, W] bool, scores [P, M]): (mask, score, index)."""
    chosen = []
    for prompt_masks, prompt_scores in zip(masks, scores):
        index = int(np.argmax(prompt_scores))
        chosen.append((np.asarray(prompt_masks[index]), float(prompt_scores[index]), index))
    return chosen


def case_entry(name: str, path: Path, kind: str, prompts: list, chosen: list) -> dict:
    return {
        "image": name,
        "path": f"skimage:{name}",
        "sha256": sha256(path),
        "kind": kind,
        "prompts": prompts,
        "masks": [mask_entry(mask, score, index) for mask, score, index in chosen],
    }


def sam_processor():
    from transformers import SamProcessor
    from transformers.models.sam.image_processing_pil_sam import SamImageProcessorPil

    return SamProcessor(SamImageProcessorPil())


def processor_inputs(processor, images: Path, kind: str):
    """Each image's (name, path, prompts of ``kind``, the processor's inputs for them, every point labelled 1),
    the image's prompts as one batch; and the torch prompt tensors the model takes."""
    from PIL import Image

    for name in IMAGES:
        path = images / name
        image = Image.open(path).convert("RGB")
        prompts = PROMPTS[name][kind]
        if kind == "boxes":
            inputs = processor(images=image, input_boxes=[prompts], return_tensors="pt")
            yield name, path, prompts, inputs, {"input_boxes": inputs["input_boxes"]}
            continue
        inputs = processor(
            images=image,
            input_points=[[[point] for point in prompts]],
            input_labels=[[[1] for _ in prompts]],
            return_tensors="pt",
        )
        yield (
            name,
            path,
            prompts,
            inputs,
            {"input_points": inputs["input_points"], "input_labels": inputs["input_labels"]},
        )


def hf_cases(out: Path, images: Path, decoder_file: str, kind: str, model) -> tuple[list[dict], float]:
    """transformers' processor and post_process_masks on ONNX Runtime's outputs of the HF split; the lowest mask
    IoU against the PyTorch model through the same processor (said, not recorded)."""
    import torch

    processor = sam_processor()
    encoder, decoder = session(out / "hf-vision_encoder.onnx"), session(out / decoder_file)
    cases, lowest = [], 1.0
    for name, path, prompts, inputs, torch_prompts in processor_inputs(processor, images, kind):
        if kind == "boxes":
            feeds = {"input_boxes": inputs["input_boxes"].numpy().astype(np.float32)}
        else:
            feeds = {
                "input_points": inputs["input_points"].numpy().astype(np.float32),
                "input_labels": inputs["input_labels"].numpy().astype(np.int64),
            }
        embeddings, positions = encoder.run(None, {"pixel_values": inputs["pixel_values"].numpy()})
        feeds |= {"image_embeddings": embeddings, "image_positional_embeddings": positions}
        scores, low_res = decoder.run(["iou_scores", "pred_masks"], feeds)
        (masks,) = processor.post_process_masks(
            [torch.from_numpy(low_res[0])], inputs["original_sizes"], inputs["reshaped_input_sizes"]
        )
        chosen = best(masks.numpy(), scores[0])
        cases.append(case_entry(name, path, kind, prompts, chosen))
        with torch.no_grad():
            found = model(pixel_values=inputs["pixel_values"], multimask_output=True, **torch_prompts)
        (torch_masks,) = processor.post_process_masks(
            [found.pred_masks[0]], inputs["original_sizes"], inputs["reshaped_input_sizes"]
        )
        for (mask, _, index), torch_mask in zip(chosen, torch_masks.numpy()):
            lowest = min(lowest, iou(mask, torch_mask[index]))
    return cases, lowest


def meta_cases(out: Path, images: Path, kind: str) -> tuple[list[dict], float]:
    """Meta's decoder fed as its ONNX example feeds it (one prompt a run: a point and the padding point (0, 0)
    labelled -1; a box as its two corners labelled 2 and 3, no padding), the coordinates scaled by SamProcessor;
    post_process_masks of low_res_masks, the best of the multimask outputs 1-3; the lowest IoU of those masks
    against the in-graph ``masks`` (said, not recorded)."""
    import torch

    processor = sam_processor()
    encoder, decoder = session(out / "meta-encoder.onnx"), session(out / "meta-decoder.onnx")
    cases, lowest = [], 1.0
    for name, path, prompts, inputs, _ in processor_inputs(processor, images, kind):
        height, width = (int(side) for side in inputs["original_sizes"][0])
        if kind == "boxes":
            scaled = inputs["input_boxes"][0].numpy().reshape(-1, 2, 2)
            coords = [box for box in scaled]
            labels = [np.array([2.0, 3.0]) for _ in scaled]
        else:
            scaled = inputs["input_points"][0, :, 0].numpy()
            coords = [np.array([point, [0.0, 0.0]]) for point in scaled]
            labels = [np.array([1.0, -1.0]) for _ in scaled]
        (embeddings,) = encoder.run(None, {"input_image": inputs["pixel_values"].numpy()})
        chosen = []
        for coord, label in zip(coords, labels):
            masks, scores, low_res = decoder.run(
                None,
                {
                    "image_embeddings": embeddings,
                    "point_coords": coord[None].astype(np.float32),
                    "point_labels": label[None].astype(np.float32),
                    "mask_input": np.zeros((1, 1, 256, 256), np.float32),
                    "has_mask_input": np.zeros(1, np.float32),
                    "orig_im_size": np.array([height, width], np.float32),
                },
            )
            (processed,) = processor.post_process_masks(
                [torch.from_numpy(low_res)], inputs["original_sizes"], inputs["reshaped_input_sizes"]
            )
            index = 1 + int(np.argmax(scores[0, 1:]))
            mask = processed.numpy()[0, index]
            chosen.append((mask, float(scores[0, index]), index))
            lowest = min(lowest, iou(mask, masks[0, index] > 0))
        cases.append(case_entry(name, path, kind, prompts, chosen))
    return cases, lowest


def sam2_cases(out: Path, images: Path, kind: str, model) -> tuple[list[dict], float]:
    """Sam2Processor and its post_process_masks on ONNX Runtime's outputs of the SAM2 layout (a box as its corners
    labelled 2 and 3, as transformers' Sam2 prompt encoder embeds a box); all of an image's prompts in one run; the
    lowest mask IoU against the PyTorch Sam2Model through the same processor (said, not recorded)."""
    import torch
    from transformers import Sam2Processor
    from transformers.models.sam2.image_processing_sam2 import Sam2ImageProcessor

    processor = Sam2Processor(Sam2ImageProcessor())
    encoder, decoder = session(out / "sam2-encoder.onnx"), session(out / "sam2-decoder.onnx")
    cases, lowest = [], 1.0
    for name, path, prompts, inputs, torch_prompts in processor_inputs(processor, images, kind):
        if kind == "boxes":
            coords = inputs["input_boxes"][0].numpy().reshape(-1, 2, 2)
            labels = np.tile(np.array([[2.0, 3.0]]), (len(coords), 1))
        else:
            coords = inputs["input_points"][0].numpy()
            labels = np.ones(coords.shape[:2])
        features = encoder.run(None, {"image": inputs["pixel_values"].numpy()})
        count = len(coords)
        low_res, scores = decoder.run(
            None,
            {
                "image_embed": features[2],
                "high_res_feats_0": features[0],
                "high_res_feats_1": features[1],
                "point_coords": coords.astype(np.float32),
                "point_labels": labels.astype(np.float32),
                "mask_input": np.zeros((count, 1, 256, 256), np.float32),
                "has_mask_input": np.zeros(count, np.float32),
            },
        )
        (masks,) = processor.post_process_masks([torch.from_numpy(low_res)], inputs["original_sizes"])
        chosen = best(masks.numpy(), scores)
        cases.append(case_entry(name, path, kind, prompts, chosen))
        with torch.no_grad():
            found = model(pixel_values=inputs["pixel_values"], multimask_output=True, **torch_prompts)
        (torch_masks,) = processor.post_process_masks([found.pred_masks[0]], inputs["original_sizes"])
        for (mask, _, index), torch_mask in zip(chosen, torch_masks.numpy()):
            lowest = min(lowest, iou(mask, torch_mask[index]))
    return cases, lowest


def iou(a: np.ndarray, b: np.ndarray) -> float:
    union = np.count_nonzero(a | b)
    return float(np.count_nonzero(a & b) / union) if union else 1.0


def lively(cases: list[dict], images: Path) -> str:
    """Whether the masks depend on the prompt: each mask's area as a share of its image, and the highest IoU
    between two prompts' masks of one image."""
    from PIL import Image

    shares, overlaps = [], []
    for case in cases:
        with Image.open(images / case["image"]) as image:
            shape = (image.height, image.width)
        decoded = [unpacked(mask["bits"], shape) for mask in case["masks"]]
        shares += [mask.mean() for mask in decoded]
        overlaps += [iou(a, b) for i, a in enumerate(decoded) for b in decoded[i + 1 :]]
    return (
        f"areas {min(shares):.2f}-{max(shares):.2f} of the image, prompts' masks overlap at most IoU "
        f"{max(overlaps):.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "test" / "data" / "sam")
    parser.add_argument("--skimage-data", type=Path, default=default_skimage_data())
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    args.out.mkdir(parents=True, exist_ok=True)
    import onnxruntime
    import PIL
    import torch
    import transformers

    torch.set_num_threads(max(1, (os.cpu_count() or 2)))
    model = sam_model()
    export_hf(model, args.out)
    export_meta(model, args.out)
    models = []
    for decoder, kind in (
        ("hf-prompt_encoder_mask_decoder.onnx", "points"),
        ("hf-prompt_encoder_mask_decoder_boxes.onnx", "boxes"),
    ):
        cases, lowest = hf_cases(args.out, args.skimage_data, decoder, kind, model)
        print(f"{decoder}: {lively(cases, args.skimage_data)}; lowest mask IoU of ONNX Runtime vs PyTorch {lowest:.4f}")
        models.append(layout_entry(args.out, "hf", "hf-vision_encoder.onnx", decoder, cases))
    meta = []
    for kind in ("boxes", "points"):
        cases, lowest = meta_cases(args.out, args.skimage_data, kind)
        said = lively(cases, args.skimage_data)
        print(f"meta-decoder.onnx {kind}: {said}; lowest IoU of in-graph vs post_process_masks {lowest:.4f}")
        meta += cases
    models.append(layout_entry(args.out, "meta", "meta-encoder.onnx", "meta-decoder.onnx", meta))
    model2 = sam2_model()
    export_sam2(model2, args.out)
    sam2 = []
    for kind in ("boxes", "points"):
        cases, lowest = sam2_cases(args.out, args.skimage_data, kind, model2)
        said = lively(cases, args.skimage_data)
        print(f"sam2-decoder.onnx {kind}: {said}; lowest mask IoU of ONNX Runtime vs PyTorch {lowest:.4f}")
        sam2 += cases
    models.append(layout_entry(args.out, "sam2", "sam2-encoder.onnx", "sam2-decoder.onnx", sam2))
    reference = {
        "generator": "benchmarks/make_sam_models.py",
        "versions": {
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "torchvision": importlib.metadata.version("torchvision"),
            "onnxruntime": onnxruntime.__version__,
            "pillow": PIL.__version__,
            "numpy": np.__version__,
        },
        "models": models,
        "bits": dict(sorted(BITS.items())),
    }
    (args.out / "reference.json").write_text(json.dumps(reference, separators=(",", ":")) + "\n")


def layout_entry(out: Path, layout: str, encoder: str, decoder: str, cases: list[dict]) -> dict:
    return {
        "layout": layout,
        "encoder": encoder,
        "decoder": decoder,
        "sha256": {encoder: sha256(out / encoder), decoder: sha256(out / decoder)},
        "cases": cases,
    }


if __name__ == "__main__":
    main()
