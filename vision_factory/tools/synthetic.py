"""Built-in models and data that need no download: a TrackNet-compatible ONNX model that
really finds a bright moving ball, an InpaintNet-compatible gap filler, and a clip of a
bouncing ball with exact ground truth."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from ..files import staged
from ..models.tracknet_stream import BG_MODES, FEATURE_CHANNELS, HEIGHT, WIDTH

# Wider than a ball at 512x288, so a flat ball becomes a single peak. (OpenVINO 2026.4's CPU
# plugin never finishes compiling this grouped convolution with 15 taps; 13 is fine.)
BLUR_SIZE = 13


def _gaussian_kernel(size: int, sigma: float) -> np.ndarray:
    axis = np.arange(size, dtype=np.float32) - (size - 1) / 2
    kernel = np.exp(-(axis**2) / (2 * sigma**2))
    return (kernel / kernel.sum()).astype(np.float32)


def _ball_score_weights(seq_len: int, bg_mode: str) -> np.ndarray:
    """1x1 convolution that turns the model input into one 'ballness' channel per frame."""
    channels = FEATURE_CHANNELS[bg_mode]
    weights = np.zeros((seq_len, channels * seq_len, 1, 1), np.float32)
    for frame in range(seq_len):
        if bg_mode == "":
            weights[frame, 3 * frame : 3 * frame + 3] = 1 / 3  # brightness
        elif bg_mode == "subtract":
            weights[frame, frame] = 1  # background difference
        elif bg_mode == "subtract_concat":
            weights[frame, 4 * frame + 3] = 1
    return weights


def _unet_backbone(width: int, in_channels: int, seq_len: int, seed: int = 0) -> tuple[list, list]:
    """Nodes and initializers of a U-Net with TrackNetV3's layer shapes at base ``width`` (V3: 64).

    Encoder: 2, 2, 3 conv3x3+ReLU blocks of width, 2x, 4x, each followed by a 2x2 max-pool, and
    a bottleneck of 3 convs of 8x width; decoder: nearest 2x up-sampling, concatenation with the
    encoder block of the same scale, and 3, 2, 2 convs of 4x, 2x, 1x width; a 1x1 conv to
    ``seq_len`` maps, squashed by a sigmoid into "cost" [1, seq_len, 288, 512]. Random He-scaled
    weights: it finds nothing, it only costs what a network of that shape costs.
    """
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes, initializers = [], []
    count = 0

    def conv(source: str, channels_in: int, channels_out: int, kernel: int = 3, relu: bool = True) -> str:
        nonlocal count
        count += 1
        fan_in = channels_in * kernel * kernel
        weight = rng.normal(0, np.sqrt(2 / fan_in), (channels_out, channels_in, kernel, kernel))
        initializers.append(numpy_helper.from_array(weight.astype(np.float32), f"unet_w{count}"))
        initializers.append(numpy_helper.from_array(np.zeros(channels_out, np.float32), f"unet_b{count}"))
        pad = kernel // 2
        name = f"unet_conv{count}"
        nodes.append(helper.make_node("Conv", [source, f"unet_w{count}", f"unet_b{count}"], [name], pads=[pad] * 4))
        if not relu:
            return name
        nodes.append(helper.make_node("Relu", [name], [f"{name}_relu"]))
        return f"{name}_relu"

    def block(source: str, channels_in: int, channels_out: int, convs: int) -> str:
        for _ in range(convs):
            source, channels_in = conv(source, channels_in, channels_out), channels_out
        return source

    def pool(source: str) -> str:
        nodes.append(helper.make_node("MaxPool", [source], [f"{source}_pool"], kernel_shape=[2, 2], strides=[2, 2]))
        return f"{source}_pool"

    def up(source: str) -> str:
        nodes.append(helper.make_node("Resize", [source, "", "unet_scales"], [f"{source}_up"], mode="nearest"))
        return f"{source}_up"

    def concat(first: str, second: str) -> str:
        nodes.append(helper.make_node("Concat", [first, second], [f"{first}_cat"], axis=1))
        return f"{first}_cat"

    initializers.append(numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "unet_scales"))
    w = width
    skip1 = block("input", in_channels, w, 2)
    skip2 = block(pool(skip1), w, 2 * w, 2)
    skip3 = block(pool(skip2), 2 * w, 4 * w, 3)
    x = block(pool(skip3), 4 * w, 8 * w, 3)
    x = block(concat(up(x), skip3), 12 * w, 4 * w, 3)
    x = block(concat(up(x), skip2), 6 * w, 2 * w, 2)
    x = block(concat(up(x), skip1), 3 * w, w, 2)
    x = conv(x, w, seq_len, kernel=1, relu=False)
    nodes.append(helper.make_node("Sigmoid", [x], ["cost"]))
    return nodes, initializers


def build_tracknet_model(
    path: str | Path, seq_len: int = 8, bg_mode: str = "subtract", backbone_width: int = 0
) -> Path:
    """Write a TrackNet-compatible ONNX model: input [1, C, 288, 512] -> L heatmaps [1, L, 288, 512].

    Per frame it scores pixels by brightness (bg_mode ""), by the background difference
    (the subtract modes) or by |frame - median| computed inside the graph ("concat"),
    blurs the score into a peak and passes it through a sigmoid. Heatmaps are exactly 0
    where the score is below the threshold, so frames without a ball are misses.

    ``backbone_width`` > 0 adds a U-Net with TrackNetV3's layer shapes at that base width
    (64 is TrackNetV3's own) on the same input, whose output is multiplied by 0 and added
    to the score: the heatmaps are the same, the inference costs about what a real network
    of that size costs (the cheap model alone takes a few ms, TrackNetV3 far more).
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    if bg_mode not in BG_MODES:
        raise ValueError(f"bg_mode must be one of {BG_MODES}")
    in_channels = FEATURE_CHANNELS[bg_mode] * seq_len + (3 if bg_mode == "concat" else 0)
    threshold = 0.6 if bg_mode == "" else 0.35
    kernel = _gaussian_kernel(BLUR_SIZE, 4.0)
    initializers = [
        numpy_helper.from_array(np.tile(kernel.reshape(1, 1, 1, -1), (seq_len, 1, 1, 1)), "blur_x"),
        numpy_helper.from_array(np.tile(kernel.reshape(1, 1, -1, 1), (seq_len, 1, 1, 1)), "blur_y"),
        numpy_helper.from_array(np.array(10.0, np.float32), "gain"),
        numpy_helper.from_array(np.array(threshold, np.float32), "threshold"),
        numpy_helper.from_array(np.array(0.5, np.float32), "half"),
        numpy_helper.from_array(np.array(2.0, np.float32), "two"),
    ]
    nodes = []
    if bg_mode == "concat":
        # difference channels: frame f channel c minus median channel c, then |.|, then summed.
        diff = np.zeros((3 * seq_len, in_channels, 1, 1), np.float32)
        total = np.zeros((seq_len, 3 * seq_len, 1, 1), np.float32)
        for frame in range(seq_len):
            for channel in range(3):
                diff[3 * frame + channel, 3 + 3 * frame + channel] = 1
                diff[3 * frame + channel, channel] = -1
                total[frame, 3 * frame + channel] = 1
        initializers += [numpy_helper.from_array(diff, "diff"), numpy_helper.from_array(total, "total")]
        nodes += [
            helper.make_node("Conv", ["input", "diff"], ["signed"]),
            helper.make_node("Abs", ["signed"], ["absolute"]),
            helper.make_node("Conv", ["absolute", "total"], ["score"]),
        ]
    else:
        initializers.append(numpy_helper.from_array(_ball_score_weights(seq_len, bg_mode), "select"))
        nodes.append(helper.make_node("Conv", ["input", "select"], ["score"]))
    if backbone_width > 0:
        backbone, weights = _unet_backbone(backbone_width, in_channels, seq_len)
        initializers += [*weights, numpy_helper.from_array(np.array(0.0, np.float32), "zero")]
        nodes += [
            *backbone,
            helper.make_node("Mul", ["cost", "zero"], ["no_cost"]),
            helper.make_node("Add", ["score", "no_cost"], ["score_backbone"]),
        ]
    pad = BLUR_SIZE // 2
    score = "score_backbone" if backbone_width > 0 else "score"
    nodes += [
        helper.make_node("Conv", [score, "blur_x"], ["blurred_x"], group=seq_len, pads=[0, pad, 0, pad]),
        helper.make_node("Conv", ["blurred_x", "blur_y"], ["blurred"], group=seq_len, pads=[pad, 0, pad, 0]),
        helper.make_node("Sub", ["blurred", "threshold"], ["centred"]),
        helper.make_node("Mul", ["centred", "gain"], ["logits"]),
        helper.make_node("Sigmoid", ["logits"], ["probability"]),
        helper.make_node("Sub", ["probability", "half"], ["above"]),
        helper.make_node("Relu", ["above"], ["positive"]),
        helper.make_node("Mul", ["positive", "two"], ["heatmap"]),
    ]
    graph = helper.make_graph(
        nodes,
        "synthetic_tracknet",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, in_channels, HEIGHT, WIDTH])],
        [helper.make_tensor_value_info("heatmap", TensorProto.FLOAT, [1, seq_len, HEIGHT, WIDTH])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="vision_factory")
    model.ir_version = 8
    props = {"model_name": "TrackNet", "seq_len": str(seq_len), "bg_mode": bg_mode, "synthetic": "true"}
    if backbone_width > 0:
        props["backbone_width"] = str(backbone_width)
    helper.set_model_props(model, props)
    onnx.checker.check_model(model)
    path = Path(path)
    with staged(path) as fresh:
        onnx.save(model, fresh)
    return path


