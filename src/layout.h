/*
 * layout.h: the segment file, region by region.  docs/FORMAT.md is the
 * same description for readers written in other languages; change both
 * together and bump TALLY__FMT_MAJOR (incompatible) or _MINOR (additions).
 *
 *   offset 0          struct tally__hdr, one page.
 *   node_off          uint16_t cpu_node[nslabs]: the NUMA node of each CPU.
 *   meta_off          struct tally__chunk[nchunks]: allocation state of each
 *                     chunk (written by writers only; readers may ignore it).
 *   metric_off        struct tally__metric_rec[metric_cap]: one record a
 *                     metric (a name, and what its series share).
 *   series_off        struct tally__series[series_cap]: one record a series.
 *   hash_off          uint32_t[hash_buckets + metric_hash_buckets +
 *                     series_cap]: the writers' index of series and
 *                     metrics, and the series chains (readers ignore it).
 *
 * Words: a *metric* is a name with its help, unit, kind and mode (struct
 * tally__metric_rec; Prometheus's "metric family"); a *series* is one set
 * of label values of a metric, with the block holding its values (struct
 * tally__series; the public handle tally_metric stands for one).  The
 * public tally_family (tally/family.h), a *label family*, is neither: it
 * is a process's cache of the series of one metric, found by their label
 * values.
 *   chunks_off        nchunks chunks of chunk_pages pages each.
 *
 * A chunk holds 504 slots.  Its pages, in order:
 *
 *   page 0                 baseline: what tally_block_zero() removed and
 *                          what adds that found no room were spilled to
 *                          (subtracted); at TALLY__RESV_OFF, the
 *                          reservation line (below)
 *   page 1                 adaptive blocks: the shared word (below)
 *   page 2 + c             rseq copy of CPU c        (c < nslabs)
 *   page 2 + nslabs + f    fallback copy f           (f < nslabs); at
 *                          TALLY__OWNER_OFF, the token of the thread
 *                          that owns it (src/core/add.c)
 *
 * A TALLY_SHARED block uses only page 2 (its one atomic copy) and a
 * TALLY_PERNODE block pages 2 .. 2 + nnodes - 1.  Slot s of a chunk is the
 * 8 bytes at s * 8 of each page.  A block's handle is the address of its
 * first slot in page 2, tagged with its mode in the two low bits.
 *
 * Space is reserved for real (fallocate) before anybody writes a page, so
 * that a full file system gives ENOSPC or a slower lossless path, never
 * SIGBUS.  A chunk's fixed pages are reserved when it is handed out: page
 * 0 for per-CPU and adaptive chunks, page 1 too for adaptive ones, the
 * copies of shared and per-node chunks.  The per-CPU copies are reserved
 * lazily, the first time a CPU (or a fallback copy) writes to the chunk:
 * the reservation line is 512 bits, bit (c & 255) for the rseq copies of
 * the CPUs c with that remainder, bit 256 + (f & 255) for the fallback
 * copies f; a set bit means those pages exist and stay until the chunk is
 * punched, which clears the line with the rest of page 0.  The update
 * path tests the bit inside its restartable sequence; when it is clear,
 * the slow path reserves the pages and sets it, and when the file system
 * has no room, the add is subtracted from the slot's baseline word
 * instead (an atomic add to a page that surely exists): no count is lost.
 *
 * An adaptive slot's shared word holds (value << 1) | promoted: while
 * the low bit is clear, adds go to it, and the first add that finds
 * another write between its read of the word and its own (a failed
 * compare-and-swap, or an atomic fetch-and-add that did not find the
 * value it read) sets the bit (fetch_or, which keeps the value); from
 * then on adds go to the per-CPU copies.  Adds keep the word's value in
 * the band -2^61 .. 2^61 - 1, of the 63 bits it has: an add that would
 * take it out promotes the slot too (the copies are full 64-bit words,
 * so a slot holds any int64 and wraps like one), and a fetch-and-add
 * (src/core/add.c, tally/arch/x86_64.h) adds below 2^31 to a word within
 * the band only, so that the adds in flight never take it past its 63
 * bits.
 * (Writers before this rule kept the word in -2^62 .. 2^62 - 1 with
 * compare-and-swaps only; the two meet only when a value crosses 2^61.)
 * Its value is the word shifted right arithmetically by one, plus the
 * copies.
 *
 * The value of a slot is
 *     sum of the copies the mode uses  -  baseline
 * where a page that does not exist in the file (a hole) counts as zeros.
 * Pages exist only once written, so readers must find them with
 * lseek(SEEK_DATA/SEEK_HOLE) (or read with pread, which never allocates)
 * instead of touching holes through a mapping, which would allocate them.
 */
