#!/bin/bash
# Build .gpu/site.txz here: the grader's packages that a GPU machine's image lacks or holds in other versions, for its
# Python 3.12, trimmed to fit a device call (bitsandbytes' CUDA 13.0 library only, wordfreq's English lists only).
# Then, there: scripts/gpu_check.sh (README, "Verified on a GPU"). Keep the pins those of constraints.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo /.gpu/ >>.git/info/exclude
rm -rf .gpu/site && mkdir -p .gpu
pin() { grep -i "^$1==" constraints.txt || python3 -m pip freeze | grep -i "^$1=="; }
PACKAGES="$(pin bitsandbytes) $(pin transformers) $(pin optimum) $(pin optimum-onnx) $(pin wordfreq) $(pin copydetect) \
 $(pin jupyter_client) tokenizers==0.22.2 huggingface_hub==0.36.2 ftfy langcodes locate nbclient nbformat ipykernel \
 jupyter_core ipython ipython_pygments_lexers traitlets pyzmq tornado comm debugpy matplotlib-inline jedi parso \
 prompt_toolkit wcwidth pexpect ptyprocess decorator stack-data asttokens executing pure_eval fastjsonschema jsonschema \
 jsonschema-specifications referencing rpds-py platformdirs pydantic pydantic_core annotated-types typing-inspection \
 click-default-group nest_asyncio"
python3 -m pip install -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_26_x86_64 \
  --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux1_x86_64 --target .gpu/site $PACKAGES
find .gpu/site/bitsandbytes -name 'libbitsandbytes_*.so' ! -name '*cuda130*' ! -name '*cpu*' -delete
find .gpu/site/wordfreq/data -type f ! -name '*_en*' -delete
find .gpu/site -name __pycache__ -prune -exec rm -rf {} +
tar cJf .gpu/site.txz -C .gpu site && rm -rf .gpu/site
ls -la .gpu/site.txz