def build_inpaint_model(path: str | Path, seq_len: int = 16, sigma: float = 3.0) -> Path:
    """Write an InpaintNet-compatible ONNX model: coords [1,L,2], mask [1,L,1] -> coords [1,L,2].

    Each frame's output is a Gaussian-weighted local linear fit (in time) through the
    visible frames' coordinates, so hidden frames are interpolated, or extrapolated at
    the window's ends, from their neighbours.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    steps = np.arange(seq_len, dtype=np.float64)
    offset = steps[None, :] - steps[:, None]  # [t, s] = s - t
    kernel = np.exp(-(offset**2) / (2 * sigma**2))
    constants = {
        "k0": kernel,
        "k1": kernel * offset,
        "k2": kernel * offset**2,
        "one": np.array(1.0),
        "ridge": np.array(1e-3),
        "epsilon": np.array(1e-9),
    }
    nodes = [
        helper.make_node("Sub", ["one", "mask"], ["visible"]),
        helper.make_node("Mul", ["coords", "visible"], ["visible_coords"]),
        helper.make_node("MatMul", ["k0", "visible"], ["s0"]),
        helper.make_node("MatMul", ["k1", "visible"], ["s1"]),
        helper.make_node("MatMul", ["k2", "visible"], ["s2_raw"]),
        helper.make_node("Add", ["s2_raw", "ridge"], ["s2"]),
        helper.make_node("MatMul", ["k0", "visible_coords"], ["t0"]),
        helper.make_node("MatMul", ["k1", "visible_coords"], ["t1"]),
        # intercept of the weighted line fit: (s2 t0 - s1 t1) / (s0 s2 - s1^2)
        helper.make_node("Mul", ["s2", "t0"], ["a"]),
        helper.make_node("Mul", ["s1", "t1"], ["b"]),
        helper.make_node("Sub", ["a", "b"], ["numerator"]),
        helper.make_node("Mul", ["s0", "s2"], ["c"]),
        helper.make_node("Mul", ["s1", "s1"], ["d"]),
        helper.make_node("Sub", ["c", "d"], ["determinant"]),
        helper.make_node("Max", ["determinant", "epsilon"], ["safe_determinant"]),
        helper.make_node("Div", ["numerator", "safe_determinant"], ["output"]),
    ]
    graph = helper.make_graph(
        nodes,
        "synthetic_inpaintnet",
        [
            helper.make_tensor_value_info("coords", TensorProto.FLOAT, [1, seq_len, 2]),
            helper.make_tensor_value_info("mask", TensorProto.FLOAT, [1, seq_len, 1]),
        ],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, seq_len, 2])],
        [numpy_helper.from_array(value.astype(np.float32), name) for name, value in constants.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="vision_factory")
    model.ir_version = 8
    helper.set_model_props(model, {"model_name": "InpaintNet", "seq_len": str(seq_len), "synthetic": "true"})
    onnx.checker.check_model(model)
    path = Path(path)
    with staged(path) as fresh:
        onnx.save(model, fresh)
    return path


@dataclass(frozen=True)
class BallTruth:
    frame: int
    visibility: int
    x: float
    y: float


class BallClip:
    """A static court with a bright ball bouncing across it; some frames hide the ball."""

    def __init__(
        self,
        num_frames: int = 60,
        width: int = 640,
        height: int = 360,
        seed: int = 0,
        hidden_every: int = 15,
        hidden_frames: int = 2,
    ):
        self.num_frames, self.width, self.height = num_frames, width, height
        rng = np.random.default_rng(seed)
        self._rng = rng
        self.background = self._court(rng)
        self.radius = max(3, round(0.012 * width))
        self.truth = [self._truth(i, hidden_every, hidden_frames) for i in range(num_frames)]

    def _court(self, rng: np.random.Generator) -> np.ndarray:
        h, w = self.height, self.width
        ramp = np.linspace(0.0, 1.0, h, dtype=np.float32)[:, None, None]
        court = (np.array([60, 110, 50], np.float32) * (0.8 + 0.4 * ramp)).repeat(w, axis=1)
        court += rng.normal(0, 6, court.shape).astype(np.float32)
        image = np.clip(court, 0, 255).astype(np.uint8)
        line = (170, 170, 170)
        thickness = max(1, w // 320)
        cv2.rectangle(image, (w // 10, h // 6), (w - w // 10, h - h // 10), line, thickness)
        cv2.line(image, (w // 2, h // 6), (w // 2, h - h // 10), line, thickness)
        return image

    def _truth(self, index: int, hidden_every: int, hidden_frames: int) -> BallTruth:
        progress = index / max(1, self.num_frames - 1)
        x = self.width * (0.08 + 0.84 * progress)
        bounces = 2.5
        phase = (progress * bounces) % 1.0
        y = self.height * (0.85 - 0.6 * 4 * phase * (1 - phase))
        hidden = hidden_every > 0 and index % hidden_every >= hidden_every - hidden_frames
        return BallTruth(index, 0 if hidden else 1, float(x), float(y))

    def frame(self, index: int) -> np.ndarray:
        """The BGR frame at ``index`` (sensor noise included, reproducible)."""
        rng = np.random.default_rng(index + 1000)
        image = cv2.add(self.background, rng.integers(0, 4, self.background.shape, dtype=np.uint8))
        truth = self.truth[index]
        if truth.visibility:
            centre = (int(round(truth.x)), int(round(truth.y)))
            cv2.circle(image, centre, self.radius, (200, 250, 255), -1, lineType=cv2.LINE_AA)
        return image

    def frames(self):
        for index in range(self.num_frames):
            yield self.frame(index)
