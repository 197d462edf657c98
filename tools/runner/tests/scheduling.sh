# Tests of cronoq-run (see check.sh): how jobs are admitted: capacities, the queue, the devices a job sees, lines that cannot run.
# Every function of this file is a test, run by ctest as runner_<name>.

# Six jobs on a budget of 2 and six on a budget of 3, interleaved: the
# jobs of each budget reach exactly its capacity, and never exceed it.
peak_concurrency_reaches_but_never_exceeds_each_capacity() {
  : >"$dir/jobs"
  for i in 1 2 3 4 5 6; do
    echo "db=1 -- sh '$dir/probe' '$log' db d$i '^start db ' 2" >>"$dir/jobs"
    echo "lic=1 -- sh '$dir/probe' '$log' lic l$i '^start lic ' 3" >>"$dir/jobs"
  done
  run --resources db=2,lic=3 --no-progress "$dir/jobs"
  [ "$rc" -eq 0 ] || fail "exit status $rc, expected 0"
  [ "$(grep -c '^end ' "$log")" -eq 12 ] || fail "not every job ran"
  [ "$(peak db)" -eq 2 ] || fail "peak of db jobs $(peak db), capacity 2"
  [ "$(peak lic)" -eq 3 ] || fail "peak of lic jobs $(peak lic), capacity 3"
}

# One GPU: job A holds it, job B waits for it at the head of the queue, and
# a CPU job behind B starts anyway. A holds the GPU until the CPU job has
# finished, so the CPU job finishing first is not a matter of timing.
cpu_job_is_not_held_behind_a_waiting_gpu_job() {
  cat >"$dir/jobs" <<EOF
gpu=1 -- echo 'start gpu A' >>'$log'; sh '$dir/await' '$log' '^end cpu' && echo 'end gpu A' >>'$log'
gpu=1 -- echo 'start gpu B' >>'$log'; echo 'end gpu B' >>'$log'
cpu=1 -- echo 'start cpu C' >>'$log'; echo 'end cpu C' >>'$log'
EOF
  run --resources gpu=1,cpu=4 "$dir/jobs"
  [ "$rc" -eq 0 ] || fail "exit status $rc, expected 0"
  expect_order 'end cpu C' 'start gpu B' "the CPU job waited for GPU job B"
  expect_order 'end gpu A' 'start gpu B' "GPU job B started while A held the GPU"
}

# Two devices: six half-device jobs share them two per device, each seeing
# the one device it holds; a two-device job sees both; jobs without a
# device see an empty CUDA_VISIBLE_DEVICES; CRONOQ_GRANT says what each
# holds; the rest of the environment is inherited.
each_job_sees_the_devices_it_was_granted() {
  # The job records its environment, then marks its device in the log.
  cat >"$dir/devjob" <<'EOF'
name=$1 env=$2; shift 2
echo "$name cvd=${CUDA_VISIBLE_DEVICES-unset} grant=${CRONOQ_GRANT-unset} inherited=${RUNNER_TEST_INHERITED-unset}" >>"$env"
[ "$#" -eq 0 ] || sh "$@"
EOF
  : >"$dir/jobs"
  for i in 1 2 3 4 5 6; do
    echo "gpu=0.5 -- sh '$dir/devjob' h$i '$dir/env' '$dir/probe' '$log' \"dev\$CUDA_VISIBLE_DEVICES\" h$i '^start ' 4" >>"$dir/jobs"
  done
  cat >>"$dir/jobs" <<EOF
gpu=2 -- sh '$dir/devjob' whole '$dir/env'
gpu=0.5,mem=100 -- sh '$dir/devjob' mixed '$dir/env'
mem=100 -- sh '$dir/devjob' memory '$dir/env'
-- sh '$dir/devjob' nothing '$dir/env'
EOF
  # Stale values in the runner's environment must not reach the jobs.
  CUDA_VISIBLE_DEVICES=7 CRONOQ_GRANT=stale RUNNER_TEST_INHERITED=yes \
    run --resources gpu=2,mem=1000 --summary full "$dir/jobs"
  [ "$rc" -eq 0 ] || fail "exit status $rc, expected 0"
  for i in 1 2 3 4 5 6; do
    entry=$(grep "^h$i " "$dir/env")
    case $entry in
    "h$i cvd=0 grant=gpu=0.5@0 inherited=yes") ;;
    "h$i cvd=1 grant=gpu=0.5@1 inherited=yes") ;;
    *) fail "half-device job h$i: $entry" ;;
    esac
  done
  [ "$(peak dev0)" -eq 2 ] || fail "device 0 held by $(peak dev0) halves at once"
  [ "$(peak dev1)" -eq 2 ] || fail "device 1 held by $(peak dev1) halves at once"
  grep -qx "whole cvd=0,1 grant=gpu=2@0+1 inherited=yes" "$dir/env" ||
    fail "two-device job: $(grep '^whole ' "$dir/env")"
  grep -qx 'mixed cvd=\([01]\) grant=gpu=0\.5@\1,mem=100 inherited=yes' \
    "$dir/env" || fail "gpu and memory job: $(grep '^mixed ' "$dir/env")"
  grep -qx "memory cvd= grant=mem=100 inherited=yes" "$dir/env" ||
    fail "memory-only job: $(grep '^memory ' "$dir/env")"
  grep -qx "nothing cvd= grant=jobs=1 inherited=yes" "$dir/env" ||
    fail "job without a request: $(grep '^nothing ' "$dir/env")"
  # The summary shows the devices each job got.
  [ "$(awk '$1 == 7 { print $6 }' "$dir/err")" = "0,1" ] ||
    fail "the summary does not show the devices of line 7"
}

