#!/usr/bin/env python3
r"""Architecture-true Segment Anything test models in the export layouts users have, and what transformers' own
processing returns on them: test/data/sam/ (the ONNX files and reference.json), read by test/test_sam.py without
PyTorch.

Every model is transformers' own ``SamModel`` (or ``Sam2Model``) from a small seeded configuration with the real
interface: a 1024 x 1024 input, 64 x 64 image embeddings, 256 x 256 low-resolution masks, 3 multimask outputs (and
SAM's single-mask one). Small: a ViT of width 16 and 2 layers (one windowed, one global), 32 embedding channels
(the real models have 256), a mask decoder of width 32; its weights re-drawn "lively" (``liven``: every Linear and
convolution N(0, 1/fan_in), every embedding N(0, 1)), the random positional encoding's frequencies x POSITION_SCALE
and the mask decoder's attention SHARPEN times sharper, so that masks depend on the image and the prompt
(transformers' initialisation gives nearly the same mask everywhere; so lively, the masks of one image's prompts
overlap at IoU 0.35 on average, 0.8 at most, and cover 8-88% of it).

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

ROOT = Path(__file__).resolve().parent.parent
SEED = 0
SIZE = 1024  # SAM's input side
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
HF_EMBEDDINGS = ("image_embeddings", "image_positional_embeddings")
SAM2_FEATURES = ("high_res_feats_0", "high_res_feats_1", "image_embed")  # the encoder's outputs, in order
EMBED = 32  # embedding channels (SAM's 256, made small)
POSITION_SCALE = 4.0  # the random positional encoding's frequencies
SHARPEN = 10.0  # the mask decoder's attention logits x this (sharpen)


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


def liven(model, seed: int = SEED):
    """Weights that make masks depend on the image and the prompt: every Linear and convolution N(0, 1/fan_in),
    biases N(0, 0.1), every embedding N(0, 1) (LayerNorms kept)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (torch.nn.Linear, torch.nn.Conv2d, torch.nn.ConvTranspose2d)):
                weight = module.weight
                fan_in = weight.shape[1] * (weight[0, 0].numel() if weight.dim() > 2 else 1)
                if isinstance(module, torch.nn.ConvTranspose2d):
                    fan_in = weight.shape[0]
                weight.copy_(torch.randn(weight.shape, generator=generator) / fan_in**0.5)
                if module.bias is not None:
                    module.bias.copy_(torch.randn(module.bias.shape, generator=generator) * 0.1)
            elif isinstance(module, torch.nn.Embedding):
                module.weight.copy_(torch.randn(module.weight.shape, generator=generator))
        for name, parameter in model.named_parameters():
            if name.endswith("pos_embed") or "rel_pos" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.5)
    return model


