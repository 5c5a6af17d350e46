#!/bin/bash
# Execute notebooks one at a time (fresh onnx-int8 folder each time); log to /tmp/qruns
cd /work/corpus/quantization
mkdir -p /tmp/qruns
for nb in "$@"; do
  rm -rf onnx-int8
  /work/main/.venv/bin/python /work/corpus/run_nb.py "$nb" > "/tmp/qruns/${nb%.ipynb}.log" 2>&1
  echo "$nb rc=$?"
done
rm -rf onnx-int8 quantization_throughput.png
