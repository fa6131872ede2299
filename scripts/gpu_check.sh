#!/usr/bin/env bash
# gpu_check.sh: the one GPU acceptance run. Builds the engine against the GPU
# machine's CUDA LibTorch (python3's torch), runs the GPU and precision tests,
# times the device codec on the seed's MobileNetV2 boundary against that
# micro-batch's forward and backward, the optimizer's step paths, the engine
# against PyTorch eager in fp32 and bf16 (ResNet-18 at 32x32 and 224x224,
# MobileNetV2, ViT, small CNN), checks that bf16 trains to at most 1 accuracy
# point below fp32 on Fashion-MNIST, and ends in one table.
# The default run fits in 6 minutes on an H100 (build about 83 s with 12 jobs).
#
# Usage (from any directory on the GPU machine):
#   bash scripts/gpu_check.sh [STAGE...]
# STAGEs, in order (default: env configure build test codec optimizer bench accuracy table summary):
#   env configure build train test codec optimizer bench accuracy table summary
#   (train and diag only when named)
#   train     the small CNN on Fashion-MNIST on the GPU and its records' CUDA fields
#   test      the GPU and precision tests (Gpu.*, ...), each in its own process
#   codec     codec_bench --seed-shapes: 8-bit sort_quant on the device on the seed's
#             MobileNetV2 boundary ([32,32,112,112] and [32,1280,7,7], the model's own
#             activations), encode + decode as a share of the micro-batch's forward
#             and backward (goal <= 10 %): $OUT/codec.log
#   optimizer optimizer_bench --device cuda: torch::optim per parameter, _foreach_,
#             and the path the engine takes there: $OUT/optimizer.log
#   bench     engine vs PyTorch eager, fp32 and bf16 (autocast), one process per
#             engine run and one peer process per model: $OUT/bench.json, bench.log
#   accuracy  small_cnn and resnet18 on Fashion-MNIST, fp32 then bf16, same seed
#             and steps: test accuracy of each; bf16 at most 1 point below fp32?  $OUT/accuracy.log
#   table     every stage's figures in one table (from $OUT/table.tsv, which
#             each stage appends to): also printed at the very end
# Settings, all from the environment:
#   SRC          source tree to build          (default: the tree holding this script)
#   GPU_DIR      carried folder with deps/, deps-zlib/, gloo-include/, data/
#                (default: ./.gpu if it has deps/, else the folder above $SRC)
#   BUILD        build directory               (default: /tmp/flotilla-gpu-build; reused if there)
#   OUT          where the *.log files go      (default: $OUT of the device tool, else ./gpu-out)
#   JOBS         parallel compile jobs         (default: nproc)
#   BUILD_TYPE   CMake build type              (default: Release)
#   EXTRA_CMAKE_ARGS  appended to the configure line (e.g. -DCMAKE_CXX_STANDARD=20)
#   FULL=1       the broad run of before: every target, every test program
#                (engine_tests protocol_tests agent_tests train_process_tests, all
#                but *Long*), deadline 570 s; longer than 6 minutes
#   TARGETS      what to build (default: flotilla-train engine_tests train_process_tests
#                codec_bench optimizer_bench;
#                FULL=1: also flotilla-agent protocol_tests agent_tests)
#   TESTS        test programs to run          (default: engine_tests train_process_tests)
#   GTEST_FILTER passed to every test program  (default: the GPU and precision tests,
#                see DEFAULT_FILTER below; FULL=1: -*Long*)
#   GTEST_FILTER_<program>  that program's own filter instead (e.g. GTEST_FILTER_agent_tests=Agent.Stop*)
#   PER_TEST     1 (default): each test in its own process, so a crash costs one test; 0: whole programs
#   EACH_TIMEOUT seconds per test with PER_TEST=1 (default: 90)
#   TRACE        1 (default): preload crash_trace.cpp (stacks on crashes and uncaught exceptions)
#   PRELOAD_STDCXX 1 (default): tests run with LD_PRELOAD=libstdc++.so.6 (see pytorch#133437 below);
#                0 shows the crash of engine_tests' TempDir tests against a LibTorch 2.x wheel
#   TEST_TIMEOUT seconds per test program      (default: 150: the benches after the tests need the rest)
#   DEADLINE_S   seconds after start by which every stage must end (default: 350, i.e. under
#                6 minutes; FULL=1: 570, the device tool's limit being 600); a stage that
#                would start too late is skipped and says so in the table
#   STEPS        flotilla-train max_steps      (default: 400)
#   BATCH        batch_size of that run        (default: 64, the preset's)
#   TRAIN_CONFIG a YAML of your own for the training stage instead of the generated one
#   TRAIN_ARGS   extra flotilla-train arguments
#   BENCH_ROWS   models of the bench stage     (default: resnet18 resnet18_224 mobilenet_v2 vit small_cnn;
#                resnet18_224 is the compute-bound row of "bf16 at least 2x fp32")
#   BENCH_PRECISIONS  (default: fp32 bf16)
#   BENCH_REPEATS     runs of each, best kept (default: 1)
#   BENCH_ARGS   extra engine_vs_pytorch.py arguments (e.g. --steps 50, --warmup 10)
#   CHANNELS_LAST 1 (default): CNN rows in NHWC on both sides (both engine and PyTorch); 0: NCHW
#   ACC_MODELS   models of the accuracy stage  (default: small_cnn resnet18)
#   ACC_STEPS    steps of each accuracy run    (default: 600, batch 64: 0.64 epochs)
#   DEVICE       device of the train, bench and accuracy stages (default: cuda; cpu
#                smoke-tests those stages' pieces on a machine without a GPU)
#   PYTHON       the python with torch that runs the PyTorch peer (default: python3)
#   DEPS_ZLIB=1  link the carried static zlib even where the machine has zlib.h
# With the device tool (GPU machine), after copying the committed source to .gpu/src:
#   run  command: bash .gpu/src/scripts/gpu_check.sh   carry: [".gpu"]
# Logs: $OUT/{env,configure,build,train,bench,accuracy,tests,summary}.log, diag.log,
# $OUT/train_records.jsonl, $OUT/bench.json, $OUT/table.tsv.
# summary.log (also printed at the end) has one line per test: PASS, FAIL, SKIP,
# CRASH or TIMEOUT, and the output of each that did not pass; the table follows it.
set -uo pipefail

