# Tests of cronoq-run (see check.sh): what the runner reports: the summary table and the JSON document.
# Every function of this file is a test, run by ctest as runner_<name>.

# --json FILE: one document in its own file, with every job, its status and
# the totals, whatever the jobs print on stdout (which stays the jobs').
json_summary_parses_and_counts_the_jobs() {
  cat >"$dir/jobs" <<'EOF'
slot=1 -- echo '{"not": "the summary"'
slot=1 -- exit 4
-- : "a \"quoted\" word, a \\ backslash	and a tab"
gpu0.5 -- true
gpu=2 -- true
gpu=0.5,name=half -- true
EOF
  run --resources slot=2,gpu=1 --json "$dir/doc.json" "$dir/jobs"
  [ "$rc" -eq 1 ] || fail "exit status $rc, expected 1"
  [ "$(cat "$dir/out")" = '{"not": "the summary"' ] ||
    fail "stdout is not the jobs' output alone"
  have_python || return 0
  $python - "$dir/doc.json" "$dir/jobs" <<'EOF' || fail "the JSON document is wrong"
import json, sys
doc = json.load(open(sys.argv[1], encoding="utf-8"))
lines = open(sys.argv[2], encoding="utf-8").read().split("\n")
jobs = {j["line"]: j for j in doc["jobs"]}
assert doc["total"] == 6 and doc["failed"] == 3 and doc["ok"] == 3, doc
assert doc["interrupted"] is False and doc["signal"] is None
assert doc["halted"] is False and doc["skipped"] == 0
assert [j["line"] for j in doc["jobs"]] == [1, 2, 3, 4, 5, 6]
assert [j["seq"] for j in doc["jobs"]] == [1, 2, 3, 4, 5, 6]
status = {n: j["status"] for n, j in jobs.items()}
assert status == {1: "ok", 2: "failed", 3: "ok", 4: "parse_error",
                  5: "never_fits", 6: "ok"}, status
assert jobs[1]["exit_code"] == 0 and jobs[1]["signal"] is None
assert jobs[1]["attempts"] == 1 and jobs[5]["attempts"] == 0
assert jobs[2]["exit_code"] == 4
assert jobs[3]["command"] == lines[2][len("-- "):], jobs[3]
assert jobs[4]["error"].startswith("request spec: expected"), jobs[4]
assert "2 devices of gpu" in jobs[5]["error"], jobs[5]
assert jobs[5]["wait_s"] is None and jobs[5]["run_s"] is None
assert jobs[6]["devices"] == "0" and jobs[1]["devices"] == ""
assert jobs[6]["grant"] == "gpu=0.5@0" and jobs[1]["grant"] == "slot=1"
assert jobs[6]["name"] == "half" and jobs[1]["name"] is None
assert all(j["run_s"] >= 0 for j in doc["jobs"] if j["status"] == "ok")
EOF
}

# GPUs named by UUID (as detection names them): the summary shows every
# device of a job in full, so a 1-GPU and a 2-GPU job do not look alike.
summary_shows_every_device_of_a_job_in_full() {
  a=GPU-0a1b2c3d-1111-2222-3333-444455556666
  b=GPU-0a1b2c3d-1111-2222-3333-444455557777
  printf '%s\n' 'gpu=1 -- true' 'gpu=2 -- true' >"$dir/jobs"
  CUDA_VISIBLE_DEVICES=$a,$b run --resources gpu=auto --summary full "$dir/jobs"
  [ "$rc" -eq 0 ] || fail "exit status $rc, expected 0"
  one=$(awk '$1 == 1 && $2 == "exit" { print $6 }' "$dir/err")
  [ "$one" = "$a" ] || [ "$one" = "$b" ] || fail "line 1 shows '$one'"
  two=$(awk '$1 == 2 && $2 == "exit" { print $6 }' "$dir/err")
  [ "$two" = "$a,$b" ] || fail "line 2 shows '$two', expected '$a,$b'"
}
