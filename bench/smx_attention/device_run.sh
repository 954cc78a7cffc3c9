#!/usr/bin/env bash
# flash_fwd.smx (or SMX_KERNEL) on a lent NVIDIA GPU in one call: builds the jobs (jobs.py), runs
# the bench page in Chromium with Dawn's robustness on (what a page gets), then again with it off
# (disable_robustness) and with integer range analysis in robustness
# (enable_integer_range_analysis_in_robustness), judges every correctness output by the rule of the
# kernel's precision (f16), times PyTorch's f16 SDPA and GEMM, writes details under $OUT and prints
# a table last.
#
# On the lent machine, after bench/devcarry.py's parts are stashed and unpacked there (its calls 1-3,
# docs/performance.md), in one more call to the same warm machine, carrying nothing:
#   python3 bench/devcarry.py run -- bash bench/smx_attention/device_run.sh
# (or, with the parts of ../../../shared/scripts/chromium-gpu/README.md stashed instead, from a
# checkout whose .devcarry/ holds chromium/chr3, chromium/chrx, libvulkan1_*.deb and scripts/:
#   bash bench/smx_attention/device_run.sh)
# Environment: SMX_KERNEL (a registered kernel id, jobs.py --kernel; default flash_fwd.smx; another
# kernel runs in its one kind and the "auto" variant: varlen_bwd.smx's dq, dk, dv are judged, its
# timed shapes counted as 2.5 times the causal forward's FLOPs; summary.py's PyTorch rows stay the
# forward's), SMX_MODES (default robust,off,range), SMX_CASES (all | quick), SMX_CONFIGS,
# SMX_T_ROBUST / SMX_T_OFF / SMX_T_RANGE (seconds each page may take: 170, 130, 80),
# SMX_VARIANTS (jobs.py VARIANTS names), SMX_CASES_VARIANT (the variant whose tiles the correctness
# cases run), SMX_TIMING=0 (correctness only), SMX_TEMPLATE (another kernel file, jobs.py --template), SMX_TPR (invocations per softmax row), SMX_KINDS, SMX_SHAPES (timed B,H,S,D;...), SMX_KEEP_RAW=1 (keep the outputs' bytes),
# SMX_CHROMIUM (a Chromium binary: a local dry run without the carried one), PYTHON (python3).
set -u
export PYTHONUNBUFFERED=1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${OUT:-/tmp/smx-out}
mkdir -p "$out" "$here/out"
t_start=$(date +%s)
cd "$root"
nvidia_flags="--disable-gpu-sandbox --ignore-gpu-blocklist --use-angle=vulkan --enable-features=Vulkan --disable-vulkan-surface --disable-gpu-compositing --disable-gpu-rasterization --disable-accelerated-2d-canvas"
if [ -n "${WGATTN_CHROMIUM:-}" ]; then  # inside `bench/devcarry.py run --`: its Chromium, loader and fonts
  # ANGLE and Dawn load libvulkan.so.1 from beside the binary; Debian's is the one that worked on the H100.
  beside=$(dirname "$WGATTN_CHROMIUM")/libvulkan.so.1
  [ -e "$beside.chromium" ] || { cp "$beside" "$beside.chromium" 2>/dev/null; cp -L "$WGATTN_VULKAN_FALLBACK" "$beside"; }
  chromium_gpu_start() {
    # shellcheck disable=SC2086
    LD_LIBRARY_PATH=$WGATTN_CHROMIUM_LIBS:$LD_LIBRARY_PATH "$WGATTN_CHROMIUM" --headless=new --no-sandbox \
      --remote-debugging-port=9222 --user-data-dir="$(mktemp -d)" --enable-unsafe-webgpu $nvidia_flags --no-first-run \
      --disable-background-networking --disable-component-update "$@" about:blank > /tmp/chromium-gpu.log 2>&1 &
    local pid=$!
    for _ in $(seq 1 40); do python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9222/json/version', timeout=1)" 2>/dev/null && break; sleep 0.5; done
    echo "$pid"
  }
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$out/nvidia-smi.txt" 2>&1
elif [ -n "${SMX_CHROMIUM:-}" ]; then  # a local dry run with this Chromium (no GPU: it reports so)
  chromium_gpu_start() {
    "$SMX_CHROMIUM" --headless=new --no-sandbox --remote-debugging-port=9222 --user-data-dir="$(mktemp -d)" \
      --enable-unsafe-webgpu --disable-background-networking --disable-component-update --no-first-run \
      "$@" about:blank > /tmp/chromium-gpu.log 2>&1 &
    local pid=$!
    for _ in $(seq 1 40); do python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9222/json/version', timeout=1)" 2>/dev/null && break; sleep 0.5; done
    echo "$pid"
  }