T0=$(date +%s)
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=${SRC:-$(cd "$HERE/.." && pwd)}
if [[ -z ${GPU_DIR:-} ]]; then
  if [[ -d $PWD/.gpu/deps ]]; then GPU_DIR=$PWD/.gpu
  elif [[ -d $SRC/../deps ]]; then GPU_DIR=$(cd "$SRC/.." && pwd)
  else GPU_DIR=$PWD/.gpu; fi
fi
GPU_DIR=$(cd "$GPU_DIR" 2>/dev/null && pwd || echo "$GPU_DIR")
BUILD=${BUILD:-/tmp/flotilla-gpu-build}
TRAIN_BIN=$BUILD/bin/flotilla-train
OUT=${OUT:-$PWD/gpu-out}
JOBS=${JOBS:-$(nproc)}
BUILD_TYPE=${BUILD_TYPE:-Release}
# The GPU tests, the precision tests (engine_tests: autocast, loss scale, bf16
# and fp16 buckets; train_process_tests: the bf16 runs' bytes, on the CPU
# with this LibTorch's Gloo); the train stage is the Fashion-MNIST run on the GPU.
DEFAULT_FILTER='Gpu.*:Autocast.*:Precision.*:LossScaler.*:ChannelsLast.*:*ReducedPrecisionBuckets*:TrainProcess.Bf16*:TrainProcess.Fp16*:TrainProcess.DataParallelOverItsDevices*'
if [[ ${FULL:-0} == 1 ]]; then
  TARGETS=${TARGETS:-flotilla-train flotilla-agent engine_tests protocol_tests agent_tests train_process_tests}
  TESTS=${TESTS:-engine_tests protocol_tests agent_tests train_process_tests}
  GTEST_FILTER=${GTEST_FILTER:--*Long*}
  DEADLINE_S=${DEADLINE_S:-570}
else
  TARGETS=${TARGETS:-flotilla-train engine_tests train_process_tests codec_bench optimizer_bench}
  TESTS=${TESTS:-engine_tests train_process_tests}
  GTEST_FILTER=${GTEST_FILTER:-$DEFAULT_FILTER-*Long*}
  DEADLINE_S=${DEADLINE_S:-350}
fi
TEST_TIMEOUT=${TEST_TIMEOUT:-150}
STEPS=${STEPS:-400}
BATCH=${BATCH:-64}
BENCH_ROWS=${BENCH_ROWS:-resnet18 resnet18_224 mobilenet_v2 vit small_cnn}
BENCH_PRECISIONS=${BENCH_PRECISIONS:-fp32 bf16}
BENCH_REPEATS=${BENCH_REPEATS:-1}
CHANNELS_LAST=${CHANNELS_LAST:-1}
ACC_MODELS=${ACC_MODELS:-small_cnn resnet18}
ACC_STEPS=${ACC_STEPS:-600}
DEVICE=${DEVICE:-cuda}
PYTHON=${PYTHON:-python3}
STAGES=${*:-env configure build test codec optimizer bench accuracy table summary}
mkdir -p "$OUT" "$BUILD"
SUMMARY=$OUT/summary.log
: >"$SUMMARY"
TABLE=$OUT/table.tsv
# A stage run alone adds to the table of the run before; a whole run starts it afresh.
if [[ -z ${*:-} ]]; then : >"$TABLE"; else touch "$TABLE"; fi

say() { echo "== $*" | tee -a "$SUMMARY"; }
elapsed() { echo $(($(date +%s) - T0)); }
left() { echo $((DEADLINE_S - $(date +%s) + T0)); }
want() { [[ " $STAGES " == *" $1 "* ]]; }
# One row of the final table: SECTION ITEM VALUE [VERDICT] (tab-separated).
table_row() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4:-}" >>"$TABLE"; }
# Whether SECONDS are left before the deadline; otherwise notes the stage as not run.
time_for() {
  (( $(left) >= $2 )) && return 0
  say "$1: not run, $(left) s left before the deadline (needs about $2)"
  table_row "$1" "not run" "$(left) s left of DEADLINE_S=$DEADLINE_S" "SKIPPED"
  return 1
}
# Whether flotilla-train was built; otherwise STAGE (ITEM) fails, in the
# summary and in the table. The train, bench and accuracy stages all need it.
have_trainer() {
  [[ -x $TRAIN_BIN ]] && return 0
  say "$1: no $TRAIN_BIN"
  table_row "$1" "$2" "no flotilla-train built" "FAIL"
  return 1
}
want_any() { local x; for x; do want "$x" && return 0; done; return 1; }

