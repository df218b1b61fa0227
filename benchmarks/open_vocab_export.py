"""The models and tokenizers benchmarks/make_open_vocab.py makes (its docstring says what and how): tokenizers
built with the ``tokenizers`` library from vocabularies written here, transformers' own Grounding DINO, OWLv2 and
OWL-ViT from small seeded configs made lively, and their ONNX exports. Needs torch and transformers: run it from
that script, in its scratch venv."""

from __future__ import annotations

import json
from pathlib import Path

SEED = 0
GD_SIZE = (320, 320)  # (height, width) of the Hugging Face export
IDEA_SIZE = (256, 384)  # of the IDEA / TAO export (fixed, not square: the stretch shows)
IDEA_TEXT = 256  # tokens the IDEA export takes (max_text_len), the host pads to it
OWLV2_SIZE, OWLVIT_SIZE = 160, 192
OWL_TOKENS = 16  # OWL's text positions (its tokenizer's model_max_length)
# Words of the vocabularies: those of the prompts and a few more; "astronaut" is left to word pieces in BERT's.
WORDS = (
    "the of and an in on with cat cup coffee person woman man flag helmet rocket suit space saucer spoon plate table "
    "remote control dog face eye ear nose tabby red white blue black american photo big small"
).split()
BERT_PIECES = ["##s", "##tro", "##naut", "##ing", "as", "##er", "##ed"]


# --- tokenizers ---------------------------------------------------------------------------------------------------


def bert_vocab() -> list[str]:
    """bert-base-uncased's layout of the first ids ([PAD] 0, [unusedN], [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103,
    [unusedN] to 998, then the printable ASCII characters from 999: '.' 1012, '?' 1029), then word pieces and words."""
    vocab = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab += [f"[unused{i}]" for i in range(99, 99 + 999 - len(vocab))]
    vocab += [chr(c) for c in range(33, 127)]
    vocab += [f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz0123456789"]
    vocab += [word for word in WORDS + BERT_PIECES if word not in vocab]
    assert vocab[101] == "[CLS]" and vocab[102] == "[SEP]" and vocab[1012] == "." and vocab[1029] == "?"
    return vocab


def write_bert_tokenizer(folder: Path) -> list[str]:
    """tokenizer.json, vocab.txt and tokenizer_config.json of an uncased BERT WordPiece tokenizer, as transformers'
    BertTokenizer builds one (its normalizer, pre-tokenizer, [CLS] $A [SEP] template and decoder)."""
    from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    vocab = bert_vocab()
    tokenizer = Tokenizer(WordPiece({token: i for i, token in enumerate(vocab)}, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True
    )
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece(prefix="##")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0",
        pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 101), ("[SEP]", 102)],
    )
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "vocab.txt").write_text("".join(f"{token}\n" for token in vocab))
    config = {"tokenizer_class": "BertTokenizer", "do_lower_case": True, "model_max_length": 256}
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=1) + "\n")
    return vocab


