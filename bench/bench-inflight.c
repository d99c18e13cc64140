#include "bench.h"
int bench_inflight(const struct bench_opts *o)
{
	(void)o;
	return 1;
}
