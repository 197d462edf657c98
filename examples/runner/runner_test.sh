#!/bin/sh
# Tests of cronoq-run, run as the real binary:
#
#   sh runner_test.sh path/to/cronoq-run CHECK
#
# CHECK is one of the functions below, each named after the behaviour it
# checks; ctest runs each as a test of its own.
#
# The jobs observe the runner from inside: they append marks ("start KEY
# NAME", "end KEY NAME") to a log. A job's start mark is written after it
# was granted, its end mark before it exits and so before its release:
# replaying the log therefore counts at most what was granted at once, and
# any count above a capacity is an over-commitment. Where a peak must be
# reached, the jobs wait for each other through the log (a barrier), never
# for a length of time; every wait gives up after a minute, so a broken
# runner fails the test instead of hanging it.
set -u

bin=$1
check=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/cronoq-run-test.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
log=$dir/log
: >"$log"

fail() {
  echo "FAIL ($check): $*"
  # Stop what the jobs left, by pid and by group (a job's shell leads one).
  for f in "$dir"/pid.*; do
    [ -s "$f" ] || continue
    kill -KILL -- "-$(cat "$f")" 2>/dev/null
    kill -KILL "$(cat "$f")" 2>/dev/null
  done
  for f in out err log; do
    if [ -s "$dir/$f" ]; then
      echo "--- $f"
      cat "$dir/$f"
    fi
  done
  exit 1
}

# probe LOG KEY NAME PATTERN COUNT: mark the start, wait until COUNT lines
# of the log match PATTERN (the barrier), hold a moment, mark the end.
cat >"$dir/probe" <<'EOF'
log=$1 key=$2 name=$3 pattern=$4 count=$5
echo "start $key $name" >>"$log"
i=0
while [ "$(grep -c "$pattern" "$log")" -lt "$count" ]; do
  i=$((i + 1))
  if [ "$i" -gt 1200 ]; then
    echo "end $key $name" >>"$log"
    exit 99
  fi
  sleep 0.05
done
sleep 0.2
echo "end $key $name" >>"$log"
EOF

# await FILE PATTERN: wait until FILE has a line matching PATTERN.
cat >"$dir/await" <<'EOF'
i=0
until grep -q "$2" "$1" 2>/dev/null; do
  i=$((i + 1))
  [ "$i" -gt 1200 ] && exit 98
  sleep 0.05
done
EOF

# The highest number of KEY jobs between their start and end marks.
peak() {
  awk -v key="$1" '
    $1 == "start" && $2 == key { n++; if (n > max) max = n }
    $1 == "end" && $2 == key { n-- }
    END { print max + 0 }' "$log"
}

# The line of the log where a mark first appears (0 if it does not).
mark_at() {
  awk -v mark="$1" '$0 == mark { print NR; found = 1; exit }
    END { if (!found) print 0 }' "$log"
}

# The status the summary table gives the job of line $1 ("exit 0",
# "signal 9", "timed out", ...: always two words).
status_of() {
  awk -v line="$1" '$1 == line && $2 != "job(s):" { print $2 " " $3 }' \
    "$dir/out"
}

expect_status() {
  got=$(status_of "$1")
  [ "$got" = "$2" ] || fail "line $1: status '$got', expected '$2'"
}

# Whether process $1 still runs. A zombie has exited and only waits to be
# reaped (by init, for orphans), so it does not count.
alive() {
  kill -0 "$1" 2>/dev/null || return 1
  if [ -r "/proc/$1/stat" ]; then
    state=$(sed 's/^.*) //' "/proc/$1/stat" | cut -c1)
    [ "$state" != Z ] || return 1
  fi
  return 0
}

# Every pid written to the files $dir/pid.* is gone (waits up to a minute).
expect_no_process_left() {
  for f in "$dir"/pid.*; do
    [ -s "$f" ] || fail "$f is missing or empty"
    pid=$(cat "$f")
    i=0
    while alive "$pid"; do
      i=$((i + 1))
      [ "$i" -gt 1200 ] && fail "process $pid ($f) is still running"
      sleep 0.05
    done
  done
}

# Run the runner with its output in $dir/out and $dir/err; sets $rc.
run() {
  "$bin" "$@" >"$dir/out" 2>"$dir/err"
  rc=$?
}

