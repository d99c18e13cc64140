/* Each kind's handle with its own calls: compiles without a warning. */
#include <string.h>

#include <tally/tally.h>

int control(void)
{
	struct tally_metric_desc d;
	tally_counter c;
	tally_gauge g;
	tally_setgauge s;
	tally_histogram h;
	int64_t v;

	memset(&d, 0, sizeof(d));
	d.name = "x";
	if (tally_counter_register(NULL, &d, &c) ||
	    tally_gauge_register(NULL, &d, &g) ||
	    tally_setgauge_register(NULL, &d, &s) ||
	    tally_histogram_register(NULL, &d, &h))
		return -1;
	tally_counter_add(&c, 2);
	tally_counter_inc(&c);
	tally_gauge_add(&g, -2);
	tally_gauge_inc(&g);
	tally_gauge_dec(&g);
	tally_setgauge_set(&s, 7);
	tally_setgauge_add(&s, 1);
	tally_histogram_observe(&h, 5);
	(tally_counter_add)(&c, 1);
	(tally_histogram_observe)(&h, 1);
	return tally_metric_fetch(&c.metric, &v) ||
	       tally_metric_remove(&h.metric);
}

/* A family of each kind, its child with the calls of that kind. */
int control_family(void)
{
	static const char *const names[] = { "code" };
	const char *v[] = { "200" };
	struct tally_metric_desc d;
	tally_counter_family cf;
	tally_histogram_family hf;
	const tally_counter *c;
	const tally_histogram *h;

	memset(&d, 0, sizeof(d));
	d.name = "y";
	if (tally_counter_family_register(NULL, &d, names, 1, &cf) ||
	    tally_counter_family_get(&cf, v, 1, &c))
		return -1;
	tally_counter_inc(c);
	d.name = "z";
	if (tally_histogram_family_register(NULL, &d, names, 1, &hf) ||
	    tally_histogram_family_get(&hf, v, 1, &h))
		return -1;
	tally_histogram_observe(h, 3);
	return tally_family_remove(&cf.family) ||
	       tally_family_remove(&hf.family);
}