def byte_symbols() -> list[str]:
    """GPT-2's and CLIP's byte-level alphabet: one printable character for each byte, in their order (the printable
    bytes as themselves, the others mapped from U+0100 on)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    extra = [b for b in range(256) if b not in printable]
    return [chr(b) for b in printable] + [chr(256 + i) for i in range(len(extra))]


def clip_vocab() -> tuple[dict[str, int], list[tuple[str, str]]]:
    """A CLIP BPE vocabulary: the bytes, the bytes ending a word (</w>), each word's merges left to right, then
    <|startoftext|> and <|endoftext|> (the highest id, where OWL's text tower pools)."""
    symbols = byte_symbols()
    tokens = symbols + [f"{s}</w>" for s in symbols]
    merges: list[tuple[str, str]] = []
    for word in WORDS:
        pieces = [*word[:-1], f"{word[-1]}</w>"]
        while len(pieces) > 1:
            pair = (pieces[0], pieces[1])
            if pair not in merges:
                merges.append(pair)
                tokens.append(pair[0] + pair[1])
            pieces = [pair[0] + pair[1], *pieces[2:]]
    tokens = list(dict.fromkeys(tokens)) + ["<|startoftext|>", "<|endoftext|>"]
    return {token: i for i, token in enumerate(tokens)}, merges


def write_clip_tokenizer(folder: Path) -> dict[str, int]:
    """tokenizer.json and tokenizer_config.json of a CLIP BPE tokenizer, as transformers' CLIPTokenizer builds one
    (NFC, white space runs as one space, lower case; CLIP's split pattern then byte-level; <|startoftext|> $A
    <|endoftext|>); OWL's config: model_max_length 16, pad token '!'."""
    from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import BPE

    vocab, merges = clip_vocab()
    tokenizer = Tokenizer(
        BPE(
            vocab=vocab,
            merges=merges,
            dropout=None,
            continuing_subword_prefix="",
            end_of_word_suffix="</w>",
            fuse_unk=False,
            unk_token="<|endoftext|>",
        )
    )
    tokenizer.normalizer = normalizers.Sequence(
        [normalizers.NFC(), normalizers.Replace(Regex(r"\s+"), " "), normalizers.Lowercase()]
    )
    split = r"""<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+"""
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(split), behavior="removed", invert=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.RobertaProcessing(
        ("<|endoftext|>", vocab["<|endoftext|>"]), ("<|startoftext|>", vocab["<|startoftext|>"]), False, False
    )
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    config = {
        "tokenizer_class": "CLIPTokenizer",
        "model_max_length": OWL_TOKENS,
        "pad_token": "!",
        "bos_token": "<|startoftext|>",
        "eos_token": "<|endoftext|>",
        "unk_token": "<|endoftext|>",
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=1) + "\n")
    return vocab


# --- models -------------------------------------------------------------------------------------------------------


def grounding_dino_model(vocab_size: int):
    import torch
    from transformers import BertConfig, GroundingDinoConfig, GroundingDinoForObjectDetection, SwinConfig

    torch.manual_seed(SEED)
    backbone = SwinConfig(
        embed_dim=8,
        depths=[1, 1, 1, 1],
        num_heads=[1, 2, 2, 4],
        window_size=7,
        out_features=["stage2", "stage3", "stage4"],
        drop_path_rate=0.0,
    )
    text = BertConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=IDEA_TEXT,
    )
    config = GroundingDinoConfig(
        backbone_config=backbone,
        text_config=text,
        d_model=32,
        encoder_layers=1,
        decoder_layers=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        num_queries=50,
        encoder_n_points=2,
        decoder_n_points=2,
        fusion_droppath=0.0,
        dropout=0.0,
        max_text_len=IDEA_TEXT,
    )
    return lively_grounding_dino(GroundingDinoForObjectDetection(config).eval())


def lively_grounding_dino(model, norm: float = 0.15, hidden: float = 0.2, last: float = 0.1):
    """Box heads drawn N(0, hidden) and their last layer N(0, last) (transformers zeroes it and draws the others
    N(0, 0.02): every query's box would be its encoder proposal, the same for every image); the decoder's output norm
    x ``norm`` (with it, the token similarities saturate: every score near 1)."""
    import torch
    from transformers.models.grounding_dino.modeling_grounding_dino import GroundingDinoMLPPredictionHead

    generator = torch.Generator().manual_seed(SEED)
    seen: set[int] = set()
    with torch.no_grad():
        model.model.decoder.layer_norm.weight.mul_(norm)
        for head in (m for m in model.modules() if isinstance(m, GroundingDinoMLPPredictionHead)):
            for i, layer in enumerate(head.layers):
                if id(layer.weight) not in seen:
                    seen.add(id(layer.weight))
                    std = last if i == len(head.layers) - 1 else hidden
                    layer.weight.copy_(torch.randn(layer.weight.shape, generator=generator) * std)
    return model


