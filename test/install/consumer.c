/* A program built against an installed libtally (tools/check-install.sh). */
#include <stdio.h>

#include <tally/reader.h>
#include <tally/tally.h>

int main(void)
{
	tally_block *b = tally_block_alloc(NULL, 1, TALLY_PERCPU);
	int64_t v = 0;

	if (!b) {
		fprintf(stderr, "consumer: %s\n", tally_errmsg());
		return 1;
	}
	tally_block_add(b, 0, 41);
	tally_block_add(b, 0, 1);
	if (tally_block_fetch(b, 0, &v) != 0 || v != 42) {
		fprintf(stderr, "consumer: read %lld, not 42\n", (long long)v);
		return 1;
	}
	return 0;
}