def sam_model():
    """transformers' SamModel, small, seeded and lively."""
    import torch
    from transformers import SamConfig, SamMaskDecoderConfig, SamModel, SamPromptEncoderConfig, SamVisionConfig

    vision = SamVisionConfig(
        hidden_size=16,
        output_channels=EMBED,
        num_hidden_layers=2,
        num_attention_heads=2,
        mlp_dim=32,
        global_attn_indexes=[1],
        num_pos_feats=EMBED // 2,
        image_size=SIZE,
    )
    prompt = SamPromptEncoderConfig(hidden_size=EMBED, image_size=SIZE, mask_input_channels=8)
    decoder = SamMaskDecoderConfig(
        hidden_size=EMBED, mlp_dim=64, num_attention_heads=2, iou_head_hidden_dim=32, num_hidden_layers=2
    )
    config = SamConfig(vision_config=vision, prompt_encoder_config=prompt, mask_decoder_config=decoder)
    torch.manual_seed(SEED)
    model = liven(SamModel(config).eval())
    # the prompt encoder's positional embedding is tied to the model's: one matrix, of frequencies that tell
    # positions apart smoothly (SAM's scale is its ViT width / 2: 16 here, which gives a prompt no region)
    with torch.no_grad():
        model.shared_image_embedding.positional_embedding.copy_(
            torch.randn((2, EMBED // 2), generator=torch.Generator().manual_seed(SEED + 1)) * POSITION_SCALE
        )
        model.prompt_encoder.shared_embedding.positional_embedding = model.shared_image_embedding.positional_embedding
    return sharpen(model)


def sharpen(model):
    """The mask decoder's attention made SHARPEN times sharper (its query and key projections scaled): with random
    weights it spreads evenly and every prompt of an image gets nearly the same mask (IoU 0.9 between prompts);
    sharp, the masks of one image's prompts overlap at IoU 0.5 on average."""
    import torch

    with torch.no_grad():
        for name, parameter in model.mask_decoder.named_parameters():
            if ("q_proj" in name or "k_proj" in name) and name.endswith("weight"):
                parameter.mul_(SHARPEN)
    return model


def all_masks(decoder, image_embeddings, image_pe, sparse, dense):
    """SamMaskDecoder's forward with every mask token's mask and IoU (SAM's single-mask output 0, then the 3
    multimask ones), as Meta's ``predict_masks`` returns them; transformers' forward keeps either 0 or 1-3."""
    import torch

    batch, channels, height, width = image_embeddings.shape
    prompts = sparse.shape[1]
    tokens = torch.cat([decoder.iou_token.weight, decoder.mask_tokens.weight], dim=0)
    tokens = torch.cat([tokens.repeat(batch, prompts, 1, 1), sparse], dim=2)
    source = (image_embeddings + dense).repeat_interleave(prompts, 0)
    positions = image_pe.repeat_interleave(prompts, 0)
    out_tokens, source = decoder.transformer(
        point_embeddings=tokens,
        image_embeddings=source,
        image_positional_embeddings=positions,
        attention_similarity=None,
    )[:2]
    iou_token, mask_tokens = out_tokens[:, :, 0, :], out_tokens[:, :, 1 : 1 + decoder.num_mask_tokens, :]
    source = source.transpose(2, 3).reshape(batch * prompts, channels, height, width)
    upscaled = decoder.activation(decoder.upscale_layer_norm(decoder.upscale_conv1(source)))
    upscaled = decoder.activation(decoder.upscale_conv2(upscaled))
    hyper = torch.stack(
        [mlp(mask_tokens[:, :, i, :]) for i, mlp in enumerate(decoder.output_hypernetworks_mlps)], dim=2
    )
    _, up_channels, up_height, up_width = upscaled.shape
    upscaled = upscaled.reshape(batch, prompts, up_channels, up_height * up_width)
    masks = (hyper @ upscaled).reshape(batch, prompts, -1, up_height, up_width)
    return masks, decoder.iou_prediction_head(iou_token)


def wrapped(model, forward):
    """``model`` in a torch Module whose forward is ``forward(model, *inputs)``: what is exported."""
    import torch

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.sam = model

        def forward(self, *inputs):
            return forward(self.sam, *inputs)

    return Wrapped()


def hf_encoder(sam, pixel_values):
    """The Hugging Face split's vision encoder, as optimum exports it."""
    positions = sam.get_image_wide_positional_embeddings().repeat(pixel_values.shape[0], 1, 1, 1)
    return sam.vision_encoder(pixel_values).last_hidden_state, positions


def hf_points_decoder(sam, input_points, input_labels, image_embeddings, image_positional_embeddings):
    sparse, dense = sam.prompt_encoder(input_points, input_labels, None, None)
    masks, scores = sam.mask_decoder(image_embeddings, image_positional_embeddings, sparse, dense, True)[:2]
    return scores, masks


def hf_boxes_decoder(sam, input_boxes, image_embeddings, image_positional_embeddings):
    sparse, dense = sam.prompt_encoder(None, None, input_boxes, None)
    masks, scores = sam.mask_decoder(image_embeddings, image_positional_embeddings, sparse, dense, True)[:2]
    return scores, masks


def export_hf_encoder(model, target: Path):
    """The encoder exported; its outputs on a random image (the decoders' example inputs)."""
    import torch

    pixels = torch.rand(1, 3, SIZE, SIZE)
    torch.onnx.export(
        wrapped(model, hf_encoder),
        (pixels,),
        str(target),
        input_names=["pixel_values"],
        output_names=["image_embeddings", "image_positional_embeddings"],
        opset_version=17,
        dynamo=False,
    )
    with torch.no_grad():
        return hf_encoder(model, pixels)


def export_hf_boxes_decoder(model, embeddings, target: Path) -> None:
    import torch

    boxes = torch.tensor([[[10.0, 20.0, 300.0, 400.0], [500.0, 100.0, 900.0, 700.0]]])
    torch.onnx.export(
        wrapped(model, hf_boxes_decoder),
        (boxes, *embeddings),
        str(target),
        input_names=["input_boxes", *HF_EMBEDDINGS],
        output_names=["iou_scores", "pred_masks"],
        dynamic_axes={"input_boxes": {1: "nb_boxes"}, "iou_scores": {1: "nb_boxes"}, "pred_masks": {1: "nb_boxes"}},
        opset_version=17,
        dynamo=False,
    )


def export_hf(model, out: Path) -> None:
    import torch

    embeddings = export_hf_encoder(model, out / "hf-vision_encoder.onnx")
    points = torch.rand(1, 2, 1, 2) * SIZE
    labels = torch.ones(1, 2, 1, dtype=torch.int64)
    torch.onnx.export(
        wrapped(model, hf_points_decoder),
        (points, labels, *embeddings),
        str(out / "hf-prompt_encoder_mask_decoder.onnx"),
        input_names=["input_points", "input_labels", *HF_EMBEDDINGS],
        output_names=["iou_scores", "pred_masks"],
        dynamic_axes={
            "input_points": {1: "point_batch_size", 2: "nb_points_per_image"},
            "input_labels": {1: "point_batch_size", 2: "nb_points_per_image"},
            "iou_scores": {1: "point_batch_size"},
            "pred_masks": {1: "point_batch_size"},
        },
        opset_version=17,
        dynamo=False,
    )
    export_hf_boxes_decoder(model, embeddings, out / "hf-prompt_encoder_mask_decoder_boxes.onnx")


def meta_encoder(sam, input_image):
    """Meta's image encoder alone: one map out."""
    return sam.vision_encoder(input_image).last_hidden_state


def meta_points(sam, coords, labels):
    """SamOnnxModel's point embedding: (x + 0.5) / S through the random positional encoding; label -1 the
    not-a-point embedding, 0-3 their own (2 and 3 a box's corners)."""
    prompt = sam.prompt_encoder
    coords = (coords + 0.5) / SIZE
    embedding = prompt.shared_embedding(coords[:, None])[:, 0]  # [1, N, C] from [1, 1, N, 2] in [0, 1]
    labels = labels.unsqueeze(-1).expand_as(embedding)
    embedding = embedding * (labels != -1) + prompt.not_a_point_embed.weight * (labels == -1)
    for i, point in enumerate(prompt.point_embed):
        embedding = embedding + point.weight * (labels == i)
    return embedding


def meta_decoder(sam, image_embeddings, point_coords, point_labels, mask_input, has_mask_input, orig_im_size):
    """SamOnnxModel's forward over transformers' SAM: the mask input blended by has_mask_input, all four masks, and
    its mask_postprocessing inside (bilinear up to S x S, the padding cut, bilinear to orig_im_size)."""
    import torch
    from torch.nn import functional as F

    prompt = sam.prompt_encoder
    sparse = meta_points(sam, point_coords, point_labels)
    dense = has_mask_input * prompt.mask_embed(mask_input)
    dense = dense + (1 - has_mask_input) * prompt.no_mask_embed.weight.reshape(1, -1, 1, 1)
    image_pe = sam.get_image_wide_positional_embeddings()
    masks, scores = all_masks(sam.mask_decoder, image_embeddings, image_pe, sparse[:, None], dense)
    masks, scores = masks[:, 0], scores[:, 0]
    upscaled = F.interpolate(masks, size=(SIZE, SIZE), mode="bilinear", align_corners=False)
    size = orig_im_size.to(torch.float32)
    prepadded = torch.floor(size * (SIZE / torch.max(size)) + 0.5).to(torch.int64)
    upscaled = upscaled[..., : prepadded[0], : prepadded[1]]
    original = orig_im_size.to(torch.int64)
    upscaled = F.interpolate(upscaled, size=(original[0], original[1]), mode="bilinear", align_corners=False)
    return upscaled, scores, masks


def export_meta(model, out: Path) -> None:
    """Meta's layout, as its scripts/export_onnx_model.py exports the decoder (default options: all four masks,
    the number of points dynamic) and samexporter the encoder."""
    import torch

    pixels = torch.rand(1, 3, SIZE, SIZE)
    torch.onnx.export(
        wrapped(model, meta_encoder),
        (pixels,),
        str(out / "meta-encoder.onnx"),
        input_names=["input_image"],
        output_names=["image_embeddings"],
        opset_version=17,
        dynamo=False,
    )
    with torch.no_grad():
        embeddings = meta_encoder(model, pixels)
    inputs = {
        "image_embeddings": embeddings,
        "point_coords": torch.randint(low=0, high=SIZE, size=(1, 5, 2), dtype=torch.float),
        "point_labels": torch.randint(low=0, high=4, size=(1, 5), dtype=torch.float),
        "mask_input": torch.randn(1, 1, 256, 256, dtype=torch.float),
        "has_mask_input": torch.tensor([1], dtype=torch.float),
        "orig_im_size": torch.tensor([1500, 2250], dtype=torch.float),
    }
    torch.onnx.export(
        wrapped(model, meta_decoder),
        tuple(inputs.values()),
        str(out / "meta-decoder.onnx"),
        input_names=list(inputs),
        output_names=["masks", "iou_predictions", "low_res_masks"],
        dynamic_axes={"point_coords": {1: "num_points"}, "point_labels": {1: "num_points"}},
        opset_version=17,
        dynamo=False,
    )


def sam2_model():
    """transformers' Sam2Model, small (a Hiera of widths 8-64, one block a stage), seeded and lively."""
    import torch
    from transformers import (
        Sam2Config,
        Sam2HieraDetConfig,
        Sam2MaskDecoderConfig,
        Sam2Model,
        Sam2PromptEncoderConfig,
        Sam2VisionConfig,
    )

    hiera = Sam2HieraDetConfig(
        hidden_size=8,
        num_attention_heads=1,
        blocks_per_stage=[1, 1, 2, 1],
        embed_dim_per_stage=[8, 16, 32, 64],
        num_attention_heads_per_stage=[1, 1, 2, 2],
        window_size_per_stage=[8, 4, 14, 7],
        global_attention_blocks=[3],
    )
    vision = Sam2VisionConfig(backbone_config=hiera, backbone_channel_list=[64, 32, 16, 8], fpn_hidden_size=EMBED)
    prompt = Sam2PromptEncoderConfig(hidden_size=EMBED, mask_input_channels=8, scale=int(POSITION_SCALE))
    decoder = Sam2MaskDecoderConfig(hidden_size=EMBED, mlp_dim=64, num_attention_heads=2, iou_head_hidden_dim=32)
    config = Sam2Config(vision_config=vision, prompt_encoder_config=prompt, mask_decoder_config=decoder)
    torch.manual_seed(SEED)
    model = liven(Sam2Model(config).eval())
    with torch.no_grad():
        model.no_memory_embedding.copy_(torch.randn(model.no_memory_embedding.shape) * 0.1)
    return sharpen(model)


def sam2_encoder(sam, image):
    """samexporter's SAM2 encoder over transformers' Sam2Model: its three feature maps, the no-memory embedding
    added to the last."""
    features = sam.get_image_embeddings(image)
    return features[0], features[1], features[2]


def sam2_decoder(
    sam, image_embed, high_res_feats_0, high_res_feats_1, point_coords, point_labels, mask_input, has_mask_input
):
    """samexporter's SAM2 decoder over transformers' Sam2Model: the prompts as the batch (its repeat_image=False),
    each with its own mask input; the padding point added; the three multimask outputs, clamped to +-32."""
    import torch

    prompt = sam.prompt_encoder
    sparse = prompt._embed_points(point_coords[:, None], point_labels[:, None].to(torch.int64), pad=True)
    mask = has_mask_input.reshape(-1, 1, 1, 1)
    dense = mask * prompt.mask_embed(mask_input)
    dense = dense + (1 - mask) * prompt.no_mask_embed.weight.reshape(1, -1, 1, 1)
    masks, scores = sam.mask_decoder(
        image_embeddings=image_embed.expand(point_coords.shape[0], -1, -1, -1),
        image_positional_embeddings=sam.get_image_wide_positional_embeddings(),
        sparse_prompt_embeddings=sparse,
        dense_prompt_embeddings=dense,
        multimask_output=True,
        high_resolution_features=[high_res_feats_0, high_res_feats_1],
    )[:2]
    return torch.clamp(masks[:, 0], -32.0, 32.0), scores[:, 0]


def export_sam2(model, out: Path) -> None:
    """SAM2's image predictor layout (samexporter's export_sam2.py) over transformers' Sam2Model."""
    import torch

    pixels = torch.rand(1, 3, SIZE, SIZE)
    torch.onnx.export(
        wrapped(model, sam2_encoder),
        (pixels,),
        str(out / "sam2-encoder.onnx"),
        input_names=["image"],
        output_names=list(SAM2_FEATURES),
        opset_version=17,
        dynamo=False,
    )
    with torch.no_grad():
        features = sam2_encoder(model, pixels)
    inputs = (
        features[2],
        features[0],
        features[1],
        torch.randint(low=0, high=SIZE, size=(2, 3, 2), dtype=torch.float),  # 2 prompts: no axis of 1 to fold
        torch.randint(low=0, high=2, size=(2, 3), dtype=torch.float),
        torch.randn(2, 1, 256, 256, dtype=torch.float),
        torch.tensor([1, 0], dtype=torch.float),
    )
    torch.onnx.export(
        wrapped(model, sam2_decoder),
        inputs,
        str(out / "sam2-decoder.onnx"),
        input_names=[
            "image_embed",
            "high_res_feats_0",
            "high_res_feats_1",
            "point_coords",
            "point_labels",
            "mask_input",
            "has_mask_input",
        ],
        output_names=["masks", "iou_predictions"],
        dynamic_axes={
            "point_coords": {0: "num_labels", 1: "num_points"},
            "point_labels": {0: "num_labels", 1: "num_points"},
            "mask_input": {0: "num_labels"},
            "has_mask_input": {0: "num_labels"},
        },
        opset_version=17,
        dynamo=False,
    )


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


def hf_cases(out: Path, images: Path, decoder_file: str, kind: str, model) -> tuple[list[dict], float]:
    """transformers' processor and post_process_masks on ONNX Runtime's outputs of the HF split; the lowest mask
    IoU against the PyTorch model through the same processor (said, not recorded)."""
    import torch
    from PIL import Image

    processor = sam_processor()
    encoder, decoder = session(out / "hf-vision_encoder.onnx"), session(out / decoder_file)
    cases, lowest = [], 1.0
    for name in IMAGES:
        path = images / name
        image = Image.open(path).convert("RGB")
        prompts = PROMPTS[name][kind]
        if kind == "boxes":
            inputs = processor(images=image, input_boxes=[prompts], return_tensors="pt")
            feeds = {"input_boxes": inputs["input_boxes"].numpy().astype(np.float32)}
            torch_prompts = {"input_boxes": inputs["input_boxes"]}
        else:
            inputs = processor(
                images=image,
                input_points=[[[point] for point in prompts]],
                input_labels=[[[1] for _ in prompts]],
                return_tensors="pt",
            )
            feeds = {
                "input_points": inputs["input_points"].numpy().astype(np.float32),
                "input_labels": inputs["input_labels"].numpy().astype(np.int64),
            }
            torch_prompts = {"input_points": inputs["input_points"], "input_labels": inputs["input_labels"]}
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
    from PIL import Image

    processor = sam_processor()
    encoder, decoder = session(out / "meta-encoder.onnx"), session(out / "meta-decoder.onnx")
    cases, lowest = [], 1.0
    for name in IMAGES:
        path = images / name
        image = Image.open(path).convert("RGB")
        prompts = PROMPTS[name][kind]
        if kind == "boxes":
            inputs = processor(images=image, input_boxes=[prompts], return_tensors="pt")
            scaled = inputs["input_boxes"][0].numpy().reshape(-1, 2, 2)
            coords = [box for box in scaled]
            labels = [np.array([2.0, 3.0]) for _ in scaled]
        else:
            inputs = processor(images=image, input_points=[[[point] for point in prompts]], return_tensors="pt")
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
                    "orig_im_size": np.array([image.height, image.width], np.float32),
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
    from PIL import Image
    from transformers import Sam2Processor
    from transformers.models.sam2.image_processing_sam2 import Sam2ImageProcessor

    processor = Sam2Processor(Sam2ImageProcessor())
    encoder, decoder = session(out / "sam2-encoder.onnx"), session(out / "sam2-decoder.onnx")
    cases, lowest = [], 1.0
    for name in IMAGES:
        path = images / name
        image = Image.open(path).convert("RGB")
        prompts = PROMPTS[name][kind]
        if kind == "boxes":
            inputs = processor(images=image, input_boxes=[prompts], return_tensors="pt")
            coords = inputs["input_boxes"][0].numpy().reshape(-1, 2, 2)
            labels = np.tile(np.array([[2.0, 3.0]]), (len(coords), 1))
            torch_prompts = {"input_boxes": inputs["input_boxes"]}
        else:
            inputs = processor(
                images=image,
                input_points=[[[point] for point in prompts]],
                input_labels=[[[1] for _ in prompts]],
                return_tensors="pt",
            )
            coords = inputs["input_points"][0].numpy()
            labels = np.ones(coords.shape[:2])
            torch_prompts = {"input_points": inputs["input_points"], "input_labels": inputs["input_labels"]}
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
