#!/bin/sh
# fleet_share as two processes of two "hosts", each with two fake GPUs,
# against a redis-server this script starts on a Unix socket and stops by
# its PID. Every job runs; at most two hold the licence at once across both
# processes; each host's jobs get that host's devices; fencing tokens are
# all different. Skips (77) without redis-server.
set -eu
bin=$1
cronoq=$2
if ! command -v redis-server >/dev/null 2>&1; then
  echo "SKIP: redis-server not found (apt-get install redis-server)"
  exit 77
fi
dir=$(mktemp -d)
redis-server --port 0 --unixsocket "$dir/redis.sock" --save '' \
  --appendonly no --maxmemory-policy noeviction --dir "$dir" \
  >"$dir/redis.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; rm -rf "$dir"' EXIT
url="unix://$dir/redis.sock"
i=0
until "$cronoq" load "$url" >/dev/null 2>&1; do
  i=$((i + 1))
  [ $i -lt 100 ] || { cat "$dir/redis.log"; exit 1; }
  sleep 0.1
done
CRONOQ_HOST=hostA CRONOQ_NUM_GPUS=2 "$bin" "$url" demo 6 new >"$dir/a" &
a=$!
CRONOQ_HOST=hostB CRONOQ_NUM_GPUS=2 "$bin" "$url" demo 6 new >"$dir/b" &
b=$!
wait $a
wait $b
cat "$dir/a" "$dir/b"
[ "$(cat "$dir/a" "$dir/b" | wc -l)" -eq 12 ]
# Each host's jobs on its own devices (one of two, ids 0 and 1).
! grep -v ' gpu [01] ' "$dir/a" "$dir/b"
# Every token once.
[ "$(cat "$dir/a" "$dir/b" | awk '{print $NF}' | sort -u | wc -l)" -eq 12 ]
# At most two jobs at once: sweep the starts and ends in time order.
cat "$dir/a" "$dir/b" | awk '{print $4, 1; print $6, -1}' | sort -n -k1,1 -k2,2 |
  awk '{n += $2; if (n > most) most = n} END {print "most at once:", most;
       exit !(most >= 1 && most <= 2)}'
echo ok