#ifndef TALLY_LAYOUT_H
#define TALLY_LAYOUT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define TALLY__MAGIC       "TALLYSEG"
#define TALLY__FMT_MAJOR   2
#define TALLY__FMT_MINOR   8
/* From 2.1 on, the creator holds the creator lock (process/lock.c) while it
 * runs; readers judge older files by pid and start time.  2.2 adds shared
 * zones (TALLY__HDR_SHARED), whose every user holds the creator lock.
 * 2.3 adds a metric's value type (TALLY__VT_*).
 * 2.4: fallback copies are owned by one thread (the owner line of their
 * pages, the fallback locks), whose adds take no lock (src/core/add.c).
 * 2.5: long label sets.  A series whose labels do not fit in its record
 * (more than TALLY__LABELS_INLINE bytes) is a record of state
 * TALLY__SERIES_LONG whose label text lies in extension records
 * (state TALLY__SERIES_EXT) of the same table (struct tally__series_ext).
 * Readers older than 2.5 skip records whose state is not 1, so they show
 * every other series of the file; writers write long records only into
 * a zone whose header says 2.5 or later.
 * 2.5 also: generations of a metric (struct tally__metric_rec: flags, prev,
 * generation; header: metric_changes, redefinitions): a definition that
 * changes is a new metric record of the same name, the older one is
 * superseded, and a metric's help and unit may change under its seq.
 * 2.6: readers have no power over writers.  Every lock writers decide
 * anything from lies in a lock file only their user may open
 * (process/lock.c, tally__lockfile_open); readers judge liveness by write
 * locks on the zone file, which they cannot take.
 * 2.6 also: types of a metric (struct tally__metric_rec: type; the tail of
 * its help field, struct tally__metric_tail): what a metric's series
 * mean beyond their kind (per-process gauges and their combine mode, see
 * "Types" below).  Their series records have the states
 * TALLY__SERIES_TYPED and _TYPED_LONG, which readers older than 2.6
 * skip as they skip every state they do not know: they show every other
 * series of the file, and their checks of the metric record pass (its
 * kind, value type, mode and texts are those of an older kind).
 * 2.7: summaries.  A TALLY__TYPE_CHISTO record of no finite bounds whose
 * tail has TALLY__TAIL_SUMMARY is a summary (a count and a sum), which
 * readers of 2.6 show as the classic histogram it also is: its one
 * bucket, +Inf, is the count.
 * 2.8: info and enum metrics (TALLY__TYPE_INFO, TALLY__TYPE_ENUM): float
 * gauges for older readers, whose series readers of 2.6 and 2.7 skip as
 * a type they do not know; writers make them in zones of 2.6 and later,
 * never in a zone older than 2.6 (made by tally 0.3), which cannot hold
 * their type. */
#define TALLY__FMT_MINOR_CREATOR_LOCK 1
#define TALLY__FMT_MINOR_OWNED_FALLBACK 4
#define TALLY__FMT_MINOR_LONG_LABELS 5
#define TALLY__FMT_MINOR_GENERATIONS 5
#define TALLY__FMT_MINOR_LOCK_FILE 6
#define TALLY__FMT_MINOR_TYPES 6
#define TALLY__FMT_MINOR_SUMMARY 7
#define TALLY__FMT_MINOR_INFO_ENUM 8
#define TALLY__BYTE_ORDER  0x0102030405060708ull
#define TALLY__PAGE        4096u
#define TALLY__NAUX        2u
#define TALLY__PG_BASELINE 0u
#define TALLY__PG_ASHARED  1u
#define TALLY__PG_COPY0    2u
#define TALLY__MAX_SLABS   4096u
/* Page 0 of a chunk: the baseline words of its slots, then the
 * reservation line (see the top of this file). */
#define TALLY__RESV_OFF    4032u /* TALLY_CHUNK_SLOTS * 8 */
#define TALLY__CHUNK_SLOTS 504u   /* TALLY_CHUNK_SLOTS (tally/zone.h) */
#define TALLY__RESV_FALLBACK 256u /* first bit of the fallback copies */
#define TALLY__NCLASS      36u
#define TALLY__NMODES      4u

/* Header flags. */
#define TALLY__HDR_ANON    0x1u
#define TALLY__HDR_PERSIST 0x2u
#define TALLY__HDR_SHARED  0x4u /* attached by name by any process */

/*
 * The header, in the first page of the file.  The first 512 bytes are
 * written once, before the file is given its final name, and never change;
 * the live fields after them are updated by writers with atomic operations
 * and lie on cache lines of their own.
 */
