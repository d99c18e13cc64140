/*
 * tally/tally.h: everything of libtally's writer side in one include.
 */
#ifndef TALLY_TALLY_H
#define TALLY_TALLY_H

#include "tally/zone.h"
#include "tally/block.h"
#include "tally/metrics.h"
#include "tally/family.h"

#endif /* TALLY_TALLY_H */