# -------------------------------------------------------------------------

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
  cpu_end=$(mark_at 'end cpu C')
  b_start=$(mark_at 'start gpu B')
  a_end=$(mark_at 'end gpu A')
  [ "$cpu_end" -gt 0 ] && [ "$b_start" -gt 0 ] || fail "a job did not run"
  [ "$cpu_end" -lt "$b_start" ] || fail "the CPU job waited for GPU job B"
  [ "$a_end" -lt "$b_start" ] || fail "GPU job B started while A held the GPU"
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
    run --resources gpu=2,mem=1000 "$dir/jobs"
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
  grep -qx "nothing cvd= grant= inherited=yes" "$dir/env" ||
    fail "job without a request: $(grep '^nothing ' "$dir/env")"
  # The summary shows the devices each job got.
  [ "$(awk '$1 == 7 { print $6 }' "$dir/out")" = "0,1" ] ||
    fail "the summary does not show the devices of line 7"
}

# On a budget of 1: a job that exits 3, one killed by a signal, one that
# runs past --timeout, and one that ignores SIGTERM each give the unit back,
# so the job after them runs; no process of theirs is left.
failures_and_timeouts_release_their_units() {
  cat >"$dir/jobs" <<EOF
slot=1 -- exit 3
slot=1 -- kill -9 \$\$
slot=1 -- echo \$\$ >'$dir/pid.sleeper'; sleep 300 & echo \$! >'$dir/pid.sleep'; wait
slot=1 -- trap '' TERM; echo \$\$ >'$dir/pid.stubborn'; sleep 300
slot=1 -- touch '$dir/after'
EOF
  # A generous timeout: the quick jobs must never reach it.
  run --resources slot=1 --timeout 3 "$dir/jobs"
  [ "$rc" -eq 1 ] || fail "exit status $rc, expected 1"
  [ -e "$dir/after" ] || fail "the job after the failures did not run"
  expect_status 1 "exit 3"
  expect_status 2 "signal 9"
  expect_status 3 "timed out"
  expect_status 4 "timed out"
  expect_status 5 "exit 0"
  grep -q "line 3: timed out" "$dir/err" || fail "timeout not reported"
  expect_no_process_left
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
a command without a request
gpu=8 -- touch '$dir/ran.6'

gpu=0.5 -- touch '$dir/ran.8'
EOF
  run --resources gpu=4,slot=1 "$dir/jobs"
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
  grep -q '^cronoq-run: line 5: expected " -- "' "$dir/err" ||
    fail "line 5 not reported"
  grep -q '^cronoq-run: line 6: never fits: request asks 8 devices of gpu but it has 4' "$dir/err" ||
    fail "line 6 not reported"
  expect_status 2 "exit 0"
  expect_status 3 "parse error"
  expect_status 4 "parse error"
  expect_status 5 "parse error"
  expect_status 6 "never fits"
  expect_status 8 "exit 0"
  grep -q "^6 job(s): 2 ok, 4 failed" "$dir/out" || fail "wrong totals"
}

# SIGINT while two jobs run and two wait: the running ones are stopped
# (with what they started), the waiting ones never start, the summary is
# printed and the exit status is 130.
sigint_stops_children_and_prints_the_summary() {
  : >"$dir/jobs"
  for i in 1 2; do
    echo "slot=1 -- echo \$\$ >'$dir/pid.sh$i'; sleep 300 & echo \$! >'$dir/pid.sleep$i'; echo 'start slot $i' >>'$log'; wait" >>"$dir/jobs"
  done
  for i in 3 4; do
    echo "slot=1 -- touch '$dir/ran.$i'" >>"$dir/jobs"
  done
  "$bin" --resources slot=2 "$dir/jobs" >"$dir/out" 2>"$dir/err" &
  runner=$!
  sh "$dir/await" "$log" '^start slot 1' && sh "$dir/await" "$log" '^start slot 2' ||
    { kill -KILL "$runner"; fail "the jobs did not start"; }
  kill -INT "$runner"
  wait "$runner"
  rc=$?
  [ "$rc" -eq 130 ] || fail "exit status $rc, expected 130"
  expect_status 1 "signal 15"
  expect_status 2 "signal 15"
  expect_status 3 "not started"
  expect_status 4 "not started"
  [ ! -e "$dir/ran.3" ] && [ ! -e "$dir/ran.4" ] || fail "a waiting job ran"
  grep -q "^4 job(s): 0 ok, 4 failed (interrupted by signal 2)" "$dir/out" ||
    fail "no summary"
  expect_no_process_left
}

