/*
 * cmd_bench.h - `axctl bench`: scheduling latency, throughput and axd
 * memory, measured on the real processes (options: cli/bench_util.h).
 */
#ifndef AX_CMD_BENCH_H
#define AX_CMD_BENCH_H

/* `axctl bench ...`; argv[0] is "bench". Exit status 0 / 1 / 2. */
int ax_cmd_bench(int argc, char **argv);

#endif /* AX_CMD_BENCH_H */
