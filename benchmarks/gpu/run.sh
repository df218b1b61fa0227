#!/usr/bin/env bash
# The GPU checks on a lent NVIDIA machine (no package registry there; CPython 3.12 with PyTorch and CUDA 13's
# libraries, CPU-only onnxruntime). What pack.sh made travels in several calls; each call first stashes what it
# carried under /tmp/gpu, which stays while the machine does.
#
#   bash benchmarks/gpu/run.sh stash          # move the carried .gpu/* to /tmp/gpu
#   bash benchmarks/gpu/run.sh baseline       # machine facts, TrackNetV3's own PyTorch network timed, exported
#   bash benchmarks/gpu/run.sh site all       # rejoin onnxruntime-gpu, then tests, parity and speed (check.py)
#   bash benchmarks/gpu/run.sh site again     # the tests again, and where fp16 drifts
#   bash benchmarks/gpu/run.sh site tests     # the GPU tests on the code as it is, the fp16 TrackNet timed
# Everything it prints and writes goes under $OUT (default /tmp/gpu_out).
set -u
OUT=${OUT:-/tmp/gpu_out}
STORE=/tmp/gpu
HERE=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$OUT" "$STORE"
cd "$HERE"

for step in "$@"; do
case $step in
stash)
  if [ -d .gpu ]; then cp -r .gpu/. "$STORE"/ && rm -rf .gpu; fi
  du -sh "$STORE"/* ;;
site)
  if [ ! -f /tmp/site/onnxruntime/capi/libonnxruntime_providers_cuda.so ]; then
    mkdir -p /tmp/site
    python3 -c "import tarfile; tarfile.open('$STORE/a/ort_rest.tar.xz').extractall('/tmp/site')"
    cat "$STORE"/cuda.* | python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.stdin.buffer), sys.stdout.buffer, 1 << 20)" \
      > /tmp/site/onnxruntime/capi/libonnxruntime_providers_cuda.so
    echo "$(cat "$STORE/a/cuda.sha256")  /tmp/site/onnxruntime/capi/libonnxruntime_providers_cuda.so" | sha256sum -c
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$STORE"/a/wheels/*.whl
  fi ;;
baseline|all|again|tests)
  export PYTHONPATH=/tmp/site:$HERE:$HERE/test PYTHONUNBUFFERED=1 VISION_FACTORY_SHARED=$STORE/a/shared
  # onnxruntime-gpu's CUDA provider loads cuBLAS, cuDNN, cuFFT, cuRAND and the runtime of CUDA 13 from PyTorch's
  # nvidia-* packages
  site=$(python3 -c "import site; print(site.getsitepackages()[0])")
  export LD_LIBRARY_PATH=$(find "$site/nvidia" -name 'lib*.so*' -printf '%h\n' 2>/dev/null | sort -u | paste -sd:)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  timeout 580 python3 benchmarks/gpu/check.py "$step" --store "$STORE" --out "$OUT" 2>&1 | tee -a "$OUT/$step.log" ;;
*) echo "unknown step $step"; exit 2 ;;
esac
done
