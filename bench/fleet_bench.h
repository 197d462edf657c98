/*
 * cronoq-bench fleet (bench/fleet.c) and fleet-failure
 * (bench/fleet_failure.c): the fleet pool's figures, against a
 * redis-server the bench starts itself. Kept apart from harness.h, with
 * the fleet pool's own files.
 */
#ifndef CRONOQ_BENCH_FLEET_H
#define CRONOQ_BENCH_FLEET_H

int cqb_fleet_plan(void);
void cqb_fleet(void);

/* cronoq-bench fleet-failure (bench/fleet_failure.c): recovery from killed
 * and paused holders, as distributions; --kills N and --pauses N. */
int cqb_fleet_failure_plan(void);
void cqb_fleet_failure(void);
int cqb_fleet_failure_parse_option(int argc, char **argv, int i);

#endif