struct tally__hdr {
	char magic[8];           /* "TALLYSEG" */
	uint16_t major;          /* TALLY__FMT_MAJOR */
	uint16_t minor;          /* TALLY__FMT_MINOR */
	uint32_t header_size;    /* sizeof(struct tally__hdr) */
	uint64_t byte_order;     /* TALLY__BYTE_ORDER, written natively */
	uint32_t page_size;      /* TALLY__PAGE */
	uint32_t stride;         /* bytes between two CPUs' copies: a page */
	uint32_t nslabs;         /* per-CPU copies of every slot */
	uint32_t nnodes;         /* NUMA nodes */
	uint32_t naux;           /* auxiliary pages at the start of a chunk */
	uint32_t chunk_pages;    /* naux + 2 * nslabs */
	uint32_t chunk_slots;    /* TALLY_CHUNK_SLOTS: 504 */
	uint32_t flags;          /* TALLY__HDR_* */
	uint64_t nchunks;        /* capacity in chunks */
	uint64_t node_off, node_size;
	uint64_t meta_off, meta_size;
	uint64_t series_off, series_size;
	uint64_t metric_off, metric_size;
	uint64_t chunks_off, chunks_size;
	uint64_t file_size;      /* chunks_off + chunks_size */
	int32_t creator_pid;
	uint32_t meta_rec_size;  /* sizeof(struct tally__chunk) */
	uint64_t creator_start;  /* start time of the creator, in clock ticks
				    since boot (/proc/<pid>/stat field 22) */
	uint64_t created_ns;     /* CLOCK_REALTIME at creation */
	char proc_name[16];      /* the creator's comm, NUL-terminated */
	char zone_name[64];      /* NUL-terminated */
	uint32_t series_rec_size;  /* sizeof(struct tally__series) */
	uint32_t series_cap;       /* series records in the table */
	uint32_t metric_rec_size;   /* sizeof(struct tally__metric_rec) */
	uint32_t metric_cap;        /* metric records in the table */
	uint64_t hash_off, hash_size;
	uint32_t hash_buckets;   /* series index buckets (a power of two) */
	uint32_t metric_hash_buckets; /* metric index buckets (a power of two) */
	uint8_t reserved0[512 - 296];

	/* Live fields. */
	_Alignas(64) _Atomic uint64_t series_gen; /* descriptor table changes */
	_Atomic uint32_t series_hwm;  /* records ever used: readers scan these */
	_Atomic uint32_t metric_count;   /* metric records, never removed */
	_Atomic uint32_t metric_changes; /* 2.5: metric records rewritten
					 (help, unit, superseded): readers
					 read the metric records again */
	_Atomic uint64_t redefinitions; /* 2.5: generations made because a
					   definition changed */
	_Alignas(64) _Atomic uint32_t next_token; /* owner tokens handed out */
	_Atomic uint64_t chunks_bumped;          /* chunks ever handed out */
	_Atomic uint64_t chunks_inuse;           /* chunks holding blocks */
	_Atomic uint64_t chunks_warm;            /* all free, not punched */
	_Atomic uint64_t alloc_refused;          /* allocations and
						    registrations refused
						    with ENOSPC */
	_Atomic uint64_t copies_refused;         /* copies that could not be
						    reserved: their adds
						    were spilled */
	_Atomic uint64_t register_failed;        /* registrations that
						    failed (their handles
						    discard updates) */
	/* The pool: lists of chunks, changed under pool_lock only. */
	_Alignas(64) pthread_mutex_t pool_lock;  /* robust, process-shared */
	uint32_t empty_head;                     /* chunk index + 1, 0: none */
	uint32_t partial_head[TALLY__NMODES][TALLY__NCLASS];
	/* Metrics: changed under metrics_lock only. */
	_Alignas(64) pthread_mutex_t metrics_lock; /* robust, process-shared */
	uint32_t series_free;                      /* free list (index + 1) */
	uint32_t series_live;
	uint32_t hash_cur;   /* series buckets in use (grows to hash_buckets) */
};

/*
 * The allocation state of one chunk, four cache lines.  Line 0 is changed
 * under the pool lock; lines 1 and 2 only by the thread that owns the
 * chunk; line 3 by any thread (atomic or).  A block is free when its bit
 * is set in local, dirty or remote; "dirty" and "remote" blocks still hold
 * old values and are zeroed in batches before they are handed out again.
 */
