# Tests of cronoq-run (see check.sh): the jobs' output, the progress line,
# the summary's forms.
# Every function of this file is a test, run by ctest as runner_<name>.

# Two jobs run at once and each writes two lines, the second only once the
# other has written its first: grouped (the default), each job's lines come
# out together, stdout before stderr.
grouped_output_never_interleaves() {
  cat >"$dir/jobs" <<EOF
slot=1 -- echo A-1; echo 'mark A' >>'$log'; sh '$dir/await' '$log' '^mark B'; echo A-2; echo A-err >&2
slot=1 -- echo B-1; echo 'mark B' >>'$log'; sh '$dir/await' '$log' '^mark A'; echo B-2
EOF
  run --resources slot=2 "$dir/jobs"
  [ "$rc" -eq 0 ] || fail "exit status $rc, expected 0"
  out=$(tr '\n' ' ' <"$dir/out")
  [ "$out" = "A-1 A-2 B-1 B-2 " ] || [ "$out" = "B-1 B-2 A-1 A-2 " ] ||
    fail "the jobs' output interleaved: $out"
  grep -qx A-err "$dir/err" || fail "the job's stderr is missing"
}

# --line-buffer: each whole line is printed as it comes (A waits to see its
# first line printed before it writes the second), and a line written in
# two parts is never cut by another job's line.
line_buffer_prints_whole_lines_as_they_come() {
  cat >"$dir/jobs" <<EOF
slot=1 -- echo A-1; sh '$dir/await' '$dir/out' '^A-1\$' && echo A-2; printf 'A-'; echo 'mark A' >>'$log'; sh '$dir/await' '$log' '^mark B'; echo 3
slot=1 -- sh '$dir/await' '$log' '^mark A'; echo B-1; sh '$dir/await' '$dir/out' '^B-1\$' && echo 'mark B' >>'$log'
EOF
  run --resources slot=2 --line-buffer "$dir/jobs"
  [ "$rc" -eq 0 ] || fail "exit status $rc, expected 0"
  out=$(tr '\n' ' ' <"$dir/out")
  [ "$out" = "A-1 A-2 B-1 A-3 " ] || fail "line-buffered output: $out"
}

# --ungroup: the jobs write to the runner's stdout themselves, as they run
# (the job waits to see its first line there).
ungrouped_jobs_write_to_the_output_as_they_run() {
  echo "echo early; sh '$dir/await' '$dir/out' '^early\$' && echo late" \
    >"$dir/jobs"
  run -u "$dir/jobs"
  [ "$rc" -eq 0 ] || fail "exit status $rc, expected 0"
  [ "$(tr '\n' ' ' <"$dir/out")" = "early late " ] || fail "ungrouped output"
}

# --tag: each line starts with the job's label and a tab: its name=, its
# argument, or "line N"; on stdout and stderr, in every output mode.
tag_prefixes_each_line_with_the_job_label() {
  cat >"$dir/jobs" <<'EOF'
name=first -- printf 'x\ny\n'
-- echo z
echo w >&2
EOF
  for mode in --group --line-buffer; do
    run -j 1 --tag "$mode" "$dir/jobs"
    [ "$rc" -eq 0 ] || fail "$mode: exit status $rc, expected 0"
    printf 'first\tx\nfirst\ty\nline 2\tz\n' >"$dir/want"
    cmp -s "$dir/out" "$dir/want" || fail "$mode: tagged stdout: $(cat "$dir/out")"
    grep -q "^line 3	w\$" "$dir/err" || fail "$mode: tagged stderr"
  done
  run -j 1 --tag echo ::: p q
  printf 'p\tp\nq\tq\n' >"$dir/want"
  cmp -s "$dir/out" "$dir/want" || fail "tagged by argument: $(cat "$dir/out")"
}

# --results DIR: each job's stdout and stderr in DIR/SEQ/, none printed.
results_writes_each_jobs_output_to_its_own_files() {
  printf '%s\n' '-- echo out1; echo err1 >&2' '-- echo out2' >"$dir/jobs"
  run --results "$dir/res" "$dir/jobs"
  [ "$rc" -eq 0 ] || fail "exit status $rc, expected 0"
  [ ! -s "$dir/out" ] || fail "output was printed too"
  [ "$(cat "$dir/res/1/stdout")" = out1 ] && [ "$(cat "$dir/res/1/stderr")" = err1 ] &&
    [ "$(cat "$dir/res/2/stdout")" = out2 ] && [ ! -s "$dir/res/2/stderr" ] ||
    fail "the result files are wrong"
}

