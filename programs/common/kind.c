/*
 * programs/common/kind.c: the names of kinds and modes (kind.h).
 */
#include "kind.h"

const char *tp_kind_name(unsigned kind)
{
	switch (tp_kind_type(kind)) {
	case TALLY_COUNTER:   return "counter";
	case TALLY_GAUGE:     return "gauge";
	case TALLY_HISTOGRAM: return "histogram";
	default:              return "unknown";
	}
}

const char *tp_type_name(unsigned kind, int summary, int info,
			 int stateset)
{
	return summary ? "summary" : info ? "info" :
	       stateset ? "stateset" : tp_kind_name(kind);
}

const char *tp_mode_name(unsigned mode)
{
	switch (mode) {
	case TALLY_PERCPU:   return "percpu";
	case TALLY_SHARED:   return "shared";
	case TALLY_PERNODE:  return "pernode";
	case TALLY_ADAPTIVE: return "adaptive";
	default:             return "unknown";
	}
}
