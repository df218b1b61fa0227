"""The Florence-2 exports benchmarks/make_florence2.py and bench_florence2.py make (make_florence2's docstring says what
and how): a BART byte-level BPE tokenizer built with the ``tokenizers`` library from a vocabulary written here, with
Florence-2's added tokens; transformers' own ``Florence2ForConditionalGeneration`` from a small seeded config made
lively (or the full-size base config); its ONNX graphs in onnx-community's layout (transformers.js's Florence-2:
``vision_encoder``, ``embed_tokens``, ``encoder_model``, ``decoder_model_merged``) and optimum's decoder pair
(``decoder_model`` + ``decoder_with_past_model``); the configs at the folder's top. Needs torch and transformers: run
it from those scripts, in their scratch venv."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from open_vocab_export import byte_symbols, compact, export

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the package's tables (no torch needed for them)
from vision_factory.models import florence2_interface as tables  # noqa: E402

SEED = 0
SIDE = 768  # Florence-2's input: 768 x 768, every checkpoint
IMAGE_TOKENS = 577  # 24 x 24 patches (strides 4, 2, 2, 2) and their mean: the image's positions in the encoder
BOS, PAD, EOS, UNK = "<s>", "<pad>", "</s>", "<unk>"
IMAGE_TOKEN = "<image>"  # transformers 5's placeholder, added by its Florence-2 conversion after the others
# The tokens Florence-2's processor adds to BART's (its tokenizer.json's added tokens, all special), in their order.
FLORENCE_TOKENS = (
    ["<od>", "</od>", "<ocr>", "</ocr>"]
    + [f"<loc_{i}>" for i in range(1000)]
    + "<cap> </cap> <ncap> </ncap> <dcap> </dcap> <grounding> </grounding> <seg> </seg> <sep> <region_cap> "
    "</region_cap> <region_to_desciption> </region_to_desciption> <proposal> </proposal> <poly> </poly> <and>".split()
)
# The task tables of the published preprocessor_config.json (onnx-community's, which transformers.js reads) and of
# transformers' Florence2Processor: the same text as the package's (models/florence2_interface.py), written once there.
# The phrases grounding drops: Florence-2's original processor's list, which transformers' conversion writes into
# processor_config.json's post_processor_config (repeats and all).
BANNED_GROUNDING = (
    "it I me mine you your yours he him his she her hers they them their theirs one oneself we us our ours you your "
    "yours they them their theirs mine yours his hers its ours yours theirs myself yourself himself herself itself "
    "ourselves yourselves themselves this that these those who whom whose which what who whom whose which that all "
    "another any anybody anyone anything each everybody everyone everything few many nobody none one several some "
    "somebody someone something"
).split() + [
    "each other",
    "one another",
    *"myself yourself himself herself itself ourselves yourselves themselves".split(),
    "the image",
    "image",
    "images",
    "the",
    "a",
    "an",
    "a group",
    "other objects",
    "lots",
    "a set",
]
OCR_PATTERN = r"(.+?)<loc_(\d+)><loc_(\d+)><loc_(\d+)><loc_(\d+)><loc_(\d+)><loc_(\d+)><loc_(\d+)><loc_(\d+)>"
# Words of the vocabulary (each merged whole, after a space and at the start): those of the task questions and
# phrases, and a few more. Others fall to byte pieces.
WORDS = (
    "What is the text in image with regions does describe Describe detail shown Locate objects category name their "
    "descriptions region proposals phrases caption polygon mask of a an and on cat cup coffee person woman man flag "
    "helmet rocket suit space saucer spoon plate table red white blue black tabby astronaut photo sign shop open "
    "street car tree sky grass window door wall"
).split()

# The generation config of the published exports (onnx-community's generation_config.json), and the configs a
# transformers 5 Florence-2 checkpoint carries.
GENERATION_CONFIG = {
    "_from_model_config": True,
    "bos_token_id": 0,
    "decoder_start_token_id": 2,
    "early_stopping": True,
    "eos_token_id": 2,
    "forced_bos_token_id": 0,
    "forced_eos_token_id": 2,
    "no_repeat_ngram_size": 3,
    "num_beams": 3,
    "pad_token_id": 1,
}
IMAGENET_MEAN, IMAGENET_STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


# --- the tokenizer ------------------------------------------------------------------------------------------------


def bart_vocab() -> tuple[dict[str, int], list[tuple[str, str]]]:
    """A BART (GPT-2 byte-level) BPE vocabulary: <s> 0, <pad> 1, </s> 2, <unk> 3 as BART's, the 256 byte symbols,
    merges that make each word one token (with and without the leading space, 'Ġ'; a merge is added for the first
    two pieces the word still splits into, ranked after the others, until it is whole), then <mask>, the last of
    BART's own."""
    from tokenizers.models import BPE

    tokens = [BOS, PAD, EOS, UNK, *byte_symbols()]
    merges: list[tuple[str, str]] = []
    for word in [*WORDS, *(f"Ġ{w}" for w in WORDS)]:
        while True:
            model = BPE(vocab={token: i for i, token in enumerate(tokens)}, merges=merges)
            pieces = [token.value for token in model.tokenize(word)]
            if len(pieces) == 1:
                break
            merges.append((pieces[0], pieces[1]))
            tokens.append(pieces[0] + pieces[1])
    tokens = list(dict.fromkeys(tokens)) + ["<mask>"]
    return {token: i for i, token in enumerate(tokens)}, merges


