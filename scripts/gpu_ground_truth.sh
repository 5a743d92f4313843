#!/usr/bin/env bash
# Ground truth on the GPU this runs on, in one go (issue #19's matrix):
#   scripts/gpu_ground_truth.sh OUT_DIR [SECONDS]
# 1. checks what the machine has (a CUDA build of torch; torchvision; torchinfo) and only
#    then installs what is missing, from wheels carried in .gpu/wheels (no index is reached);
# 2. profiles every registered model alone (train and inference, batch 8..64, peak memory by
#    nvidia-smi and torch, context, time) into OUT_DIR/measurements.csv;
# 3. runs a few groups of 2, 3 and 4 jobs at once into OUT_DIR/collocation.csv (and .jsonl).
# SECONDS (default 480) bounds it: no model starts after 65 % of it, no group after 85 %;
# what was measured by then is kept.
set -uo pipefail
out=${1:?usage: scripts/gpu_ground_truth.sh OUT_DIR [SECONDS]}
budget=${2:-480}
py=${PYTHON:-python3}
cd "$(dirname "$0")/.." || exit 2
mkdir -p "$out"
export PYTHONUNBUFFERED=1

if ! "$py" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
    if compgen -G ".gpu/wheels/torch-*.whl" >/dev/null; then
        "$py" -m pip install -q --no-index --find-links .gpu/wheels torch torchvision || exit 2
    else
        echo "no CUDA build of torch here and none in .gpu/wheels: nothing to profile with" >&2
        exit 2
    fi
fi
if ! "$py" -c 'import torchinfo' 2>/dev/null; then
    export PYTHONPATH="$PWD/.gpu/site${PYTHONPATH:+:$PYTHONPATH}"  # pure-Python copy
fi
nvidia-smi >"$out/nvidia-smi.txt" 2>&1
"$py" - >"$out/versions.json" <<'PY'
import json, platform, torch, torchvision
print(json.dumps({"python": platform.python_version(), "torch": torch.__version__,
                  "torchvision": torchvision.__version__, "cuda": torch.version.cuda,
                  "cudnn": torch.backends.cudnn.version(),
                  "gpu": torch.cuda.get_device_name(0),
                  "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
                  "tf32_cudnn": torch.backends.cudnn.allow_tf32}))
PY
cat "$out/versions.json"

# The models users ask about first come first, so a short budget still covers the families.
models="resnet50 vit_b_16 bert_base swin_t densenet121 vgg16 resnet18 bert_small mobilenet_v2
efficientnet_b0 convnext_tiny resnext50_32x4d resnet101 densenet169 vgg19 alexnet squeezenet1_1
regnet_y_1_6gf mobilenet_v3_large efficientnet_b3 wide_resnet50_2 resnet34 vgg11 resnet152
densenet201 vgg13 resnext101_32x8d"
# shellcheck disable=SC2086
"$py" -m scripts.profile_gpu $models --task train inference --batch 8 16 32 64 \
    --steps 8 --requests 20 --deadline-s $((budget * 65 / 100)) \
    --out "$out/measurements.csv" --json | tee "$out/profile.jsonl"

groups=("resnet50:train:32 resnet50:train:32"
        "resnet50:train:32 resnet50:train:32 resnet50:train:32"
        "resnet50:train:32 resnet50:train:32 resnet50:train:32 resnet50:train:32"
        "resnet50:train:32 vgg16:train:32"
        "bert_base:train:32 resnet18:train:64"
        "vit_b_16:train:32 densenet121:train:32")
for group in "${groups[@]}"; do
    if ((SECONDS > budget * 85 / 100)); then
        echo "budget: collocation group not run: $group" >&2
        continue
    fi
    # shellcheck disable=SC2086
    "$py" -m scripts.profile_gpu --collocate $group --window 3 --json \
        --collocation-out "$out/collocation.csv" | tee -a "$out/collocation.jsonl"
done