struct tally__chunk {
	_Alignas(64) _Atomic uint32_t owner; /* owner token, 0 when unowned */
	int32_t owner_pid;       /* the owner's process ... */
	uint64_t owner_start;    /* ... and its start time (clock ticks) */
	uint32_t bdiv;           /* ceil(2^20 / bsize): slot / bsize is
				    (slot * bdiv) >> 20 for any slot < 512 */
	uint32_t next, prev;     /* partial or empty list links (index + 1) */
	uint16_t bsize;          /* slots per block */
	uint16_t nblocks;        /* blocks in the chunk */
	uint8_t mode;            /* TALLY_* mode; TALLY__CHUNK_FREE if none */
	uint8_t cls;             /* size class */
	uint8_t listed;          /* on its partial list */
	uint8_t warm;            /* all free, kept unpunched for reuse */
	/* Blocks of more than 16 slots (at most 25 a chunk): how many slots
	 * of the size class each block does not use, set by the owner when
	 * it hands the block out, so that slot numbers can be checked. */
	uint8_t slack[28];
	_Alignas(64) _Atomic uint64_t local[8];  /* free and zeroed */
	_Alignas(64) _Atomic uint64_t dirty[8];  /* freed by the owner */
	_Alignas(64) _Atomic uint64_t remote[8]; /* freed by other threads */
};

#define TALLY__CHUNK_FREE 0xffu
#define TALLY__EXACT_MAX  16u /* size classes up to here are exact */

/* Metric kinds (also in tally/metrics.h). */
#define TALLY__KIND_COUNTER   1u
#define TALLY__KIND_GAUGE     2u
#define TALLY__KIND_GAUGE_SET 3u
#define TALLY__KIND_HISTOGRAM 4u

/* What a metric's slots hold: int64 (every kind), or the bits of an IEEE
 * 754 double (TALLY__KIND_GAUGE_SET only: a TALLY_FGAUGE). */
#define TALLY__VT_INT64   0u
#define TALLY__VT_FLOAT64 1u

/* A TALLY__VT_FLOAT64 slot's value, and that value as an int64 for who
 * asks for one: rounded toward zero, held within the int64 range, NaN
 * as 0. */
static inline double tally__f64_of(int64_t bits)
{
	double d;

	__builtin_memcpy(&d, &bits, sizeof(d));
	return d;
}

static inline int64_t tally__f64_to_i64(double d)
{
	if (d != d)
		return 0;
	if (d >= 9223372036854775807.0)
		return INT64_MAX;
	if (d <= -9223372036854775808.0)
		return INT64_MIN;
	return (int64_t)d;
}

#define TALLY__NAME_MAX   128u /* bytes with the NUL */
#define TALLY__UNIT_MAX   32u
#define TALLY__HELP_MAX   840u
#define TALLY__LABELS_INLINE 100u /* label bytes in a series record */
/* Pairs a record holds inline: readers of 2.4 take no more, so a set of
 * more pairs is a long set (2.5) even when its bytes would fit. */
#define TALLY__LABELS_INLINE_PAIRS (TALLY__LABELS_INLINE / 4)
/* A series' labels: at most TALLY__LABEL_PAIRS_MAX pairs, whose names
 * and values take at most TALLY__LABEL_BYTES_MAX bytes (without their
 * NULs); packed as "name\0value\0" pairs, TALLY__LABELS_PACKED_MAX. */
#define TALLY__LABEL_PAIRS_MAX 128u
#define TALLY__LABEL_BYTES_MAX 4096u
#define TALLY__LABELS_PACKED_MAX \
	(TALLY__LABEL_BYTES_MAX + 2u * TALLY__LABEL_PAIRS_MAX)
#define TALLY__METRIC_CAP    4096u

/*
 * A metric: the name, help, unit and kind shared by its series.  Never
 * removed.  Published like series records (seq).
 * A histogram's buckets: sub_bits sub-buckets per power of two, values
 * from 0 to 2^max_bits - 1 (larger ones count in the last bucket).
 *
 * Generations (2.5): a registration whose kind, value type, mode or
 * histogram layout differs from the current record's makes a new record
 * of the same name (generation + 1 and prev pointing at the last one
 * made), or makes current again an older one of its very definition
 * (a TALLY__METRIC_RETIRED one only for the label names of its series:
 * docs/FORMAT.md); the one it replaces gets
 * TALLY__METRIC_SUPERSEDED, and the metric index points at the current
 * one.  Series keep the record they were made in: processes that
 * registered another definition go on writing its series, which readers
 * do not show while it is superseded.  Help and unit are no part of a generation: a
 * registration that gives others rewrites them (under seq) and bumps
 * the header's metric_changes, so that readers read the record again.
 */
#define TALLY__METRIC_SUPERSEDED 0x1u
#define TALLY__METRIC_RETIRED    0x2u /* superseded by a binding's new
				      definition: current again only for
				      its series' label names */