# --json: one document on stdout, with every job, its status and the totals.
json_summary_parses_and_counts_the_jobs() {
  # The jobs print nothing: their stdout is the runner's.
  cat >"$dir/jobs" <<'EOF'
slot=1 -- true
slot=1 -- exit 4
-- : "a \"quoted\" word, a \\ backslash	and a tab"
no request here
gpu=2 -- true
gpu=0.5 -- true
EOF
  "$bin" --resources slot=2,gpu=1 --json <"$dir/jobs" >"$dir/out" 2>"$dir/err"
  rc=$?
  [ "$rc" -eq 1 ] || fail "exit status $rc, expected 1"
  if command -v python3 >/dev/null 2>&1; then
    python3 - "$dir/out" "$dir/jobs" <<'EOF' || fail "the JSON document is wrong"
import json, sys
doc = json.load(open(sys.argv[1], encoding="utf-8"))
lines = open(sys.argv[2], encoding="utf-8").read().split("\n")
jobs = {j["line"]: j for j in doc["jobs"]}
assert doc["total"] == 6 and doc["failed"] == 3, doc
assert doc["interrupted"] is False
assert [j["line"] for j in doc["jobs"]] == [1, 2, 3, 4, 5, 6]
status = {n: j["status"] for n, j in jobs.items()}
assert status == {1: "ok", 2: "failed", 3: "ok", 4: "parse_error",
                  5: "never_fits", 6: "ok"}, status
assert jobs[1]["exit_code"] == 0 and jobs[1]["signal"] is None
assert jobs[2]["exit_code"] == 4
assert jobs[3]["command"] == lines[2][len("-- "):], jobs[3]
assert jobs[4]["error"].startswith("expected"), jobs[4]
assert "2 devices of gpu" in jobs[5]["error"], jobs[5]
assert jobs[5]["wait_s"] is None and jobs[5]["run_s"] is None
assert jobs[6]["devices"] == "0" and jobs[1]["devices"] == ""
assert all(j["run_s"] >= 0 for j in doc["jobs"] if j["status"] == "ok")
EOF
  else
    grep -q '"failed":3,"total":6' "$dir/out" || fail "wrong totals"
    [ "$(grep -c '"status":"ok"' "$dir/out")" -eq 3 ] || fail "wrong statuses"
  fi
}

# Usage and resource-spec errors exit 2 with a message; --help exits 0.
usage_and_spec_errors_exit_2() {
  echo "-- true" >"$dir/jobs"
  run "$dir/jobs"
  [ "$rc" -eq 2 ] && grep -q -- "--resources" "$dir/err" ||
    fail "no --resources: status $rc"
  run --resources 'gpu=,db=2' "$dir/jobs"
  [ "$rc" -eq 2 ] || fail "bad resource spec: status $rc"
  grep -q "resource spec: .* at column 5" "$dir/err" ||
    fail "bad resource spec: not the library's message"
  run --resources db=1 --bogus "$dir/jobs"
  [ "$rc" -eq 2 ] || fail "unknown option: status $rc"
  for t in 0 -1 abc; do
    run --resources db=1 --timeout "$t" "$dir/jobs"
    [ "$rc" -eq 2 ] || fail "--timeout $t: status $rc"
  done
  run --resources db=1 --timeout
  [ "$rc" -eq 2 ] || fail "--timeout without a value: status $rc"
  run --resources db=1 "$dir/no-such-file"
  [ "$rc" -eq 2 ] || fail "missing job file: status $rc"
  run --resources db=1 "$dir/jobs" "$dir/jobs"
  [ "$rc" -eq 2 ] || fail "two job files: status $rc"
  run --help
  [ "$rc" -eq 0 ] && grep -q "^usage: cronoq-run" "$dir/out" ||
    fail "--help: status $rc"
  # Not errors: an empty job list, and the --opt=value forms.
  run --resources=db=1 --timeout=0.5 /dev/null
  [ "$rc" -eq 0 ] && grep -q "^0 job(s)" "$dir/out" ||
    fail "empty job list: status $rc"
}

