# Tests of cronoq-run (see check.sh): how jobs end: failures, timeouts, signals, process groups, a dead output stream.
# Every function of this file is a test, run by ctest as runner_<name>.

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
  run --resources slot=1 --timeout 3 --summary full "$dir/jobs"
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

# A job that times out leaves a process that ignores SIGTERM in its group
# (as data-loader workers do): its shell dies of the SIGTERM, the straggler
# does not. The next job on the same one-unit budget must not start while
# the straggler runs: it records whether it saw it alive.
units_come_back_only_when_the_whole_process_group_is_gone() {
  cat >"$dir/jobs" <<EOF
slot=1 -- (trap '' TERM; exec sleep 60) & echo \$! >'$dir/pid.straggler'; echo 'start slot 1' >>'$log'; sleep 60
slot=1 -- if kill -0 \$(cat '$dir/pid.straggler') 2>/dev/null; then echo alive; else echo gone; fi >'$dir/seen'
EOF
  run --resources slot=1 --timeout 1 --summary full "$dir/jobs"
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
  start_runner --resources slot=2 "$dir/jobs" >"$dir/out" 2>"$dir/err"
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
  grep -q "^4 job(s): 0 ok, 4 failed (2 not started); interrupted by signal 2" \
    "$dir/err" ||
    fail "no summary"
  expect_no_process_left
}

# SIGHUP (the terminal or ssh session went away) stops the jobs as SIGINT
# does: the running ones are stopped, the summary is printed, status 129.
sighup_stops_the_jobs_like_sigint() {
  expect_signal_stops_the_jobs HUP 129
}

