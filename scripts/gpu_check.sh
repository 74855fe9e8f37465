#!/usr/bin/env bash
# GPU check: build + pack on a development machine, run on the GPU machine
# (docs/development.md#gpu-check).
#
#   scripts/gpu_check.sh pack [DIR]   development machine (CUDA 13 + NCCL in /usr/local/cuda, no GPU
#                                     needed): configures and builds a CUDA release build in
#                                     $BUILD_DIR (default build-gpu; sm_90), then packs DIR (default
#                                     bundle/, git-ignored): bin/ (stripped ddprun, ddprund, train),
#                                     tests/ (GPU test binaries), lib/ (train's CUDA model module
#                                     and the non-system shared libraries they need; never libcuda/libcudart/libcublas*/
#                                     libnccl), python/ddprun (the ddprun Python package, where
#                                     bin/ddprun finds it), gpu_torch_ddp.py + ddp_shards.py,
#                                     gpu_check_torch.py + gpu_torch_in_place.py (the PyTorch rows),
#                                     gpu_check.sh and run.sh. Fails if DIR is 64 MiB or more.
#                                     ROWS=python: no CUDA build, the PyTorch rows only; ddprun +
#                                     ddprund built in $BUILD_DIR (default build) as it is configured
#                                     (a folder that is no build tree: its bin/ taken as it is).
#   scripts/gpu_check.sh run [DIR]    GPU machine: LD_LIBRARY_PATH = DIR/lib + the directories of
#                                     libnccl.so.2 / libcublas.so.* / libcudart.so.* found in
#                                     python3's site-packages (PyTorch's nvidia-* wheels); checks
#                                     nvidia-smi; runs the GPU tests (exit 77 = skipped), a
#                                     world-size-1 NCCL training run, `ddprun --nproc-per-node=gpu
#                                     train`, a worker SIGKILLed under --restart-scope=failed
#                                     (NCCL rebuilt in place; 2+ GPUs, else skipped), a
#                                     bf16-vs-fp32 loss comparison and samples/s of
#                                     `ddprun train` vs PyTorch DDP (nccl) on the same MLP, batch and
#                                     steps. Then the PyTorch rows on $PYTHON's torch (issue 32,
#                                     scripts/gpu_check_torch.py): a ddprun.torch DDP script 1x2
#                                     under --restart-scope=failed with a worker SIGKILLed mid-run
#                                     (gloo on the CPUs; nccl on 2 GPUs, else skipped): replaced in
#                                     place, survivors keep their pids, final CRCs = a fault-free
#                                     run's; torch's TCPStore client (default and use_libuv=True)
#                                     against ddprund; two torchrun agents with ddprund as their
#                                     c10d endpoint running a DDP script. Prints a markdown table,
#                                     also written to $OUT/gpu_check.md (plus
#                                     $OUT/gpu_check_logs.tar.gz) when $OUT is set. Every step runs
#                                     under `timeout`; the whole run is kept under $BUDGET_S
#                                     (default 420) seconds. Exit 0 = all passed, 1 = a check
#                                     failed, 3 = no GPU / not packed.
#                                     ROWS=python (or a bundle packed so): the PyTorch rows only,
#                                     no GPU needed (nvidia-smi, CUDA libraries and train unused).
#
# With the device tool (one call; the bundle is git-ignored, so it must be carried):
#   1. here:   scripts/gpu_check.sh pack
#   2. device: run(command="bash scripts/gpu_check.sh run bundle", carry=["bundle"], timeout_s=570)
#      The table comes back in output_tail and as gpu_check.md under files_at.
# Here, the PyTorch rows on Debian's torch 1.13 (no GPU: the nccl row is skipped):
#   ROWS=python BUILD_DIR=build scripts/gpu_check.sh pack /tmp/bundle-py
#   PYTHON=/usr/bin/python3 scripts/gpu_check.sh run /tmp/bundle-py
#
# env (run): STEPS=500 BATCH=1024 HIDDEN=1024,1024 FEATURES=256 CLASSES=10 SAMPLES=262144
#            BUDGET_S=420 PYTHON=python3 CUDA_LIB_DIRS=dir:dir (instead of searching python3's site-packages)
#            ROWS=all|python  TORCH_STEPS=400 (steps of the in-place rows' jobs)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODE="${1:-}"
PY="${PYTHON:-python3}"  # the Python that holds PyTorch 2.x (run)
MAX_BUNDLE=$((64 * 1024 * 1024))
die() { echo "gpu_check: $1" >&2; exit "${2:-1}"; }