struct tally__metric_rec {
	_Atomic uint32_t seq;    /* odd while being written */
	uint8_t state;           /* 1: live */
	uint8_t kind;            /* TALLY__KIND_* */
	uint8_t mode;            /* block mode of its series */
	uint8_t sub_bits;        /* histograms */
	uint8_t max_bits;        /* histograms */
	uint8_t vtype;           /* TALLY__VT_* (0 before format 2.3) */
	uint8_t flags;           /* TALLY__METRIC_* (0 before format 2.5) */
	uint8_t type;            /* 2.6: TALLY__TYPE_* (0 before) */
	uint32_t prev;           /* 2.5: record index + 1 of the
				    generation made before; 0: none */
	uint16_t name_len, unit_len, help_len;
	uint16_t generation;     /* 2.5: 0 for the first definition of
				    the name, then + 1 (at most 65535) */
	char name[TALLY__NAME_MAX];  /* NUL-terminated */
	char unit[TALLY__UNIT_MAX];  /* NUL-terminated, may be empty */
	char help[TALLY__HELP_MAX];  /* NUL-terminated, may be empty */
};

/*
 * Types of a metric (2.6): what its series mean beyond their kind, for
 * readers that know them.  The record's kind, value type and mode are
 * those an older reader accepts (so that its check of every record
 * passes), its series records have a typed state (older readers skip
 * them), and what the type needs besides lies in the tail of the help
 * field (struct tally__metric_tail), past the help text's NUL.
 *
 *   TALLY__TYPE_PGAUGE  a per-process gauge: kind TALLY__KIND_GAUGE_SET,
 *                       TALLY__VT_FLOAT64, TALLY_SHARED.  Each series is
 *                       one process's value: its labels hold
 *                       pid="<pid>:<token>", the writer's pid in its own
 *                       PID namespace (for people) and its process token
 *                       in the zone, whose lock byte
 *                       (TALLY__OWNER_LOCK_BYTE + token, src/process)
 *                       the process holds while it runs: readers judge
 *                       its liveness by that lock, from any PID
 *                       namespace.  Slot 0 the value (a double's bits),
 *                       slot 1 the CLOCK_REALTIME nanoseconds of its last
 *                       set.  tail.combine says how readers combine the
 *                       series of one label set (TALLY__COMBINE_*).
 *   TALLY__TYPE_FCOUNTER a counter with fractional increments, exact to
 *                       10^-9: kind TALLY__KIND_COUNTER, TALLY__VT_INT64,
 *                       any mode.  Slot 0 counts whole units, slot 1
 *                       billionths (each add puts its fraction there,
 *                       0 .. 10^9 - 1, never a negative amount), read
 *                       as an unsigned 64-bit sum: the value is
 *                       slot 0 + slot 1 / 10^9, exactly, as long as the
 *                       fractions added come to less than 2^64
 *                       billionths (1.8 * 10^10 units).
 *   TALLY__TYPE_CHISTO  a classic histogram with the application's own
 *                       bucket bounds (prometheus_client's buckets):
 *                       kind TALLY__KIND_COUNTER, TALLY__VT_INT64, any
 *                       mode.  tail.nbounds finite upper bounds, strictly
 *                       increasing IEEE 754 doubles, lie in the
 *                       TALLY__BOUNDS_MAX doubles before the tail (struct
 *                       tally__metric_bounds), the first nbounds of them
 *                       used.  Slot 0 the sum's whole part, floor(v)
 *                       (signed), slot 1 its billionths, v - floor(v),
 *                       read as an unsigned sum as a fractional
 *                       counter's; slots 2 .. 2 + nbounds the count of
 *                       each bucket, not cumulative: bucket i counts the
 *                       values v <= bound i and above bound i - 1, the
 *                       last one those above every bound (+Inf).
 *                       The count is the sum of the buckets.
 *                       2.7: with TALLY__TAIL_SUMMARY in tail.flags (and
 *                       no finite bounds: one bucket, the count), a
 *                       summary: readers show its count and sum as a
 *                       Prometheus summary's.
 *   TALLY__TYPE_INFO    2.8: an info metric (prometheus_client's Info):
 *                       kind TALLY__KIND_GAUGE_SET, TALLY__VT_FLOAT64,
 *                       TALLY_SHARED, no tail.  Each series is one set
 *                       of pairs (its labels); slot 0, a double, is 1
 *                       while those are the metric's pairs and 0 once
 *                       other pairs replaced them.  Readers show the
 *                       series of value 1 only, as <name>_info{...} 1.
 *   TALLY__TYPE_ENUM    2.8: an enum metric (prometheus_client's Enum,
 *                       an OpenMetrics stateset): as TALLY__TYPE_INFO,
 *                       one series per state, whose labels hold one
 *                       named as the metric (the state); slot 0 is the
 *                       state's stamp, 0 never current: a change writes
 *                       one more than the largest stamp of the label
 *                       set, under the metrics lock, and readers show
 *                       the state of the largest stamp as 1, the others
 *                       as 0 (src/reader/enumset.c).
 */