# CUDA_VISIBLE_DEVICES comes from the GPU pool alone (`gpu`, or the pool
# --gpu-pool names), never from another device pool: GPUs 5 and 7 (from
# detection) and four TPUs 0-3.
cuda_visible_devices_comes_from_the_gpu_pool_only() {
  cat >"$dir/devjob" <<'EOF'
echo "$1 cvd=${CUDA_VISIBLE_DEVICES-unset}" >>"$2"
EOF
  cat >"$dir/jobs" <<EOF
tpu=2 -- sh '$dir/devjob' tpus '$dir/env'
tpu=1,gpu=1 -- sh '$dir/devjob' both '$dir/env'
gpu=0.5 -- sh '$dir/devjob' half '$dir/env'
EOF
  CUDA_VISIBLE_DEVICES=5,7 run --resources gpu=auto,tpu:devices=4 "$dir/jobs"
  [ "$rc" -eq 0 ] || fail "exit status $rc, expected 0"
  grep -qx "tpus cvd=" "$dir/env" ||
    fail "a job holding only TPUs: $(grep '^tpus ' "$dir/env")"
  grep -qx "both cvd=[57]" "$dir/env" ||
    fail "a job holding a TPU and a GPU: $(grep '^both ' "$dir/env")"
  grep -qx "half cvd=[57]" "$dir/env" ||
    fail "a job holding half a GPU: $(grep '^half ' "$dir/env")"
  # Named as the GPU pool, the TPUs are what CUDA_VISIBLE_DEVICES lists.
  : >"$dir/env"
  CUDA_VISIBLE_DEVICES=5,7 run --resources gpu=auto,tpu:devices=4 \
    --gpu-pool tpu "$dir/jobs"
  [ "$rc" -eq 0 ] || fail "--gpu-pool tpu: exit status $rc, expected 0"
  grep -qx "tpus cvd=[0-3],[0-3]" "$dir/env" ||
    fail "--gpu-pool tpu, TPU job: $(grep '^tpus ' "$dir/env")"
  grep -qx "half cvd=" "$dir/env" ||
    fail "--gpu-pool tpu, GPU job: $(grep '^half ' "$dir/env")"
  # A GPU pool that is not a device pool of --resources is a usage error.
  for pool in nosuch mem; do
    run --resources gpu=2,mem=10 --gpu-pool "$pool" "$dir/jobs"
    [ "$rc" -eq 2 ] && grep -q -- "--gpu-pool" "$dir/err" ||
      fail "--gpu-pool $pool: status $rc"
  done
}