# ---- environment: torch, CUDA, NCCL headers, the carried dependencies
export PATH=/usr/local/cuda/bin:$PATH
TORCH_PREFIX=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)' 2>/dev/null)
TORCH_LIB=$(python3 -c 'import torch,os;print(os.path.join(os.path.dirname(torch.__file__),"lib"))' 2>/dev/null)
DEPS=$GPU_DIR/deps/usr
ARCH_LIB=$DEPS/lib/x86_64-linux-gnu
PREFIX="$TORCH_PREFIX;$DEPS"
ZLIB_ARGS=()
if [[ ! -e /usr/include/zlib.h || -n ${DEPS_ZLIB:-} ]]; then  # no zlib headers there (or DEPS_ZLIB=1): Debian's static zlib
  PREFIX="$PREFIX;$GPU_DIR/deps-zlib/usr"
  ZLIB_ARGS=(-DZLIB_USE_STATIC_LIBS=ON -DZLIB_INCLUDE_DIR="$GPU_DIR/deps-zlib/usr/include"
             -DZLIB_LIBRARY="$GPU_DIR/deps-zlib/usr/lib/x86_64-linux-gnu/libz.a")
fi
# ProcessGroupNCCL.hpp includes <nccl.h>: the wheel's nvidia-nccl ships it.
NCCL_INC=""
for d in /usr/include /usr/local/cuda/include; do [[ -e $d/nccl.h ]] && NCCL_INC=$d && break; done
if [[ -z $NCCL_INC ]]; then
  for sp in $(python3 -c 'import site;print(" ".join(site.getsitepackages()))' 2>/dev/null); do
    f=$(find "$sp/nvidia" -name nccl.h 2>/dev/null | head -1)
    [[ -n $f ]] && NCCL_INC=$(dirname "$f") && break
  done
fi
[[ -n $NCCL_INC ]] && export CPATH=$NCCL_INC${CPATH:+:$CPATH}
# ProcessGroupGloo.hpp includes gloo's headers; where the wheel lacks them,
# the carried copy of Debian's (searched after every -I directory).
TORCH_INC=$(python3 -c 'import torch,os;print(os.path.join(os.path.dirname(torch.__file__),"include"))' 2>/dev/null)
if [[ ! -e $TORCH_INC/gloo/algorithm.h && -d $GPU_DIR/gloo-include ]]; then
  export CPATH=${CPATH:+$CPATH:}$GPU_DIR/gloo-include
fi
export LD_LIBRARY_PATH=$ARCH_LIB:$TORCH_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
# The tests read Fashion-MNIST from Debian's location.
if [[ -d $GPU_DIR/data && ! -e /usr/share/datasets/fashion-mnist ]]; then
  mkdir -p /usr/share/datasets 2>/dev/null && ln -s "$GPU_DIR/data" /usr/share/datasets/fashion-mnist 2>/dev/null
fi
DATA_DIR=$GPU_DIR/data
[[ -d $DATA_DIR ]] || DATA_DIR=/usr/share/datasets/fashion-mnist

if want env; then
  {
    echo "SRC=$SRC GPU_DIR=$GPU_DIR BUILD=$BUILD OUT=$OUT JOBS=$JOBS"
    echo "TORCH_PREFIX=$TORCH_PREFIX NCCL_INC=$NCCL_INC CPATH=${CPATH:-}"
    uname -a; cat /etc/os-release 2>/dev/null | head -2
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
    which nvcc cmake ninja g++ 2>&1; nvcc --version 2>&1 | tail -2; cmake --version | head -1
    ninja --version; g++ --version | head -1
    python3 -c 'import torch;print("torch",torch.__version__,"cuda",torch.version.cuda,
      "avail",torch.cuda.is_available(),"nccl",torch.cuda.nccl.version() if torch.cuda.is_available() else None,
      "cxx11abi",torch.compiled_with_cxx11_abi())' 2>&1
    ls "$TORCH_LIB" | head -50
    ls -d /usr/include/zlib.h "$TORCH_INC/gloo" 2>&1
  } 2>&1 | tee "$OUT/env.log"
fi

