/*
 * programs/tallystat/table.c: aligned text tables (table.h).
 */
#define _GNU_SOURCE
#include "table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strbuf.h"
#include "tallystat.h"

int ts_table_col(struct ts_table *t, const char *head, int right)
{
	if (t->ncols == TS_MAXCOLS)
		return -1;
	t->head[t->ncols] = head;
	t->right[t->ncols] = right;
	t->width[t->ncols] = ts_display_width(head);
	t->ncols++;
	return 0;
}

struct ts_cell *ts_table_row(struct ts_table *t)
{
	if (t->stream && t->cap) {
		/* The previous row was used: its cells go. */
		for (unsigned c = 0; c < t->ncols; c++) {
			free(t->cells[c].text);
			t->cells[c].text = NULL;
			t->cells[c].sgr = NULL;
		}
		t->nrows++;
		return t->cells;
	}
	if (t->stream) {
		t->cap = 1;
		t->cells = tp_xcalloc(t->ncols ? t->ncols : 1,
				      sizeof(*t->cells));
		t->nrows++;
		return t->cells;
	}
	if (t->nrows == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 64;
		t->cells = tp_xrealloc(t->cells, t->cap * t->ncols *
				       sizeof(*t->cells));
	}
	memset(&t->cells[t->nrows * t->ncols], 0,
	       t->ncols * sizeof(*t->cells));
	return &t->cells[t->nrows++ * t->ncols];
}

void ts_table_set(struct ts_table *t, struct ts_cell *row, unsigned c,
		  char *text, const char *sgr)
{
	size_t w;

	if (c >= t->ncols) {
		free(text);
		return;
	}
	w = ts_display_width(text);
	free(row[c].text);
	row[c].text = text;
	row[c].sgr = sgr;
	if (w > t->width[c])
		t->width[c] = w;
}

static void print_cell(const struct ts_table *t, unsigned c,
		       const char *text, const char *sgr, int color)
{
	size_t pad = t->width[c] - ts_display_width(text);

	if (c)
		fputs("  ", stdout);
	if (t->right[c])
		printf("%*s", (int)pad, "");
	if (color && sgr)
		printf("%s%s%s", sgr, text, TS_SGR_OFF);
	else
		fputs(text, stdout);
	if (!t->right[c] && c + 1 < t->ncols)
		printf("%*s", (int)pad, "");
}

void ts_table_print_head(const struct ts_table *t, int color)
{
	if (color)
		fputs(TS_SGR_BOLD, stdout);
	for (unsigned c = 0; c < t->ncols; c++)
		print_cell(t, c, t->head[c], NULL, 0);
	if (color)
		fputs(TS_SGR_OFF, stdout);
	fputc('\n', stdout);
}

void ts_table_print_row(const struct ts_table *t, const struct ts_cell *row,
			int color)
{
	for (unsigned c = 0; c < t->ncols; c++)
		print_cell(t, c, row[c].text ? row[c].text : "", row[c].sgr,
			   color);
	fputc('\n', stdout);
}

void ts_table_print(const struct ts_table *t, int color)
{
	ts_table_print_head(t, color);
	for (size_t r = 0; r < t->nrows; r++)
		ts_table_print_row(t, &t->cells[r * t->ncols], color);
}

void ts_table_free(struct ts_table *t)
{
	size_t n = t->stream ? (t->cap ? t->ncols : 0) : t->nrows * t->ncols;

	for (size_t i = 0; i < n; i++)
		free(t->cells[i].text);
	free(t->cells);
	t->cells = NULL;
	t->nrows = t->cap = 0;
}
