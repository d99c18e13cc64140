/*
 * programs/tallystat/table.h: aligned text tables.  Cells are collected
 * first and printed once every column's width is known; numbers are
 * right-aligned, text left-aligned, widths counted in characters (UTF-8),
 * and no line ends in blanks.
 *
 * A table of many rows need not hold them: with stream set, it keeps one
 * row only (each ts_table_row() replaces the last), and its caller makes
 * the rows twice, the same way: once for the widths, then again to print
 * each one as it is made (ts_table_print_head(), ts_table_print_row()).
 */
#ifndef TALLYSTAT_TABLE_H
#define TALLYSTAT_TABLE_H

#include <stddef.h>

#define TS_MAXCOLS (16 + 1024) /* CPU columns beyond 1024 are left out */

#define TS_SGR_BOLD   "\033[1m"
#define TS_SGR_RED    "\033[31;1m"
#define TS_SGR_YELLOW "\033[33m"
#define TS_SGR_OFF    "\033[0m"

struct ts_cell {
	char *text;             /* owned by the table */
	const char *sgr;        /* colour, or NULL */
};

struct ts_table {
	unsigned ncols;
	const char *head[TS_MAXCOLS];
	int right[TS_MAXCOLS];
	size_t width[TS_MAXCOLS];
	struct ts_cell *cells;  /* nrows * ncols; stream: one row */
	size_t nrows, cap;      /* stream: rows made, cap 1 */
	int stream;             /* keep the last row only */
};

/* Add a column (before any row); @head must outlive the table.  Returns
 * 0, or -1 when the table has TS_MAXCOLS columns already. */
int ts_table_col(struct ts_table *t, const char *head, int right);
/* A new row of empty cells. */
struct ts_cell *ts_table_row(struct ts_table *t);
/* Cell @c of @row takes @text (malloc'ed; the table frees it). */
void ts_table_set(struct ts_table *t, struct ts_cell *row, unsigned c,
		  char *text, const char *sgr);
/* Print the header (bold with @color) and the rows on stdout. */
void ts_table_print(const struct ts_table *t, int color);
/* Print the header; print @row (of ts_table_row()). */
void ts_table_print_head(const struct ts_table *t, int color);
void ts_table_print_row(const struct ts_table *t, const struct ts_cell *row,
			int color);
void ts_table_free(struct ts_table *t);

#endif /* TALLYSTAT_TABLE_H */