def write_tokenizer(folder: Path) -> int:
    """tokenizer.json and tokenizer_config.json of a BART byte-level BPE tokenizer as transformers' BartTokenizer
    (RoBERTa's) builds one (byte-level pre-tokenizer without a prefix space, <s> $A </s>, byte-level decoder), with
    Florence-2's added tokens and transformers 5's <image> after them, all special. Returns the vocabulary's size."""
    from tokenizers import AddedToken, Tokenizer, decoders, pre_tokenizers, processors
    from tokenizers.models import BPE

    vocab, merges = bart_vocab()
    tokenizer = Tokenizer(BPE(vocab=vocab, merges=merges, dropout=None, fuse_unk=False))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.RobertaProcessing((EOS, 2), (BOS, 0), trim_offsets=True)
    tokenizer.add_special_tokens([BOS, PAD, EOS, UNK, AddedToken("<mask>", lstrip=True, special=True)])
    tokenizer.add_special_tokens([AddedToken(token, normalized=False, special=True) for token in FLORENCE_TOKENS])
    tokenizer.add_special_tokens([AddedToken(IMAGE_TOKEN, normalized=False, special=True)])
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    config = {
        "tokenizer_class": "BartTokenizer",
        "add_prefix_space": False,
        "errors": "replace",
        "model_max_length": 1024,
        "bos_token": BOS,
        "cls_token": BOS,
        "eos_token": EOS,
        "sep_token": EOS,
        "pad_token": PAD,
        "unk_token": UNK,
        "mask_token": "<mask>",
        "clean_up_tokenization_spaces": False,
        "extra_special_tokens": [*FLORENCE_TOKENS, IMAGE_TOKEN],
        "image_token": IMAGE_TOKEN,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=1) + "\n")
    return tokenizer.get_vocab_size()


