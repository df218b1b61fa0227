"""A deliberately plain implementation of TrackNetV3's streaming modules, written from the
specification alone (whole-window concatenation, dicts, no ring buffers), to check the
optimised modules against."""

from __future__ import annotations

import math

import cv2
import numpy as np
import onnxruntime as ort


def weights(seq_len: int, mode: str) -> np.ndarray:
    if mode == "average":
        return np.ones(seq_len, np.float32) / np.float32(seq_len)
    w = np.ones(seq_len, np.float32)
    for i in range(math.ceil(seq_len / 2)):
        w[i] = i + 1
        w[seq_len - i - 1] = i + 1
    return w / w.sum()


def resize(image):
    return cv2.resize(image, (512, 288), interpolation=cv2.INTER_AREA)


class ReferenceTrackNet:
    def __init__(self, model_path, seq_len, bg_mode, eval_mode="weight", median=None, median_warmup=0):
        self.session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
        self.L, self.bg_mode, self.w = seq_len, bg_mode, weights(seq_len, eval_mode)
        self.median, self.median_warmup = median, median_warmup
        self.warm, self.features, self.ids, self.sums, self.sizes, self.count = [], [], [], {}, {}, 0

    def feature(self, bgr):
        rgb = bgr[:, :, ::-1]
        if self.bg_mode in ("", "concat"):
            return resize(rgb).astype(np.float32).transpose(2, 0, 1) / 255
        diff = np.abs(rgb.astype(np.int16) - self.median.astype(np.int16)).sum(axis=2)
        diff = np.clip(diff, 0, 255).astype(np.uint8)
        d = resize(diff).astype(np.float32)[None] / 255
        if self.bg_mode == "subtract":
            return d
        return np.concatenate([resize(rgb).astype(np.float32).transpose(2, 0, 1) / 255, d])

    def push(self, bgr):
        fid = self.count
        self.count += 1
        if self.bg_mode and self.median is None:
            self.warm.append(bgr[:, :, ::-1])
            if len(self.warm) < self.median_warmup:
                return None
            # The frame that completes the median is then processed as the stream's first frame.
            median = np.median(np.stack(self.warm), axis=0).astype(np.uint8)
            self.median = resize(median).transpose(2, 0, 1) if self.bg_mode == "concat" else median
        self.features = (self.features + [self.feature(bgr)])[-self.L :]
        self.ids = (self.ids + [fid])[-self.L :]
        self.sums[fid] = [np.zeros((288, 512), np.float32), np.float32(0)]
        self.sizes[fid] = (bgr.shape[1], bgr.shape[0])
        if len(self.features) < self.L:
            return None
        x = np.concatenate(self.features)[None]
        if self.bg_mode == "concat":
            x = np.concatenate([self.median.astype(np.float32)[None] / 255, x], axis=1)
        heatmaps = self.session.run(None, {self.session.get_inputs()[0].name: x})[0][0]
        for j, f in enumerate(self.ids):
            self.sums[f][0] += self.w[self.L - 1 - j] * heatmaps[j]
            self.sums[f][1] += self.w[self.L - 1 - j]
        return self.emit(self.ids[0])

    def emit(self, fid):
        total, weight = self.sums.pop(fid)
        heatmap = total / max(np.float32(1e-6), weight)
        w, h = self.sizes.pop(fid)
        if heatmap.max() <= 0:
            return {"Frame": fid, "X": 0, "Y": 0, "Visibility": 0}
        row, col = np.unravel_index(np.argmax(heatmap), heatmap.shape)
        x, y = int(col * (w / 512)), int(row * (h / 288))
        return {"Frame": fid, "X": x, "Y": y, "Visibility": int(not (x == 0 and y == 0))}

    def flush(self):
        out = [self.emit(f) for f in sorted(self.sums)]
        self.features, self.ids = [], []
        return out


class ReferenceInpaint:
    def __init__(self, model_path, seq_len, img_scaler):
        self.session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
        self.L, (self.sx, self.sy), self.buffer = seq_len, img_scaler, []

    def push(self, pred):
        if pred["Visibility"] == 1 and pred["X"] > 0 and pred["Y"] > 0:
            c = [min(max(pred["X"] / (512 * self.sx), 0), 1), min(max(pred["Y"] / (288 * self.sy), 0), 1)]
            m = 0.0
        else:
            c, m = [0.0, 0.0], 1.0
        self.buffer.append((pred, c, m))
        if len(self.buffer) < self.L:
            return None
        coords = np.array([[b[1] for b in self.buffer]], np.float32)
        mask = np.array([[[b[2]] for b in self.buffer]], np.float32)
        out = self.session.run(None, {"coords": coords, "mask": mask})[0]
        merged = coords * (1 - mask) + out * mask
        pred0 = self.buffer.pop(0)[0]
        x = int(merged[0, 0, 0] * 512 * self.sx)
        y = int(merged[0, 0, 1] * 288 * self.sy)
        return {"Frame": pred0["Frame"], "X": x, "Y": y, "Visibility": int(not (x == 0 and y == 0))}
