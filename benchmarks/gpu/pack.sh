#!/usr/bin/env bash
# Packs what the GPU checks need (benchmarks/gpu/run.sh) into parts that each fit one call of a lent GPU machine
# that reaches no package registry: onnxruntime-gpu for CPython 3.12 (its CUDA provider alone is 284 MB, so it
# travels xz-compressed in parts of PART bytes, rejoined there), pycocotools, the shared test models, the
# shapes validation set and TrackNetV3's model definition (from a checkout of its repository, never committed).
#
#   benchmarks/gpu/pack.sh DEST SHARED TRACKNETV3_MODEL_PY
#
# DEST gets a/ (everything but the provider) and cuda.1, cuda.2, ... (the provider's parts); each is carried in
# one call and moved to /tmp/gpu there by run.sh's `stash`.
set -euo pipefail
DEST=$1 SHARED=$2 TV3=$3
ORT=${ORT_VERSION:-1.31.1}
PART=${PART:-62000000}
mkdir -p "$DEST/a/wheels" "$DEST/work"
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
  --platform manylinux2014_x86_64)
pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${platforms[@]}" \
  -d "$DEST/work" "onnxruntime-gpu==$ORT"
pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${platforms[@]}" \
  -d "$DEST/a/wheels" pycocotools
rm -rf "$DEST/work/site" && mkdir -p "$DEST/work/site"
python3 -m zipfile -e "$DEST"/work/onnxruntime_gpu-*.whl "$DEST/work/site"
capi="$DEST/work/site/onnxruntime/capi"
sha256sum "$capi/libonnxruntime_providers_cuda.so" | cut -d' ' -f1 > "$DEST/a/cuda.sha256"
# CUDA_XZ: the provider already compressed by an earlier run (xz -9e takes minutes)
if [ -n "${CUDA_XZ:-}" ]; then cat "$CUDA_XZ"; else xz -9e -T2 -c "$capi/libonnxruntime_providers_cuda.so"; fi | split -b "$PART" -d -a 1 - "$DEST/cuda."
rm "$capi/libonnxruntime_providers_cuda.so" "$capi"/libonnxruntime.so.*  # the C API library: Python needs none
tar -C "$DEST/work/site" -cJf "$DEST/a/ort_rest.tar.xz" .
mkdir -p "$DEST/a/shared/models" "$DEST/a/shared/data"
for model in yolo11n-pose shapes-yolov8n shapes-yolov8n-seg mobilenetv2-reid-embedder-b16; do
  cp "$SHARED/models/$model.onnx" "$DEST/a/shared/models/"
done
cp -r "$SHARED/data/shapes-val" "$DEST/a/shared/data/"
cp "$TV3" "$DEST/a/tracknetv3_model.py"
du -sb "$DEST"/a "$DEST"/cuda.*
