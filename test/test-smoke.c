#include "harness.h"
#include "tally/tally.h"

TEST(alloc_add_fetch)
{
	tally_block *b = tally_block_alloc(NULL, 1, TALLY_PERCPU);
	int64_t v = -1;

	CHECK(b != NULL);
	tally_block_add(b, 0, 5);
	CHECK_EQ(tally_block_fetch(b, 0, &v), 0);
	CHECK_EQ(v, 5);
}