else
  bash .devcarry/scripts/chromium-gpu/chromium-gpu.sh stash .devcarry/chromium/chr3 >/dev/null
  # shellcheck disable=SC1091
  source .devcarry/scripts/chromium-gpu/chromium-gpu.sh env .devcarry/chromium/chrx .devcarry/libvulkan1_*.deb || exit 1
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$out/nvidia-smi.txt" 2>&1
fi

"${PYTHON:-python3}" "$here/jobs.py" build "$here/out/jobs.json" --configs "${SMX_CONFIGS:-16x16x16,16x8x16,16x8x8}" \
  --subgroup 32 --storage 49152 --cases "${SMX_CASES:-all}" $([ "${SMX_TIMING:-1}" = 0 ] || echo --timing) \
  ${SMX_KERNEL:+--kernel "$SMX_KERNEL"} \
  ${SMX_VARIANTS:+--variants "$SMX_VARIANTS"} ${SMX_TEMPLATE:+--template "$SMX_TEMPLATE"} ${SMX_TPR:+--tpr "$SMX_TPR"} \
  ${SMX_CASES_VARIANT:+--cases-variant "$SMX_CASES_VARIANT"} \
  ${SMX_KINDS:+--kinds "$SMX_KINDS"} ${SMX_SHAPES:+--shapes "$SMX_SHAPES"} 2>&1 | tail -1
echo "jobs built at $(( $(date +%s) - t_start )) s"

(cd "$root" && exec python3 -m http.server 18991 --bind 127.0.0.1 > "$out/http.log" 2>&1) & hs=$!
base=--enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia
args=()
for mode in ${SMX_MODES:-robust off range}; do
  # robust: every job; off: the quick correctness cases, every timing; range: quick cases, the
  # "auto" variant of each kind.
  # Each page gets at most T seconds (what it finished by then is kept), so that the call ends
  # in under 8 minutes.
  case $mode in
    robust) flags=$base; query=""; T=${SMX_T_ROBUST:-170} ;;
    off) flags=$base,disable_robustness; query="&quick=1"; T=${SMX_T_OFF:-130} ;;
    range) flags=$base,enable_integer_range_analysis_in_robustness; query="&quick=1&variants=auto"; T=${SMX_T_RANGE:-80} ;;
    *) echo "unknown mode $mode"; continue ;;
  esac
  if [ $(( $(date +%s) - t_start )) -gt 400 ]; then echo "skipping $mode: out of time"; continue; fi
  pid=$(chromium_gpu_start "$flags")
  echo "== $mode: $flags (chromium $pid) at $(( $(date +%s) - t_start )) s"
  timeout $(( T + 30 )) "${PYTHON:-python3}" "$here/cdp.py" 9222 \
    "http://127.0.0.1:18991/bench/smx_attention/index.html?jobs=out/jobs.json&mode=$mode$query" \
    "$out/raw_$mode.json" "$T" | grep -vE "^page: (adapter |.*correctness plans in)" | tail -60
  kill "$pid" 2>/dev/null; sleep 1; kill -9 "$pid" 2>/dev/null
  cp /tmp/chromium-gpu.log "$out/chromium_$mode.log" 2>/dev/null
  args+=("$mode=$out/raw_$mode.json")
done
kill "$hs" 2>/dev/null
echo "browsers done at $(( $(date +%s) - t_start )) s"
(cd "$here" && "${PYTHON:-python3}" summary.py "$here/out/jobs.json" "$out" "${args[@]}")
[ -n "${SMX_KEEP_RAW:-}" ] || rm -f "$out"/raw_*.json  # results_<mode>.json keep them without the output bytes
echo "total $(( $(date +%s) - t_start )) s"