if want configure; then
  say "configure ($(elapsed) s)"
  cmake -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" \
    -DFLOTILLA_BUILD_GUI=OFF -DFLOTILLA_BUILD_TESTS=ON \
    -DCMAKE_PREFIX_PATH="$PREFIX" \
    -DGTest_DIR="$ARCH_LIB/cmake/GTest" -Dyaml-cpp_DIR="$ARCH_LIB/cmake/yaml-cpp" \
    -DCLI11_DIR="$DEPS/share/cmake/CLI11" -Dnlohmann_json_DIR="$DEPS/share/cmake/nlohmann_json" \
    -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_GTEST_DISCOVER_TESTS_DISCOVERY_MODE=PRE_TEST \
    "${ZLIB_ARGS[@]}" ${EXTRA_CMAKE_ARGS:-} 2>&1 | tee "$OUT/configure.log"
  rc=${PIPESTATUS[0]}
  say "configure: exit $rc ($(elapsed) s)"
  table_row "build" "configure" "exit $rc at $(elapsed) s" "$([[ $rc == 0 ]] && echo OK || echo FAIL)"
  [[ $rc == 0 ]] || { cat "$SUMMARY"; exit 1; }
fi

if want build; then
  say "build ($(elapsed) s): $TARGETS"
  # -k 0: every compile error at once, not the first.
  timeout $(( $(left) > 30 ? $(left) - 20 : 10 )) \
    cmake --build "$BUILD" -j "$JOBS" --target $TARGETS -- -k 0 2>&1 | tee "$OUT/build.log" | grep -v '^\[' 
  rc=${PIPESTATUS[0]}
  say "build: exit $rc ($(elapsed) s)"
  table_row "build" "$TARGETS" "exit $rc at $(elapsed) s" "$([[ $rc == 0 ]] && echo OK || echo FAIL)"
  if [[ $rc != 0 ]]; then
    grep -E 'error|FAILED' "$OUT/build.log" | head -60 | tee -a "$SUMMARY"
  fi
fi