# ---------------------------------------------------------------- pack ---------------------------
# Libraries the GPU machine provides itself (glibc, the C++ runtime, the driver, PyTorch's CUDA).
SYSTEM_LIBS='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libutil\.so|libresolv\.so|libstdc\+\+\.so|libgcc_s\.so|libcuda\.so|libcudart\.so|libcublas\.so|libcublasLt\.so|libnccl\.so|libnvidia-)'

copy_libs() {  # binary... -> DIR/lib
  local lib path
  { ldd "$@" 2>/dev/null || true; } | awk '/=> \// {print $1, $3}' | sort -u | while read -r lib path; do
    [[ "$lib" =~ $SYSTEM_LIBS ]] && continue
    [[ -e "$DIR/lib/$lib" ]] || cp -L "$path" "$DIR/lib/$lib"
  done
}

pack() {
  set -e
  DIR="$(realpath -m "${1:-$ROOT/bundle}")"
  [[ "$DIR" != / && "$DIR" != "$ROOT" && "$DIR" != "$HOME" ]] || die "refusing to pack into $DIR"
  local rows="${ROWS:-all}"
  [[ "$rows" == all || "$rows" == python ]] || die "ROWS=$rows: all or python" 2
  if [[ "$rows" == python ]]; then pack_python_build; else pack_cuda_build; fi
  rm -rf "$DIR" && mkdir -p "$DIR/bin" "$DIR/tests" "$DIR/lib" "$DIR/python"
  for t in ddprun ddprund train; do
    [[ "$rows" == python && "$t" == train ]] && continue
    strip --strip-unneeded -o "$DIR/bin/$t" "$build/bin/$t"
  done
  if [[ "$rows" == all ]]; then
    for t in "$build"/tests-bin/gpu_* "$build"/tests-bin/trainer_cuda_model_test; do
      [[ -x "$t" ]] && strip --strip-unneeded -o "$DIR/tests/$(basename "$t")" "$t"
    done
    # train's CUDA model (cuBLAS), a module it loads from bin/../lib for a model on a GPU.
    strip --strip-unneeded -o "$DIR/lib/libddp_train_cuda.so" "$build/lib/libddp_train_cuda.so"
    cp "$ROOT/scripts/gpu_torch_ddp.py" "$ROOT/scripts/ddp_shards.py" "$DIR/"
  fi
  local files; mapfile -t files < <(find "$DIR/bin" "$DIR/tests" "$DIR/lib" -type f)
  copy_libs "${files[@]}"
  # The ddprun package (build/python/ddprun is a link to it): bin/ddprun puts bin/../python first
  # on its Python workers' PYTHONPATH.
  cp -r "$ROOT/worker_runtime/python/ddprun" "$DIR/python/ddprun"
  find "$DIR/python" -name __pycache__ -prune -exec rm -rf {} +
  cp "$ROOT/scripts/gpu_check_torch.py" "$ROOT/scripts/gpu_torch_in_place.py" \
    "$ROOT/scripts/gpu_check.sh" "$DIR/"
  echo "$rows" > "$DIR/ROWS"
  printf '#!/usr/bin/env bash\nexec bash "$(dirname "$0")/gpu_check.sh" run "$(dirname "$0")"\n' \
    > "$DIR/run.sh"
  chmod +x "$DIR/run.sh" "$DIR/gpu_check.sh"
  (cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null) > "$DIR/COMMIT" || true
  local size
  size=$(du -sb "$DIR" | cut -f1)
  echo "gpu_check: packed $DIR ($rows rows): $(find "$DIR" -type f | wc -l) files, $((size / 1024)) KiB"
  ls -l "$DIR/bin" "$DIR/tests" "$DIR/lib" | awk 'NF > 5 {print "  " $5 "\t" $NF}'
  ((size < MAX_BUNDLE)) || die "bundle is $size bytes, over the 64 MiB the device tool carries"
  local tree  # the rest of the working tree travels with it
  tree=$(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard 2>/dev/null \
    | du -cb --files0-from=- 2>/dev/null | tail -n1 | cut -f1)
  ((size + ${tree:-0} < MAX_BUNDLE)) \
    || die "bundle ($size bytes) + working tree (${tree} bytes) exceed the 64 MiB a device call carries"
  local there="$DIR"; [[ "$DIR" == "$ROOT"/* ]] && there="${DIR#"$ROOT"/}"
  echo "gpu_check: OK ($size bytes < $MAX_BUNDLE). Next: device run, command" \
    "'bash scripts/gpu_check.sh run $there', carry [\"$there\"], timeout_s 570"
}

pack_cuda_build() {  # -> $build: a CUDA release build of the programs and the GPU tests
  local jobs="${JOBS:-2}" t
  build="${BUILD_DIR:-$ROOT/build-gpu}"
  cmake -S "$ROOT" -B "$build" -DDDP_WITH_CUDA=ON -DDDP_WITH_DNNL=OFF -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES=90 > "$build.configure.log" 2>&1 \
    || die "configure failed (DDP_WITH_CUDA=ON needs nvcc + NCCL in /usr/local/cuda); see $build.configure.log"
  cmake --build "$build" -j"$jobs" --target ddp_programs \
    || die "build of ddprun/ddprund/train failed in $build"
  for t in gpu_nccl_communicator_test trainer_cuda_model_test; do  # whichever exist
    cmake --build "$build" -j"$jobs" --target "$t" > /dev/null 2>&1 || echo "gpu_check: no target $t (skipped)"
  done
}

pack_python_build() {  # -> $build: ddprun + ddprund built in a configured tree, else taken as they are
  build="${BUILD_DIR:-$ROOT/build}"
  if [[ -f "$build/CMakeCache.txt" ]]; then
    cmake --build "$build" -j"${JOBS:-2}" --target ddprun ddprund \
      || die "build of ddprun/ddprund failed in $build"
  else
    [[ -x "$build/bin/ddprun" && -x "$build/bin/ddprund" ]] \
      || die "ROWS=python: no build tree and no bin/ddprun + bin/ddprund in $build (set BUILD_DIR)"
    echo "gpu_check: $build is no build tree: packing its bin/ddprun and bin/ddprund as they are"
  fi
}

# ---------------------------------------------------------------- run ----------------------------
declare -a TABLE=()  # the report's rows (ROWS is the env switch)
brief() {  # log file -> its first error line (else its last lines), squeezed, at most 240 chars
  { grep -m1 -iE 'error|exception|fail' "$1" || tail -n 3 "$1"; } 2>/dev/null \
    | tr '\n|' ' /' | tr -s ' \t' ' ' | cut -c1-240
}
FAILED=0
row() { TABLE+=("| $1 | $2 | $3 |"); [[ "$2" == FAIL* ]] && FAILED=1; echo "gpu_check: $1: $2 $3"; }
left() { echo $((DEADLINE - SECONDS)); }
budget() {  # wanted seconds -> the seconds left for a step (0 = none left)
  local l; l=$(left); ((l < 15)) && { echo 0; return; }
  ((l < $1)) && echo "$l" || echo "$1"
}

cuda_lib_dirs() {  # the site-packages directories holding NCCL / cuBLAS / cudart
  local roots
  roots=$("$PY" - <<'PY' 2>/dev/null
import os, site
paths = set(site.getsitepackages() + [site.getusersitepackages()])
try:
    import nvidia
    paths.update(os.path.dirname(p) for p in nvidia.__path__)
except Exception:
    pass
try:
    import torch
    paths.add(os.path.dirname(os.path.dirname(torch.__file__)))
except Exception:
    pass
print("\n".join(p for p in paths if os.path.isdir(p)))
PY
)
  [[ -n "$roots" ]] || return 0
  # shellcheck disable=SC2086
  find $roots -maxdepth 6 \( -name 'libnccl.so.2' -o -name 'libcublas.so.*' \
    -o -name 'libcublasLt.so.*' -o -name 'libcudart.so.*' \) -printf '%h\n' 2>/dev/null | sort -u
}

metrics_summary() {  # metrics.jsonl batch -> "loss samples_per_s" (samples/s over all ranks)
  python3 - "$1" "$2" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
a, b = lines[0], lines[-1]
sps = (b["step"] - a["step"]) * int(sys.argv[2]) * b.get("world_size", 1) / (b["time"] - a["time"])
print(f'{b["loss"]:.4f} {sps:.0f}')
PY
}

train_run() {  # name nproc config extra-args... -> row; sets LAST="loss sps"
  local name=$1 nproc=$2 cfg=$3 t; shift 3
  LAST=""
  t=$(budget 90); ((t > 0)) || { row "$name" "SKIPPED" "time budget spent"; return; }
  rm -f "$WORK/$name.jsonl"
  timeout -k 5 "$t" "$B/bin/ddprun" --standalone --nproc-per-node="$nproc" "$B/bin/train" \
    --config "$cfg" --metrics "$WORK/$name.jsonl" "$@" > "$WORK/$name.log" 2>&1
  local rc=$?
  if ((rc == 0)) && LAST=$(metrics_summary "$WORK/$name.jsonl" "$BATCH" 2>> "$WORK/$name.log"); then
    row "$name" "PASS" "final loss ${LAST% *}, ${LAST#* } samples/s"
  else
    LAST=""
    row "$name" "FAIL (rc $rc)" "$(brief "$WORK/$name.log")"
  fi
}

recovery_run() {  # cfg -> row: a worker SIGKILLed under --restart-scope=failed is replaced in place
  local name="recovery in place (NCCL)" cfg=$1 gpus t pid victim
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  if ((gpus < 2)); then
    row "$name" "SKIPPED" "$gpus GPU: NCCL needs a device per rank, so no survivor to keep"
    return
  fi
  t=$(budget 120); ((t > 0)) || { row "$name" "SKIPPED" "time budget spent"; return; }
  rm -f "$WORK/recovery.jsonl"
  timeout -k 5 "$t" "$B/bin/ddprun" --standalone --nproc-per-node=gpu --restart-scope=failed \
    --max-restarts=3 "$B/bin/train" --config "$cfg" --metrics "$WORK/recovery.jsonl" \
    > "$WORK/recovery.log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do [[ -s "$WORK/recovery.jsonl" ]] && break; sleep 0.1; done
  # agent -> guardian -> worker: the last worker of the agent
  victim=$(pgrep -P "$(pgrep -P "$pid" | tail -1)" -x train | tail -1)
  [[ -n "$victim" ]] && kill -KILL "$victim"
  wait "$pid"; local rc=$?
  if ((rc == 0)) && [[ -n "$victim" ]] && grep -q "replacing in place" "$WORK/recovery.log"; then
    row "$name" "PASS" "worker $victim SIGKILLed, replaced in place, the job finished"
  else
    row "$name" "FAIL (rc $rc)" "$(brief "$WORK/recovery.log")"
  fi
}

write_config() {  # file bf16(true|false)
  cat > "$1" <<JSON
{"data": "$WORK/data", "hidden": [$HIDDEN], "device": "cuda", "bf16": $2, "backend": "nccl",
 "epochs": 1000, "max_steps": $STEPS, "batch_size": $BATCH, "optimizer": "sgd", "lr": 0.05,
 "momentum": 0.9, "log_every": 20, "progress_seconds": 1e9, "checkpoint_every": 0}
JSON
}

run_tests() {
  local t rc s
  for t in "$B"/tests/*; do
    [[ -x "$t" ]] || continue
    s=$(budget 90); ((s > 0)) || { row "$(basename "$t")" "SKIPPED" "time budget spent"; continue; }
    timeout -k 5 "$s" "$t" > "$WORK/$(basename "$t").log" 2>&1; rc=$?
    case $rc in
      0) row "$(basename "$t")" "PASS" "$(tail -n 1 "$WORK/$(basename "$t").log" | tr '|' '/' | cut -c1-200)" ;;
      77) row "$(basename "$t")" "SKIPPED (77)" "no device visible" ;;
      *) row "$(basename "$t")" "FAIL (rc $rc)" "$(brief "$WORK/$(basename "$t").log")" ;;
    esac
  done
}

torch_run() {  # -> TORCH_FP32 / TORCH_BF16 = "loss sps"
  local t; t=$(budget 150); TORCH_FP32="n/a n/a" TORCH_BF16="n/a n/a"
  ((t > 0)) || { row "pytorch DDP" "SKIPPED" "time budget spent"; return; }
  # PyTorch's own libraries, not the bundle's: run with the original LD_LIBRARY_PATH.
  if LD_LIBRARY_PATH="$ORIG_LD" timeout -k 5 "$t" "$PY" -m torch.distributed.run --standalone \
      --nproc_per_node=1 "$B/gpu_torch_ddp.py" --data "$WORK/data" --hidden "$HIDDEN" \
      --batch-size "$BATCH" --steps "$STEPS" --modes fp32,bf16 > "$WORK/torch.log" 2>&1; then
    TORCH_FP32=$(grep -o '{"mode": "fp32".*}' "$WORK/torch.log" | python3 -c 'import json,sys; d=json.loads(sys.stdin.readline()); print(f"{d[\"loss\"]:.4f} {d[\"samples_per_s\"]:.0f}")')
    TORCH_BF16=$(grep -o '{"mode": "bf16".*}' "$WORK/torch.log" | python3 -c 'import json,sys; d=json.loads(sys.stdin.readline()); print(f"{d[\"loss\"]:.4f} {d[\"samples_per_s\"]:.0f}")')
    row "pytorch DDP (torchrun, nccl, 1 GPU)" "PASS" "fp32 ${TORCH_FP32#* } samples/s, bf16 ${TORCH_BF16#* } samples/s"
  else
    row "pytorch DDP (torchrun, nccl, 1 GPU)" "FAIL" "$(brief "$WORK/torch.log")"
  fi
}

ratio() { python3 -c "import sys; a,b=sys.argv[1:]; print(f'{float(a)/float(b):.2f}x')" "$1" "$2" 2>/dev/null || echo "n/a"; }

report() {
  local md="$WORK/gpu_check.md"
  report_md > "$md"
  echo; cat "$md"
  if [[ -n "${OUT:-}" ]]; then
    cp "$md" "$OUT/gpu_check.md"
    tar -C "$WORK" -czf "$OUT/gpu_check_logs.tar.gz" --exclude=data . 2>/dev/null || true
  fi
}

report_md() {  # -> the markdown report on stdout
  local ours32="${FP32:-}" ours16="${BF16:-}"
  ours32="${ours32#* }" ours16="${ours16#* }"
  echo "## GPU check ($(date -u '+%Y-%m-%d %H:%M UTC'), commit $(cat "$B/COMMIT" 2>/dev/null || echo ?))"
  echo
  if [[ "$SELECTED" == all ]]; then
    echo "$GPU_NAME; MLP ${FEATURES}-${HIDDEN//,/-}-${CLASSES}, batch $BATCH/rank, $STEPS steps, SGD momentum 0.9; $TORCH_INFO"
  else
    echo "PyTorch rows only (ROWS=python, no GPU checked); $TORCH_INFO; $(nproc) CPUs"
  fi
  echo
  echo "| check | result | detail |"
  echo "|---|---|---|"
  printf '%s\n' "${TABLE[@]}"
  [[ "$SELECTED" == all ]] || return 0
  echo
  echo "| 1 GPU, samples/s (timed after step 20) | ddprun train | PyTorch DDP | ratio |"
  echo "|---|---|---|---|"
  echo "| fp32 | ${ours32:-n/a} | ${TORCH_FP32#* } | $(ratio "${ours32:-0}" "${TORCH_FP32#* }") |"
  echo "| bf16 autocast | ${ours16:-n/a} | ${TORCH_BF16#* } | $(ratio "${ours16:-0}" "${TORCH_BF16#* }") |"
}

# ---------------------------------------------------------------- PyTorch rows -------------------
torch_check() {  # name seconds gpu_check_torch.py-args... -> row from the check's last verdict line
  local name=$1 want=$2 t rc line log; shift 2
  t=$(budget "$want"); ((t > 0)) || { row "$name" "SKIPPED" "time budget spent"; return; }
  log="$WORK/torch_check_$(tr -c 'a-zA-Z0-9' _ <<< "$name").log"
  # torch runs on its own libraries (the original LD_LIBRARY_PATH); ddprun and ddprund, which the
  # check starts, on the bundle's (GPU_CHECK_BIN_LD). Its scratch files (and torchrun's) in $WORK.
  # shellcheck disable=SC2097,SC2098  # GPU_CHECK_BIN_LD takes the LD_LIBRARY_PATH of this shell
  GPU_CHECK_BIN_LD="$LD_LIBRARY_PATH" LD_LIBRARY_PATH="$ORIG_LD" TMPDIR="$WORK" \
    GPU_CHECK_TIMEOUT_S=$((t > 20 ? t - 10 : t)) timeout -k 5 "$t" \
    "$PY" "$B/gpu_check_torch.py" "$@" > "$log" 2>&1; rc=$?
  line=$(grep -E '^(PASS|FAIL|SKIPPED): ' "$log" | tail -n 1 | tr '|' '/' | cut -c1-400)
  case $rc in
    0) row "$name" "PASS" "${line#PASS: }" ;;
    77) row "$name" "SKIPPED" "${line#SKIPPED: }" ;;
    124 | 137) row "$name" "FAIL (timeout)" "still running after $t s: $(brief "$log")" ;;
    *) row "$name" "FAIL (rc $rc)" "${line:+${line#FAIL: }}${line:-$(brief "$log")}" ;;
  esac
}

torch_rows() {  # issue 32: ddprun.torch in place, torch's TCPStore and torchrun against ddprund
  local common=(--bin "$B/bin") steps="${TORCH_STEPS:-400}"
  torch_check "ddprun.torch in place (gloo, CPU)" 150 in-place "${common[@]}" \
    --worker "$B/gpu_torch_in_place.py" --backend gloo --nproc 2 --steps "$steps"
  torch_check "ddprun.torch in place (nccl)" 150 in-place "${common[@]}" \
    --worker "$B/gpu_torch_in_place.py" --backend nccl --nproc 2 --steps "$steps"
  torch_check "torch TCPStore client vs ddprund" 60 store "${common[@]}"
  torch_check "torch TCPStore client (use_libuv=True) vs ddprund" 60 store "${common[@]}" --libuv
  torch_check "torchrun agents, ddprund as c10d endpoint" 120 torchrun "${common[@]}"
}

torch_info() {  # -> "torch X (CUDA Y, N GPUs)" of $PY, or why there is none
  LD_LIBRARY_PATH="$ORIG_LD" timeout 120 "$PY" -c 'import sys, torch
cuda = torch.cuda.is_available()
print("%s torch %s (CUDA %s, %d GPUs)" % (sys.executable, torch.__version__, torch.version.cuda,
      torch.cuda.device_count() if cuda else 0))' 2> "$WORK/torch_info.log" \
    || echo "no torch in $PY: $(brief "$WORK/torch_info.log")"
}

# ---------------------------------------------------------------- GPU rows -----------------------
gpu_setup() {  # nvidia-smi, then LD_LIBRARY_PATH = the bundle's + PyTorch's CUDA libraries
  command -v nvidia-smi > /dev/null \
    || die "nvidia-smi not found: this is not a GPU machine (run this on the H200 device machine; ROWS=python runs the PyTorch rows alone)" 3
  GPU_NAME=$(timeout 30 nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1) \
    || die "nvidia-smi failed: $GPU_NAME" 3
  local cuda_dirs; cuda_dirs="${CUDA_LIB_DIRS:-$(cuda_lib_dirs | paste -sd:)}"
  [[ -n "$cuda_dirs" ]] || die "no libnccl.so.2/libcublas/libcudart in python3's site-packages" 3
  export LD_LIBRARY_PATH="$B/lib:$cuda_dirs${ORIG_LD:+:$ORIG_LD}"
  [[ -d /usr/local/nvidia/lib64 ]] && LD_LIBRARY_PATH+=":/usr/local/nvidia/lib64"
  echo "gpu_check: $GPU_NAME; LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
}

gpu_rows() {
  local missing; missing=$(ldd "$B"/bin/* "$B"/tests/* "$B"/lib/libddp_train_cuda.so 2>/dev/null | grep 'not found' | sort -u | tr -s ' \t\n' ' ')
  [[ -z "$missing" ]] && row "shared libraries" "PASS" "all resolved" \
    || row "shared libraries" "FAIL" "missing: $missing"
  run_tests
  if timeout 120 "$B/bin/train" make-data --out "$WORK/data" --samples "$SAMPLES" \
      --features "$FEATURES" --classes "$CLASSES" --shards 4 --seed 1 > "$WORK/make-data.log" 2>&1; then
    write_config "$WORK/fp32.json" false; write_config "$WORK/bf16.json" true
    train_run "train ws=1 nccl fp32" 1 "$WORK/fp32.json" --backend nccl; FP32=$LAST
    train_run "train nproc=gpu" gpu "$WORK/fp32.json"
    recovery_run "$WORK/fp32.json"
    train_run "train ws=1 nccl bf16" 1 "$WORK/bf16.json" --backend nccl; BF16=$LAST
    if [[ -n "$FP32" && -n "$BF16" ]]; then
      row "bf16 vs fp32 final loss" "$(python3 -c "import sys; a,b=map(float,sys.argv[1:]); print('PASS' if abs(a-b) <= max(0.05, 0.15*abs(a)) else 'FAIL')" "${FP32% *}" "${BF16% *}")" \
        "fp32 ${FP32% *}, bf16 ${BF16% *}, diff $(python3 -c "import sys; a,b=map(float,sys.argv[1:]); print(f'{b-a:+.4f}')" "${FP32% *}" "${BF16% *}")"
    fi
    torch_run
  else
    row "make-data" "FAIL" "$(brief "$WORK/make-data.log")"
  fi
}

run() {
  local dir="${1:-$ROOT/bundle}"
  B="$(realpath -m "$dir")"
  SELECTED="${ROWS:-$(cat "$B/ROWS" 2>/dev/null || echo all)}"
  [[ "$SELECTED" == all || "$SELECTED" == python ]] || die "ROWS=$SELECTED: all or python" 2
  [[ -x "$B/bin/ddprun" && -x "$B/bin/ddprund" && -f "$B/gpu_check_torch.py" ]] \
    || die "no bundle at $B (run 'scripts/gpu_check.sh pack' on a development machine first)" 3
  [[ "$SELECTED" == python || -x "$B/bin/train" ]] \
    || die "$B was packed with ROWS=python (no train): run it with ROWS=python" 3
  DEADLINE=$((SECONDS + ${BUDGET_S:-420}))
  STEPS="${STEPS:-500}" BATCH="${BATCH:-1024}" HIDDEN="${HIDDEN:-1024,1024}"
  FEATURES="${FEATURES:-256}" CLASSES="${CLASSES:-10}" SAMPLES="${SAMPLES:-262144}"
  ORIG_LD="${LD_LIBRARY_PATH:-}"
  if [[ "$SELECTED" == all ]]; then
    gpu_setup
  else
    export LD_LIBRARY_PATH="$B/lib${ORIG_LD:+:$ORIG_LD}"
  fi
  export DDP_LOG_LEVEL=warn
  WORK="$(mktemp -d)"; trap 'rm -rf "$WORK"' EXIT
  TORCH_INFO=$(torch_info)
  echo "gpu_check: $TORCH_INFO"
  [[ "$SELECTED" == all ]] && gpu_rows
  torch_rows
  report
  exit "$FAILED"
}

case "$MODE" in
  pack) shift; pack "$@" ;;
  run) shift; run "$@" ;;
  *) die "usage: $0 pack [DIR] | run [DIR]   (see the header of this script)" 2 ;;
esac