#define TALLY__TYPE_NONE     0u
#define TALLY__TYPE_PGAUGE   1u
#define TALLY__TYPE_FCOUNTER 2u
#define TALLY__TYPE_CHISTO   3u
#define TALLY__TYPE_INFO     4u
#define TALLY__TYPE_ENUM     5u
#define TALLY__TYPE_MAX      5u
#define TALLY__FRAC_SCALE    1000000000ull /* TALLY__TYPE_FCOUNTER */
#define TALLY__BOUNDS_MAX    40u /* TALLY__TYPE_CHISTO's finite bounds */

/* How the per-process series of one label set are shown (prometheus_
 * client's multiprocess modes, in this order); the "live" ones leave out
 * the series of processes that are gone. */
#define TALLY__COMBINE_ALL            0u /* each, with its pid label */
#define TALLY__COMBINE_LIVEALL        1u
#define TALLY__COMBINE_SUM            2u
#define TALLY__COMBINE_LIVESUM        3u
#define TALLY__COMBINE_MAX            4u
#define TALLY__COMBINE_LIVEMAX        5u
#define TALLY__COMBINE_MIN            6u
#define TALLY__COMBINE_LIVEMIN        7u
#define TALLY__COMBINE_MOSTRECENT     8u /* the last one set */
#define TALLY__COMBINE_LIVEMOSTRECENT 9u
#define TALLY__COMBINE_MAX_MODE       9u

static inline int tally__combine_live(unsigned combine)
{
	return combine & 1u;
}

/*
 * The tail of a typed metric record (2.6): the last TALLY__TAIL_BYTES
 * bytes of its help field, which the help text of a typed metric leaves
 * free (its help_len + 1 is at most TALLY__HELP_MAX - TALLY__TAIL_BYTES).
 * Readers older than 2.6 check the help text up to its NUL only.
 */
#define TALLY__TAIL_BYTES 8u
struct tally__metric_tail {
	uint8_t combine;         /* TALLY__TYPE_PGAUGE: TALLY__COMBINE_* */
	uint8_t nbounds;         /* TALLY__TYPE_CHISTO: 0 .. TALLY__BOUNDS_MAX */
	uint8_t flags;           /* 2.7: TALLY__TAIL_* (0 before) */
	uint8_t zero[5];
};

/* tail.flags: a TALLY__TYPE_CHISTO of no bounds that is a summary. */
#define TALLY__TAIL_SUMMARY 0x1u

/* A TALLY__TYPE_CHISTO record's bucket bounds: the TALLY__BOUNDS_BYTES
 * bytes of its help field before the tail, so that its help text and
 * NUL take at most TALLY__HELP_MAX - TALLY__TAIL_BYTES -
 * TALLY__BOUNDS_BYTES bytes. */
#define TALLY__BOUNDS_BYTES (8u * TALLY__BOUNDS_MAX)
struct tally__metric_bounds {
	double bound[TALLY__BOUNDS_MAX];
};

static inline struct tally__metric_tail *
tally__metric_tail(const struct tally__metric_rec *f)
{
	return (struct tally__metric_tail *)(f->help + TALLY__HELP_MAX -
					     TALLY__TAIL_BYTES);
}

static inline struct tally__metric_bounds *
tally__metric_bounds(const struct tally__metric_rec *f)
{
	return (struct tally__metric_bounds *)(f->help + TALLY__HELP_MAX -
					       TALLY__TAIL_BYTES -
					       TALLY__BOUNDS_BYTES);
}

/* The bytes of the help field that its text and NUL may take. */
static inline unsigned tally__help_room_of(unsigned type)
{
	return type == TALLY__TYPE_CHISTO ?
		       TALLY__HELP_MAX - TALLY__TAIL_BYTES - TALLY__BOUNDS_BYTES :
	       type ? TALLY__HELP_MAX - TALLY__TAIL_BYTES : TALLY__HELP_MAX;
}

static inline unsigned tally__help_room(const struct tally__metric_rec *f)
{
	return tally__help_room_of(f->type);
}

/* Series record states. */
#define TALLY__SERIES_FREE 0u
#define TALLY__SERIES_LIVE 1u /* labels in the record */
#define TALLY__SERIES_LONG 2u /* labels in extension records (2.5) */
#define TALLY__SERIES_EXT  3u /* an extension record (2.5) */
#define TALLY__SERIES_TYPED 4u      /* LIVE, of a typed metric (2.6) */
#define TALLY__SERIES_TYPED_LONG 5u /* LONG, of a typed metric (2.6) */

