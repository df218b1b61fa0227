"""InpaintNet trajectory repair, streaming, on any Runner: the frames where TrackNet saw no ball filled from the
window of TrackNet's answers around them (tracknet_stream.py's ``TrackNetTracker`` gives them)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence

import numpy as np

from ..runtime.runner import Runner
from .tracknet_interface import HEIGHT, WIDTH
from .tracknet_stream import BallRow, StreamStats, check_metadata


class InpaintRefiner:
    """Streaming InpaintNet on a Runner: fills frames where TrackNet saw no ball."""

    def __init__(self, runner: Runner, seq_len: int, img_scaler: Sequence[float], model_name: str = "InpaintNet model"):
        if seq_len < 1:
            raise ValueError(f"seq_len must be >= 1, got {seq_len}")
        check_metadata(runner.metadata, {"seq_len": seq_len}, model_name)
        names = [tensor.name for tensor in runner.inputs]
        if len(names) != 2:
            raise ValueError(f"{model_name} has {len(names)} inputs; InpaintNet takes coords and mask")
        self._coords_name, self._mask_name = ("coords", "mask") if set(names) == {"coords", "mask"} else names
        self.runner = runner
        self.seq_len = seq_len
        self.img_scaler = (float(img_scaler[0]), float(img_scaler[1]))
        self.reset()

    def reset(self) -> None:
        self.stats = StreamStats()
        self._buffer: deque[tuple[BallRow, np.ndarray, float]] = deque(maxlen=self.seq_len)

    def _normalise(self, prediction: BallRow) -> tuple[np.ndarray, float]:
        if prediction["Visibility"] == 1 and prediction["X"] > 0 and prediction["Y"] > 0:
            sx, sy = self.img_scaler
            coords = np.clip([prediction["X"] / (WIDTH * sx), prediction["Y"] / (HEIGHT * sy)], 0, 1)
            return coords.astype(np.float32), 0.0
        return np.zeros(2, np.float32), 1.0

    def push(self, prediction: BallRow) -> BallRow | None:
        """Add one TrackNet prediction; once L are buffered, return the oldest, repaired."""
        self.stats.push_calls += 1
        start = time.perf_counter()
        coords, mask = self._normalise(prediction)
        self._buffer.append((prediction, coords, mask))
        self.stats.preprocess_s += time.perf_counter() - start
        if len(self._buffer) < self.seq_len:
            return None
        coords_in = np.stack([entry[1] for entry in self._buffer])[None]
        mask_in = np.array([[entry[2]] for entry in self._buffer], dtype=np.float32)[None]
        start = time.perf_counter()
        output = self.runner.run({self._coords_name: coords_in, self._mask_name: mask_in})[0]
        self.stats.inference_s += time.perf_counter() - start
        self.stats.inference_calls += 1
        start = time.perf_counter()
        repaired = np.where(mask_in == 0, coords_in, output.astype(np.float32))[0, 0]
        sx, sy = self.img_scaler
        x = int(repaired[0] * WIDTH * sx)
        y = int(repaired[1] * HEIGHT * sy)
        oldest = self._buffer.popleft()[0]
        self.stats.outputs += 1
        self.stats.postprocess_s += time.perf_counter() - start
        return {"Frame": oldest["Frame"], "X": x, "Y": y, "Visibility": 0 if x == 0 and y == 0 else 1}

    def flush(self) -> list[BallRow]:
        """Emit the frames not yet emitted, as they came in (masked ones as misses). A frame is repaired from the
        window it starts, so the frames after a flush are repaired as without it."""
        outputs = []
        for prediction, _, mask in self._buffer:
            if mask == 0:
                outputs.append(dict(prediction))
            else:
                outputs.append({"Frame": prediction["Frame"], "X": 0, "Y": 0, "Visibility": 0})
        self.stats.outputs += len(outputs)
        self._buffer.clear()
        return outputs
