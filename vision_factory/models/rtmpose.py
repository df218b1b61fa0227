"""Top-down pose with RTMPose-style SimCC models: person boxes in, keypoints in frame pixels out.

Follows MMPose (``TopdownAffine``, ``SimCCLabel.decode``, ``get_simcc_maximum``) so an exported
RTMPose gives what MMPose gives:

- box -> centre and size: centre = box middle, size = box size x ``padding`` (1.25), then widened or
  heightened to the model's aspect ratio w/h (never shrunk);
- crop: ``cv2.warpAffine`` with INTER_LINEAR of the matrix that maps the centre to the middle of the
  input and the size to the input size (no rotation; border 0);
- normalisation: BGR -> RGB, (pixel - mean) / std with ImageNet's mean (123.675, 116.28, 103.53) and
  std (58.395, 57.12, 57.375) in 0..255 space, NCHW float32;
- decoding: per keypoint the argmax of ``simcc_x`` [B, K, W*split] and ``simcc_y`` [B, K, H*split],
  divided by the split ratio (from the shapes: output length / input size; 2.0 for RTMPose), and
  mapped back by the inverse of the crop: x = u / W * size_w + centre_x - size_w / 2;
- score: MMPose's ``get_simcc_maximum`` takes the smaller of the two maxima (its code:
  ``mask = max_val_x > max_val_y; max_val_x[mask] = max_val_y[mask]``), the default here
  (``score_mode="min"``); rtmlib averages them (``vals = 0.5 * (max_val_x + max_val_y)``),
  ``score_mode="mean"``. Where the score is <= 0 MMPose moves the point to -1; here the point
  stays where the maxima are and the score tells it is not there. Points are not clipped to the
  frame (neither does MMPose).
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from ..results.frame import Detector, FrameResult
from ..results.keypoints import Keypoints
from ..results.keypoints import keypoint_names as coco_or_numbered
from ..runtime.runner import Runner, fixed_dim, run_in_chunks, tensor_text, tensors_text
from .rtmpose_interface import SIMCC_NAMES, simcc_order

IMAGENET_MEAN = (123.675, 116.28, 103.53)  # RGB, 0..255
IMAGENET_STD = (58.395, 57.12, 57.375)
PADDING = 1.25
SCORE_MODES = ("min", "mean")

PersonKeypoints = list[tuple[float, float, float]]  # (x, y, score) per keypoint, frame pixels


def box_center_scale(boxes_xyxy: np.ndarray, aspect_ratio: float, padding: float = PADDING) -> np.ndarray:
    """[N, 4] boxes -> [N, 4] (centre x, centre y, width, height): padded, then fitted to ``aspect_ratio`` (w/h)."""
    boxes = np.asarray(boxes_xyxy, dtype=np.float64).reshape(-1, 4)
    center = (boxes[:, :2] + boxes[:, 2:]) / 2
    w, h = ((boxes[:, 2:] - boxes[:, :2]).clip(1) * padding).T  # a degenerate box counts as 1 px
    wider = w > h * aspect_ratio
    size = np.stack([np.where(wider, w, h * aspect_ratio), np.where(wider, w / aspect_ratio, h)], axis=1)
    return np.concatenate([center, size], axis=1)


def crop_matrix(center_scale: np.ndarray, input_size: tuple[int, int]) -> np.ndarray:
    """The 2x3 affine that maps the box (centre, size) onto an input of ``input_size`` (height, width)."""
    cx, cy, w, _ = center_scale
    height, width = input_size
    s = width / w  # equals height / h: the size has the input's aspect ratio
    return np.array([[s, 0.0, width / 2 - s * cx], [0.0, s, height / 2 - s * cy]])


class RTMPoseEstimator:
    """SimCC keypoints of the people in given boxes, on a Runner."""

    def __init__(
        self,
        runner: Runner,
        simcc_x_output: str | None = None,
        simcc_y_output: str | None = None,
        split_ratio: float | None = None,
        input_size: tuple[int, int] | None = None,
        padding: float = PADDING,
        mean: Sequence[float] = IMAGENET_MEAN,
        std: Sequence[float] = IMAGENET_STD,
        score_mode: str = "min",
        keypoint_names: Sequence[str] | None = None,
    ):
        if score_mode not in SCORE_MODES:
            raise ValueError(f"score_mode {score_mode!r} is not one of {', '.join(SCORE_MODES)}")
        if split_ratio is not None and split_ratio <= 0:
            raise ValueError(f"split_ratio must be positive, not {split_ratio}")
        self.runner = runner
        self.padding, self.score_mode, self.split_ratio = padding, score_mode, split_ratio
        self.mean = np.asarray(mean, dtype=np.float32).reshape(1, 1, 3)
        self.std = np.asarray(std, dtype=np.float32).reshape(1, 1, 3)
        self._input, self.size, self.batch = self._image_input(runner, input_size)
        self._x, self._y = self._simcc_outputs(runner, simcc_x_output, simcc_y_output, self.size)
        count = fixed_dim(runner.outputs[self._x].shape[1])
        if keypoint_names and count is not None and len(keypoint_names) != count:
            raise ValueError(f"{len(keypoint_names)} keypoint names given for a model with {count} keypoints")
        self._names = list(keypoint_names) if keypoint_names else None
        self.keypoint_count = count

    @staticmethod
    def _image_input(runner: Runner, input_size: tuple[int, int] | None):
        if len(runner.inputs) != 1:
            raise ValueError(
                f"an RTMPose model takes one image input [B, 3, H, W], this one takes {tensors_text(runner.inputs)}"
            )
        info = runner.inputs[0]
        if len(info.shape) != 4 or info.shape[1] not in (3, None):
            raise ValueError(f"input {tensor_text(info)} is not [B, 3, H, W]: an RTMPose model takes NCHW RGB crops")
        height, width = fixed_dim(info.shape[2]), fixed_dim(info.shape[3])
        if height and width:
            if input_size is not None and tuple(input_size) != (height, width):
                raise ValueError(
                    f"input_size {input_size[1]}x{input_size[0]} (width x height) differs from the model's fixed "
                    f"input {width}x{height}; leave input_size unset"
                )
            size = (height, width)
        elif input_size is not None:
            size = (int(input_size[0]), int(input_size[1]))
        else:
            raise ValueError(
                f"input {tensor_text(info)} has a dynamic size: set input_size (height, width), "
                "e.g. (256, 192) for RTMPose body models"
            )
        return info.name, size, fixed_dim(info.shape[0])

    @staticmethod
    def _simcc_outputs(
        runner: Runner, x_name: str | None, y_name: str | None, size: tuple[int, int]
    ) -> tuple[int, int]:
        outputs = runner.outputs
        hint = (
            "an RTMPose model has two SimCC outputs, simcc_x [B, K, W*split] and simcc_y [B, K, H*split] "
            f"(input W x H {size[1]}x{size[0]}, split usually 2)"
        )
        index = {info.name: i for i, info in enumerate(outputs)}
        for role, name in (("simcc_x_output", x_name), ("simcc_y_output", y_name)):
            if name is not None and name not in index:
                raise ValueError(
                    f"{role} {name!r} is not an output of the model; its outputs are {tensors_text(outputs)}"
                )
        lower = {info.name.lower(): i for i, info in enumerate(outputs)}
        x = index[x_name] if x_name is not None else lower.get(SIMCC_NAMES[0])
        y = index[y_name] if y_name is not None else lower.get(SIMCC_NAMES[1])
        if x is None or y is None:
            rest = [i for i in range(len(outputs)) if i not in (x, y)]
            if (x is None) + (y is None) > len(rest):
                raise ValueError(f"{hint}; this model has {len(outputs)} output(s): {tensors_text(outputs)}")
            if x is None and y is None:
                order = simcc_order((outputs[rest[0]].shape[-1], outputs[rest[1]].shape[-1]), size)
                x, y = (rest[index] for index in order)
            elif x is None:
                x = rest[0]
            else:
                y = rest[0]
        ix, iy = outputs[x], outputs[y]
        for info in (ix, iy):
            if len(info.shape) != 3:
                raise ValueError(
                    f"output {tensor_text(info)} is not [B, K, L]: {hint}; name the SimCC outputs with "
                    "simcc_x_output and simcc_y_output"
                )
        kx, ky = fixed_dim(ix.shape[1]), fixed_dim(iy.shape[1])
        if kx is not None and ky is not None and kx != ky:
            raise ValueError(
                f"simcc outputs {tensor_text(ix)} and {tensor_text(iy)} disagree on the keypoint count: {hint}"
            )
        return x, y

    @property
    def keypoint_names(self) -> list[str]:
        if self._names is not None:
            return self._names
        return coco_or_numbered(self.keypoint_count) if self.keypoint_count is not None else []

    @property
    def output_names(self) -> tuple[str, str]:
        return self.runner.outputs[self._x].name, self.runner.outputs[self._y].name

    def estimate(self, image_bgr: np.ndarray, boxes_xyxy) -> list[PersonKeypoints]:
        """Keypoints (x, y, score) in frame pixels of the person in each box, in box order; none ([]) for a box of a
        NaN or infinite value (a damaged detector's: no crop is made of it; results/finite.py's finite leaves it
        out)."""
        boxes = np.asarray(boxes_xyxy, dtype=np.float64).reshape(-1, 4)
        finite = np.isfinite(boxes).all(axis=1)
        if not finite.all():
            found = iter(self.estimate(image_bgr, boxes[finite]))
            return [next(found) if ok else [] for ok in finite]
        if not len(boxes):
            return []
        tensor, center_scale = self.preprocess(image_bgr, boxes)
        simcc_x, simcc_y = self.infer(tensor)
        points = self.decode(simcc_x, simcc_y, center_scale)
        return [[(float(x), float(y), float(s)) for x, y, s in person] for person in points]

    def preprocess(self, image_bgr: np.ndarray, boxes_xyxy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """[N, 3, H, W] normalised crops and the [N, 4] (centre, size) of each box."""
        height, width = self.size
        center_scale = box_center_scale(boxes_xyxy, width / height, self.padding)
        crops = np.empty((len(center_scale), 3, height, width), dtype=np.float32)
        for row, box in enumerate(center_scale):
            crop = cv2.warpAffine(image_bgr, crop_matrix(box, self.size), (width, height), flags=cv2.INTER_LINEAR)
            crops[row] = ((crop[..., ::-1].astype(np.float32) - self.mean) / self.std).transpose(2, 0, 1)
        return crops, center_scale

    def infer(self, tensor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """simcc_x [N, K, Lx] and simcc_y [N, K, Ly]: in one run, or in chunks of a fixed batch size."""
        outputs = run_in_chunks(self.runner, self._input, tensor, self.batch, pad=True)
        x, y = outputs[self._x], outputs[self._y]
        if x.ndim != 3 or y.ndim != 3 or x.shape[:2] != y.shape[:2]:
            names = self.output_names
            raise ValueError(
                f"the model returned {names[0]} {list(x.shape)} and {names[1]} {list(y.shape)}: "
                "expected [B, K, W*split] and [B, K, H*split]"
            )
        return x, y

    def decode(self, simcc_x: np.ndarray, simcc_y: np.ndarray, center_scale: np.ndarray) -> np.ndarray:
        """[N, K, 3] keypoints (x, y, score) in frame pixels."""
        height, width = self.size
        ratio_x = self.split_ratio or simcc_x.shape[-1] / width
        ratio_y = self.split_ratio or simcc_y.shape[-1] / height
        u = simcc_x.argmax(axis=-1) / ratio_x  # input pixels
        v = simcc_y.argmax(axis=-1) / ratio_y
        max_x, max_y = simcc_x.max(axis=-1), simcc_y.max(axis=-1)
        scores = np.minimum(max_x, max_y) if self.score_mode == "min" else 0.5 * (max_x + max_y)
        cx, cy, w, h = (center_scale[:, i : i + 1] for i in range(4))
        x = u / width * w + cx - w / 2
        y = v / height * h + cy - h / 2
        return np.stack([x, y, scores.astype(np.float64)], axis=-1)


class TopDownPose:
    """Person detector + pose estimator as one Detector: person detections with keypoints.

    ``person_class`` picks the detector's person class, by name or id; by default ``person`` when
    the detector has such a class, else every detection is taken as a person (a detector of
    people only, such as a fall detector's Normal/Fall). ``pose`` adds keypoints to given
    detections instead, for boxes from elsewhere (a detections topic).
    """

    def __init__(
        self, person_detector: Detector | None, estimator: RTMPoseEstimator, person_class: str | int | None = None
    ):
        self.person_detector, self.estimator = person_detector, estimator
        self.names = list(person_detector.names) if person_detector is not None else ["person"]
        self.keypoint_names = estimator.keypoint_names
        self.person_class = self._person_class(self.names, person_class)

    @property
    def runner(self):
        """The pose model's runner."""
        return self.estimator.runner

    @staticmethod
    def _person_class(names: list[str], person_class: str | int | None) -> int | None:
        if person_class is None:
            return names.index("person") if "person" in names else None
        if isinstance(person_class, str) and not person_class.lstrip("-").isdigit():
            if person_class not in names:
                raise ValueError(
                    f"person_class {person_class!r} is not a class of the person detector: it has {', '.join(names)}"
                )
            return names.index(person_class)
        class_id = int(person_class)
        if not 0 <= class_id < max(len(names), 1):
            raise ValueError(f"person_class {class_id} is not a class id of the person detector (0..{len(names) - 1})")
        return class_id

    def __call__(self, image_bgr: np.ndarray) -> FrameResult:
        """The frame's result (``detect``): an adapter is a function from a frame to its result."""
        return self.detect(image_bgr)

    def detect(self, image_bgr: np.ndarray) -> FrameResult:
        if self.person_detector is None:
            raise ValueError("no person detector: give person boxes to pose(), or a person detector")
        found = self.person_detector.detect(image_bgr)
        people = found if self.person_class is None else found[found.boxes.class_ids == self.person_class]
        return self.pose(image_bgr, people)

    def pose(self, image_bgr: np.ndarray, people: FrameResult) -> FrameResult:
        """``people`` (a result of person boxes) with the keypoints of the person in each box."""
        found = self.estimator.estimate(image_bgr, people.boxes.xyxy)
        count = next((len(person) for person in found if len(person)), len(self.keypoint_names))
        points = np.zeros((len(found), count, 3))  # a person of no keypoints (a box not finite): 0, 0, 0
        for row, person in enumerate(found):
            if len(person):
                points[row] = person
        names = self.keypoint_names if len(self.keypoint_names) == count else coco_or_numbered(count)
        return people.with_parts(keypoints=Keypoints.of(points, names))
