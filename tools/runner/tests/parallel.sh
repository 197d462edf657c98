# Tests of cronoq-run (see check.sh): GNU parallel's command lines mean
# what they mean in GNU parallel. Each runs the line a user types and
# compares what it prints with what it should print and, where GNU
# parallel is installed, with what parallel prints for the same line
# (like_parallel, in lib.sh).
# Every function of this file is a test, run by ctest as runner_<name>.

# Several input sources: every combination, the last source varying
# fastest, from ":::" words, "::::" files and -a files alike; {1} {2} are
# the values of each, and without a placeholder all are appended. Before,
# `echo {1} {2} ::: a b ::: x y` ran 5 jobs, ":::" among the arguments.
several_input_sources_run_every_combination_as_parallel_does() {
  printf 'a x\na y\nb x\nb y\n' >"$dir/want"
  like_parallel "$dir/want" echo {1} {2} ::: a b ::: x y
  grep -q '^4 job(s): 4 ok, 0 failed' "$dir/err" || fail "not 4 jobs"
  like_parallel "$dir/want" -k echo ::: a b ::: x y
  like_parallel "$dir/want" -k echo {} ::: a b ::: x y
  printf 'a\nb\n' >"$dir/f1"
  printf 'x\ny\n' >"$dir/f2"
  like_parallel "$dir/want" -k echo {1} {2} :::: "$dir/f1" "$dir/f2"
  like_parallel "$dir/want" -k echo :::: "$dir/f1" ::: x y
  like_parallel "$dir/want" -k -a "$dir/f1" -a "$dir/f2" echo
  printf 'X1a\nX2a\nX1b\nX2b\n' >"$dir/want"
  like_parallel "$dir/want" -k echo {3}{2}{1} ::: a b ::: 1 2 ::: X
}

# ":::+" and "::::+" link a source to the one before it: zipped, not
# combined; the shortest of a linked run sets its length; a linked run
# combines with the other sources.
linked_input_sources_are_zipped_as_parallel_does() {
  printf '1-a\n2-b\n3-c\n' >"$dir/want"
  like_parallel "$dir/want" -k echo {2}-{1} ::: a b c :::+ 1 2 3
  printf 'a 1\nb 2\n' >"$dir/want"
  like_parallel "$dir/want" -k echo ::: a b c :::+ 1 2
  printf 'a 1 X\na 1 Y\nb 2 X\nb 2 Y\n' >"$dir/want"
  like_parallel "$dir/want" -k echo {1} {2} {3} ::: a b :::+ 1 2 ::: X Y
  printf 'a\nb\n' >"$dir/f1"
  printf 'x\ny\nz\n' >"$dir/f2"
  printf 'ax\nby\n' >"$dir/want"
  like_parallel "$dir/want" -k echo {1}{2} :::: "$dir/f1" ::::+ "$dir/f2"
}

