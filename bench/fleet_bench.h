/*
 * cronoq-bench fleet (bench/fleet.c): the fleet pool's figures, against a
 * redis-server the bench starts itself. Kept apart from harness.h, with
 * the fleet pool's own files.
 */
#ifndef CRONOQ_BENCH_FLEET_H
#define CRONOQ_BENCH_FLEET_H

int cqb_fleet_plan(void);
void cqb_fleet(void);

#endif
