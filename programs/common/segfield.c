/*
 * programs/common/segfield.c: the table of a segment's fields
 * (segfield.h) and the ways of printing one.
 */
#include "segfield.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "format.h"
#include "strbuf.h"

/* Members of struct tally_seg_info, by width. */
enum { M_I32 = 1, M_U32, M_U64 };

static void get_path(const struct tp_seg_row *r, struct tp_seg_value *v)
{
	v->s = r->info->path ? r->info->path : "";
}

/* "alive"; "dead, in use" while a process that inherited the zone still
 * uses it; "dead" for good. */
static void get_state(const struct tp_seg_row *r, struct tp_seg_value *v)
{
	v->s = r->info->alive ? "alive" :
	       r->info->in_use ? "dead, in use" : "dead";
}

static void get_series(const struct tp_seg_row *r, struct tp_seg_value *v)
{
	v->i = r->nseries;
}

static void get_format(const struct tp_seg_row *r, struct tp_seg_value *v)
{
	snprintf(v->buf, sizeof(v->buf), "%u.%u", r->info->major,
		 r->info->minor);
	v->s = v->buf;
}

static void get_used_ratio(const struct tp_seg_row *r, struct tp_seg_value *v)
{
	const struct tally_seg_info *in = r->info;

	v->d = in->capacity_chunks ? (double)in->chunks_inuse /
				     (double)in->capacity_chunks : 0.0;
}

static void get_slots(const struct tp_seg_row *r, struct tp_seg_value *v)
{
	v->i = (int64_t)r->info->capacity_chunks * r->info->chunk_slots;
}

#define OFF(m) offsetof(struct tally_seg_info, m)
/* A counter of the zone's: a uint64_t member, exported under its name
 * as tally_segment_<name>_total. */
