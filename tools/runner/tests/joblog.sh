# Tests of cronoq-run (see check.sh): the joblog, --resume and
# --resume-failed.
# Every function of this file is a test, run by ctest as runner_<name>.

# --joblog: GNU parallel's header and columns (Seq, Host, Starttime,
# JobRuntime, Send, Receive, Exitval, Signal, Command) and the grant, one
# line per job that ran; a line that could not be parsed is not one.
joblog_has_a_line_per_job_in_the_gnu_parallel_format() {
  cat >"$dir/jobs" <<'EOF'
gpu=1 -- true
-- exit 3
timeout=0.3 -- sleep 10
gpu0.5 -- true
EOF
  run --resources gpu=1 -j 1 --joblog "$dir/joblog" "$dir/jobs"
  [ "$rc" -eq 1 ] || fail "exit status $rc, expected 1"
  printf 'Seq\tHost\tStarttime\tJobRuntime\tSend\tReceive\tExitval\tSignal\tCommand\tGrant\n' \
    >"$dir/want"
  head -n 1 "$dir/joblog" | cmp -s - "$dir/want" || fail "the header is wrong"
  [ "$(wc -l <"$dir/joblog")" -eq 4 ] || fail "not one line per job that ran"
  awk -F '\t' 'NR > 1 {
      if (NF != 10 || $2 != ":" || $3 !~ /^[0-9]+\.[0-9][0-9][0-9]$/ ||
          $4 !~ /^[0-9]+\.[0-9][0-9][0-9]$/ || $5 != 0 || $6 != 0) bad = 1
      got = got $1 "|" $7 "|" $8 "|" $9 "|" $10 ";"
    }
    END { if (bad) print "bad"; else print got }' "$dir/joblog" >"$dir/got"
  [ "$(cat "$dir/got")" = '1|0|0|true|gpu=1@0;2|3|0|exit 3|jobs=1;3|-1|15|sleep 10|jobs=1;' ] ||
    fail "the joblog's lines: $(cat "$dir/got")"
}

# --resume skips every job the joblog has, failed or not, and runs the rest
# (a line added since); --resume-failed runs again the jobs that failed.
resume_skips_what_the_joblog_has_and_resume_failed_runs_the_failures() {
  for i in 1 2 3; do
    if [ "$i" -eq 2 ]; then
      echo "echo $i >>'$dir/runs'; exit 1" >>"$dir/jobs"
    else
      echo "echo $i >>'$dir/runs'" >>"$dir/jobs"
    fi
  done
  run --joblog "$dir/joblog" "$dir/jobs"
  [ "$rc" -eq 1 ] && [ "$(sort "$dir/runs" | tr '\n' ' ')" = "1 2 3 " ] ||
    fail "the first run: status $rc, ran $(cat "$dir/runs")"
  echo "echo 4 >>'$dir/runs'" >>"$dir/jobs"
  : >"$dir/runs"
  run --joblog "$dir/joblog" --resume --summary full "$dir/jobs"
  [ "$rc" -eq 0 ] || fail "--resume: exit status $rc, expected 0"
  [ "$(cat "$dir/runs")" = 4 ] || fail "--resume ran $(cat "$dir/runs")"
  expect_status 1 skipped
  grep -q '^4 job(s): 1 ok, 0 failed, 3 skipped' "$dir/err" ||
    fail "--resume: the summary does not count the skipped jobs"
  : >"$dir/runs"
  run --joblog "$dir/joblog" --resume-failed "$dir/jobs"
  [ "$rc" -eq 1 ] || fail "--resume-failed: exit status $rc, expected 1"
  [ "$(cat "$dir/runs")" = 2 ] || fail "--resume-failed ran $(cat "$dir/runs")"
  # The log keeps every run's lines: the header once, then 3 + 1 + 1 jobs.
  [ "$(grep -c '^Seq' "$dir/joblog")" -eq 1 ] &&
    [ "$(wc -l <"$dir/joblog")" -eq 6 ] || fail "the joblog: $(cat "$dir/joblog")"
}
