# Tests of cronoq-run (see check.sh): the command line: usage errors, durations.
# Every function of this file is a test, run by ctest as runner_<name>.

# Usage, resource-spec and input errors exit 2 with a message, and nothing
# runs; --help exits 0.
usage_and_spec_errors_exit_2() {
  echo "-- touch '$dir/ran'" >"$dir/jobs"
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
  run --resources db=1 --no-progress=yes "$dir/jobs"
  [ "$rc" -eq 2 ] || fail "a flag with a value: status $rc"
  run --resources db=1 "$dir/no-such-file"
  [ "$rc" -eq 2 ] || fail "missing job file: status $rc"
  run --request 'nosuch=1' "$dir/jobs"
  [ "$rc" -eq 2 ] && grep -q -- "--request" "$dir/err" ||
    fail "a default request naming nothing that exists: status $rc"
  run --resources timeout=3 "$dir/jobs"
  [ "$rc" -eq 2 ] || fail "a resource named like a job-line word: status $rc"
  for bad in '-j x' '-j 0%' '-j +x' '-j 1.5' '-j +5%' '-j --5' \
    '--retries x' '--halt sometimes' \
    '--halt soon,fail=0' '--halt now,fail=101%' '--summary some' \
    '--device-env gpu' '--device-env gpu=1X' '--device-env nosuch=X' \
    '--resume' '--json ""' '--delay 0' '--delay x' '--new-namespace' \
    '-n x' '-N -1' '--colsep ""'; do
    eval "run --resources gpu=1 $bad \"\$dir/jobs\""
    [ "$rc" -eq 2 ] || fail "$bad: status $rc, expected 2"
  done
  run echo :::
  [ "$rc" -eq 2 ] || fail "::: without arguments: status $rc"
  run echo ::: a ::::
  [ "$rc" -eq 2 ] || fail ":::: without a file: status $rc"
  run --colsep '(' echo ::: a
  [ "$rc" -eq 2 ] && grep -q -- "--colsep" "$dir/err" ||
    fail "a --colsep that is not a regex: status $rc"
  for only in '-n 2' '-X' '--colsep ,'; do
    eval "run $only \"\$dir/jobs\""
    [ "$rc" -eq 2 ] || fail "$only with a job file: status $rc, expected 2"
  done
  run --follow echo ::: a ::: b
  [ "$rc" -eq 2 ] || fail "--follow with two sources: status $rc"
  [ ! -e "$dir/ran" ] || fail "a job ran"
  run --help
  [ "$rc" -eq 0 ] && grep -q "^usage: cronoq-run" "$dir/out" ||
    fail "--help: status $rc"
  # Not errors: an empty job list, and the --opt=value forms.
  run --resources=db=1 --timeout=0.5 /dev/null
  [ "$rc" -eq 0 ] && grep -q "^0 job(s)" "$dir/err" ||
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

# Every option --help lists (the parser's own table makes the help) is in
# the man page, in the README (the manual) and in what the bash completion
# offers.
help_man_page_and_completion_cover_every_option() {
  run --help
  [ "$rc" -eq 0 ] || fail "--help: status $rc"
  # Long options, and the short ones that have none (-N, -X).
  sed -n 's/^ *\(-[a-zA-Z], \)\{0,1\}\(--[a-z][a-z-]*\).*/\2/p
    s/^  \(-[a-zA-Z]\) .*/\1/p' "$dir/out" >"$dir/options"
  [ "$(wc -l <"$dir/options")" -ge 25 ] || fail "--help lists too few options"
  sed 's/\\-/-/g; s/\\f[BIR]//g' "$here/../cronoq-run.1" >"$dir/man"
  for opt in $(cat "$dir/options"); do
    grep -q -- "$opt" "$dir/man" || fail "the man page lacks $opt"
    grep -q -- "\`$opt" "$here/../README.md" || fail "the README lacks $opt"
  done
  for opt in $(sed -n 's/^  \(-[a-zA-Z]\), .*/\1/p' "$dir/out"); do
    grep -q -- "$opt," "$dir/man" || fail "the man page lacks $opt"
  done
  command -v bash >/dev/null 2>&1 || return 0
  bash -c '. "$1"; COMP_WORDS=("$2" -); COMP_CWORD=1; _cronoq_run
    printf "%s\n" "${COMPREPLY[@]}"' sh "$here/../cronoq-run.bash" "$bin" \
    | sort >"$dir/completed"
  sort "$dir/options" | cmp -s - "$dir/completed" ||
    fail "the completion offers: $(tr '\n' ' ' <"$dir/completed")"
}