# With the progress line on (as on a terminal) and stdout and stderr in one
# stream, a job's output and the runner's messages each start a line of
# their own: nothing glues onto the progress line. The first job waits for
# the progress line to be drawn.
progress_line_never_has_output_glued_onto_it() {
  cat >"$dir/jobs" <<EOF
sh '$dir/await' '$dir/all' 'elapsed, ETA' && echo OUT-1
echo OUT-2; echo ERR-2 >&2
timeout=0.2 -- sleep 5
EOF
  ${CRONOQ_RUN_WRAPPER:-} "$bin" -j 1 --progress "$dir/jobs" >"$dir/all" 2>&1
  rc=$?
  [ "$rc" -eq 1 ] || fail "exit status $rc, expected 1"
  # Each carriage return starts a new line on the screen; the erase
  # sequences leave nothing behind.
  esc=$(printf '\033')
  tr '\r' '\n' <"$dir/all" | sed "s/$esc\[K//g" >"$dir/screen"
  grep -q '^cronoq-run: 0:0[0-9] elapsed, ETA .* done, ' "$dir/screen" ||
    fail "no progress line: $(cat "$dir/screen")"
  for want in OUT-1 OUT-2 ERR-2 'cronoq-run: line 3: timed out, stopping it'; do
    grep -qx "$want" "$dir/screen" ||
      fail "'$want' is not a line of its own: $(grep -F "$want" "$dir/screen")"
  done
}

# A run of 200 jobs ends on one screen: by default the summary lists the
# failed jobs and the totals; --summary full (or all) lists every job,
# --summary none nothing; --json keeps every job. A run where all succeed
# ends with the totals alone. Before, the default was a 200-row table.
summary_shows_totals_and_failures_by_default_and_the_full_table_on_request() {
  for i in $(seq 200); do
    case $i in 7 | 150) echo 'exit 2' ;; *) echo true ;; esac
  done >"$dir/jobs"
  run "$dir/jobs"
  [ "$rc" -eq 1 ] || fail "exit status $rc, expected 1"
  [ "$(wc -l <"$dir/err")" -eq 4 ] || fail "not 4 lines: $(cat "$dir/err")"
  expect_statuses 7 "exit 2" 150 "exit 2"
  [ -z "$(status_of 1)" ] && [ -z "$(status_of 200)" ] ||
    fail "the default summary lists a job that succeeded"
  tail -n 1 "$dir/err" | grep -q '^200 job(s): 198 ok, 2 failed$' ||
    fail "no totals"
  awk '{ print $1, $2, $3 }' "$dir/err" >"$dir/default"
  run --summary failed "$dir/jobs"
  awk '{ print $1, $2, $3 }' "$dir/err" | cmp -s - "$dir/default" ||
    fail "--summary failed is not the default"
  for full in full all; do
    run --summary "$full" --json "$dir/doc.json" "$dir/jobs"
    [ "$rc" -eq 1 ] && [ "$(wc -l <"$dir/err")" -eq 202 ] ||
      fail "--summary $full: status $rc, $(wc -l <"$dir/err") lines"
    expect_statuses 1 "exit 0" 7 "exit 2" 200 "exit 0"
  done
  [ "$(grep -c '"seq":' "$dir/doc.json")" -eq 200 ] ||
    fail "the JSON document does not have every job"
  run --summary none "$dir/jobs"
  [ "$rc" -eq 1 ] && [ ! -s "$dir/err" ] ||
    fail "--summary none: status $rc, printed $(cat "$dir/err")"
  sed -i 's/^exit 2$/true/' "$dir/jobs"
  run "$dir/jobs"
  [ "$rc" -eq 0 ] && [ "$(cat "$dir/err")" = '200 job(s): 200 ok, 0 failed' ] ||
    fail "all succeeded: status $rc, printed $(cat "$dir/err")"
}

# --json -: the document is all there is on stdout; the jobs' stdout goes
# to stderr.
json_dash_keeps_stdout_for_the_document() {
  echo 'echo "job output"' >"$dir/jobs"
  run --json - "$dir/jobs"
  [ "$rc" -eq 0 ] || fail "exit status $rc, expected 0"
  grep -qx 'job output' "$dir/err" || fail "the job's output is not on stderr"
  ! grep -qx 'job output' "$dir/out" || fail "the job's output is on stdout"
  have_python || return 0
  $python -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["total"] == 1' \
    "$dir/out" || fail "stdout does not parse: $(cat "$dir/out")"
}
