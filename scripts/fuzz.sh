#!/usr/bin/env bash
# Build the libFuzzer harnesses (fuzz/) and run each for a bounded time.
#
# Usage: scripts/fuzz.sh [--merge[=N]] [SECONDS] [HARNESS...]
#
#   SECONDS   how long each harness runs (default 60), one after the other,
#             one process each (-jobs=1), so the total is about
#             SECONDS x harnesses plus the build
#   HARNESS   spec, req, cuda_visible, nvidia_smi, ops (default: all that
#             are built; ops exists once tests/model/fuzz_ops.c does)
#   --merge   afterwards, add to fuzz/corpus/<harness>/ the new inputs that
#             bring coverage the committed seeds lack (libFuzzer -merge=1),
#             at most N per harness (default 20), smallest first
#
# Each run starts from the committed seeds (fuzz/corpus/<harness>/) and the
# past crash inputs (fuzz/regressions/<harness>/) and writes what it finds
# into a temporary directory, so the committed corpus stays small and
# hand-made unless --merge is given. A crash, leak, timeout or
# out-of-memory input is copied into fuzz/regressions/<harness>/, where the
# fuzz_replay_<harness> test of every build replays it from then on, and
# the script exits 1.
#
# Environment: CC (default clang), BUILD_DIR (default build-fuzz),
# FUZZ_ARGS (more libFuzzer flags).
set -euo pipefail
cd "$(dirname "$0")/.."

merge_max=0
seconds=60
harnesses=()
for arg in "$@"; do
  case "$arg" in
  --merge) merge_max=20 ;;
  --merge=*) merge_max=${arg#--merge=} ;;
  -h | --help)
    sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0
    ;;
  -*)
    echo "fuzz.sh: unknown option $arg" >&2
    exit 2
    ;;
  *)
    if [[ ${#harnesses[@]} -eq 0 && $arg =~ ^[0-9]+$ ]]; then
      seconds=$arg
    else
      harnesses+=("$arg")
    fi
    ;;
  esac
done

build=${BUILD_DIR:-build-fuzz}
cc=${CC:-clang}
if [[ ${#harnesses[@]} -eq 0 ]]; then
  harnesses=(spec req cuda_visible nvidia_smi)
  if [[ -f tests/model/fuzz_ops.c ]]; then
    harnesses+=(ops)
  fi
fi

# A lean build: only the library and the harnesses, so that it depends on
# nothing but clang and its runtime (Debian: clang libclang-rt-dev).
mkdir -p "$build"
log=$build/fuzz-build.log
cmake -S . -B "$build" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCRONOQ_FUZZ=ON -DCRONOQ_WERROR=ON \
  -DCRONOQ_BUILD_TESTS=OFF -DCRONOQ_BUILD_BENCH=OFF \
  -DCRONOQ_BUILD_EXAMPLES=OFF -DCRONOQ_INSTALL=OFF >"$log" 2>&1 || {
  cat "$log" >&2
  exit 1
}
targets=()
for h in "${harnesses[@]}"; do
  targets+=("fuzz_$h")
done
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" >>"$log" 2>&1 || {
  tail -n 60 "$log" >&2
  exit 1
}

work=$(mktemp -d "${TMPDIR:-/tmp}/cronoq-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The figure after `key:` on libFuzzer's last status line.
# (None when it stopped before its first.)
status_field() { { grep -E "^#[0-9]+" "$1" || true; } | tail -n 1 | sed -n "s/.* $2: \([0-9]*\).*/\1/p"; }
# A stat::name from -print_final_stats.
final_stat() { sed -n "s/^stat::$2: *\([0-9]*\).*/\1/p" "$1" | tail -n 1; }

failed=0
summary=()
total_execs=0
total_seconds=0
for h in "${harnesses[@]}"; do
  bin="$build/fuzz/fuzz_$h"
  seeds="fuzz/corpus/$h"
  regressions="fuzz/regressions/$h"
  mkdir -p "$work/$h/new" "$work/$h/artifacts" "$regressions"
  inputs=("$work/$h/new")
  [[ -d $seeds ]] && inputs+=("$seeds")
  inputs+=("$regressions")
  dict=()
  [[ -f fuzz/$h.dict ]] && dict=(-dict="fuzz/$h.dict")
  log="$work/$h/log"

  echo "== fuzz_$h: $seconds s"
  start=$(date +%s)
  rc=0
  # shellcheck disable=SC2086 # FUZZ_ARGS is a list of flags
  "$bin" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$work/$h/artifacts/" \
    "${dict[@]}" ${FUZZ_ARGS:-} "${inputs[@]}" >"$log" 2>&1 || rc=$?
  elapsed=$(($(date +%s) - start))

  execs=$(final_stat "$log" number_of_executed_units)
  rate=$(final_stat "$log" average_exec_per_sec)
  cov=$(status_field "$log" cov)
  ft=$(status_field "$log" ft)
  corp=$(status_field "$log" corp)
  new=$(find "$work/$h/new" -type f | wc -l)
  execs=${execs:-0}
  total_execs=$((total_execs + execs))
  total_seconds=$((total_seconds + elapsed))

  crashes=()
  for a in "$work/$h/artifacts"/*; do
    [[ -f $a ]] || continue
    name=$(basename "$a")
    # A known input (the library not fixed yet) is not copied again.
    for known in "$regressions"/*; do
      if [[ -f $known ]] && cmp -s "$a" "$known"; then
        name=$(basename "$known")
        break
      fi
    done
    [[ -e $regressions/$name ]] || cp "$a" "$regressions/$name"
    crashes+=("$regressions/$name")
  done
  verdict="ok"
  if [[ $rc -ne 0 || ${#crashes[@]} -gt 0 ]]; then
    failed=1
    verdict="FAILED (exit $rc)"
    echo "-- fuzz_$h failed; the end of its log:"
    grep -v -E "^#[0-9]+|^INFO:|^\s*$" "$log" | tail -n 40 || true
    for c in "${crashes[@]}"; do
      echo "-- input kept as $c; reproduce: $bin $c"
    done
  fi
  line="fuzz_$h: ${execs} execs in ${elapsed} s (${rate:-?} exec/s), cov: ${cov:-?} ft: ${ft:-?}, corpus ${corp:-?} (${new} new), ${#crashes[@]} crash inputs: $verdict"
  echo "$line"
  summary+=("$line")

  if [[ $merge_max -gt 0 && $rc -eq 0 && -d $seeds && $new -gt 0 ]]; then
    # Merge into a copy of the seeds; what merge adds to the copy is what
    # the seeds lack.
    mkdir -p "$work/$h/merged"
    cp "$seeds"/* "$work/$h/merged/" 2>/dev/null || true
    "$bin" -merge=1 "$work/$h/merged" "$work/$h/new" >"$work/$h/merge.log" 2>&1
    added=0
    while read -r _ f; do
      [[ $added -lt $merge_max ]] || break
      name=$(basename "$f")
      [[ -e $seeds/$name ]] && continue
      cp "$f" "$seeds/fuzz-${name:0:16}"
      added=$((added + 1))
    done < <(find "$work/$h/merged" -type f -printf '%s %p\n' | sort -n)
    echo "-- merged $added new inputs into $seeds"
  fi
done

echo "== summary ($total_seconds s)"
for line in "${summary[@]}"; do
  echo "$line"
done
echo "total: $total_execs execs in $total_seconds s over ${#harnesses[@]} harnesses"
exit $failed
