# Tests of cronoq-run (see check.sh): the command line: usage errors, durations.
# Every function of this file is a test, run by ctest as runner_<name>.

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