# Lines that cannot be parsed are reported with their line number and the
# library's message; a job that can never fit is reported while the other
# jobs still run (line 2 waits for that report); the good lines run.
bad_lines_are_reported_and_the_rest_run() {
  cat >"$dir/jobs" <<EOF
# a comment
slot=1 -- sh '$dir/await' '$dir/err' 'line 6: never fits' && touch '$dir/ran.2'
gpu0.5 -- touch '$dir/ran.3'
nosuch=1 -- touch '$dir/ran.4'
--
gpu=8 -- touch '$dir/ran.6'

gpu=0.5 -- touch '$dir/ran.8'
EOF
  run --resources gpu=4,slot=1 --summary full "$dir/jobs"
  [ "$rc" -eq 1 ] || fail "exit status $rc, expected 1"
  [ -e "$dir/ran.2" ] || fail "line 2 did not run (or saw no never-fits report)"
  [ -e "$dir/ran.8" ] || fail "line 8 did not run"
  for n in 3 4 6; do
    [ ! -e "$dir/ran.$n" ] || fail "line $n ran"
  done
  grep -q "^cronoq-run: line 3: request spec: expected '=' after \"gpu0.5\" at column [0-9]" "$dir/err" ||
    fail "line 3 not reported with its column"
  grep -q '^cronoq-run: line 4: .*unknown resource "nosuch"' "$dir/err" ||
    fail "line 4 not reported"
  grep -q '^cronoq-run: line 5: no command after "--"' "$dir/err" ||
    fail "line 5 not reported"
  grep -q '^cronoq-run: line 6: never fits: request asks 8 devices of gpu but it has 4' "$dir/err" ||
    fail "line 6 not reported"
  expect_status 2 "exit 0"
  expect_status 3 "parse error"
  expect_status 4 "parse error"
  expect_status 5 "parse error"
  expect_status 6 "never fits"
  expect_status 8 "exit 0"
  grep -q "^6 job(s): 2 ok, 4 failed" "$dir/err" || fail "wrong totals"
}

# Lines that name no resources (plain commands, and an empty spec before
# " -- ") each take one of the -j slots: with -j 2 exactly two run at once;
# with -j 0 there is no limit; -j P% is that share of the CPUs.
jobs_naming_nothing_take_one_of_the_j_slots() {
  : >"$dir/jobs"
  for i in 1 2 3; do
    echo "sh '$dir/probe' '$log' job p$i '^start job ' 2" >>"$dir/jobs"
    echo "-- sh '$dir/probe' '$log' job e$i '^start job ' 2" >>"$dir/jobs"
  done
  run -j 2 "$dir/jobs"
  [ "$rc" -eq 0 ] || fail "-j 2: exit status $rc, expected 0"
  [ "$(grep -c '^end ' "$log")" -eq 6 ] || fail "-j 2: not every job ran"
  [ "$(peak job)" -eq 2 ] || fail "-j 2: $(peak job) jobs ran at once"
  : >"$log"
  sed 's/ 2$/ 6/' "$dir/jobs" >"$dir/jobs6"
  run -j 0 "$dir/jobs6"
  [ "$rc" -eq 0 ] && [ "$(peak job)" -eq 6 ] ||
    fail "-j 0: status $rc, $(peak job) at once, expected all 6"
  cpus=$(getconf _NPROCESSORS_ONLN)
  half=$((cpus / 2))
  [ "$half" -ge 1 ] || half=1
  : >"$log"
  : >"$dir/jobs"
  for i in $(seq $((half + 1))); do
    echo "sh '$dir/probe' '$log' job h$i '^start job ' $half" >>"$dir/jobs"
  done
  run -j 50% "$dir/jobs"
  [ "$rc" -eq 0 ] && [ "$(peak job)" -eq "$half" ] ||
    fail "-j 50% of $cpus CPUs: status $rc, $(peak job) at once"
}