def owl_model(kind: str, vocab: dict[str, int]):
    import torch
    from transformers import Owlv2Config, Owlv2ForObjectDetection, OwlViTConfig, OwlViTForObjectDetection

    torch.manual_seed(SEED)
    text = dict(
        vocab_size=len(vocab),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        max_position_embeddings=OWL_TOKENS,
        pad_token_id=0,
        bos_token_id=vocab["<|startoftext|>"],
        eos_token_id=vocab["<|endoftext|>"],
    )
    size = OWLV2_SIZE if kind == "owlv2" else OWLVIT_SIZE
    vision = dict(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=size, patch_size=16
    )
    config_class, model_class = (
        (Owlv2Config, Owlv2ForObjectDetection) if kind == "owlv2" else (OwlViTConfig, OwlViTForObjectDetection)
    )
    config = config_class(text_config=text, vision_config=vision, projection_dim=32)
    return lively_owl(model_class(config).eval())


def lively_owl(model, hidden: float = 0.2, last: float = 0.15, scale: float = 0.1):
    """The box head's layers drawn N(0, hidden) and its last N(0, last) (with transformers' N(0, 0.02) every patch's
    box is its prior, whatever the image); the class head's logit scale and shift drawn N(0, scale)."""
    import torch

    generator = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for name, module in model.named_modules():
            if not isinstance(module, torch.nn.Linear):
                continue
            if name.startswith("box_head."):
                std = last if name.endswith("dense2") else hidden
            elif name in ("class_head.logit_shift", "class_head.logit_scale"):
                std = scale
            else:
                continue
            module.weight.copy_(torch.randn(module.weight.shape, generator=generator) * std)
    return model


# --- exports ------------------------------------------------------------------------------------------------------


class TraceableMaskOps:
    """While entered, ``torch.isin``, ``torch.cummax`` and ``torch.cummin`` (of a [B, T] tensor along T) are computed
    with operations the TorchScript exporter has ONNX forms of (a comparison with each test element; the max / min
    over a lower-triangular [T, T] mask), and a boolean ``torch.eye`` as a float one compared (ONNX Runtime has no
    boolean EyeLike): the same values. transformers' phrase-mask function uses them and ``torch.onnx.export`` has no
    form of the first three at any opset. ``check_mask_ops`` compares the two."""

    def __enter__(self):
        import torch

        self.original = torch.isin, torch.cummax, torch.cummin, torch.eye
        eye = torch.eye
        torch.isin = lambda elements, test_elements: (elements.unsqueeze(-1) == test_elements).any(-1)
        torch.cummax = lambda values, dim: cumulative(values, dim, largest=True)
        torch.cummin = lambda values, dim: cumulative(values, dim, largest=False)
        torch.eye = lambda n, device=None, dtype=None: (
            eye(n, device=device) > 0.5 if dtype == torch.bool else eye(n, device=device, dtype=dtype)
        )

    def __exit__(self, *exc):
        import torch

        torch.isin, torch.cummax, torch.cummin, torch.eye = self.original


def cumulative(values, dim: int, largest: bool):
    """The running max (or min) of a [B, T] tensor along T, as (values, values)."""
    import torch

    assert values.dim() == 2 and dim in (1, -1)
    length = values.shape[1]
    upto = torch.ones(length, length, dtype=torch.bool).tril()  # [i, j]: j <= i
    rows = values.unsqueeze(1).expand(-1, length, -1)
    first = values[:, :1].unsqueeze(1).expand(-1, length, length)  # values[0] is in every prefix
    result = torch.where(upto, rows, first)
    result = result.max(dim=-1).values if largest else result.min(dim=-1).values
    return result, result