# Resolves crash_trace's "module+0xOFFSET" frames to function (file:line).
symbolize() {
  local line fn
  while IFS= read -r line; do
    if [[ $line =~ ^\ +#[0-9]+\ +([^ ]+)\+0x([0-9a-f]+)\ *$ ]] && command -v addr2line >/dev/null; then
      fn=$(addr2line -C -f -p -e "${BASH_REMATCH[1]}" "0x${BASH_REMATCH[2]}" 2>/dev/null | head -1)
      echo "$line $fn"
    else
      echo "$line"
    fi
  done
}

if [[ ${TRACE:-1} == 1 ]] && want_any test diag; then
  if g++ -shared -fPIC -O1 -o "$BUILD/libcrash_trace.so" "$HERE/crash_trace.cpp" -ldl 2>>"$SUMMARY"; then
    CRASH_TRACE=$BUILD/libcrash_trace.so
  fi
fi
# LibTorch 2.x wheels export the std::filesystem functions they link in
# statically (pytorch/pytorch#133437), and LibTorch comes before libstdc++ in
# our programs' load order: fs::temp_directory_path/remove_all then crash the
# TempDir tests of engine_tests. Preloading the system's libstdc++ puts its
# definitions first for the test stage (flotilla-train itself is run as built).
STDCXX=""
[[ ${PRELOAD_STDCXX:-1} == 1 ]] && STDCXX=libstdc++.so.6
PRELOAD_LIST="$STDCXX${CRASH_TRACE:+ $CRASH_TRACE}"
PRELOAD_LIST=${PRELOAD_LIST# }
PRELOAD=${PRELOAD_LIST:+LD_PRELOAD=$PRELOAD_LIST}

# Runs one test program, whole or one process per test (PER_TEST=1: a crash
# then costs one test, not the rest); appends its output to tests.log.
run_tests_of() {
  local t=$1 bin=$2 budget=$3 name rc status suite="" line
  local tests=() filter_var="GTEST_FILTER_$t"
  local filter=${!filter_var:-$GTEST_FILTER}
  if [[ ${PER_TEST:-1} != 1 ]]; then
    (cd "$BUILD" && env ${PRELOAD:+"$PRELOAD"} timeout "$budget" "$bin" --gtest_filter="$filter" --gtest_color=no) \
      >"$OUT/$t.tmp" 2>&1
    rc=$?
    symbolize <"$OUT/$t.tmp" >>"$OUT/tests.log"
    echo "$t: exit $rc$([[ $rc == 124 ]] && echo ' (timed out)') ($(elapsed) s)" | tee -a "$SUMMARY"
    grep -E '^\[ +(PASSED|FAILED|SKIPPED) +\]' "$OUT/$t.tmp" | tee -a "$SUMMARY"
    rm -f "$OUT/$t.tmp"
    return
  fi
  while IFS= read -r line; do
    if [[ $line =~ ^([^\ ].*\.)(\ +#.*)?$ ]]; then suite=${BASH_REMATCH[1]}
    elif [[ $line =~ ^\ +([^\ #]+) ]]; then tests+=("$suite${BASH_REMATCH[1]}"); fi
  done < <("$bin" --gtest_list_tests --gtest_filter="$filter" 2>/dev/null)
  local pass=0 fail=0 skip=0 crash=0 deadline=$(( $(date +%s) + budget ))
  for name in "${tests[@]}"; do
    local now each t0 ms
    now=$(date +%s) each=${EACH_TIMEOUT:-90}
    (( deadline - now < each )) && each=$(( deadline - now ))
    if (( each < 5 )); then echo "NOT RUN  $name (deadline)" | tee -a "$SUMMARY"; continue; fi
    t0=$(date +%s%N)
    (cd "$BUILD" && env ${PRELOAD:+"$PRELOAD"} timeout "$each" "$bin" --gtest_filter="$name" --gtest_color=no) \
      >"$OUT/$t.tmp" 2>&1
    rc=$?
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    if grep -q '^\[  SKIPPED \] 1 test' "$OUT/$t.tmp"; then status=SKIP; skip=$((skip + 1))
    elif [[ $rc == 0 ]] && grep -q '^\[  PASSED  \] 1 test' "$OUT/$t.tmp"; then status=PASS; pass=$((pass + 1))
    elif [[ $rc == 1 ]]; then status=FAIL; fail=$((fail + 1))
    elif [[ $rc == 124 ]]; then status="TIMEOUT(${each}s)"; crash=$((crash + 1))
    else status="CRASH(exit $rc)"; crash=$((crash + 1)); fi
    { echo "######## $t $name: $status ($ms ms)"; symbolize <"$OUT/$t.tmp"; } >>"$OUT/tests.log"
    echo "$status  $name ($ms ms)" >>"$SUMMARY"
    if [[ $status != PASS && $status != SKIP ]]; then
      # The failure, verbatim, without gtest's banner lines.
      grep -vE '^(Running main|Note: Google Test filter|\[(==========|----------| RUN      |       OK )\])' \
        "$OUT/$t.tmp" | symbolize | head -"${FAIL_LINES:-40}" | sed 's/^/    /' >>"$SUMMARY"
    elif [[ $status == SKIP ]]; then
      grep -iE 'skip' "$OUT/$t.tmp" | grep -v '^\[' | head -3 | sed 's/^/    /' >>"$SUMMARY"
    fi
  done
  echo "$t: ${#tests[@]} tests: $pass passed, $fail failed, $skip skipped, $crash crashed/timed out ($(elapsed) s)" \
    | tee -a "$SUMMARY"
  table_row "tests" "$t (${#tests[@]} of filter)" \
    "$pass passed, $fail failed, $skip skipped, $crash crashed/timed out" \
    "$([[ $((fail + crash)) == 0 && ${#tests[@]} -gt 0 ]] && echo OK || echo FAIL)"
  rm -f "$OUT/$t.tmp"
}

if want test; then
  : >"$OUT/tests.log"
  for t in $TESTS; do
    if (( $(left) < 15 )); then
      say "$t: not run, past the deadline"
      table_row "tests" "$t" "not run: past the deadline" "SKIPPED"
      continue
    fi
    bin=$BUILD/bin/$t
    [[ -x $bin ]] || bin=$(find "$BUILD" -name "$t" -type f -perm -u+x | head -1)
    if [[ -z $bin || ! -x $bin ]]; then say "$t: not built"; continue; fi
    budget=$(( $(left) - 5 ))
    (( budget > TEST_TIMEOUT )) && budget=$TEST_TIMEOUT
    if (( budget < 10 )); then say "$t: not run, past the deadline"; continue; fi
    say "$t ($(elapsed) s, up to $budget s)"
    run_tests_of "$t" "$bin" "$budget"
  done
fi

if want train && have_trainer train "small_cnn fp32, $STEPS steps"; then
  cfg=${TRAIN_CONFIG:-$BUILD/gpu_fashion_mnist.yaml}
  if [[ -z ${TRAIN_CONFIG:-} ]]; then
    cat >"$cfg" <<EOF
# The quick-start preset on the GPU, cut to $STEPS steps.
name: gpu-fashion-mnist-small-cnn
model: small_cnn
dataset: fashion_mnist
data_dir: $DATA_DIR
strategy: single
batch_size: $BATCH
epochs: 1
max_steps: $STEPS
optimizer: {name: sgd, lr: 0.05, momentum: 0.9, weight_decay: 0.0005}
lr_schedule: {name: cosine}
device: $DEVICE
seed: 1
threads: 4
EOF
  fi
  say "train ($(elapsed) s): $cfg"
  rm -f "$OUT/train_records.jsonl"
  timeout $(( $(left) > 60 ? 150 : 30 )) "$TRAIN_BIN" --config "$cfg" \
    --records "$OUT/train_records.jsonl" ${TRAIN_ARGS:-} 2>&1 | tee "$OUT/train.log"
  rc=${PIPESTATUS[0]}
  say "train: exit $rc ($(elapsed) s)"
  [[ $rc == 0 ]] || table_row "train" "small_cnn fp32, $STEPS steps" "exit $rc" "FAIL"
  python3 - "$OUT/train_records.jsonl" "$TABLE" <<'PY' 2>&1 | tee -a "$OUT/train.log" "$SUMMARY"
import json, statistics, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {}
for r in recs: by.setdefault(r.get("type"), []).append(r)
steps = by.get("step", [])
print(f"records: {len(recs)} ({', '.join(f'{k} {len(v)}' for k, v in by.items())})")
for r in by.get("start", []):
    print("start:", {k: v for k, v in r.items() if k not in ("config",)})
def show(r):
    keys = ["step", "loss", "step_ms", "data_ms", "forward_ms", "backward_ms", "optimizer_ms",
            "samples_per_s", "mem_alloc", "mem_reserved", "mem_peak"]
    f = lambda v: f"{v:.4g}" if isinstance(v, float) else str(v)
    return "  ".join(f"{k}={f(r.get(k))}" for k in keys)
for r in steps[:3] + steps[-3:]: print(show(r))
if steps:
    rest = steps[min(20, len(steps) // 4):]
    for k in ("step_ms", "forward_ms", "backward_ms", "optimizer_ms", "data_ms", "samples_per_s"):
        v = [float(s[k]) for s in rest if k in s]
        if v: print(f"{k}: median {statistics.median(v):.3f}  min {min(v):.3f}  max {max(v):.3f}  (steps {len(steps)-len(rest)+1}..{len(steps)})")
    MiB = 2**20
    for k in ("mem_alloc", "mem_reserved", "mem_peak"):
        v = [int(s[k]) for s in steps if k in s]
        if v: print(f"{k}: last {v[-1]/MiB:.1f} MiB  max {max(v)/MiB:.1f} MiB")
for r in by.get("epoch", []) + by.get("end", []): print(r.get("type") + ":", r)
rates = [float(s["samples_per_s"]) for s in steps[min(20, len(steps) // 4):]]
epochs = by.get("epoch", [])
if rates and epochs:
    with open(sys.argv[2], "a") as table:
        start = (by.get("start") or [{}])[0]
        table.write(f"train\t{start.get('model', '?')} {start.get('dataset', '?')} "
                    f"b{steps[0].get('samples', '?')}, {len(steps)} steps, {start.get('precision', 'fp32')}\t"
                    f"{statistics.median(rates):.0f} samples/s, test acc {epochs[-1]['acc_test']:.4f}\tOK\n")
PY
fi

# A C++ bench of STAGE: runs BINARY ARGS... under TIMEOUT seconds into
# $OUT/STAGE.log, its "TABLE<tab>..." lines to the table; a failure or a
# missing binary is a FAIL row.
run_table_bench() {
  local stage=$1 timeout_s=$2 bin=$BUILD/bin/$3 rc
  shift 3
  if [[ ! -x $bin ]]; then table_row "$stage" "$(basename "$bin")" "not built" "FAIL"; return; fi
  say "$stage ($(elapsed) s)"
  timeout "$timeout_s" "$bin" "$@" 2>&1 | tee "$OUT/$stage.log"
  rc=${PIPESTATUS[0]}
  grep '^TABLE' "$OUT/$stage.log" | cut -f2- >>"$TABLE"
  [[ $rc == 0 ]] || table_row "$stage" "$(basename "$bin") $*" "exit $rc ($stage.log)" "FAIL"
  say "$stage: exit $rc ($(elapsed) s)"
}

# codec: 8-bit sort_quant on the device on the seed's MobileNetV2 boundary
# (the model's own activations at 224x224, micro-batch 32): encode + decode
# as a share of that micro-batch's forward and backward, goal <= 10 %.
if want codec && time_for codec 30; then
  run_table_bench codec $(( $(left) > 90 ? 80 : $(left) - 5 )) codec_bench \
    --device "$DEVICE" --seed-shapes --repeats 5
fi

# optimizer: the step's paths on the device, and the one the engine takes there.
if want optimizer && time_for optimizer 20; then
  run_table_bench optimizer $(( $(left) > 60 ? 50 : $(left) - 5 )) optimizer_bench \
    --device "$DEVICE" --repeats 20
fi

# bench: the engine against PyTorch eager on the GPU, each model in fp32 and
# in bf16 (the engine's precision: bf16, PyTorch's torch.autocast), steps
# after a warm-up timed alike on both sides (tests/bench/engine_vs_pytorch.py).
if want bench && time_for bench 60 && have_trainer bench "engine vs PyTorch"; then
  say "bench ($(elapsed) s): $BENCH_ROWS, $BENCH_PRECISIONS"
  rm -f "$OUT/bench.json"
  cl=(); [[ $CHANNELS_LAST == 1 ]] && cl=(--channels-last)
  timeout $(( $(left) - 10 )) "$PYTHON" "$SRC/tests/bench/engine_vs_pytorch.py" \
    --binary "$TRAIN_BIN" --device "$DEVICE" --threads 4 \
    --rows $BENCH_ROWS --precision $BENCH_PRECISIONS --repeats "$BENCH_REPEATS" \
    --no-measurement-cost --json "$OUT/bench.json" "${cl[@]}" ${BENCH_ARGS:-} 2>&1 \
    | tee "$OUT/bench.log"
  rc=${PIPESTATUS[0]}
  say "bench: exit $rc ($(elapsed) s)"
  if [[ -s $OUT/bench.json ]]; then
    # The issue's targets: bf16 at least PyTorch's autocast on every row,
    # and ResNet-18's bf16 at least twice its fp32.
    python3 - "$OUT/bench.json" >>"$TABLE" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1])):
    item = f"{r['row']} b{r['batch']} {r['precision']}" + (" NHWC" if r["channels_last"] else "")
    value = (f"engine {r['engine_per_s']:.0f}/s, PyTorch {r['pytorch_per_s']:.0f}/s: "
             f"{r['engine_over_pytorch']:.2f}x")
    verdict = ""
    if r["precision"] != "fp32":
        verdict = "OK" if r["engine_over_pytorch"] >= 1.0 else "BELOW PyTorch"
        if r["engine_over_its_fp32"]:
            value += f"; {r['engine_over_its_fp32']:.2f}x engine fp32"
            if r["row"] == "resnet18_224" and r["engine_over_its_fp32"] < 2.0:
                verdict += ", <2x fp32"
    print(f"bench\t{item}\t{value}\t{verdict}")
PY
  fi
  [[ $rc == 0 ]] || table_row "bench" "engine_vs_pytorch.py" "exit $rc (bench.log)" "FAIL"
fi

# accuracy: each model on Fashion-MNIST in fp32 and in bf16, same seed, data
# order and steps: bf16's test accuracy may be at most 1 point below fp32's.
if want accuracy && time_for accuracy 40 && have_trainer accuracy "fp32 vs bf16"; then
  say "accuracy ($(elapsed) s): $ACC_MODELS, $ACC_STEPS steps, fp32 and bf16"
  : >"$OUT/accuracy.log"
  for model in $ACC_MODELS; do
    for precision in fp32 bf16; do
      cfg=$BUILD/accuracy_${model}_$precision.yaml
      printf '%s\n' "name: accuracy-$model-$precision" "model: $model" "dataset: fashion_mnist" \
        "data_dir: $DATA_DIR" "batch_size: 64" "epochs: 1" "max_steps: $ACC_STEPS" \
        "optimizer: {name: sgd, lr: 0.05, momentum: 0.9, weight_decay: 0.0005}" \
        "device: $DEVICE" "precision: $precision" "seed: 1" "threads: 4" >"$cfg"
      rm -f "$OUT/accuracy_${model}_$precision.jsonl"
      timeout $(( $(left) > 70 ? 60 : 20 )) "$TRAIN_BIN" --config "$cfg" \
        --records "$OUT/accuracy_${model}_$precision.jsonl" >>"$OUT/accuracy.log" 2>&1
      echo "$model $precision: exit $?" | tee -a "$OUT/accuracy.log"
    done
  done
  python3 - "$OUT" "$ACC_STEPS" $ACC_MODELS <<'PY' 2>&1 | tee -a "$OUT/accuracy.log" >>"$TABLE"
import json, os, sys
out, steps, models = sys.argv[1], sys.argv[2], sys.argv[3:]
def accuracy(model, precision):
    path = os.path.join(out, f"accuracy_{model}_{precision}.jsonl")
    if not os.path.exists(path): return None
    epochs = [r for r in map(json.loads, open(path)) if r.get("type") == "epoch"]
    return epochs[-1]["acc_test"] if epochs else None
for model in models:
    fp32, bf16 = accuracy(model, "fp32"), accuracy(model, "bf16")
    if fp32 is None or bf16 is None:
        print(f"accuracy\t{model} Fashion-MNIST, {steps} steps\tfp32 {fp32}, bf16 {bf16}\tFAIL (no result)")
        continue
    # The acceptance is that bf16 loses at most 1 point: doing better than
    # fp32 (another rounding, another minimum) passes, and the verdict says by
    # how much. Points rounded to 1e-9: 0.80 - 0.79 is 1.0000000000000009.
    points = round(100 * (bf16 - fp32), 9)
    side = f"bf16 {abs(points):.2f} points {'above' if points >= 0 else 'below'} fp32"
    verdict = f"OK ({side})" if points >= -1 else f"LOSES MORE THAN 1 POINT ({side})"
    print(f"accuracy\t{model} Fashion-MNIST, {steps} steps\t"
          f"test acc fp32 {fp32:.4f}, bf16 {bf16:.4f} ({100 * (bf16 - fp32):+.2f} points)\t{verdict}")
PY
  say "accuracy: done ($(elapsed) s)"
fi


# diag (not in the default stages): how this LibTorch behaves as a process: its
# address space, how long SIGTERM and SIGKILL take to end a rank, the agent's
# stop of a two-rank run (with its logs), and the OOM test's run.
if want diag && [[ -x $TRAIN_BIN ]]; then
  d=$BUILD/diag
  mkdir -p "$d"
  {
    printf '%s\n' 'name: diag-long' 'model: small_cnn' 'dataset: synthetic' \
      'synthetic: {shape: [1, 28, 28], classes: 10, train_samples: 6400000, test_samples: 64}' \
      'batch_size: 32' 'epochs: 1' 'threads: 1' >"$d/long.yaml"
    for sig in TERM KILL; do
      rm -f "$d/rec.jsonl"
      t0=$(date +%s%N)
      "$TRAIN_BIN" --config "$d/long.yaml" --records "$d/rec.jsonl" --quiet 2>"$d/err.txt" &
      pid=$!
      for i in $(seq 1 400); do
        grep -q '"step"' "$d/rec.jsonl" 2>/dev/null && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
      done
      echo "first step record after $(( ($(date +%s%N) - t0) / 1000000 )) ms"
      grep -E 'VmPeak|VmSize|VmRSS|Threads' "/proc/$pid/status" | tr -s ' \t' ' ' | paste -sd' '
      t1=$(date +%s%N)
      kill -"$sig" "$pid"
      wait "$pid"
      rc=$?
      echo "SIG$sig: exited $rc after $(( ($(date +%s%N) - t1) / 1000000 )) ms"
    done
    # The agent's stop of a two-rank run, as Agent.StopLeavesNoProcessOfTheRun
    # does it, with the run directory's logs and the processes left after it.
    if [[ -x $BUILD/bin/flotilla-agent ]]; then
      H=$d/agent-home
      rm -rf "$H" && mkdir -p "$H"
      port=$((29000 + RANDOM % 900))
      coproc AG { exec "$BUILD/bin/flotilla-agent" --home "$H" 2>"$d/agent.err"; }
      exec {AGIN}>&"${AG[1]}" {AGOUT}<&"${AG[0]}"
      recv_until() {  # PATTERN SECONDS: prints the first line holding PATTERN
        local end=$(( $(date +%s) + $2 )) line
        while (( $(date +%s) < end )); do
          if IFS= read -r -t 5 line <&"$AGOUT"; then
            echo "$line" >>"$d/agent.out"
            [[ $line == *"$1"* ]] && { echo "${line:0:400}"; return 0; }
          fi
        done
        return 1
      }
      printf '%s\n' '{"v":1,"type":"hello","role":"controller","software":"diag"}' >&"$AGIN"
      recv_until '"hello"' 10 >/dev/null || echo "agent: no hello"
      printf '{"v":1,"type":"start","run":"diag-stop","config":{"name":"diag-stop","model":"small_cnn","dataset":"synthetic","synthetic":{"shape":[1,28,28],"classes":10,"train_samples":6400000,"test_samples":64},"strategy":"ddp","ranks_per_node":2,"batch_size":32,"epochs":1,"threads":1},"ranks":[0,1],"world_size":2,"master_addr":"127.0.0.1","master_port":%d}\n' "$port" >&"$AGIN"
      t0=$(date +%s%N)
      recv_until '"type":"step"' 60 >/dev/null && echo "agent: first step after $(( ($(date +%s%N) - t0) / 1000000 )) ms"
      t1=$(date +%s%N)
      printf '%s\n' '{"v":1,"type":"stop","run":"diag-stop","grace_s":3}' >&"$AGIN"
      ( for s in 1 4 8; do sleep $(( s == 1 ? 1 : s == 4 ? 3 : 4 )); echo "+${s}s after stop:"
          ps -eo pid,ppid,pgid,stat,etime,wchan:24,args | grep -E "PID|$BUILD|flotilla-(train|agent)\]" \
            | grep -v grep | cut -c1-200; done ) &
      pspid=$!
      if recv_until '"run_end"' 25; then echo "agent: run_end $(( ($(date +%s%N) - t1) / 1000000 )) ms after stop"
      else echo "agent: no run_end 25 s after stop"; fi
      wait $pspid
      find "$H" -maxdepth 4 -type f | head -30
      for f in $(find "$H" -name '*.log' -o -name 'final*' -o -name '*.json' | head -10); do
        echo "--- $f"; tail -25 "$f"; done
      echo "--- agent stderr"; tail -20 "$d/agent.err"
      exec {AGIN}>&-
      kill "${AG_PID:-0}" 2>/dev/null
    fi
    printf '%s\n' 'name: oom' 'model: resnet18' 'dataset: synthetic' \
      'synthetic: {shape: [3, 32, 32], classes: 10, train_samples: 4096, test_samples: 16}' \
      'batch_size: 4096' 'threads: 1' >"$d/oom.yaml"
    echo "--- the OOM test's run (ulimit -d 2621440):"
    (ulimit -d 2621440; env ${PRELOAD:+"$PRELOAD"} "$TRAIN_BIN" --config "$d/oom.yaml" --records "$d/oom.jsonl"; echo "exit $?") 2>&1 \
      | symbolize | head -80
    tail -1 "$d/oom.jsonl" 2>/dev/null
  } 2>&1 | tee "$OUT/diag.log" | tee -a "$SUMMARY"
fi

# The one table: every stage's rows, in the order they ran.
print_table() {
  echo "######## table ($(elapsed) s of DEADLINE_S=$DEADLINE_S; $("$PYTHON" -c 'import torch;print("torch",torch.__version__)' 2>/dev/null), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1))"
  if [[ -s $TABLE ]]; then
    python3 - "$TABLE" <<'PY'
import sys
rows = [["stage", "item", "result", "verdict"]]
rows += [(line.rstrip("\n").split("\t") + [""] * 4)[:4] for line in open(sys.argv[1]) if line.strip()]
widths = [max(len(r[i]) for r in rows) for i in range(4)]
for r in rows:
    print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
PY
  else
    echo "(no rows: run some stages first)"
  fi
}

if want table; then
  table_row "total" "wall time" "$(elapsed) s" "$( (( $(elapsed) <= 360 )) && echo 'OK (<= 6 min)' || echo 'OVER 6 min')"
  print_table | tee "$OUT/table.log"
fi

if want summary; then
  echo
  echo "######## summary ($(elapsed) s)"
  cat "$SUMMARY"
  if want table; then echo; cat "$OUT/table.log"; fi
fi
