"""What an open-vocabulary detector's export looks like (a text prompt in, boxes of what it names out), the facts its
adapters share, and the rule that recognises it from the file alone. Three layouts (``head``):

- ``grounding_dino_hf``: Grounding DINO as Hugging Face transformers exports it (``torch.onnx.export`` of
  ``GroundingDinoForObjectDetection``, optimum, transformers.js): inputs ``pixel_values`` [1, 3, H, W],
  ``input_ids`` and ``attention_mask`` [1, T], and ``token_type_ids`` [1, T] and / or ``pixel_mask`` [1, H, W];
  outputs ``logits`` [1, Q, L] (each query's similarity to each of L token positions, L the config's max_text_len,
  256; before the sigmoid) and ``pred_boxes`` [1, Q, 4] (cx, cy, w, h normalised). The graph builds the phrase mask
  and position ids from ``input_ids``.
- ``grounding_dino_idea``: Grounding DINO as IDEA's code and NVIDIA TAO export it (the layout Isaac ROS runs): an
  image input [1, 3, H, W] (``inputs``), ``input_ids``, ``attention_mask``, ``position_ids``, ``token_type_ids``
  [1, T] and ``text_token_mask`` [1, T, T] (the phrase mask); outputs ``pred_logits`` [1, Q, L] and ``pred_boxes``.
  The host builds the phrase mask and position ids, and pads the tokens to T.
- ``owl``: OWLv2 and OWL-ViT as optimum and transformers export them: inputs ``pixel_values`` [1, 3, S, S],
  ``input_ids`` and ``attention_mask`` [N, 16] (one row a phrase); outputs ``logits`` [1, P, N] (each image patch's
  similarity to each phrase) and ``pred_boxes`` [1, P, 4]. Which of the two (``variant``: OWLv2 pads the frame to a
  square, OWL-ViT stretches it) is told by the file's metadata ``model_type`` (the transformers config's), else by
  its input side (OWLv2's checkpoints take 960 or 1008, OWL-ViT's 768 or 840), else assumed OWLv2 and said so.
- ``yolo_text``: YOLO-World and YOLOE exported with the text embeddings as an input (Ultralytics' ``predict`` with
  ``txt_feats`` / ``tpe`` traced, models/yolo_world.py): inputs an image [1, 3, H, W] and ``txt_feats`` (YOLO-World)
  or ``tpe`` (YOLOE) [1, K, D] (K the phrases, fixed by the head's reshape; D the text encoder's width, 512);
  output a raw YOLO head [1, 4 + K, N]. The embeddings come from a separate CLIP text encoder, once per prompt.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..runtime.runner import TensorInfo, shape_text
from ..text import untrusted
from .interface import Interface, Recognition, Rule, batch_ok, image_details

GROUNDING_DINO_HF, GROUNDING_DINO_IDEA, OWL, YOLO_TEXT = "grounding_dino_hf", "grounding_dino_idea", "owl", "yolo_text"
TEXT_FEATURES = {"txt_feats": "YOLO-World", "tpe": "YOLOE"}  # the text-embedding input's name -> whose
OWLV2, OWLVIT = "owlv2", "owlvit"
# The phrase delimiters Grounding DINO's graph reads (transformers' SPECIAL_TOKENS): bert-base-uncased's ids of these
# tokens, which belong to no phrase. The tokenizer must give them these ids.
DELIMITERS = {"[CLS]": 101, "[SEP]": 102, ".": 1012, "?": 1029}
IDEA_TEXT_INPUTS = ("input_ids", "attention_mask", "position_ids", "token_type_ids", "text_token_mask")
OWL_INPUTS = ("pixel_values", "input_ids", "attention_mask")
MAX_TEXT_LEN = 256  # Grounding DINO's token positions (GroundingDinoConfig's max_text_len, every checkpoint's)
OWL_TOKENS = 16  # OWL's text positions: each phrase padded to 16 tokens (its tokenizer's model_max_length)
OWL_SIDES = {960: OWLV2, 1008: OWLV2, 768: OWLVIT, 840: OWLVIT}  # the input sides of the published checkpoints
# transformers' OPENAI_CLIP_MEAN / _STD, RGB, the OWL processors' normalisation
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
MAX_PROMPT_CHARACTERS = 10_000  # a prompt is a few phrases; Grounding DINO reads at most 256 tokens of it
MAX_PHRASES = 1000  # OWL runs its text tower on one row per phrase
NO_NMS = "its boxes are final, no NMS is run (iou_threshold does not apply)"


def parse_phrases(prompt: str | Sequence[str]) -> tuple[str, ...]:
    """The phrases of a prompt: a text of phrases separated by '.' ("a cat. a remote control.") or a list of them;
    each stripped of white space, empty ones dropped. A ValueError, the text escaped, for no phrase, a phrase with a
    '.' in a list, or a prompt past the bounds."""
    if isinstance(prompt, str):
        if len(prompt) > MAX_PROMPT_CHARACTERS:
            raise ValueError(f"the prompt is {len(prompt)} characters, more than {MAX_PROMPT_CHARACTERS}: shorten it")
        phrases = tuple(part.strip() for part in prompt.split(".") if part.strip())
    else:
        given = list(prompt)
        if sum(len(str(phrase)) for phrase in given) > MAX_PROMPT_CHARACTERS:
            raise ValueError(f"the prompt's phrases are more than {MAX_PROMPT_CHARACTERS} characters: shorten them")
        dotted = next((phrase for phrase in given if "." in str(phrase)), None)
        if dotted is not None:
            raise ValueError(
                f"the phrase '{untrusted(dotted, 80)}' holds a '.', which separates phrases: give it without one"
            )
        phrases = tuple(str(phrase).strip() for phrase in given if str(phrase).strip())
    if not phrases:
        raise ValueError(
            f"the prompt '{untrusted(prompt, 80)}' names nothing to detect: give phrases separated by '.', "
            "e.g. 'a cat. a remote control.'"
        )
    if len(phrases) > MAX_PHRASES:
        raise ValueError(f"the prompt has {len(phrases)} phrases, more than {MAX_PHRASES}: give fewer")
    return phrases


def _named(tensors: Sequence[TensorInfo], name: str) -> TensorInfo | None:
    return next((tensor for tensor in tensors if tensor.name == name), None)


def _image(model: Interface, text: Sequence[str]) -> TensorInfo | None:
    """The one input that is not a text input, if it is an image [B, 3, H, W] (B 1 or dynamic)."""
    others = [tensor for tensor in model.inputs if tensor.name not in text]
    if len(others) != 1:
        return None
    shape = others[0].shape
    return others[0] if len(shape) == 4 and batch_ok(shape[0]) and shape[1] == 3 else None


def _queries(logits: TensorInfo | None, boxes: TensorInfo | None) -> tuple[object, object] | None:
    """(Q, L) of logits [1, Q, L] beside boxes [1, Q, 4]; None otherwise."""
    if logits is None or boxes is None or len(logits.shape) != 3 or len(boxes.shape) != 3:
        return None
    if not (batch_ok(logits.shape[0]) and batch_ok(boxes.shape[0])) or boxes.shape[2] != 4:
        return None
    return logits.shape[1], logits.shape[2]


def _grounding_dino(model: Interface) -> Recognition | None:
    idea = all(_named(model.inputs, name) for name in IDEA_TEXT_INPUTS)
    names = ("pred_logits", "pred_boxes") if idea else ("logits", "pred_boxes")
    logits, boxes = (_named(model.outputs, name) for name in names)
    found = _queries(logits, boxes)
    if idea:
        text, head, who = IDEA_TEXT_INPUTS, GROUNDING_DINO_IDEA, "IDEA's and NVIDIA TAO's (Isaac ROS) layout"
    else:
        text = ("input_ids", "attention_mask", "token_type_ids", "pixel_mask")
        head, who = GROUNDING_DINO_HF, "Hugging Face transformers' layout"
        present = {tensor.name for tensor in model.inputs}
        if not {"input_ids", "attention_mask"} <= present or not {"token_type_ids", "pixel_mask"} & present:
            return None
    image = _image(model, text)
    if found is None or image is None:
        return None
    queries, positions = found
    positions = positions if isinstance(positions, int) else None
    text_inputs = ", ".join(tensor.name for tensor in model.inputs if tensor is not image)
    reason = (
        f"inputs {image.name} {shape_text(image.shape)} and {untrusted(text_inputs)}, outputs {logits.name} "
        f"{shape_text(logits.shape)} and {boxes.name} {shape_text(boxes.shape)}: a Grounding DINO detector in "
        f"{who} (each query's similarity to {positions or 'the'} token positions of the prompt; boxes cx, cy, w, h "
        f"normalised); {NO_NMS}"
    )
    ids = _named(model.inputs, "input_ids")
    details: dict[str, object] = {**image_details(image), "head": head, "image": image.name}
    details |= {"queries": queries, "positions": positions, "text_length": ids.shape[1] if ids else None}
    return Recognition("open_vocab", reason, details)


def owl_variant(model: Interface, image: TensorInfo) -> tuple[str, str] | None:
    """OWLV2 or OWLVIT and why, from the metadata's model_type or the input's side; None where neither says."""
    model_type = model.metadata.get("model_type", "")
    if model_type in (OWLV2, OWLVIT):
        return model_type, f"metadata model_type '{model_type}'"
    side = image.shape[3]
    if image.shape[2] == side and side in OWL_SIDES:
        return OWL_SIDES[side], f"its input side {side}, a published {OWL_SIDES[side]} checkpoint's"
    return None


def _owl(model: Interface) -> Recognition | None:
    if {tensor.name for tensor in model.inputs} != set(OWL_INPUTS):
        return None
    logits, boxes = _named(model.outputs, "logits"), _named(model.outputs, "pred_boxes")
    image = _image(model, OWL_INPUTS[1:])
    found = _queries(logits, boxes)
    if found is None or image is None:
        return None
    variant = owl_variant(model, image)
    if variant:
        said = f"{'OWLv2 (the frame padded to a square)' if variant[0] == OWLV2 else 'OWL-ViT'}, by {variant[1]}"
    else:
        said = "OWLv2 (the frame padded to a square), assumed: no model_type in its metadata or known input side says"
    reason = (
        f"inputs {image.name} {shape_text(image.shape)}, input_ids and attention_mask (one row a phrase), outputs "
        f"{logits.name} {shape_text(logits.shape)} and {boxes.name} {shape_text(boxes.shape)}: an OWL detector, "
        f"{said} (each image patch's similarity to each phrase; boxes cx, cy, w, h normalised); {NO_NMS}"
    )
    details: dict[str, object] = {**image_details(image), "head": OWL, "image": image.name}
    details |= {"variant": variant[0] if variant else None, "queries": found[0]}
    return Recognition("open_vocab", reason, details)


def _yolo_text(model: Interface) -> Recognition | None:
    text = next((tensor for tensor in model.inputs if tensor.name in TEXT_FEATURES), None)
    if text is None or len(model.outputs) != 1 or len(text.shape) != 3 or not batch_ok(text.shape[0]):
        return None
    image, (out,) = _image(model, (text.name,)), model.outputs
    if image is None or len(out.shape) != 3 or not batch_ok(out.shape[0]):
        return None
    phrases, width = text.shape[1], text.shape[2]
    if isinstance(phrases, int) and isinstance(out.shape[1], int) and out.shape[1] != 4 + phrases:
        return None
    reason = (
        f"inputs {image.name} {shape_text(image.shape)} and {text.name} {shape_text(text.shape)} (the prompt's text "
        f"embeddings), output {out.name} {shape_text(out.shape)}: a {TEXT_FEATURES[text.name]} detector taking its "
        "classes as text embeddings (read as [1, 4 + phrases, N]; NMS as Ultralytics'), from a CLIP text encoder "
        "beside it"
    )
    details: dict[str, object] = {**image_details(image), "head": YOLO_TEXT, "image": image.name, "text": text.name}
    details |= {"phrases": phrases if isinstance(phrases, int) else None, "width": width}
    return Recognition("open_vocab", reason, details)


def _open_vocab(model: Interface) -> Recognition | None:
    return _grounding_dino(model) or _owl(model) or _yolo_text(model)


OPEN_VOCAB = Rule(
    "open_vocab",
    "an open-vocabulary detector: Grounding DINO (pixel_values, input_ids, attention_mask and token_type_ids or "
    "pixel_mask in; logits and pred_boxes out; or IDEA / TAO's inputs, input_ids, attention_mask, position_ids, "
    "token_type_ids, text_token_mask in; pred_logits and pred_boxes out), OWLv2 / OWL-ViT (pixel_values, input_ids, "
    "attention_mask in; logits and pred_boxes out) or YOLO-World / YOLOE with a text-embedding input (an image and "
    "txt_feats or tpe [1, K, 512] in; a YOLO head [1, 4 + K, N] out)",
    _open_vocab,
)