def write_configs(folder: Path) -> None:
    """generation_config.json and preprocessor_config.json as onnx-community publishes them (the latter with the task
    tables transformers.js reads), and processor_config.json as transformers 5's conversion writes it (its
    post-processor config: the banned grounding phrases). config.json is the model's own (``to_json_file``)."""
    (folder / "generation_config.json").write_text(json.dumps(GENERATION_CONFIG, indent=2) + "\n")
    preprocessor = {
        "crop_size": {"height": SIDE, "width": SIDE},
        "do_center_crop": False,
        "do_convert_rgb": None,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": IMAGENET_MEAN,
        "image_processor_type": "CLIPImageProcessor",
        "image_seq_length": IMAGE_TOKENS,
        "image_std": IMAGENET_STD,
        "processor_class": "Florence2Processor",
        "resample": 3,
        "rescale_factor": 1 / 255,
        "size": {"height": SIDE, "width": SIDE},
        "tasks_answer_post_processing_type": tables.TASK_ANSWERS,
        "task_prompts_without_inputs": tables.TASK_PROMPTS_WITHOUT_INPUTS,
        "task_prompts_with_input": tables.TASK_PROMPTS_WITH_INPUT,
    }
    (folder / "preprocessor_config.json").write_text(json.dumps(preprocessor, indent=2) + "\n")
    (folder / "processor_config.json").write_text(json.dumps(processor_config(), indent=2) + "\n")


def processor_config() -> dict:
    post = {
        "ocr": {"pattern": OCR_PATTERN, "area_threshold": 0.0},
        "phrase_grounding": {"banned_grounding_tokens": BANNED_GROUNDING},
        **{kind: {} for kind in ("pure_text", "description_with_bboxes", "description_with_polygons", "polygons")},
        **{kind: {} for kind in ("bboxes", "description_with_bboxes_or_polygons")},
    }
    return {"num_additional_image_tokens": 0, "post_processor_config": post, "processor_class": "Florence2Processor"}


# --- the model ----------------------------------------------------------------------------------------------------