/* A series that is live (in any of its states), and one whose labels lie
 * in extension records. */
static inline int tally__series_live(unsigned state)
{
	return state == TALLY__SERIES_LIVE || state == TALLY__SERIES_LONG ||
	       state == TALLY__SERIES_TYPED ||
	       state == TALLY__SERIES_TYPED_LONG;
}

static inline int tally__series_long(unsigned state)
{
	return state == TALLY__SERIES_LONG ||
	       state == TALLY__SERIES_TYPED_LONG;
}

/*
 * A series: one set of label values of a metric, and the block holding
 * its values.  seq is even while the record is stable and odd while a
 * writer changes it; a reader copies the record, reads the values, and
 * copies the record again: the values belong to the series only if both
 * copies are equal and their seq is even (see FORMAT.md).
 *
 * labels: nlabels pairs "name\0value\0", labels_len bytes in all.
 * When state is TALLY__SERIES_LONG, labels_len is more than
 * TALLY__LABELS_INLINE and labels holds a struct tally__long_labels
 * instead: the pairs are in extension records.
 * slot_off: file offset of the block's first slot in its chunk's page 2.
 * Value layout in the block: counters and set gauges, slot 0; gauges,
 * slot 0 the increments and slot 1 the decrements (read first, see
 * walk.c); histograms, slot 0 the sum of observed values, slots
 * 1 .. nbuckets the buckets.
 */
struct tally__series {
	_Atomic uint32_t seq;
	uint8_t state;           /* 0: free, 1: live */
	uint8_t nlabels;
	uint16_t labels_len;
	uint32_t metric;         /* its metric record (index) */
	uint32_t nslots;
	uint64_t slot_off;
	uint32_t refs;           /* registrations holding the series; the
				    writers' alone: changed under the
				    metrics lock without the seq, so
				    readers ignore it (and leave it out
				    when they compare two copies) */
	char labels[TALLY__LABELS_INLINE];
};

/*
 * What the labels field of a TALLY__SERIES_LONG record holds (format
 * 2.5): the first extension record, and the writers' hash of the labels
 * (readers ignore it), so that rebuilding the writers' index needs no
 * walk of the extensions.  The rest of the field is zero.
 */
struct tally__long_labels {
	uint32_t first;          /* index + 1 of the first extension */
	uint32_t next_unused;    /* 0 */
	uint64_t hash;           /* writers' only */
};

/*
 * An extension record (format 2.5): a part of the label text of series
 * record @owner, @len bytes in @data; @next links to the next part
 * (index + 1; 0 ends the chain).  The parts in chain order are the
 * series' labels_len bytes.  Extensions are written before their owner
 * is published and do not change while it lives; @owner_seq is the seq
 * the owner has while it lives, so that a reader can tell an extension
 * of this life of the owner from a stale or foreign one.  They are freed
 * (state 0) only after the owner was retired.  Readers skip them when
 * they scan the table, and read them only through their owner, between
 * their two copies of it.
 */
#define TALLY__EXT_DATA 108u
struct tally__series_ext {
	_Atomic uint32_t seq;    /* even; not used otherwise */
	uint8_t state;           /* TALLY__SERIES_EXT */
	uint8_t pad;
	uint16_t len;            /* bytes of data used, 1 .. TALLY__EXT_DATA */
	uint32_t owner;          /* series record index */
	uint32_t owner_seq;      /* the owner's seq while it lives */
	uint32_t next;           /* next extension, index + 1; 0: last */
	char data[TALLY__EXT_DATA];
};

/*
 * The geometry of a segment: where every region lies, from the three
 * numbers that decide it.  The one place that computes positions in the
 * file: writers lay files out with it, readers check a header against it
 * (docs/FORMAT.md, "Regions", says the same).  Every region starts on a
 * page; the header is page 0.
 */
struct tally__geometry {
	uint64_t chunk_pages, chunk_bytes;
	uint64_t node_off, node_size;
	uint64_t meta_off, meta_size;
	uint64_t metric_off, metric_size;
	uint64_t series_off, series_size;
	uint64_t hash_off, hash_size;
	uint64_t chunks_off, chunks_size;
	uint64_t file_size;
	uint32_t hash_buckets, metric_hash_buckets;
};

static inline uint64_t tally__round_page(uint64_t n)
{
	return (n + TALLY__PAGE - 1) & ~(uint64_t)(TALLY__PAGE - 1);
}

/* The pages of a chunk: the auxiliary ones, an rseq and a fallback copy
 * for each slab. */
static inline uint64_t tally__chunk_pages(uint32_t nslabs)
{
	return TALLY__NAUX + 2ull * nslabs;
}

/* Page of chunk-relative number of the rseq copy of CPU @c, and of the
 * fallback copy @f. */