# {1} ... {n} and their forms {1.} {1/} {1//} {1/.}, as for {}; a value
# that is not there is empty; values are quoted for the shell.
positional_placeholders_take_their_forms_as_parallel_does() {
  echo 'd/a a.txt e/f b.tar e/f/b.tar.gz' >"$dir/want"
  like_parallel "$dir/want" -k echo {1.} {1/} {2//} {2/.} {2} ::: d/a.txt \
    ::: e/f/b.tar.gz
  echo 'x-y' >"$dir/want"
  like_parallel "$dir/want" -k echo x{3}-y ::: a ::: b
  echo "it's; touch $dir/pwned ok" >"$dir/want"
  like_parallel "$dir/want" -k echo {1} {2} ::: "it's; touch $dir/pwned" ::: ok
  [ ! -e "$dir/pwned" ] || fail "a value ran as a command"
}

# -k: the output in input order, whatever order the jobs end in: job 1
# ends only once job 2 has ended. Grouped and line by line, stdout and
# stderr. (Without -k, job 1 waits to see job 2's output printed first.)
keep_order_prints_the_output_in_input_order() {
  cat >"$dir/job" <<EOF
if [ "\$1" = 1 ]; then sh '$dir/await' "\$2" "\$3" || exit 98; fi
echo "out \$1"; echo "err \$1" >&2
echo "end \$1" >>'$log'
EOF
  printf 'out 1\nout 2\nout 3\n' >"$dir/want"
  for mode in --group --line-buffer; do
    like_parallel "$dir/want" -k -j 2 "$mode" sh "$dir/job" {} "$log" \
      "'^end 2'" ::: 1 2 3
    [ "$(grep '^err' "$dir/err" | tr '\n' ' ')" = "err 1 err 2 err 3 " ] ||
      fail "-k $mode: stderr in the order $(grep '^err' "$dir/err")"
    run -j 2 "$mode" sh "$dir/job" {} "$dir/out" "'^out 2'" ::: 1 2
    [ "$rc" -eq 0 ] && [ "$(tr '\n' ' ' <"$dir/out")" = "out 2 out 1 " ] ||
      fail "without -k ($mode): status $rc, output in another order"
  done
}

# --dry-run prints each job's command, as parallel does, and runs none;
# a job file's commands too; the quoting means what parallel's does.
dry_run_prints_the_commands_and_runs_none_as_parallel_does() {
  printf 'touch %s/ran.a x\ntouch %s/ran.b x\n' "$dir" "$dir" >"$dir/want"
  like_parallel "$dir/want" --dry-run touch "$dir/ran.{}" x ::: a b
  [ -z "$(ls "$dir" | grep '^ran\.')" ] || fail "a job ran"
  [ ! -s "$dir/err" ] || fail "a dry run wrote on stderr: $(cat "$dir/err")"
  printf '%s\n' 'gpu=1,name=a -- echo one' "echo two; touch '$dir/ran.c'" \
    >"$dir/jobs"
  printf '%s\n' 'echo one' "echo two; touch '$dir/ran.c'" >"$dir/want"
  run --resources gpu=1 --dry-run "$dir/jobs"
  [ "$rc" -eq 0 ] && cmp -s "$dir/out" "$dir/want" ||
    fail "a job file's dry run: status $rc, $(cat "$dir/out")"
  [ ! -e "$dir/ran.c" ] || fail "a job ran"
  # Quoted otherwise than parallel quotes, but the shell reads the same.
  run --dry-run printf "'[%s]\n'" {} ::: "it's" 'a  b'
  sh "$dir/out" >"$dir/ran"
  printf "[it's]\n[a  b]\n" | cmp -s - "$dir/ran" ||
    fail "the quoting: $(cat "$dir/out")"
  have_parallel || return 0
  HOME=$dir parallel --will-cite --dry-run printf "'[%s]\n'" {} ::: "it's" \
    'a  b' | sh | cmp -s - "$dir/ran" || fail "parallel's commands differ"
}

# -n N (and -N N): N values per job, {1} to {N} among them, the last job
# what is left; -n 0 inserts none.
max_args_put_n_values_in_each_job_as_parallel_does() {
  printf 'a b\nc d\ne\n' >"$dir/want"
  like_parallel "$dir/want" -k -n 2 echo ::: a b c d e
  like_parallel "$dir/want" -k -N 2 echo {} ::: a b c d e
  printf 'a+b\nc+d\ne+\n' >"$dir/want"
  like_parallel "$dir/want" -k -N 2 echo {1}+{2} ::: a b c d e
  printf 'a b\nc\n' >"$dir/want"
  like_parallel "$dir/want" -k -n 2 echo {.} ::: a.x b.y c.z
  printf '1\n2\n' >"$dir/want"
  like_parallel "$dir/want" -k -n 2 echo {#} ::: a b c
  printf 'hi\nhi\n' >"$dir/want"
  like_parallel "$dir/want" -k -n 0 echo hi ::: a b
  printf 'a x a y\nb x b y\n' >"$dir/want"
  like_parallel "$dir/want" -k -n 2 echo ::: a b ::: x y
}

# --colsep REGEX splits each value into columns {1} {2} ..., blanks
# trimmed; the columns of several sources follow each other.
colsep_splits_values_into_columns_as_parallel_does() {
  printf 'a,b,c\nd,e\n x , y \n' >"$dir/csv"
  printf 'b-a\ne-d\ny-x\n' >"$dir/want"
  like_parallel "$dir/want" -k --colsep , echo {2}-{1} :::: "$dir/csv"
  printf 'a b c\nd e\nx y\n' >"$dir/want"
  like_parallel "$dir/want" -k -C , echo :::: "$dir/csv"
  printf 'a\tb\nc\td\n' >"$dir/tsv"
  printf 'b:a\nd:c\n' >"$dir/want"
  like_parallel "$dir/want" -k --colsep '\t' echo {2}:{1} :::: "$dir/tsv"
  echo 'a/b/c' >"$dir/want"
  like_parallel "$dir/want" -k --colsep , echo {1}/{2}/{3} ::: a,b ::: c,d
  echo 'b' >"$dir/want"
  like_parallel "$dir/want" -k --colsep '[,;]+' echo {2} ::: 'a,;b'
}

# --delay: no two jobs start closer together than the delay, though three
# could run at once (a lower bound, which load only makes longer; the
# joblog's Starttime is when the runner started each job).
delay_spaces_out_the_job_starts() {
  printf '1\n2\n3\n' >"$dir/want"
  like_parallel "$dir/want" --delay 0.5 -j 3 echo ::: 1 2 3
  run --delay 0.5 -j 3 --joblog "$dir/joblog" echo ::: 1 2 3
  [ "$rc" -eq 0 ] || fail "exit status $rc, expected 0"
  awk -F '\t' 'NR > 1 { print $3 }' "$dir/joblog" | sort -n | awk '
    NR > 1 && $1 - prev < 0.499 { bad = 1 }
    { prev = $1 }
    END { exit bad || NR != 3 }' ||
    fail "jobs started closer than 0.5 s: $(cat "$dir/joblog")"
}

# -X: the values spread evenly over the -j slots (at most -n per job), a
# word with {} repeated once per value, {#} the job's.
context_replace_spreads_the_values_over_the_job_slots_as_parallel_does() {
  echo 'pre-a-post pre-b-post pre-c-post' >"$dir/want"
  like_parallel "$dir/want" -k -j 1 -X echo pre-{}-post ::: a b c
  printf 'a b c\nd e\n' >"$dir/want"
  like_parallel "$dir/want" -k -j 2 -X echo {} ::: a b c d e
  printf 'a b c\nd e f\ng\n' >"$dir/want"
  like_parallel "$dir/want" -k -j 3 -X echo ::: a b c d e f g
  printf 'a b\nc\n' >"$dir/want"
  like_parallel "$dir/want" -k -j 1 -X -n 2 echo {} ::: a b c
  echo '1-a 1-b 1-c' >"$dir/want"
  like_parallel "$dir/want" -k -j 1 -X echo {#}-{} ::: a b c
}

# -j P%, +N and -N count in the CPUs as GNU parallel does (at least one):
# each many jobs run at once, no more (the jobs wait for each other at a
# barrier of that many), and as many as parallel runs for the same -j.
jobs_as_a_share_or_an_offset_of_the_cpus_as_parallel_counts_them() {
  cpus=$(getconf _NPROCESSORS_ONLN)
  compare=no
  if have_parallel; then
    compare=yes
    threads=$(HOME=$dir parallel --will-cite --number-of-threads)
    if [ "$threads" != "$cpus" ]; then
      compare=no
      echo "skipped the comparison with GNU parallel: it counts $threads" \
        "CPUs, getconf $cpus"
    fi
  fi
  for spec in 50% 100% +1 -1; do
    case $spec in
    *%) n=$((cpus * ${spec%\%} / 100)) ;;
    +*) n=$((cpus + ${spec#+})) ;;
    -*) n=$((cpus - ${spec#-})) ;;
    esac
    [ "$n" -ge 1 ] || n=1
    set --
    for i in $(seq $((n + 1))); do set -- "$@" "$i"; done
    : >"$log"
    run -j "$spec" sh "$dir/probe" "$log" job 'j{}' '^start.job' "$n" ::: "$@"
    [ "$rc" -eq 0 ] && [ "$(peak job)" -eq "$n" ] ||
      fail "-j $spec of $cpus CPUs: status $rc, $(peak job) at once, expected $n"
    [ "$compare" = yes ] || continue
    : >"$log"
    HOME=$dir parallel --will-cite -j "$spec" sh "$dir/probe" "$log" job \
      'j{}' '^start.job' "$n" ::: "$@" </dev/null
    [ "$(peak job)" -eq "$n" ] ||
      fail "-j $spec: GNU parallel ran $(peak job) at once, cronoq-run $n"
  done
}

# Options come before the command, as in GNU parallel: a word there that
# starts with '-' and is not an option (a GNU parallel option cronoq-run
# does not take, a typo) is refused with status 2 and named, never run;
# after the command every word is the command's (`echo a -k`); short
# options bundle (-kj1). A job file followed by options is refused with a
# message saying where options go.
unknown_options_are_refused_and_words_after_the_command_are_its_own() {
  for opt in --bogus --pipe -q --sshlogin=x -Z; do
    run "$opt" touch "$dir/ran" ::: a
    [ "$rc" -eq 2 ] || fail "$opt: status $rc, expected 2"
    grep -q -- "unknown option '${opt%%=*}'" "$dir/err" ||
      fail "$opt: the message does not name it: $(cat "$dir/err")"
    [ ! -e "$dir/ran" ] || fail "$opt: a job ran"
  done
  if have_parallel; then
    HOME=$dir parallel --will-cite --bogus touch "$dir/ran" ::: a \
      </dev/null >/dev/null 2>&1 && fail "GNU parallel took --bogus"
    [ ! -e "$dir/ran" ] || fail "GNU parallel ran a job"
  fi
  echo 'a -k b' >"$dir/want"
  like_parallel "$dir/want" echo a -k ::: b
  printf 'a\nb\n' >"$dir/want"
  like_parallel "$dir/want" -kj1 echo ::: a b
  echo "-- touch '$dir/ran'" >"$dir/jobs"
  run "$dir/jobs" --timeout 5
  [ "$rc" -eq 2 ] && grep -q "options come before the input" "$dir/err" ||
    fail "a job file then an option: status $rc, $(cat "$dir/err")"
  [ ! -e "$dir/ran" ] || fail "a job ran"
}
