#include "bench.h"
int bench_pernode(const struct bench_opts *o)
{
	(void)o;
	return 1;
}