# A job that times out leaves a process that ignores SIGTERM in its group
# (as data-loader workers do): its shell dies of the SIGTERM, the straggler
# does not. The next job on the same one-unit budget must not start while
# the straggler runs: it records whether it saw it alive.
units_come_back_only_when_the_whole_process_group_is_gone() {
  cat >"$dir/jobs" <<EOF
slot=1 -- (trap '' TERM; exec sleep 60) & echo \$! >'$dir/pid.straggler'; echo 'start slot 1' >>'$log'; sleep 60
slot=1 -- if kill -0 \$(cat '$dir/pid.straggler') 2>/dev/null; then echo alive; else echo gone; fi >'$dir/seen'
EOF
  run --resources slot=1 --timeout 1 "$dir/jobs"
  kill -KILL "$(cat "$dir/pid.straggler" 2>/dev/null)" 2>/dev/null
  [ "$rc" -eq 1 ] || fail "exit status $rc, expected 1"
  expect_status 1 "timed out"
  expect_status 2 "exit 0"
  [ "$(cat "$dir/seen")" = gone ] ||
    fail "the next job started while the timed-out job's straggler ran"
  expect_no_process_left
}

# A command that exits and leaves a process behind in its group (here one
# that ignores SIGTERM) has not given its units back yet: the runner stops
# what it left, and only then starts the next job on the same unit.
leftover_processes_are_stopped_before_the_units_come_back() {
  cat >"$dir/jobs" <<EOF
slot=1 -- (trap '' TERM; exec sleep 60) & echo \$! >'$dir/pid.leftover'
slot=1 -- if kill -0 \$(cat '$dir/pid.leftover') 2>/dev/null; then echo alive; else echo gone; fi >'$dir/seen'
EOF
  run --resources slot=1 "$dir/jobs"
  kill -KILL "$(cat "$dir/pid.leftover" 2>/dev/null)" 2>/dev/null
  [ "$rc" -eq 0 ] || fail "exit status $rc, expected 0"
  [ "$(cat "$dir/seen")" = gone ] ||
    fail "the next job started while the first job's leftover ran"
  grep -q "line 1: .*left" "$dir/err" || fail "the leftover was not reported"
  expect_no_process_left
}

# The reader of the runner's output goes away (a closed ssh session, `| head`)
# while a job runs: the runner's next message must not kill it. It goes on,
# enforces --timeout, runs the next job and exits with the jobs' status.
# The runner ignores SIGPIPE; its jobs must not (the second one records the
# signals it ignores, where /proc says).
dead_output_stream_does_not_kill_the_runner() {
  cat >"$dir/jobs" <<EOF
slot=1 -- echo \$\$ >'$dir/pid.job'; echo 'start slot 1' >>'$log'; sleep 30
slot=1 -- touch '$dir/ran.2'; sed -n 's/^SigIgn:[[:space:]]*//p' /proc/self/status >'$dir/sigign' 2>/dev/null
EOF
  mkfifo "$dir/fifo" || fail "mkfifo"
  "$bin" --resources slot=1 --timeout 1 --no-progress "$dir/jobs" \
    >"$dir/fifo" 2>&1 &
  runner=$!
  exec 3<"$dir/fifo"
  sh "$dir/await" "$log" '^start slot 1' ||
    { kill -KILL "$runner"; fail "the job did not start"; }
  exec 3<&-
  wait "$runner"
  rc=$?
  [ "$rc" -eq 1 ] || fail "exit status $rc, expected 1"
  [ -e "$dir/ran.2" ] || fail "the job after the timeout did not run"
  if [ -s "$dir/sigign" ]; then
    [ $(((0x$(cat "$dir/sigign") >> 12) & 1)) -eq 0 ] ||
      fail "the job inherited an ignored SIGPIPE: $(cat "$dir/sigign")"
  fi
  expect_no_process_left
}