# Backfill: A holds 2 of 4 CPUs with a 60 s limit; H, a 4-CPU job, waits at
# the head for A; S, a 2-CPU job with a 5 s limit, ends before H could start
# anyway (A's limit), so it runs in what H waits for and ends before H
# starts. A waits for S's end, so S running first is not a matter of timing;
# the library says no head was granted after its shadow time.
a_short_job_is_backfilled_before_a_waiting_large_job() {
  cat >"$dir/jobs" <<EOF
cpu=2,timeout=60,name=A -- echo 'start cpu A' >>'$log'; sh '$dir/await' '$log' '^end cpu S' && echo 'end cpu A' >>'$log'
cpu=4,timeout=60,name=H -- echo 'start cpu H' >>'$log'; echo 'end cpu H' >>'$log'
cpu=2,timeout=5,name=S -- echo 'start cpu S' >>'$log'; echo 'end cpu S' >>'$log'
EOF
  run --resources cpu=4 --json "$dir/doc.json" "$dir/jobs"
  [ "$rc" -eq 0 ] || fail "exit status $rc, expected 0"
  expect_order 'end cpu S' 'start cpu H' "the short job did not run before H"
  expect_order 'end cpu A' 'start cpu H' "H started while A held its CPUs"
  grep -q "^3 job(s): 3 ok, 0 failed; 1 backfilled" "$dir/err" ||
    fail "the summary does not count the backfilled job"
  grep -q '"backfilled":1,"late_heads":0' "$dir/doc.json" ||
    fail "not one backfill, or a head granted after its shadow time"
}

# A line's timeout= is its limit, in place of --timeout, either way.
line_timeout_overrides_the_global_timeout() {
  cat >"$dir/jobs" <<EOF
timeout=0.3 -- sleep 30
timeout=30 -- sleep 1
sleep 30
timeout=0x10 -- touch '$dir/ran.4'
EOF
  run --timeout 0.5 --summary full "$dir/jobs"
  [ "$rc" -eq 1 ] || fail "exit status $rc, expected 1"
  expect_status 1 "timed out"
  expect_status 2 "exit 0"
  expect_status 3 "timed out"
  expect_status 4 "parse error"
  grep -q '^cronoq-run: line 4: timeout= wants a duration' "$dir/err" ||
    fail "a bad timeout= is not reported"
  [ ! -e "$dir/ran.4" ] || fail "the line with a bad timeout= ran"
}

# The environment describes the grant: CRONOQ_GPU_FRACTION is the share of
# each GPU held, --device-env gives other variables the ids of another
# pool's devices (or the GPUs' under another name), CRONOQ_JOB_SEQ,
# CRONOQ_JOB_SLOT and CRONOQ_JOB_NAME say which job it is. Stale values in
# the runner's environment never reach a job.
job_environment_describes_the_grant() {
  cat >"$dir/envjob" <<'EOF'
echo "$1 frac=${CRONOQ_GPU_FRACTION-unset} tpu=${TPU_IDS-unset} hip=${HIP_VISIBLE_DEVICES-unset} seq=${CRONOQ_JOB_SEQ-unset} slot=${CRONOQ_JOB_SLOT-unset} name=${CRONOQ_JOB_NAME-unset}" >>"$2"
EOF
  cat >"$dir/jobs" <<EOF
gpu=0.5,name=half -- sh '$dir/envjob' half '$dir/env'
gpu=2 -- sh '$dir/envjob' whole '$dir/env'
tpu=2 -- sh '$dir/envjob' tpus '$dir/env'
sh '$dir/envjob' plain '$dir/env'
EOF
  CRONOQ_GPU_FRACTION=stale TPU_IDS=stale HIP_VISIBLE_DEVICES=stale \
    run --resources gpu=2,tpu:devices=4 -j 1 --device-env tpu=TPU_IDS \
    --device-env gpu=HIP_VISIBLE_DEVICES "$dir/jobs"
  [ "$rc" -eq 0 ] || fail "exit status $rc, expected 0"
  grep -qx 'half frac=0.5 tpu= hip=[01] seq=1 slot=[1-4] name=half' \
    "$dir/env" || fail "half a GPU: $(grep '^half ' "$dir/env")"
  grep -qx 'whole frac=1 tpu= hip=0,1 seq=2 slot=[1-4] name=line 2' \
    "$dir/env" || fail "two GPUs: $(grep '^whole ' "$dir/env")"
  grep -qx 'tpus frac= tpu=[0-3],[0-3] hip= seq=3 slot=[1-4] name=line 3' \
    "$dir/env" || fail "two TPUs: $(grep '^tpus ' "$dir/env")"
  grep -qx 'plain frac= tpu= hip= seq=4 slot=[1-4] name=line 4' \
    "$dir/env" || fail "no device: $(grep '^plain ' "$dir/env")"
}
