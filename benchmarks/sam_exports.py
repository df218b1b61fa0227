"""The Segment Anything models benchmarks/make_sam_models.py and benchmarks/bench_sam.py export: transformers' own
SamModel and Sam2Model from small seeded configurations made lively, and the torch wrappers that give each export
layout its signature (the Hugging Face split as optimum exports it, Meta's SamOnnxModel, samexporter's SAM2 image
predictor). Imported by those scripts, in the scratch venv that has PyTorch; what each file is: make_sam_models.py's
docstring.
"""

from __future__ import annotations

from pathlib import Path

SEED = 0
SIZE = 1024  # SAM's input side
HF_EMBEDDINGS = ("image_embeddings", "image_positional_embeddings")
SAM2_FEATURES = ("high_res_feats_0", "high_res_feats_1", "image_embed")  # the encoder's outputs, in order
EMBED = 32  # embedding channels (SAM's 256, made small)
POSITION_SCALE = 4.0  # the random positional encoding's frequencies
SHARPEN = 10.0  # the mask decoder's attention logits x this (sharpen)


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