# SIGTERM (a service manager, `kill`) does the same, with status 143.
sigterm_stops_the_jobs_like_sigint() {
  expect_signal_stops_the_jobs TERM 143
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
  # Opened by the background shell: the open waits for the reader.
  (exec ${CRONOQ_RUN_WRAPPER:-} "$bin" --resources slot=1 --timeout 1 \
    --no-progress "$dir/jobs") >"$dir/fifo" 2>&1 &
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

# --retries: a failed attempt runs again, as a new attempt that queues
# behind the jobs already waiting (one slot, so the log is the queue's
# order): A fails once then succeeds, C always fails and is tried 1 + 2
# times; B, queued before A's retry, runs before it.
retries_run_a_failed_job_again_behind_the_jobs_queued_before() {
  cat >"$dir/jobs" <<EOF
slot=1 -- echo 'run A' >>'$log'; if [ ! -e '$dir/a.once' ]; then touch '$dir/a.once'; exit 3; fi
slot=1 -- echo 'run B' >>'$log'
slot=1 -- echo 'run C' >>'$log'; exit 5
EOF
  run --resources slot=1 --retries 2 --summary full --json "$dir/doc.json" "$dir/jobs"
  [ "$rc" -eq 1 ] || fail "exit status $rc, expected 1"
  order=$(awk '{ printf "%s", $2 }' "$log")
  [ "$order" = ABCACC ] || fail "attempts ran in the order $order"
  expect_status 1 "exit 0"
  expect_status 3 "exit 5"
  grep -q '^cronoq-run: line 1: attempt 1 failed (exit 3); retrying (1 of 2)' \
    "$dir/err" || fail "the retry is not reported"
  grep -q '"seq":1,.*"attempts":2' "$dir/doc.json" &&
    grep -q '"seq":2,.*"attempts":1' "$dir/doc.json" &&
    grep -q '"seq":3,.*"attempts":3' "$dir/doc.json" ||
    fail "the attempts are not counted"
}

# --halt soon,fail=1: once a job fails no more start; the running one
# finishes (it waits for the halt to be reported, then succeeds); status 3.
halt_soon_starts_no_more_jobs_and_lets_the_running_ones_finish() {
  cat >"$dir/jobs" <<EOF
slot=1 -- sh '$dir/await' '$dir/err' 'halting' && echo 'end 1' >>'$log'
slot=1 -- exit 7
slot=1 -- touch '$dir/ran.3'
slot=1 -- touch '$dir/ran.4'
EOF
  run --resources slot=2 --halt soon,fail=1 --summary full "$dir/jobs"
  [ "$rc" -eq 3 ] || fail "exit status $rc, expected 3"
  expect_statuses 1 "exit 0" 2 "exit 7" 3 "not started" 4 "not started"
  [ ! -e "$dir/ran.3" ] && [ ! -e "$dir/ran.4" ] || fail "a job started"
  grep -q "^4 job(s): 1 ok, 3 failed (2 not started); halted by --halt" \
    "$dir/err" || fail "the summary does not say it halted"
}

# --halt now,fail=1: the running jobs are stopped too.
halt_now_stops_the_running_jobs() {
  cat >"$dir/jobs" <<EOF
slot=1 -- echo \$\$ >'$dir/pid.1'; sleep 30
slot=1 -- sh '$dir/await' '$dir/pid.1' . && exit 7
slot=1 -- touch '$dir/ran.3'
EOF
  run --resources slot=2 --halt now,fail=1 "$dir/jobs"
  [ "$rc" -eq 3 ] || fail "exit status $rc, expected 3"
  expect_statuses 1 "signal 15" 2 "exit 7" 3 "not started"
  expect_no_process_left
}

# --halt fail=P%: a share of all the jobs. Of ten, one failure (10%) does
# not halt at 20%; the second does.
halt_fail_percent_is_a_share_of_all_the_jobs() {
  : >"$dir/jobs"
  for i in 1 2 3 4 5 6 7 8 9 10; do
    if [ "$i" -le 2 ]; then
      echo "slot=1 -- exit 1" >>"$dir/jobs"
    else
      echo "slot=1 -- touch '$dir/ran.$i'" >>"$dir/jobs"
    fi
  done
  run --resources slot=1 --halt fail=20% "$dir/jobs"
  [ "$rc" -eq 3 ] || fail "exit status $rc, expected 3"
  expect_status 1 "exit 1"
  expect_status 2 "exit 1"
  expect_status 3 "not started"
  [ -z "$(ls "$dir" | grep '^ran\.')" ] || fail "a job after the halt ran"
}

# A shell's exit reaches the runner as SIGCHLD alone, and a blocked signal
# mask passes from a parent to what it starts (a parent that waits for its
# children with signalfd blocks SIGCHLD): a runner started so still sees
# each job end, and the run ends. Before, it waited for ever on the first.
job_ends_are_seen_when_the_runner_starts_with_sigchld_blocked() {
  have_python || { echo "skipped: no $python"; return 0; }
  printf 'slot=1 -- true\nslot=1 -- exit 3\nslot=1 -- true\n' >"$dir/jobs"
  (exec "$python" -c 'import os, signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD])
os.execvp(sys.argv[1], sys.argv[1:])' ${CRONOQ_RUN_WRAPPER:-} "$bin" \
    --resources slot=1 --summary full "$dir/jobs" >"$dir/out" 2>"$dir/err") &
  runner=$!
  guard 60
  wait "$runner"
  rc=$?
  unguard
  [ "$rc" -ne 137 ] || fail "the runner hung (killed after 60 s)"
  [ "$rc" -eq 1 ] || fail "exit status $rc, expected 1"
  expect_statuses 1 "exit 0" 2 "exit 3" 3 "exit 0"
}

# A second signal does not wait for the grace period (a minute here): the
# job, which ignores SIGTERM, is killed at once.
second_signal_kills_at_once() {
  cat >"$dir/jobs" <<EOF
slot=1 -- trap '' TERM; echo \$\$ >'$dir/pid.1'; echo 'start slot 1' >>'$log'; sleep 300
EOF
  start_runner --resources slot=1 --kill-grace 60 "$dir/jobs" \
    >"$dir/out" 2>"$dir/err"
  guard 30
  sh "$dir/await" "$log" '^start slot 1' || fail "the job did not start"
  kill -INT "$runner"
  sh "$dir/await" "$dir/err" 'interrupted' || fail "no interrupt reported"
  kill -INT "$runner"
  wait "$runner"
  rc=$?
  unguard
  [ "$rc" -eq 130 ] || fail "exit status $rc, expected 130"
  expect_status 1 "signal 9"
  expect_no_process_left
}