# SIGHUP (the terminal or ssh session went away) stops the jobs as SIGINT
# does: the running ones are stopped, the summary is printed, status 129.
sighup_stops_the_jobs_like_sigint() {
  cat >"$dir/jobs" <<EOF
slot=1 -- echo \$\$ >'$dir/pid.sh'; sleep 300 & echo \$! >'$dir/pid.sleep'; echo 'start slot 1' >>'$log'; wait
slot=1 -- touch '$dir/ran.2'
EOF
  "$bin" --resources slot=1 "$dir/jobs" >"$dir/out" 2>"$dir/err" &
  runner=$!
  sh "$dir/await" "$log" '^start slot 1' ||
    { kill -KILL "$runner"; fail "the job did not start"; }
  kill -HUP "$runner"
  wait "$runner"
  rc=$?
  [ "$rc" -eq 129 ] || fail "exit status $rc, expected 129"
  grep -q "^2 job(s): 0 ok, 2 failed (interrupted by signal 1)" "$dir/out" ||
    fail "no summary"
  [ ! -e "$dir/ran.2" ] || fail "a waiting job ran"
  expect_no_process_left
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

# GPUs named by UUID (as detection names them): the summary shows every
# device of a job in full, so a 1-GPU and a 2-GPU job do not look alike.
summary_shows_every_device_of_a_job_in_full() {
  a=GPU-0a1b2c3d-1111-2222-3333-444455556666
  b=GPU-0a1b2c3d-1111-2222-3333-444455557777
  printf '%s\n' 'gpu=1 -- true' 'gpu=2 -- true' >"$dir/jobs"
  CUDA_VISIBLE_DEVICES=$a,$b run --resources gpu=auto "$dir/jobs"
  [ "$rc" -eq 0 ] || fail "exit status $rc, expected 0"
  one=$(awk '$1 == 1 && $2 == "exit" { print $6 }' "$dir/out")
  [ "$one" = "$a" ] || [ "$one" = "$b" ] || fail "line 1 shows '$one'"
  two=$(awk '$1 == 2 && $2 == "exit" { print $6 }' "$dir/out")
  [ "$two" = "$a,$b" ] || fail "line 2 shows '$two', expected '$a,$b'"
}

# --timeout takes decimal seconds, with a fraction and a unit (s, m, h) at
# most: hexadecimal, exponents, infinities, blanks and signs are refused
# with a message and status 2 before anything runs.
timeout_is_read_strictly_as_a_decimal_duration() {
  echo "-- touch '$dir/ran'" >"$dir/jobs"
  for t in 0x10 1e3 inf nan ' 5' '5 ' +5 .5 5. 1.2.3 5x 5sec 0 0.0000 \
    99999999999; do
    run --resources db=1 --timeout "$t" "$dir/jobs"
    [ "$rc" -eq 2 ] || fail "--timeout '$t': status $rc, expected 2"
    grep -q -- "--timeout" "$dir/err" || fail "--timeout '$t': no message"
    [ ! -e "$dir/ran" ] || fail "--timeout '$t': a job ran"
  done
  # Accepted (a job that a 1 ms timeout stops fails, with status 1).
  for t in 5 0.5 0.0001 1.25s 2m 1h 1d; do
    run --resources db=1 --timeout "$t" "$dir/jobs"
    [ "$rc" -ne 2 ] && ! grep -q -- "--timeout" "$dir/err" ||
      fail "--timeout '$t': status $rc, refused"
  done
}

case $check in
peak_concurrency_reaches_but_never_exceeds_each_capacity | \
  cpu_job_is_not_held_behind_a_waiting_gpu_job | \
  each_job_sees_the_devices_it_was_granted | \
  failures_and_timeouts_release_their_units | \
  bad_lines_are_reported_and_the_rest_run | \
  sigint_stops_children_and_prints_the_summary | \
  json_summary_parses_and_counts_the_jobs | \
  usage_and_spec_errors_exit_2 | \
  units_come_back_only_when_the_whole_process_group_is_gone | \
  leftover_processes_are_stopped_before_the_units_come_back | \
  dead_output_stream_does_not_kill_the_runner | \
  sighup_stops_the_jobs_like_sigint | \
  cuda_visible_devices_comes_from_the_gpu_pool_only | \
  summary_shows_every_device_of_a_job_in_full | \
  timeout_is_read_strictly_as_a_decimal_duration)
  "$check"
  echo "ok: $check"
  ;;
*)
  echo "unknown check '$check'"
  exit 2
  ;;
esac