def check_mask_ops() -> None:
    """transformers' phrase mask and position ids are the same with TraceableMaskOps, for random token ids."""
    import torch
    from transformers.models.grounding_dino.modeling_grounding_dino import (
        SPECIAL_TOKENS,
    )
    from transformers.models.grounding_dino.modeling_grounding_dino import (
        generate_masks_with_special_tokens_and_transfer_map as masks,
    )

    generator = torch.Generator().manual_seed(SEED)
    special = torch.tensor(SPECIAL_TOKENS)
    for length in (1, 2, 5, 13, 64, 256):
        ids = torch.randint(1000, 1040, (3, length), generator=generator)  # "." (1012) and "?" (1029) among them
        ids[:, 0], ids[:, -1] = 101, 102
        expected = masks(ids, special)
        with TraceableMaskOps():
            found = masks(ids, special)
        assert all(torch.equal(a, b) for a, b in zip(expected, found)), length


def export_grounding_dino_hf(model, target: Path, size: tuple[int, int] = GD_SIZE) -> None:
    import torch

    class LogitsAndBoxes(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, pixel_values, input_ids, token_type_ids, attention_mask, pixel_mask):
            out = self.model(
                pixel_values=pixel_values,
                input_ids=input_ids,
                token_type_ids=token_type_ids,
                attention_mask=attention_mask,
                pixel_mask=pixel_mask,
            )
            return out.logits, out.pred_boxes

    height, width = size
    ids = torch.tensor([[101, 1063, 1136, 1012, 102]])
    args = (
        torch.rand(1, 3, height, width),
        ids,
        torch.zeros_like(ids),
        torch.ones_like(ids),
        torch.ones(1, height, width, dtype=torch.int64),
    )
    text = {0: "batch_size", 1: "sequence_length"}
    with TraceableMaskOps():
        export(
            LogitsAndBoxes(model),
            args,
            target,
            input_names=["pixel_values", "input_ids", "token_type_ids", "attention_mask", "pixel_mask"],
            output_names=["logits", "pred_boxes"],
            dynamic_axes={
                "pixel_values": {0: "batch_size", 2: "height", 3: "width"},
                "input_ids": text,
                "token_type_ids": text,
                "attention_mask": text,
                "pixel_mask": {0: "batch_size", 1: "height", 2: "width"},
                "logits": {0: "batch_size"},
                "pred_boxes": {0: "batch_size"},
            },
        )


def export_grounding_dino_idea(model, target: Path) -> None:
    """The IDEA / TAO layout: the phrase mask and position ids are inputs. While traced, transformers' mask function
    (looked up in its module at each call) returns them."""
    import torch
    from transformers.models.grounding_dino import modeling_grounding_dino

    class Idea(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, inputs, input_ids, attention_mask, position_ids, token_type_ids, text_token_mask):
            original = modeling_grounding_dino.generate_masks_with_special_tokens_and_transfer_map
            modeling_grounding_dino.generate_masks_with_special_tokens_and_transfer_map = lambda ids, special_tokens: (
                text_token_mask,
                position_ids,
            )
            try:
                out = self.model(
                    pixel_values=inputs,
                    input_ids=input_ids,
                    token_type_ids=token_type_ids,
                    attention_mask=attention_mask,
                    pixel_mask=torch.ones_like(inputs[:, 0], dtype=torch.int64),
                )
            finally:
                modeling_grounding_dino.generate_masks_with_special_tokens_and_transfer_map = original
            return out.logits, out.pred_boxes

    height, width = IDEA_SIZE
    ids = torch.zeros(1, IDEA_TEXT, dtype=torch.int64)
    ids[0, :5] = torch.tensor([101, 1063, 1136, 1012, 102])
    mask, positions = idea_text_inputs(ids)
    args = (torch.rand(1, 3, height, width), ids, ids > 0, positions, torch.zeros_like(ids), mask)
    export(
        Idea(model),
        args,
        target,
        input_names=["inputs", "input_ids", "attention_mask", "position_ids", "token_type_ids", "text_token_mask"],
        output_names=["pred_logits", "pred_boxes"],
        dynamic_axes={"inputs": {2: "height", 3: "width"}},  # then declared fixed, as TAO's is
    )
    declare_size(target, IDEA_SIZE)


