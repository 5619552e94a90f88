/* ops/engine_int.h: the engine's own inside (engine.c, engine_stats.c): how sampled calls are timed and scaled,
 * and the wall-clock-only regions of a consumer's sampled calls. Ops use ops/op_int.h and ops/op_async_int.h. Not
 * public. */
#ifndef SL_OPS_ENGINE_H
#define SL_OPS_ENGINE_H

#include "ops/op_async_int.h"

/* The same for a call timed on the wall clock alone: the enclosing region gets its inclusive wall time as time
 * whose CPU it did not read. The enclosing call's own CPU then counts that wall time as the nested calls' CPU less
 * the time the call spent off the CPU (its wall less its CPU): a sampled call waits in its pulls, not in its own
 * work, so its own CPU is its own wall time, at most its CPU less the nested calls'. */
void sl__nest_close_wall(const sl__nest *saved, sl__nest *inner, uint64_t incl_wall);

/* runq_ns (both): the run-queue delay over the sampled call, inclusive, or SL__RUNQ_NONE when not read. */
/* Charges the run-queue reads a sampled call made just outside its windows (two, sl__runq_ns) to the region
 * enclosing it, as the calls nested in it: the enclosing call's own time does not carry them. Call after
 * sl__nest_close. */
void sl__nest_charge_runq(void);
/* Sampling of self time: the largest stride (a cheap op is timed once in SL__SAMPLE_STRIDE calls; a tuner window of
 * such an op at 500k calls/s still holds about 120 samples a second). */
#define SL__SAMPLE_STRIDE 4096u
/* Adds one sampled measurement (ns, inclusive; the calls nested in it, `inner`, are subtracted: may be NULL),
 * scaled by the number of calls it stands for, and sets the next stride and countdown: calls are timed often
 * enough for good estimates but so that the clocks' cost (measured once per process: a thread CPU clock read is a
 * system call on some machines), the nested calls' included, stays near 0.25% of the op's inclusive time. */
void sl__stats_sample(sl__op *op, sl__sampler *smp, uint64_t cpu_ns, uint64_t wall_ns, const sl__nest *inner,
                      bool cpu_read, uint64_t runq_ns);
/* Whether this sampled call reads the thread CPU clock too. A call of a cheap op (a mean under SL__CPU_ALWAYS_NS)
 * does so one time in SL__CPU_EVERY (and until its op has one such sample): the others read the wall clock alone
 * and are charged their own wall time times the op's CPU/wall ratio over the ones that read both. The system call
 * is not just a cost: the call timed after it runs slower (a kernel that flushes the TLB on every system call), by
 * a large part of a cheap op's cost (docs/trace-format.md), and a sample stands for `stride` calls. The
 * wall-clock-only samples do not
 * carry that excess; the ratio barely moves with it. Worker iterations always read both. */
bool sl__sampler_cpu_due(sl__sampler *s, const sl__op *op);
#define SL__CPU_EVERY 4u
#define SL__CPU_ALWAYS_NS 50000u
/* False when SL_NO_TIMING is set (counts only; for measuring the cost of timing). */
bool sl__timing_enabled(void);

#endif
