"""TrackNetV3's streaming ``TrackNetModule`` and ``InpaintModule``, on ONNX Runtime.

Same signatures and outputs as the PyTorch modules on the same weights; the streaming
logic is ``tracknet_stream`` (shared by every backend), the session is ``OnnxRunner``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

import numpy as np

from ..runtime.onnx_runner import OnnxRunner
from ..runtime.providers import ProviderConfig, device_to_providers
from .inpaint_stream import InpaintRefiner
from .tracknet_stream import TrackNetTracker, check_stride, ensemble_weights

__all__ = ["InpaintModuleONNX", "TrackNetModuleONNX"]

log = logging.getLogger(__name__)


def _onnx_runner(
    model_path: str | os.PathLike, device: str | None, provider_config: ProviderConfig | None
) -> OnnxRunner:
    config = provider_config or ProviderConfig(providers=tuple(device_to_providers(device)))
    return OnnxRunner(model_path, config, log)


class TrackNetModuleONNX(TrackNetTracker):
    """TrackNetV3's streaming TrackNetModule on ONNX Runtime.

    The reference's parameters, then keyword-only additions: ``provider_config``,
    ``heatmap_threshold`` and ``stride`` (the model runs once every ``stride`` frames, 1..seq_len;
    see ``tracknet_stream``).
    """

    def __init__(
        self,
        model_path: str | os.PathLike,
        seq_len: int,
        bg_mode: str,
        device: str | None = None,
        eval_mode: str = "weight",
        median: np.ndarray | None = None,
        median_warmup: int = 0,
        *,
        provider_config: ProviderConfig | None = None,
        heatmap_threshold: float = 0.0,
        stride: int = 1,
    ):
        ensemble_weights(seq_len, eval_mode)  # reject a bad eval_mode or stride before loading anything
        check_stride(stride, seq_len)
        super().__init__(
            _onnx_runner(model_path, device, provider_config),
            seq_len,
            bg_mode,
            eval_mode,
            median,
            median_warmup,
            model_name=str(model_path),
            heatmap_threshold=heatmap_threshold,
            stride=stride,
        )


class InpaintModuleONNX(InpaintRefiner):
    """TrackNetV3's streaming InpaintModule on ONNX Runtime."""

    def __init__(
        self,
        model_path: str | os.PathLike,
        seq_len: int,
        device: str | None,
        img_scaler: Sequence[float],
        *,
        provider_config: ProviderConfig | None = None,
    ):
        super().__init__(
            _onnx_runner(model_path, device, provider_config), seq_len, img_scaler, model_name=str(model_path)
        )