def declare_size(target: Path, size: tuple[int, int]) -> None:
    """The image input's (and the pixel mask's) height and width declared fixed at ``size``: the graph was traced
    with them dynamic (at a fixed size the exporter casts the encoder's reference points to double, which ONNX
    Runtime's GridSample does not take) but is right at this size only (``check_runs_elsewhere``)."""
    import onnx

    graph = onnx.load(str(target))
    for tensor in graph.graph.input:
        dims = tensor.type.tensor_type.shape.dim
        if tensor.name in ("pixel_values", "inputs", "pixel_mask"):
            for dim, value in zip(list(dims)[-2:], size):
                dim.Clear()
                dim.dim_value = value
    onnx.save(graph, str(target))


def export(module, args, target: Path, **options) -> None:
    """torch.onnx.export with TorchScript tracing at opset 17, quietly (the tracer's warnings are of Python values
    it keeps as constants: the sizes these exports are made at)."""
    import warnings

    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, str(target), opset_version=17, dynamo=False, verbose=False, **options)


def compact(target: Path) -> None:
    """The file simplified by onnxslim (constants folded, dead nodes dropped: Grounding DINO's 5,500 nodes become
    about 2,000, and ONNX Runtime loads it in half the time), without node names and with short names for the values
    inside the graph (the tracer names them by module path: 0.8 MB of a 2 MB file); the same inputs, outputs,
    metadata and weights."""
    import onnx
    import onnxslim

    metadata = {prop.key: prop.value for prop in onnx.load(str(target)).metadata_props}
    graph = onnxslim.slim(str(target))
    del graph.metadata_props[:]
    for key, value in metadata.items():
        graph.metadata_props.add(key=key, value=value)
    keep = {v.name for v in (*graph.graph.input, *graph.graph.output)} | {t.name for t in graph.graph.initializer}
    names: dict[str, str] = {}

    def short(name: str) -> str:
        return name if not name or name in keep else names.setdefault(name, f"v{len(names)}")

    for node in graph.graph.node:
        node.name = ""
        node.input[:] = [short(name) for name in node.input]
        node.output[:] = [short(name) for name in node.output]
    for value in graph.graph.value_info:
        value.name = short(value.name)
    onnx.checker.check_model(graph)
    onnx.save(graph, str(target))


def idea_text_inputs(input_ids):
    """The phrase mask [1, T, T] and position ids [1, T] of ``input_ids``, by transformers' own function."""
    import torch
    from transformers.models.grounding_dino.modeling_grounding_dino import (
        SPECIAL_TOKENS,
        generate_masks_with_special_tokens_and_transfer_map,
    )

    return generate_masks_with_special_tokens_and_transfer_map(input_ids, torch.tensor(SPECIAL_TOKENS))


def export_owl(model, target: Path, size: int, kind: str) -> None:
    import onnx
    import torch

    class LogitsAndBoxes(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, pixel_values, attention_mask):
            out = self.model(input_ids=input_ids, pixel_values=pixel_values, attention_mask=attention_mask)
            return out.logits, out.pred_boxes

    vocab = model.config.text_config.vocab_size
    ids = torch.zeros(2, OWL_TOKENS, dtype=torch.int64)
    ids[:, :3] = torch.tensor([[vocab - 2, 600, vocab - 1]])  # <|startoftext|> a word <|endoftext|>
    export(
        LogitsAndBoxes(model),
        (ids, torch.rand(1, 3, size, size), (ids > 0).long()),
        target,
        input_names=["input_ids", "pixel_values", "attention_mask"],
        output_names=["logits", "pred_boxes"],
        dynamic_axes={
            "input_ids": {0: "text_batch_size"},
            "attention_mask": {0: "text_batch_size"},
            "logits": {2: "num_queries"},
        },
    )
    graph = onnx.load(str(target))
    graph.metadata_props.add(key="model_type", value=kind)
    onnx.save(graph, str(target))
