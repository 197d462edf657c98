# Tests of cronoq-run (see check.sh): command templates and their
# arguments, labels, and a queue fed while the runner runs (--follow).
# Every function of this file is a test, run by ctest as runner_<name>.

# A template runs once per argument after ":::", with GNU parallel's
# placeholders; the argument is quoted for the shell; without a
# placeholder the argument is appended.
template_runs_once_per_argument_with_its_placeholders() {
  run -j 1 --summary full echo '{#}:{}+{.}+{/}+{//}+{/.}+{%}' ::: dir/sub/a.tar.gz plain \
    "it's; touch $dir/pwned"
  [ "$rc" -eq 0 ] || fail "exit status $rc, expected 0"
  cat >"$dir/want" <<EOF
1:dir/sub/a.tar.gz+dir/sub/a.tar+a.tar.gz+dir/sub+a.tar+1
2:plain+plain+plain+.+plain+1
3:it's; touch $dir/pwned+it's; touch $dir/pwned+pwned+it's; touch $dir+pwned+1
EOF
  cmp -s "$dir/out" "$dir/want" || fail "expanded: $(cat "$dir/out")"
  [ ! -e "$dir/pwned" ] || fail "an argument ran as a command"
  run -j 1 --summary full echo got ::: a b
  [ "$(tr '\n' ' ' <"$dir/out")" = "got a got b " ] ||
    fail "appended: $(cat "$dir/out")"
  grep -q '^ job  status' "$dir/err" || fail "the table does not number jobs"
}

# {%} is the job's slot: of two jobs running at once (-j 2), one has slot 1
# and the other slot 2, and slots come back for the next ones.
slots_number_the_jobs_running_at_once() {
  run -j 2 sh "$dir/probe" "$log" 'slot{%}' 'job{#}' '^start slot' 2 ::: 1 2 3 4
  [ "$rc" -eq 0 ] || fail "exit status $rc, expected 0"
  [ "$(peak slot1)" -eq 1 ] && [ "$(peak slot2)" -eq 1 ] &&
    [ "$(grep -c '^start slot[12] ' "$log")" -eq 4 ] ||
    fail "slots: $(cat "$log")"
}

# Arguments, one per line, from standard input (no ":::"), from ":::: FILE"
# ("-": standard input) or from --arg-file FILE.
arguments_come_from_stdin_or_an_arg_file() {
  printf 'a\nb\n' | ${CRONOQ_RUN_WRAPPER:-} "$bin" -j 1 echo got >"$dir/out" 2>"$dir/err"
  [ "$(tr '\n' ' ' <"$dir/out")" = "got a got b " ] ||
    fail "from stdin: $(cat "$dir/out")"
  printf 'c\n' >"$dir/args"
  run -j 1 echo got :::: "$dir/args"
  [ "$(cat "$dir/out")" = "got c" ] || fail ":::: FILE: $(cat "$dir/out")"
  run -j 1 -a "$dir/args" echo got
  [ "$(cat "$dir/out")" = "got c" ] || fail "--arg-file: $(cat "$dir/out")"
  printf 'd\n' | ${CRONOQ_RUN_WRAPPER:-} "$bin" -j 1 echo got {} :::: - >"$dir/out" 2>"$dir/err"
  [ "$(cat "$dir/out")" = "got d" ] || fail ":::: -: $(cat "$dir/out")"
}

# name= labels a job in its messages and in the summary; an empty one is
# refused.
names_label_the_jobs_in_messages_and_the_summary() {
  printf '%s\n' 'name=fold-3,timeout=0.2 -- sleep 10' 'name= -- true' >"$dir/jobs"
  run "$dir/jobs"
  [ "$rc" -eq 1 ] || fail "exit status $rc, expected 1"
  grep -q '^cronoq-run: line 1 (fold-3): timed out' "$dir/err" ||
    fail "the message does not name the job"
  grep -q '^cronoq-run: line 2: name= wants a label' "$dir/err" ||
    fail "an empty name= is not refused"
  [ "$(awk '$1 == 1 && $2 == "timed" { print $7 }' "$dir/err")" = fold-3 ] ||
    fail "the summary does not name the job"
}

# --follow: jobs start as their lines arrive on a FIFO, while the writer
# still has it open (each line is written only once the job before it has
# run), and the run ends when the writer closes it. The same from a pipe on
# standard input.
follow_starts_jobs_as_their_lines_arrive() {
  mkfifo "$dir/queue" || fail "mkfifo"
  start_runner --follow "$dir/queue" >"$dir/out" 2>"$dir/err"
  guard 60
  exec 4>"$dir/queue"
  echo "echo 'start 1' >>'$log'" >&4
  sh "$dir/await" "$log" '^start 1' || fail "the first job did not start"
  echo "echo 'start 2' >>'$log'" >&4
  sh "$dir/await" "$log" '^start 2' || fail "the second job did not start"
  exec 4>&-
  wait "$runner"
  rc=$?
  unguard
  [ "$rc" -eq 0 ] || fail "exit status $rc, expected 0"
  grep -q '^2 job(s): 2 ok, 0 failed' "$dir/err" || fail "no summary"
  : >"$log"
  {
    echo "echo 'start 3' >>'$log'"
    sh "$dir/await" "$log" '^start 3' && echo "echo 'start 4' >>'$log'"
  } | ${CRONOQ_RUN_WRAPPER:-} "$bin" --follow >"$dir/out" 2>"$dir/err"
  rc=$?
  [ "$rc" -eq 0 ] && grep -q '^start 4' "$log" ||
    fail "from a pipe: status $rc, $(cat "$log")"
}