#define ZONE_COUNTER(m, help) \
	{ #m, NULL, #m, 1, NULL, help, TP_SF_INT, OFF(m), M_U64, NULL }

/*
 * The order is the exporter's: it writes every field with a Prometheus
 * name, in this order.  The help texts are the exporter's HELP lines.
 */
const struct tp_seg_field tp_seg_fields[] = {
	{ "path", "Path", NULL, 0, NULL, "The segment's file.",
	  TP_SF_STR, 0, 0, get_path },
	{ "pid", "PID", NULL, 0, NULL,
	  "The creator's pid, in its own PID namespace.",
	  TP_SF_INT, OFF(pid), M_I32, NULL },
	{ "process", "Command", NULL, 0, NULL, "The creator's name.",
	  TP_SF_STR, OFF(proc_name), 0, NULL },
	{ "zone", "Zone", NULL, 0, NULL, "The zone's name.",
	  TP_SF_STR, OFF(zone_name), 0, NULL },
	{ "state", "State", NULL, 0, NULL,
	  "alive, dead, or dead, in use (by a process that inherited the "
	  "zone).", TP_SF_STR, 0, 0, get_state },
	{ "in_use", NULL, NULL, 0, NULL,
	  "A process (the creator, or a child that inherited the zone) "
	  "still uses it.", TP_SF_BOOL, OFF(in_use), M_I32, NULL },
	{ "format", NULL, NULL, 0, NULL, "The segment format's version.",
	  TP_SF_STR, 0, 0, get_format },
	{ "slabs", NULL, NULL, 0, NULL, "Per-CPU slabs.",
	  TP_SF_INT, OFF(nslabs), M_U32, NULL },
	{ "nodes", NULL, NULL, 0, NULL, "NUMA nodes.",
	  TP_SF_INT, OFF(nnodes), M_U32, NULL },
	{ "generation", NULL, NULL, 0, NULL,
	  "Changes with every registration and removal.",
	  TP_SF_INT, OFF(generation), M_U64, NULL },
	{ "resident_bytes", "Memory", "resident_bytes", 0, "bytes",
	  "Memory the segment file really holds (allocated blocks).",
	  TP_SF_INT, OFF(resident_bytes), M_U64, NULL },
	{ "file_bytes", "File", "file_bytes", 0, "bytes",
	  "The segment file's size (sparse: mostly not memory).",
	  TP_SF_INT, OFF(file_bytes), M_U64, NULL },
	{ "capacity_used_ratio", NULL, "capacity_used_ratio", 0, "ratio",
	  "Share of the zone's capacity (chunks) holding blocks; at 1 "
	  "allocations fail.", TP_SF_RATIO, 0, 0, get_used_ratio },
	{ "capacity_slots", NULL, "capacity_slots", 0, NULL,
	  "Slots the zone can hold.", TP_SF_INT, 0, 0, get_slots },
	ZONE_COUNTER(alloc_refused, "Allocations and registrations the zone "
		     "refused for want of room (ENOSPC)."),
	ZONE_COUNTER(copies_refused, "Per-CPU pages the file system had no "
		     "room for at a CPU's first add (the adds were kept in the "
		     "baselines, not lost)."),
	ZONE_COUNTER(register_failed, "Registrations that failed (their "
		     "updates are discarded)."),
	ZONE_COUNTER(redefinitions, "Metric definitions that changed while "
		     "the zone held them (a deploy that changed a type, mode or "
		     "buckets): only the newest definition of a name is "
		     "exported."),
	{ "alive", NULL, "alive", 0, NULL,
	  "1 while the process that created the segment runs.",
	  TP_SF_BOOL, OFF(alive), M_I32, NULL },
	{ "series", "Series", "series", 0, NULL,
	  "Series read from the segment in this scrape.",
	  TP_SF_INT, 0, 0, get_series },
};

const size_t tp_seg_nfields = sizeof(tp_seg_fields) / sizeof(tp_seg_fields[0]);

const struct tp_seg_field *tp_seg_field_find(const char *key)
{
	for (size_t i = 0; i < tp_seg_nfields; i++)
		if (strcmp(tp_seg_fields[i].key, key) == 0)
			return &tp_seg_fields[i];
	return NULL;
}

void tp_seg_field_value(const struct tp_seg_field *f,
			const struct tp_seg_row *r, struct tp_seg_value *v)
{
	const char *m = (const char *)r->info + f->off;

	memset(v, 0, sizeof(*v));
	v->type = f->type;
	if (f->get) {
		f->get(r, v);
		return;
	}
	if (f->type == TP_SF_STR) {
		v->s = m;
		return;
	}
	{
		union { int i32; uint32_t u32; uint64_t u64; } u;

		memcpy(&u, m, f->size == M_U64 ? 8 : 4);
		v->i = f->size == M_I32 ? u.i32 : f->size == M_U32 ?
		       (int64_t)u.u32 : (int64_t)u.u64;
	}
}

void tp_seg_json(struct tp_buf *b, const char *const *keys,
		 const struct tp_seg_row *r, int first)
{
	for (; *keys; keys++, first = 0) {
		const struct tp_seg_field *f = tp_seg_field_find(*keys);
		struct tp_seg_value v;

		if (!f)
			TP_DIE("no segment field '%s'", *keys);
		tp_seg_field_value(f, r, &v);
		tp_buf_printf(b, "%s\"%s\": ", first ? "" : ", ", f->key);
		switch (v.type) {
		case TP_SF_STR:
			tp_buf_json_str(b, v.s);
			break;
		case TP_SF_BOOL:
			tp_buf_puts(b, v.i ? "true" : "false");
			break;
		case TP_SF_RATIO:
			tp_buf_printf(b, "%.6g", v.d);
			break;
		default:
			tp_buf_printf(b, "%" PRId64, v.i);
			break;
		}
	}
}

char *tp_seg_text(const struct tp_seg_field *f, const struct tp_seg_row *r)
{
	struct tp_seg_value v;
	char t[64];

	tp_seg_field_value(f, r, &v);
	switch (v.type) {
	case TP_SF_STR:
		return tp_xstrdup(v.s);
	case TP_SF_RATIO:
		snprintf(t, sizeof(t), "%.6g", v.d);
		return tp_xstrdup(t);
	case TP_SF_BOOL:
		return tp_xstrdup(v.i ? "yes" : "no");
	default:
		if (f->unit && strcmp(f->unit, "bytes") == 0)
			return tp_xstrdup(tp_fmt_human(t, sizeof(t),
						       (double)v.i,
						       TP_UNIT_BYTES, 0));
		snprintf(t, sizeof(t), "%" PRId64, v.i);
		return tp_xstrdup(t);
	}
}