def florence2_model(vocab_size: int, image_token_id: int, base: bool = False):
    """transformers' Florence2ForConditionalGeneration, seeded: the small test config (DaViT of 16-64 channels, one
    block a stage, at the real 768 x 768 with its 577 image positions; a BART of width 64, one encoder and two decoder
    layers), made lively; or Florence-2-base's config (DaViT 128-1024, depths 1, 1, 9, 1; BART 768 wide, six encoder
    and six decoder layers, 12 heads) with its 51,289 tokens and the <image> one."""
    import torch
    from transformers import BartConfig, Florence2Config, Florence2ForConditionalGeneration
    from transformers.models.florence2.configuration_florence2 import Florence2VisionConfig

    torch.manual_seed(SEED)
    special = {"pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2, "decoder_start_token_id": 2}
    special |= {"forced_bos_token_id": 0, "forced_eos_token_id": 2}
    if base:
        vision = Florence2VisionConfig(projection_dim=768, drop_path_rate=0.0)
        text = BartConfig(
            vocab_size=vocab_size,
            d_model=768,
            encoder_layers=6,
            decoder_layers=6,
            encoder_attention_heads=12,
            decoder_attention_heads=12,
            encoder_ffn_dim=3072,
            decoder_ffn_dim=3072,
            max_position_embeddings=1024,
            scale_embedding=False,
            **special,
        )
    else:
        vision = Florence2VisionConfig(
            depths=(1, 1, 1, 1),
            embed_dim=(16, 32, 48, 64),
            num_heads=(1, 2, 3, 4),
            num_groups=(1, 2, 3, 4),
            projection_dim=64,
            drop_path_rate=0.0,
        )
        text = BartConfig(
            vocab_size=vocab_size,
            d_model=64,
            encoder_layers=1,
            decoder_layers=2,
            encoder_attention_heads=4,
            decoder_attention_heads=4,
            encoder_ffn_dim=128,
            decoder_ffn_dim=128,
            max_position_embeddings=1024,
            scale_embedding=False,
            **special,
        )
    config = Florence2Config(vision_config=vision.to_dict(), text_config=text.to_dict(), image_token_id=image_token_id)
    model = Florence2ForConditionalGeneration(config).eval()
    lively(model)
    return model


def lively(model) -> None:
    """Seeded weights drawn so that what is generated varies with the image and the task, and stops at </s> now and
    then: initialised as transformers does (normal, 0.02), every token's logit is within a few hundredths of the
    others' and the same tokens come whatever the image. The token embeddings (tied to the output head) drawn 40
    times wider (</s>'s 56), the decoder's cross-attention queries and keys 8 times and its values and output 30
    times (what the image and prompt say outweighs the token before), the projector's and the vision stages'
    weights 4 times."""
    import torch

    language = model.model.language_model
    with torch.no_grad():
        language.shared.weight.mul_(40.0)
        language.shared.weight[2].mul_(1.4)
        for layer in language.decoder.layers:
            for projection, scale in (("q_proj", 8.0), ("k_proj", 8.0), ("v_proj", 30.0), ("out_proj", 30.0)):
                getattr(layer.encoder_attn, projection).weight.mul_(scale)
        model.model.multi_modal_projector.image_projection.weight.mul_(4.0)
        for name, parameter in model.model.vision_tower.named_parameters():
            if name.endswith("weight") and parameter.ndim > 1:
                parameter.mul_(4.0)


# --- the ONNX graphs ----------------------------------------------------------------------------------------------


def layers_of(model) -> tuple[int, int, int]:
    """(decoder layers, decoder heads, head size) of a Florence-2 model."""
    text = model.config.text_config
    return text.decoder_layers, text.decoder_attention_heads, text.d_model // text.decoder_attention_heads


def past_names(layers: int, prefix: str, parts: tuple[str, ...] = ("decoder", "encoder")) -> list[str]:
    """past_key_values.{i}.{decoder,encoder}.{key,value} (or present.*) in optimum's order."""
    return [f"{prefix}.{i}.{part}.{kind}" for i in range(layers) for part in parts for kind in ("key", "value")]


def wrappers(model):
    """The modules each graph is traced from: the vision encoder (pixel_values -> image_features, the projector's),
    the token embedding, the BART encoder (inputs_embeds, attention_mask -> last_hidden_state), and the decoder with
    its head, without a cache (its first step) and with one (the steps after: the cross-attention keys and values are
    the first step's, the self-attention's grow by one each step)."""
    import torch
    from transformers.cache_utils import DynamicCache, EncoderDecoderCache

    layers, _, _ = layers_of(model)

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model  # a submodule: its weights are the graph's initializers

        def decode(self, encoder_attention_mask, encoder_hidden_states, inputs_embeds, cache):
            out = self.model.model.language_model.decoder(
                inputs_embeds=inputs_embeds,
                encoder_hidden_states=encoder_hidden_states,
                encoder_attention_mask=encoder_attention_mask,
                cache=cache,
                use_cache=True,
            )
            return self.model.lm_head(out.last_hidden_state), out.cache

    class Vision(Wrapped):
        def forward(self, pixel_values):
            return self.model.get_image_features(pixel_values).pooler_output

    class Embed(Wrapped):
        def forward(self, input_ids):
            return self.model.get_input_embeddings()(input_ids)

    class Encoder(Wrapped):
        def forward(self, inputs_embeds, attention_mask):
            encoder = self.model.model.language_model.encoder
            return encoder(inputs_embeds=inputs_embeds, attention_mask=attention_mask).last_hidden_state

    class DecoderFirst(Wrapped):
        def forward(self, encoder_attention_mask, encoder_hidden_states, inputs_embeds):
            cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
            logits, cache = self.decode(encoder_attention_mask, encoder_hidden_states, inputs_embeds, cache)
            presents = []
            for i in range(layers):
                own, cross = cache.self_attention_cache.layers[i], cache.cross_attention_cache.layers[i]
                presents += [own.keys, own.values, cross.keys, cross.values]
            return (logits, *presents)

    class DecoderWithPast(Wrapped):
        def forward(self, encoder_attention_mask, inputs_embeds, *pasts):
            own, cross = DynamicCache(), DynamicCache()
            cache = EncoderDecoderCache(own, cross)
            for i in range(layers):
                own.update(pasts[4 * i], pasts[4 * i + 1], i)
                cross.update(pasts[4 * i + 2], pasts[4 * i + 3], i)
                cache.is_updated[i] = True
            # the cross-attention reads its cached keys and values; these states only give its mask the length
            states = torch.zeros((*encoder_attention_mask.shape, inputs_embeds.shape[-1]), dtype=inputs_embeds.dtype)
            logits, cache = self.decode(encoder_attention_mask, states, inputs_embeds, cache)
            presents = []
            for i in range(layers):
                layer = cache.self_attention_cache.layers[i]
                presents += [layer.keys, layer.values]
            return (logits, *presents)

    # in eval mode: the exporter puts a module back in the mode it found it in, and a new module is in training mode,
    # which would turn on the model's dropout
    return tuple(module().eval() for module in (Vision, Embed, Encoder, DecoderFirst, DecoderWithPast))


def export_florence2(model, folder: Path, slim: bool = True) -> None:
    """The graphs into ``folder``/onnx: vision_encoder, embed_tokens, encoder_model, decoder_model,
    decoder_with_past_model and decoder_model_merged (the pair in one graph behind an If on use_cache_branch, as
    optimum's merge_decoders makes it). fp32, opset 17, the batch and every length dynamic."""
    import torch

    onnx_folder = folder / "onnx"
    onnx_folder.mkdir(parents=True, exist_ok=True)
    vision, embed, encoder, first, with_past = wrappers(model)
    layers, heads, size = layers_of(model)
    width = model.config.text_config.d_model
    pixels = torch.randn(1, 3, SIDE, SIDE)
    ids = torch.tensor([[0, 100, 200, 2]])
    embeds = torch.randn(1, 8, width)
    mask = torch.ones(1, 8, dtype=torch.int64)
    step = torch.randn(1, 1, width)
    batch = {0: "batch_size"}
    export(
        vision,
        (pixels,),
        onnx_folder / "vision_encoder.onnx",
        input_names=["pixel_values"],
        output_names=["image_features"],
        dynamic_axes={"pixel_values": batch, "image_features": batch},
    )
    export(
        embed,
        (ids,),
        onnx_folder / "embed_tokens.onnx",
        input_names=["input_ids"],
        output_names=["inputs_embeds"],
        dynamic_axes={
            "input_ids": {0: "batch_size", 1: "sequence_length"},
            "inputs_embeds": {0: "batch_size", 1: "sequence_length"},
        },
    )
    sequence = {0: "batch_size", 1: "encoder_sequence_length"}
    export(
        encoder,
        (embeds, mask),
        onnx_folder / "encoder_model.onnx",
        input_names=["inputs_embeds", "attention_mask"],
        output_names=["last_hidden_state"],
        dynamic_axes={"inputs_embeds": sequence, "attention_mask": sequence, "last_hidden_state": sequence},
    )
    decoder_axes = {
        "encoder_attention_mask": sequence,
        "encoder_hidden_states": sequence,
        "inputs_embeds": {0: "batch_size", 1: "decoder_sequence_length"},
        "logits": {0: "batch_size", 1: "decoder_sequence_length"},
    }
    presents = past_names(layers, "present")
    for name in presents:
        length = "decoder_sequence_length" if ".decoder." in name else "encoder_sequence_length_out"
        decoder_axes[name] = {0: "batch_size", 2: length}
    export(
        first,
        (mask, embeds, step),
        onnx_folder / "decoder_model.onnx",
        input_names=["encoder_attention_mask", "encoder_hidden_states", "inputs_embeds"],
        output_names=["logits", *presents],
        dynamic_axes=decoder_axes,
    )
    pasts = [torch.randn(1, heads, 3 if ".decoder." in n else 8, size) for n in past_names(layers, "p")]
    past_axes = {
        name: {
            0: "batch_size",
            2: "past_decoder_sequence_length" if ".decoder." in name else "encoder_sequence_length_out",
        }
        for name in past_names(layers, "past_key_values")
    }
    own = past_names(layers, "present", ("decoder",))
    with_past_axes = {key: value for key, value in decoder_axes.items() if key != "encoder_hidden_states"}
    with_past_axes = {key: value for key, value in with_past_axes.items() if ".encoder." not in key} | past_axes
    for name in own:
        with_past_axes[name] = {0: "batch_size", 2: "past_decoder_sequence_length + 1"}
    export(
        with_past,
        (mask, step, *pasts),
        onnx_folder / "decoder_with_past_model.onnx",
        input_names=["encoder_attention_mask", "inputs_embeds", *past_names(layers, "past_key_values")],
        output_names=["logits", *own],
        dynamic_axes=with_past_axes,
    )
    if slim:
        for name in ("vision_encoder", "embed_tokens", "encoder_model", "decoder_model", "decoder_with_past_model"):
            compact(onnx_folder / f"{name}.onnx")
    merge_decoders(
        onnx_folder / "decoder_model.onnx",
        onnx_folder / "decoder_with_past_model.onnx",
        onnx_folder / "decoder_model_merged.onnx",
    )


def merge_decoders(first: Path, with_past: Path, target: Path) -> None:
    """The two decoders as one graph, as optimum's ``merge_decoders`` makes decoder_model_merged.onnx: the inputs of
    both and a bool ``use_cache_branch`` [1]; one If node on it, whose else branch is the first step's graph and then
    branch the with-past one; the with-past branch gives the cross-attention's ``present.*.encoder.*`` as empty
    constants (optimum's: the caller keeps the first step's); the weights of both, those equal kept once, at the top."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    no_past, past = onnx.load(str(first)), onnx.load(str(with_past))
    initializers: dict[str, onnx.TensorProto] = {}
    by_content: dict[tuple, str] = {}

    def branch(model: onnx.ModelProto, tag: str) -> onnx.GraphProto:
        """The model's graph as an If branch: no inputs, its weights moved to the top (one of equal ones)."""
        graph = model.graph
        renames = {}
        for tensor in graph.initializer:
            array = numpy_helper.to_array(tensor)
            key = (array.dtype.str, array.shape, array.tobytes())
            if key not in by_content:
                name = f"{tag}_{tensor.name}" if tensor.name in initializers else tensor.name
                by_content[key] = name
                initializers[name] = numpy_helper.from_array(array, name)
            renames[tensor.name] = by_content[key]
        for node in graph.node:
            node.input[:] = [renames.get(name, name) for name in node.input]
        return helper.make_graph(list(graph.node), tag, [], list(graph.output))

    else_graph, then_graph = branch(no_past, "no_past"), branch(past, "with_past")
    encoder_presents = {o.name: o for o in no_past.graph.output if ".encoder." in o.name}
    for name, output in encoder_presents.items():  # zeros of no element, of the rank and fixed sizes the output has
        dims = [dim.dim_value if dim.HasField("dim_value") else 0 for dim in output.type.tensor_type.shape.dim]
        empty = numpy_helper.from_array(np.zeros(dims, np.float32), f"{name}_empty")
        then_graph.node.append(helper.make_node("Constant", [], [name], value=empty))
        then_graph.output.append(output)
    order = [output.name for output in no_past.graph.output]
    then_outputs = {output.name: output for output in then_graph.output}
    del then_graph.output[:]
    then_graph.output.extend(then_outputs[name] for name in order)
    use_cache = helper.make_tensor_value_info("use_cache_branch", onnx.TensorProto.BOOL, [1])
    inputs = {i.name: i for i in [*no_past.graph.input, *past.graph.input]}
    if_node = helper.make_node("If", ["use_cache_branch"], order, then_branch=then_graph, else_branch=else_graph)
    outputs = list(no_past.graph.output)
    graph = helper.make_graph(
        [if_node], "decoder_model_merged", [*inputs.values(), use_cache], outputs, list(initializers.values())
    )
    merged = helper.make_model(graph, opset_imports=list(no_past.opset_import), ir_version=no_past.ir_version)
    onnx.checker.check_model(merged)
    onnx.save(merged, str(target))
