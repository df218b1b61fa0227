"""What a TrackNet model's interface is (and its companion InpaintNet's), shared by the adapter
(models/tracknet_stream.py) and the rules that recognise both: input size, background modes, and
the number of input channels a (seq_len, bg_mode) pair takes."""

from __future__ import annotations

from ..runtime.runner import shape_text
from .bounds import MAX_SEQ_LEN, check_count
from .interface import Interface, Recognition, Rule, batch_ok, count_text, int_or_none

HEIGHT = 288
WIDTH = 512
BG_MODES = ("", "subtract", "subtract_concat", "concat")
FEATURE_CHANNELS = {"": 3, "subtract": 1, "subtract_concat": 4, "concat": 3}  # per frame

# Input channels for seq_len L frames, and what they hold, per bg_mode (what input_channels computes).
_CHANNEL_FORMULA = {"": "3 x {L}", "subtract": "1 x {L}", "subtract_concat": "4 x {L}", "concat": "3 x ({L} + 1)"}
_BG_MEANING = {
    "": "RGB frames only",
    "subtract": "one background-difference channel per frame",
    "subtract_concat": "RGB plus a background-difference channel per frame",
    "concat": "a background image followed by the RGB frames",
}


def input_channels(bg_mode: str, seq_len: int) -> int:
    """The input channels of a TrackNet model over ``seq_len`` frames in ``bg_mode`` (concat: + the background)."""
    return FEATURE_CHANNELS[bg_mode] * seq_len + (3 if bg_mode == "concat" else 0)


def _window(frames: object, meta_len: int | None, axis: str) -> int | None:
    """seq_len: the fixed frame ``axis`` of the model, else the metadata's; a BoundError past bounds.MAX_SEQ_LEN."""
    if isinstance(frames, int):
        return check_count(axis, frames, MAX_SEQ_LEN)
    return None if meta_len is None else check_count("metadata seq_len", meta_len, MAX_SEQ_LEN)


def _tracknet(model: Interface) -> Recognition | None:
    if len(model.inputs) != 1 or len(model.outputs) != 1:
        return None
    x, y = model.inputs[0].shape, model.outputs[0].shape
    if len(x) != 4 or len(y) != 4 or x[2:] != (HEIGHT, WIDTH) or y[2:] != (HEIGHT, WIDTH):
        return None
    if not (batch_ok(x[0]) and batch_ok(y[0])):
        return None
    channels, frames = x[1], y[1]
    meta_len, meta_mode = int_or_none(model.metadata.get("seq_len")), model.metadata.get("bg_mode")
    if frames == 1 and meta_len != 1:  # one 288x512 map out is any per-pixel model's (depth, a mask), not a window
        return None
    seen = f"one input {shape_text(x)} and one output {shape_text(y)} of {HEIGHT}x{WIDTH} heatmaps"
    seq_len = _window(frames, meta_len, f"the frames of output {shape_text(y)}")
    if seq_len is None:
        reason = f"{seen}, but the number of frames is dynamic and there is no seq_len metadata to tell it"
        return Recognition("tracknet", reason, {"seq_len": None, "bg_mode": meta_mode})
    parts = [f"{seen}: TrackNet over {count_text(seq_len, 'frame', 'frames')}"]
    if not isinstance(frames, int):
        parts.append(f"(seq_len {seq_len} from metadata, the output's frame axis is dynamic)")
    conflicts = []
    if isinstance(frames, int) and meta_len is not None and meta_len != frames:
        conflicts.append(f"seq_len={meta_len}")
    if not isinstance(channels, int):
        bg_mode = meta_mode if meta_mode in BG_MODES else None
        parts.append(
            f"with dynamic input channels, so bg_mode {bg_mode!r} comes from metadata"
            if bg_mode is not None
            else "with dynamic input channels and no bg_mode metadata, so bg_mode is unknown"
        )
    else:
        fits = [mode for mode in BG_MODES if input_channels(mode, seq_len) == channels]
        bg_mode = meta_mode if meta_mode in fits else (fits[0] if fits else None)
        if bg_mode is None:
            expected = ", ".join(f"{input_channels(mode, seq_len)} ({mode!r})" for mode in BG_MODES)
            parts.append(f"but its {channels} input channels fit no bg_mode (expected {expected})")
        else:
            formula = _CHANNEL_FORMULA[bg_mode].format(L=seq_len)
            parts.append(
                f"whose {channels} = {formula} input channels mean bg_mode {bg_mode!r} ({_BG_MEANING[bg_mode]})"
            )
        if len(fits) > 1 and meta_mode not in fits:
            parts.append(
                f"(a guess: {' and '.join(map(repr, fits))} both fit and no bg_mode metadata tells them apart)"
            )
        if meta_mode is not None and meta_mode not in fits:
            conflicts.append(f"bg_mode={meta_mode!r}")
    if conflicts:
        parts.append(
            f"while its metadata says {' and '.join(conflicts)}, which disagrees with the shapes (the shapes win)"
        )
    elif "seq_len" in model.metadata or "bg_mode" in model.metadata:
        parts.append("and its metadata agrees")
    return Recognition("tracknet", " ".join(parts), {"seq_len": seq_len, "bg_mode": bg_mode})


def _inpaintnet(model: Interface) -> Recognition | None:
    if len(model.inputs) != 2 or len(model.outputs) != 1:
        return None
    by_last_dim = {tensor.shape[-1]: tensor for tensor in model.inputs if len(tensor.shape) == 3}
    coords, mask, output = by_last_dim.get(2), by_last_dim.get(1), model.outputs[0]
    if coords is None or mask is None or len(output.shape) != 3 or output.shape[-1] != 2:
        return None
    tensors = (coords, mask, output)
    if not all(batch_ok(tensor.shape[0]) for tensor in tensors):
        return None
    lengths = {tensor.shape[1] for tensor in tensors if isinstance(tensor.shape[1], int)}
    if len(lengths) > 1:
        return None
    seq_len = _window(next(iter(lengths), None), int_or_none(model.metadata.get("seq_len")), "the fixed frame axis")
    source = "" if lengths or seq_len is None else " (seq_len from metadata)"
    reason = (
        f"inputs {coords.name} {shape_text(coords.shape)} and {mask.name} {shape_text(mask.shape)} and output "
        f"{output.name} {shape_text(output.shape)} are InpaintNet's ball track, visibility mask and repaired track "
        f"over {seq_len if seq_len is not None else 'a dynamic number of'} frames{source}"
    )
    return Recognition("inpaintnet", reason, {"seq_len": seq_len, "coords": coords.name, "mask": mask.name})


TRACKNET = Rule(
    "tracknet", f"a TrackNet model ([1, C, {HEIGHT}, {WIDTH}] in, [1, L, {HEIGHT}, {WIDTH}] out)", _tracknet
)
INPAINTNET = Rule(
    "inpaintnet", "an InpaintNet model (coords [1, L, 2] and mask [1, L, 1] in, [1, L, 2] out)", _inpaintnet
)