static inline unsigned tally__page_rseq(unsigned c)
{
	return TALLY__PG_COPY0 + c;
}

static inline unsigned tally__page_fallback(uint32_t nslabs, unsigned f)
{
	return TALLY__PG_COPY0 + nslabs + f;
}

/* Offset of page @pg in its chunk. */
static inline uint64_t tally__page_off(unsigned pg)
{
	return (uint64_t)pg * TALLY__PAGE;
}

/* The word of the same slot in page @pg, from its word in page 2 (CPU
 * 0's copy, where handles point). */
static inline int64_t *tally__slot_in_page(int64_t *copy0, unsigned pg)
{
	return (int64_t *)((char *)copy0 + ((long)pg - (long)TALLY__PG_COPY0) *
					       (long)TALLY__PAGE);
}

/*
 * A block handle's slot from its chunk-relative offset: handles point
 * into page 2 (CPU 0's copies), at a slot below TALLY__RESV_OFF / 8.
 * Returns the slot, or -1 when @in is no slot's place.
 */
static inline int tally__slot_at(uint64_t in)
{
	uint64_t off = in - (uint64_t)TALLY__PG_COPY0 * TALLY__PAGE;

	if (off >= TALLY__RESV_OFF || off % 8) /* below page 2 too: wrapped */
		return -1;
	return (int)(off / 8);
}

/* The geometry of a segment of @nchunks chunks, @series_cap series records
 * and @nslabs slabs. */
static inline void tally__geometry(uint64_t nchunks, uint32_t series_cap,
				   uint32_t nslabs, struct tally__geometry *g)
{
	uint64_t hb;

	for (hb = 64; hb < series_cap; hb *= 2)
		;
	g->chunk_pages = tally__chunk_pages(nslabs);
	g->chunk_bytes = g->chunk_pages * TALLY__PAGE;
	g->hash_buckets = (uint32_t)hb;
	g->metric_hash_buckets = 2 * TALLY__METRIC_CAP;
	g->node_off = TALLY__PAGE;
	g->node_size = tally__round_page((uint64_t)nslabs * sizeof(uint16_t));
	g->meta_off = g->node_off + g->node_size;
	g->meta_size = tally__round_page(nchunks * sizeof(struct tally__chunk));
	g->metric_off = g->meta_off + g->meta_size;
	g->metric_size = tally__round_page((uint64_t)TALLY__METRIC_CAP *
					sizeof(struct tally__metric_rec));
	g->series_off = g->metric_off + g->metric_size;
	g->series_size = tally__round_page((uint64_t)series_cap *
					 sizeof(struct tally__series));
	g->hash_off = g->series_off + g->series_size;
	g->hash_size = tally__round_page((hb + g->metric_hash_buckets + series_cap) *
					 sizeof(uint32_t));
	g->chunks_off = g->hash_off + g->hash_size;
	g->chunks_size = nchunks * g->chunk_bytes;
	g->file_size = g->chunks_off + g->chunks_size;
}

/* Where the metric index starts: after the series buckets. */
static inline uint64_t tally__metric_index_off(const struct tally__geometry *g)
{
	return g->hash_off + (uint64_t)g->hash_buckets * sizeof(uint32_t);
}

_Static_assert(sizeof(struct tally__chunk) == 256, "chunk meta is 4 lines");
_Static_assert(sizeof(struct tally__metric_rec) == 1024, "metric record size");
_Static_assert(sizeof(struct tally__series) == 128, "series record size");
_Static_assert(sizeof(struct tally__series_ext) == 128, "extension size");
_Static_assert(sizeof(struct tally__metric_tail) == TALLY__TAIL_BYTES,
	       "a typed record's tail");
_Static_assert((__builtin_offsetof(struct tally__metric_rec, help) +
		TALLY__HELP_MAX - TALLY__TAIL_BYTES - TALLY__BOUNDS_BYTES) % 8 == 0,
	       "a histogram's bounds are aligned doubles");
_Static_assert(sizeof(struct tally__long_labels) <= TALLY__LABELS_INLINE,
	       "a long record's reference fits its label field");
_Static_assert(__builtin_offsetof(struct tally__series_ext, state) ==
		       __builtin_offsetof(struct tally__series, state),
	       "records and extensions tell their state at one place");
_Static_assert(__builtin_offsetof(struct tally__hdr, register_failed) + 8 <=
		       __builtin_offsetof(struct tally__hdr, next_token) + 64,
	       "the pool's live counters share one line (read together)");
_Static_assert(__builtin_offsetof(struct tally__hdr, series_gen) == 512,
	       "live header fields start at 512");

#endif /* TALLY_LAYOUT_H */
