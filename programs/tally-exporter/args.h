/*
 * args.h: tally-exporter's command line, parsed into struct ex_args
 * (the shape of tallystat's args.c): every option's value is checked
 * here, and a bad one is reported in one line naming the option, with
 * a pointer to --help (exit status 2).
 */
#ifndef TALLY_EXPORTER_ARGS_H
#define TALLY_EXPORTER_ARGS_H

#include "server.h"

#define PROG "tally-exporter"

struct ex_args {
	const char *listen_addr;       /* --listen (default 127.0.0.1:9477) */
	const char *webfile;           /* --web.config.file; NULL: none */
	const char **dirs;             /* --dir, repeatable; none: default */
	unsigned ndirs;
	struct ex_le_rule *rules;      /* --histogram.buckets */
	unsigned nrules;
	struct tally_open_opts oo;     /* --allow-uid, --allow-group */
	/* The server's options: the exposition's, the limits, and dirs,
	 * open_opts and rules pointing at the above (listen_fd and web are
	 * the caller's). */
	struct server_opts so;
};

/*
 * ex_args_parse: fill @a from the command line.
 * Return: 0 to serve; 1 when --help or --version was printed (exit 0);
 * -1 when an option is bad: the reason is on stderr (exit 2).  @a needs
 * ex_args_free() in every case.
 */
int ex_args_parse(int argc, char **argv, struct ex_args *a);
void ex_args_free(struct ex_args *a);

#endif /* TALLY_EXPORTER_ARGS_H */
