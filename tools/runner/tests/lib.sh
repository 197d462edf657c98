# Helpers of cronoq-run's tests, sourced by check.sh with $bin (the runner)
# and $check (the test) set.
#
# The jobs observe the runner from inside: they append marks ("start KEY
# NAME", "end KEY NAME") to a log. A job's start mark is written after it
# was granted, its end mark before it exits and so before its release:
# replaying the log therefore counts at most what was granted at once, and
# any count above a capacity is an over-commitment. Where a peak must be
# reached, the jobs wait for each other through the log (a barrier), never
# for a length of time; every wait gives up after a minute, so a broken
# runner fails the test instead of hanging it.
#
# CRONOQ_RUN_WRAPPER, when set, runs the runner under a wrapper (valgrind).
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

# expect_order FIRST SECOND WHY: both marks are in the log, FIRST before.
expect_order() {
  first=$(mark_at "$1")
  second=$(mark_at "$2")
  [ "$first" -gt 0 ] || fail "'$1' is not in the log"
  [ "$second" -gt 0 ] || fail "'$2' is not in the log"
  [ "$first" -lt "$second" ] || fail "$3"
}

# The status the summary table gives the job of line $1 ("exit 0",
# "signal 9", "timed out", ...: two words, but "skipped" and "unkillable").
status_of() {
  awk -v line="$1" '$1 == line && $2 != "job(s):" {
      print ($2 == "skipped" || $2 == "unkillable") ? $2 : $2 " " $3 }' \
    "$dir/err"
}

expect_status() {
  got=$(status_of "$1")
  [ "$got" = "$2" ] || fail "line $1: status '$got', expected '$2'"
}

# expect_statuses LINE STATUS [LINE STATUS]...
expect_statuses() {
  while [ "$#" -ge 2 ]; do
    expect_status "$1" "$2"
    shift 2
  done
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

# The Python that CI has (Debian's): the JSON checks need it, and skip their
# part without it.
python=/usr/bin/python3
have_python() { [ -x "$python" ]; }

# Run the runner with its output in $dir/out and $dir/err; sets $rc.
run() {
  ${CRONOQ_RUN_WRAPPER:-} "$bin" "$@" >"$dir/out" 2>"$dir/err"
  rc=$?
}

# A hang guard for a runner in the background: kill it if it is still there
# after $1 seconds (then `wait` gives 137). unguard stops the guard.
guard() {
  (
    trap 'exit 0' TERM
    i=0
    while [ "$i" -lt $(($1 * 10)) ]; do
      sleep 0.1
      i=$((i + 1))
    done
    kill -KILL "$runner" 2>/dev/null
  ) &
  guard_pid=$!
}
unguard() { kill "$guard_pid" 2>/dev/null; }

# Stop the runner with signal $1 while job 1 runs and job 2 waits: the
# running job and what it started are stopped, the waiting one never
# starts, the summary says so, and the exit status is $2.
expect_signal_stops_the_jobs() {
  cat >"$dir/jobs" <<EOF
slot=1 -- echo \$\$ >'$dir/pid.sh'; sleep 300 & echo \$! >'$dir/pid.sleep'; echo 'start slot 1' >>'$log'; wait
slot=1 -- touch '$dir/ran.2'
EOF
  start_runner --resources slot=1 "$dir/jobs" >"$dir/out" 2>"$dir/err"
  sh "$dir/await" "$log" '^start slot 1' ||
    { kill -KILL "$runner"; fail "the job did not start"; }
  kill "-$1" "$runner"
  wait "$runner"
  rc=$?
  [ "$rc" -eq "$2" ] || fail "exit status $rc, expected $2"
  grep -q "^2 job(s): 0 ok, 2 failed (1 not started); interrupted by signal $(($2 - 128))" \
    "$dir/err" || fail "no summary"
  [ ! -e "$dir/ran.2" ] || fail "a waiting job ran"
  expect_no_process_left
}

# Start the runner in the background, with the caller's redirections; sets
# $runner to its pid (the subshell execs it, so signals reach the runner).
start_runner() {
  (exec ${CRONOQ_RUN_WRAPPER:-} "$bin" "$@") &
  runner=$!
}

# GNU parallel, which the tests of its command lines compare with. Where it
# is missing they check their own expectations alone and say that they
# skipped the comparison; with CRONOQ_REQUIRE_PARALLEL=1 (CI) its absence
# fails them instead. (moreutils' `parallel` is another program.)
have_parallel() {
  if command -v parallel >/dev/null 2>&1 &&
    parallel --version 2>/dev/null | grep -q '^GNU parallel'; then
    return 0
  fi
  [ "${CRONOQ_REQUIRE_PARALLEL:-0}" != 1 ] ||
    fail "GNU parallel is not installed, and CRONOQ_REQUIRE_PARALLEL=1"
  [ -n "${parallel_missing_said:-}" ] ||
    echo "skipped the comparisons with GNU parallel: it is not installed"
  parallel_missing_said=yes
  return 1
}

# like_parallel WANT ARG...: `cronoq-run ARG...` succeeds and prints what
# the file WANT holds on stdout, and GNU parallel, given the same line,
# prints the same. In order with -k (and --dry-run), else sorted: the
# order in which jobs that run at once end is not defined. The log is
# emptied before each of the two runs, for jobs that wait on it.
like_parallel() {
  want=$1
  shift
  order=sort
  case " $* " in *" -k "* | *" --keep-order "* | *" --dry-run "*) order=cat ;; esac
  : >"$log"
  run "$@" </dev/null
  [ "$rc" -eq 0 ] || fail "cronoq-run $*: exit status $rc, expected 0"
  LC_ALL=C $order <"$dir/out" >"$dir/got"
  LC_ALL=C $order <"$want" | cmp -s - "$dir/got" ||
    fail "cronoq-run $*: printed
$(cat "$dir/out")
expected
$(cat "$want")"
  have_parallel || return 0
  : >"$log"
  HOME=$dir parallel --will-cite "$@" </dev/null >"$dir/pout" 2>"$dir/perr" ||
    fail "GNU parallel $*: exit status $?: $(cat "$dir/perr")"
  LC_ALL=C $order <"$dir/pout" | cmp -s - "$dir/got" ||
    fail "cronoq-run $*: printed
$(cat "$dir/out")
but GNU parallel
$(cat "$dir/pout")"
}
