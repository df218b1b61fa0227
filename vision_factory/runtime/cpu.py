"""Which kind of x86 CPU runs INT8 models, and whether a quantized model holds its accuracy on it.

ONNX Runtime multiplies uint8 activations by int8 weights. On an x86 CPU with VNNI (AVX-512 VNNI, AVX-VNNI or
AMX-INT8) the products are summed in 32 bits; without it (AVX2, or AVX-512 without VNNI) its kernels use
``vpmaddubsw``, which adds pairs of products in 16 bits and saturates. Weights quantized to 7 bits
(``reduce_range``: [-64, 64]) keep every pair within 16 bits. Measured on shapes-YOLOv8n (shapes-val AP):
full-range weights lose 0.14-0.15 AP on an AVX2-only CPU (an AMD EPYC, and qemu's EPYC-Rome model) and
nothing on an AVX-512 VNNI Xeon; 7-bit weights hold on both (docs/tools/quantize.md). OpenVINO's CPU plugin
(oneDNN) loses accuracy alike unless NNCF's overflow fix gives every layer 7-bit weights (re-id embeddings under
qemu's EPYC-Rome: mean cosine to FP32 0.93 against 0.97).

CPU kinds: ``vnni`` (full-range int8 weights hold), ``avx2`` (x86 without VNNI: they saturate), ``other``
(not x86: no known saturation). The kind comes from the instruction set the process sees through ``cpuid``
(numpy's runtime dispatch reads it), the one the runtimes' kernels are chosen by; /proc/cpuinfo names the
flags numpy does not (AVX-VNNI, AMX), and is trusted only where it agrees with cpuid (an emulator such as
qemu-user, or a hypervisor masking features, shows the host's flags there).
"""

from __future__ import annotations

import functools
import platform
from collections.abc import Iterable, Mapping

CPU_KINDS = ("vnni", "avx2", "other")
VNNI_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")  # /proc/cpuinfo names of the instructions that avoid it
X86 = ("x86_64", "amd64", "i386", "i686", "x86")
# numpy's names (cpuid) of the /proc/cpuinfo flags both know: where cpuid lacks one cpuinfo lists, cpuinfo
# describes another CPU than the one running this process.
NUMPY_FLAGS = {"AVX2": "avx2", "AVX512F": "avx512f", "AVX512BW": "avx512bw", "AVX512VNNI": "avx512_vnni"}
QUANTIZATION_KEY = "quantization_"  # the provenance quantize writes (tools/quantize.py)


def cpu_kind(flags: Iterable[str], machine: str = "x86_64") -> str:
    """The CPU kind of a CPU with the /proc/cpuinfo ``flags`` on ``machine`` (platform.machine())."""
    if machine.lower() not in X86:
        return "other"
    return "vnni" if set(flags) & set(VNNI_FLAGS) else "avx2"


def cpu_flags() -> frozenset[str]:
    """The instruction-set flags (/proc/cpuinfo names) of the CPU as this process sees it."""
    listed = _proc_flags()
    seen = _cpuid_flags()
    if seen is None:
        return listed
    if listed and any(name in listed and name not in seen for name in NUMPY_FLAGS.values()):
        return frozenset(seen)  # cpuinfo shows another CPU (emulated or masked): cpuid alone
    return listed | seen


def _proc_flags() -> frozenset[str]:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as file:
            for line in file:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


def _cpuid_flags() -> set[str] | None:
    """The flags of NUMPY_FLAGS that cpuid reports (numpy's runtime CPU dispatch), None if numpy does not say."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:
        try:
            from numpy.core._multiarray_umath import __cpu_features__ as features
        except ImportError:
            return None
    return {name for key, name in NUMPY_FLAGS.items() if features.get(key)}


@functools.cache
def this_cpu() -> str:
    """The kind of the CPU running this process (detected once)."""
    return cpu_kind(cpu_flags(), platform.machine())


def full_range_int8(metadata: Mapping[str, str]) -> bool:
    """Whether a model's metadata says quantize made it int8 with full-range weights (made for VNNI CPUs, or
    for a CPU that is not x86, or before the choice was recorded)."""
    return (
        metadata.get(QUANTIZATION_KEY + "precision") == "int8"
        and metadata.get(QUANTIZATION_KEY + "reduce_range") != "true"
    )


def int8_warning(metadata: Mapping[str, str], kind: str, runtime: str = "ONNX Runtime") -> str:
    """What to say when a model with ``metadata`` runs on a CPU of ``kind``: '' unless it is int8 with full-range
    weights and ``kind`` is avx2, where it loses accuracy."""
    if not full_range_int8(metadata) or kind != "avx2":
        return ""
    made_for = metadata.get(QUANTIZATION_KEY + "target_cpu")
    made_for = made_for if made_for in CPU_KINDS else "vnni"  # metadata is the file's text: only a known kind
    return (
        f"this int8 model was quantized for {made_for} CPUs (full-range int8 weights), and this CPU has no VNNI "
        f"(AVX2 or AVX-512 without VNNI): {runtime}'s int8 kernels saturate here and lose accuracy; quantize it "
        "again on this CPU or with --target-cpu avx2 (7-bit weights)"
    )


_warned: set[str] = set()  # the models warned about in this process


def warn_once(model: str, metadata: Mapping[str, str], logger, kind: str | None = None, **about: str) -> str:
    """int8_warning for ``model`` on the ``kind`` CPU (None: this one), logged by ``logger`` the first time this
    process loads ``model``; the text ('' when there is nothing to say)."""
    text = int8_warning(metadata, kind or this_cpu(), **about)
    if text and model not in _warned:
        _warned.add(model)
        logger.warning(f"{model}: {text}")
    return text
