#!/usr/bin/env bash
# Creates tools/.venv from tools/requirements.txt (the Python side of the
# golden-file generators; Go tests and CI never need it). Re-runnable: an
# existing venv is reused and brought to the pinned versions.
#   tools/setup.sh            # uses python3 from PATH (3.10+)
#   PYTHON=python3.11 tools/setup.sh
set -euo pipefail
cd "$(dirname "$0")"
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --upgrade pip >/dev/null
# CPU wheels of torch keep the download small; any torch 2.15 build works.
.venv/bin/python -m pip install --extra-index-url https://download.pytorch.org/whl/cpu -r requirements.txt
# NVIDIA ModelOpt's NVFP4 quantizer source is the reference of
# gen_checkpoints.py --goldens; its many import-time dependencies are not needed.
.venv/bin/python -m pip install --no-deps nvidia-modelopt==0.47.0
.venv/bin/python -c "import torch, transformers; print('tools/.venv ready: torch', torch.__version__, 'transformers', transformers.__version__)"
