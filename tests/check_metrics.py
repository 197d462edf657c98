"""Reads what metrics_dump writes with the Prometheus client's own parser
(Debian's python3-prometheus-client) and checks the families and values a
scrape would see. Exits 77 (skipped) when the parser is not installed."""
import subprocess
import sys

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    print("python3-prometheus-client is not installed: skipped")
    sys.exit(77)

text = subprocess.run([sys.argv[1]], check=True, capture_output=True,
                      text=True).stdout
families = {f.name: f for f in text_string_to_metric_families(text)}


def sample(family, name, **labels):
    for s in families[family].samples:
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    raise AssertionError(f"no sample {name} {labels} in {family}")


def check(cond, what):
    if not cond:
        print("FAILED:", what)
        print(text)
        sys.exit(1)


# Types as the parser reads them (it drops _total from counter names).
check(families["cronoq_wait_seconds"].type == "histogram", "wait histogram")
check(families["cronoq_grants"].type == "counter", "grants counter")
check(families["cronoq_in_use"].type == "gauge", "in_use gauge")
check(families["cronoq_class_in_use"].type == "gauge", "class family")
check(families["cronoq_pool_waited_grants"].type == "counter", "pool counter")
check(families["cronoq_build_info"].type == "gauge", "build info")

check(sample("cronoq_in_use", "cronoq_in_use", resource="db") == 1, "db in use")
check(sample("cronoq_capacity", "cronoq_capacity", resource="gpu") == 2,
      "gpu capacity in devices")
check(sample("cronoq_device_in_use", "cronoq_device_in_use", resource="gpu",
             device='GPU-"b"') == 0, "escaped device id")
check(sample("cronoq_class_grants", "cronoq_class_grants_total",
             **{"class": "jobs"}) == 1, "class grants")
check(sample("cronoq_timeouts", "cronoq_timeouts_total", resource="db") == 1,
      "timeouts")
check(sample("cronoq_pool_waiting", "cronoq_pool_waiting") == 0, "waiting")
check(sample("cronoq_pool_waited_grants", "cronoq_pool_waited_grants_total")
      == 1, "waited grants")

# The histogram: db had two grants, one at once and one after 3 s.
def bucket(le):
    return sample("cronoq_wait_seconds", "cronoq_wait_seconds_bucket",
                  resource="db", le=le)

check(bucket("0.001") == 1, "one grant under 1 ms")
check(bucket("1.024") == 1, "still one under 1.024 s")
check(bucket("4.096") == 2, "both under 4.096 s")
check(bucket("+Inf") == 2, "+Inf counts all")
check(sample("cronoq_wait_seconds", "cronoq_wait_seconds_count",
             resource="db") == 2, "count")
check(sample("cronoq_wait_seconds", "cronoq_wait_seconds_sum",
             resource="db") == 3.0, "sum")
buckets = [s for s in families["cronoq_wait_seconds"].samples
           if s.name.endswith("_bucket") and s.labels["resource"] == "db"]
check(all(a.value <= b.value for a, b in zip(buckets, buckets[1:])),
      "buckets are cumulative")
print(f"{len(families)} families parsed")
