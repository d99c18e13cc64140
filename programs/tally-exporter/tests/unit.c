/*
 * unit.c: tally-exporter's parsers and formatter, without a server:
 * le selection, Accept and Accept-Encoding negotiation, the web config
 * parser and loader (costs, hashes, files that are not regular files,
 * fail-closed rules, the login cache), --listen parsing, and ex_write()
 * on a hand-made snapshot (exact integers, escapes, cumulative buckets,
 * families, OpenMetrics names).
 *
 *   exporter-unit [TEST...]     every test, or those named (test/harness.h)
 */
#define _GNU_SOURCE
#include <crypt.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "tally/metrics.h"
#include "tally/reader.h"

#include "aggregate.h"
#include "auth.h"
#include "authq.h"
#include "body.h"
#include "expose.h"
#include "index.h"
#include "listen.h"
#include "retain.h"
#include "selfmetrics.h"
#include "server.h"
#include "sums.h"
#include "webconfig.h"
#include "harness.h"

TEST(le)
{
	unsigned char sel[512];
	unsigned n = (40 - 3 + 1) << 3, count = 0;
	struct ex_le_rule r;
	char err[200];

	/* Octave: every 2^k - 1 below 2^39, and never the last bucket. */
	ex_le_select(NULL, 3, 40, n, sel);
	for (unsigned b = 0; b < n; b++) {
		uint64_t lo, hi;

		if (!sel[b])
			continue;
		count++;
		tally_histogram_bucket_bounds(b, 3, &lo, &hi);
		CHECK(((hi + 1) & hi) == 0);
		CHECK(b + 1 < n);
	}
	CHECK(count == 40);
	/* sub:3 is every bucket but the last; all the same. */
	CHECK(ex_le_rule_parse("x=sub:3", &r, err, sizeof(err)) == 0);
	ex_le_select(&r, 3, 40, n, sel);
	count = 0;
	for (unsigned b = 0; b < n; b++)
		count += sel[b];
	CHECK(count == n - 1);
	ex_le_rule_free(&r);
	/* A list: each value moves up to its bucket's upper edge. */
	CHECK(ex_le_rule_parse("rpc_*=100,1000,5", &r, err, sizeof(err)) == 0);
	CHECK(strcmp(r.pattern, "rpc_*") == 0 && r.nvals == 3);
	ex_le_select(&r, 3, 40, n, sel);
	{
		uint64_t lo, hi;
		unsigned b = tally_histogram_bucket(100, 3, 40);

		CHECK(sel[b]);
		tally_histogram_bucket_bounds(b, 3, &lo, &hi);
		CHECK(lo <= 100 && hi >= 100 && hi == 103);
		CHECK(sel[5]);
	}
	ex_le_rule_free(&r);
	CHECK(ex_le_rule_parse("x=1,,2", &r, err, sizeof(err)) < 0);
	CHECK(ex_le_rule_parse("x=-1", &r, err, sizeof(err)) < 0);
	CHECK(ex_le_rule_parse("=octave", &r, err, sizeof(err)) < 0);
	CHECK(ex_le_rule_parse("x=sub:8", &r, err, sizeof(err)) < 0);
	CHECK(ex_le_rule_parse("x", &r, err, sizeof(err)) < 0);
}

TEST(negotiate)
{
	CHECK(server_negotiate(NULL) == EX_TEXT);
	CHECK(server_negotiate("*/*") == EX_TEXT);
	CHECK(server_negotiate("application/openmetrics-text") ==
	      EX_OPENMETRICS);
	/* Prometheus 2.42. */
	CHECK(server_negotiate("application/openmetrics-text;version=1.0.0,"
			       "application/openmetrics-text;version=0.0.1;"
			       "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;"
			       "q=0.1") == EX_OPENMETRICS);
	/* Only the old OpenMetrics version: text. */
	CHECK(server_negotiate("application/openmetrics-text;version=0.0.1,"
			       "text/plain;q=0.5") == EX_TEXT);
	CHECK(server_negotiate("text/plain;version=0.0.4,application/"
			       "openmetrics-text;q=0.9") == EX_TEXT);
	CHECK(server_negotiate("application/openmetrics-text; q=0") == EX_TEXT);
	CHECK(server_gzip_ok("gzip"));
	CHECK(server_gzip_ok("deflate, gzip;q=1.0, *;q=0.5"));
	CHECK(!server_gzip_ok("gzip;q=0"));
	CHECK(!server_gzip_ok("identity"));
	CHECK(!server_gzip_ok(NULL));
	CHECK(server_gzip_ok("*"));
}

/* A bcrypt hash of @pw with @cost, in @out (64 bytes). */
static void mkhash(const char *pw, unsigned cost, char *out)
{
	struct crypt_data cd;
	char salt[64];
	const char *h;

	memset(&cd, 0, sizeof(cd));
	h = crypt_gensalt_rn("$2b$", cost, NULL, 0, salt, sizeof(salt));
	h = h ? crypt_r(pw, salt, &cd) : NULL;
	snprintf(out, 64, "%s", h ? h : "");
}

TEST(webconfig)
{
	static const char h10[] =
		"$2y$10$abcdefghijklmnopqrstuu0123456789012345678901234567890";
	struct webconfig wc;
	char err[600], text[400], h5[64], h6[64];

	CHECK(strlen(h10) == 60);
	snprintf(text, sizeof(text), "# comment\ntls_server_config:\n"
		 "  cert_file: /a.crt\n  key_file: '/b c.key'  # trailing\n\n"
		 "basic_auth_users:\n  alice: %s\n  bob: \"%s\"\n", h10,
		 "$2b$04$abcdefghijklmnopqrstuu012345678901234567890123456789"
		 "0");
	CHECK(wc_parse(text, "w.yml", &wc, err, sizeof(err)) == 0);
	CHECK(wc.cert_file && strcmp(wc.cert_file, "/a.crt") == 0);
	CHECK(wc.key_file && strcmp(wc.key_file, "/b c.key") == 0);
	CHECK(wc.nusers == 2 && strcmp(wc.users[1].name, "bob") == 0);
	CHECK(wc.cost_min == 4 && wc.cost_max == 10);
	/* Unknown users are checked against a hash of the largest cost. */
	CHECK(strncmp(wc.login.dummy, "$2b$10$", 7) == 0 && strlen(wc.login.dummy) == 60);
	wc_free(&wc);
	CHECK(wc_parse("basic_auth_users:\n  a: plain\n", "w.yml", &wc, err,
		       sizeof(err)) < 0);
	CHECK(strstr(err, "w.yml:2:") && strstr(err, "bcrypt"));
	/* A hash cut short is not a hash (its user could never log in). */
	CHECK(wc_parse("basic_auth_users:\n  a: $2b$04$x\n", "w.yml", &wc, err,
		       sizeof(err)) < 0);
	CHECK(strstr(err, "not a bcrypt hash"));
	/* Costs: 4 to 12.  31 would hold a thread for days a request. */
	snprintf(text, sizeof(text), "basic_auth_users:\n  mallory: $2y$31$%s\n",
		 h10 + 7);
	CHECK(wc_parse(text, "w.yml", &wc, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "w.yml:2: user 'mallory': bcrypt cost 31 is outside "
		      "4..12"));
	snprintf(text, sizeof(text), "basic_auth_users:\n  m: $2y$13$%s\n",
		 h10 + 7);
	CHECK(wc_parse(text, "w.yml", &wc, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "cost 13"));
	snprintf(text, sizeof(text), "basic_auth_users:\n  m: $2y$03$%s\n",
		 h10 + 7);
	CHECK(wc_parse(text, "w.yml", &wc, err, sizeof(err)) == -EINVAL);
	CHECK(wc_parse("http_server_config:\n  http2: false\n", "w.yml", &wc,
		       err, sizeof(err)) < 0);
	CHECK(strstr(err, "w.yml:1: unsupported setting"));
	CHECK(wc_parse("tls_server_config:\n\tcert_file: x\n", "w", &wc, err,
		       sizeof(err)) < 0);
	CHECK(wc_parse("tls_server_config:\n  cert_file: x\n", "w", &wc, err,
		       sizeof(err)) < 0);
	CHECK(strstr(err, "both"));
	CHECK(wc_parse("tls_server_config: {cert_file: x}\n", "w", &wc, err,
		       sizeof(err)) < 0);
	CHECK(wc_parse("tls_server_config:\n  cert_file: x\n   key_file: y\n",
		       "w", &wc, err, sizeof(err)) < 0);
	snprintf(text, sizeof(text), "basic_auth_users:\n  a: %s\n  a: %s\n",
		 h10, h10);
	CHECK(wc_parse(text, "w", &wc, err, sizeof(err)) < 0);
	CHECK(strstr(err, "twice"));
	/* Fail closed: a config that sets neither TLS nor users, or a
	 * section left empty, is an error, not a server without auth. */
	CHECK(wc_parse("", "w", &wc, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "neither"));
	CHECK(wc_parse("# nothing\n---\n", "w", &wc, err, sizeof(err)) < 0);
	CHECK(wc_parse("basic_auth_users:\n", "w", &wc, err, sizeof(err)) < 0);
	CHECK(strstr(err, "w:1: basic_auth_users lists no user"));
	CHECK(wc_parse("tls_server_config:\nbasic_auth_users:\n  a: x\n", "w",
		       &wc, err, sizeof(err)) < 0);
	snprintf(text, sizeof(text), "tls_server_config:\nbasic_auth_users:\n"
		 "  a: %s\n", h10);
	CHECK(wc_parse(text, "w", &wc, err, sizeof(err)) < 0);
	CHECK(strstr(err, "w:1: tls_server_config has no cert_file"));

	/* Checks and the cache: a success is remembered, a failure not. */
	mkhash("right", 5, h5);
	mkhash("other", 6, h6);
	snprintf(text, sizeof(text), "basic_auth_users:\n  u: %s\n  v: %s\n",
		 h5, h6);
	CHECK(wc_parse(text, "w", &wc, err, sizeof(err)) == 0);
	CHECK(wc.cost_min == 5 && wc.cost_max == 6);
	CHECK(strncmp(wc.login.dummy, "$2b$06$", 7) == 0);
	CHECK(!auth_cached(&wc, "u", "right"));
	CHECK(!auth_verify(&wc, "u", "wrong"));
	CHECK(!auth_cached(&wc, "u", "wrong"));
	CHECK(!auth_verify(&wc, "nobody", "right"));
	CHECK(!auth_verify(&wc, "v", "right"));
	CHECK(auth_verify(&wc, "u", "right"));
	CHECK(auth_cached(&wc, "u", "right"));
	CHECK(!auth_cached(&wc, "v", "right"));
	CHECK(!auth_cached(&wc, "u", "right "));
	CHECK(!auth_cached(&wc, "u", "righ"));
	CHECK(auth_check_user(&wc, "v", "other"));
	CHECK(auth_cached(&wc, "v", "other") && auth_cached(&wc, "u", "right"));
	wc_free(&wc);
}

/*
 * The login cache remembers exactly the user and password that logged in:
 * a password of the same length that differs in any one byte (the first,
 * a middle one, the last), a user and password split at another place,
 * or the same bytes with user and password swapped, is not a hit.  Only
 * auth_verify() (bcrypt) can let those in, and it refuses them.
 */
TEST(webconfig_cache_exact)
{
	static const char pw[] = "right";
	struct webconfig wc;
	char err[600], text[400], h5[64], h6[64], other[sizeof(pw)];

	mkhash(pw, 5, h5);
	mkhash("ur", 5, h6);
	snprintf(text, sizeof(text),
		 "basic_auth_users:\n  u: %s\n  uri: %s\n", h5, h6);
	CHECK(wc_parse(text, "w", &wc, err, sizeof(err)) == 0);
	CHECK(auth_check_user(&wc, "u", pw));
	CHECK(auth_cached(&wc, "u", pw));
	for (size_t i = 0; i < sizeof(pw) - 1; i++) {
		memcpy(other, pw, sizeof(pw));
		other[i] ^= 0x20; /* the case of one letter */
		CHECK(!auth_cached(&wc, "u", other));
		CHECK(!auth_check_user(&wc, "u", other));
		CHECK(!auth_cached(&wc, "u", other));
	}
	/* "u" NUL "right" against "ur" NUL "ight" and "righ" NUL "t". */
	CHECK(!auth_cached(&wc, "ur", "ight"));
	CHECK(!auth_cached(&wc, "", "uright"));
	CHECK(!auth_cached(&wc, "right", "u"));
	CHECK(!auth_cached(&wc, "uri", "ght"));
	CHECK(!auth_check_user(&wc, "uri", "ght"));
	CHECK(auth_cached(&wc, "u", pw));
	wc_free(&wc);
}

/*
 * What a failed login costs, counted rather than timed: one bcrypt, of
 * the user's cost for a known user with a wrong password, of the largest
 * cost of the users for an unknown one (the dummy hash), so that neither
 * answers sooner; a success costs one bcrypt once, then none while the
 * cache remembers it.  A failure is never remembered.
 */
TEST(webconfig_login_cost)
{
	struct webconfig wc;
	char err[600], text[400], h5[64], h6[64];
	unsigned long n;

	mkhash("right", 5, h5);
	mkhash("other", 6, h6);
	snprintf(text, sizeof(text), "basic_auth_users:\n  u: %s\n  v: %s\n",
		 h5, h6);
	CHECK(wc_parse(text, "w", &wc, err, sizeof(err)) == 0);
	CHECK_EQ(wc.login.checks, 0);
	for (int i = 0; i < 3; i++) {
		n = wc.login.checks;
		CHECK(!auth_check_user(&wc, "u", "wrong"));
		CHECK_EQ(wc.login.checks, n + 1);
		CHECK_EQ(wc.login.last_cost, 5);
		CHECK(!auth_check_user(&wc, "v", "wrong"));
		CHECK_EQ(wc.login.checks, n + 2);
		CHECK_EQ(wc.login.last_cost, 6);
		/* Unknown users: the dummy, of the largest cost. */
		CHECK(!auth_check_user(&wc, "nobody", "wrong"));
		CHECK_EQ(wc.login.checks, n + 3);
		CHECK_EQ(wc.login.last_cost, 6);
		CHECK(!auth_check_user(&wc, "", ""));
		CHECK_EQ(wc.login.checks, n + 4);
		CHECK_EQ(wc.login.last_cost, 6);
	}
	n = wc.login.checks;
	CHECK(auth_check_user(&wc, "u", "right"));
	CHECK_EQ(wc.login.checks, n + 1);
	for (int i = 0; i < 3; i++)
		CHECK(auth_check_user(&wc, "u", "right"));
	CHECK_EQ(wc.login.checks, n + 1);
	wc_free(&wc);
	/* One user: known and unknown cost the same bcrypt. */
	snprintf(text, sizeof(text), "basic_auth_users:\n  u: %s\n", h5);
	CHECK(wc_parse(text, "w", &wc, err, sizeof(err)) == 0);
	CHECK(!auth_check_user(&wc, "u", "wrong"));
	CHECK(!auth_check_user(&wc, "x", "wrong"));
	CHECK_EQ(wc.login.checks, 2);
	CHECK_EQ(wc.login.last_cost, 5);
	wc_free(&wc);
}

/* wc_load() on files that are not what they claim: refused at once. */
TEST(webconfig_files)
{
	char tmpl[] = "/tmp/exporter-unit.XXXXXX", path[200], cfg[600];
	char err[600], h5[64];
	struct webconfig wc;
	FILE *f;

	if (!mkdtemp(tmpl)) {
		CHECK(0);
		return;
	}
	/* A FIFO or a directory would block or read as empty: a timer
	 * turns a hang into a failure. */
	alarm(20);
	CHECK(wc_load(tmpl, &wc, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "not a regular file (a directory)"));
	snprintf(path, sizeof(path), "%s/fifo", tmpl);
	CHECK(mkfifo(path, 0600) == 0);
	CHECK(wc_load(path, &wc, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "a FIFO"));
	CHECK(wc_load("/dev/zero", &wc, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "a device"));
	CHECK(wc_load("/nonexistent/web.yml", &wc, err, sizeof(err)) ==
	      -ENOENT);
	/* An empty file. */
	snprintf(cfg, sizeof(cfg), "%s/empty.yml", tmpl);
	f = fopen(cfg, "w");
	CHECK(f != NULL);
	if (f)
		fclose(f);
	CHECK(wc_load(cfg, &wc, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "neither"));
	/* A FIFO as the certificate or the key. */
	snprintf(cfg, sizeof(cfg), "%s/tls.yml", tmpl);
	f = fopen(cfg, "w");
	if (f) {
		fprintf(f, "tls_server_config:\n  cert_file: %s\n"
			"  key_file: %s\n", path, path);
		fclose(f);
	}
	CHECK(wc_load(cfg, &wc, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "cert_file") && strstr(err, "a FIFO"));
	/* World-readable hashes are flagged (the exporter warns). */
	mkhash("pw", 4, h5);
	snprintf(cfg, sizeof(cfg), "%s/users.yml", tmpl);
	f = fopen(cfg, "w");
	if (f) {
		fprintf(f, "basic_auth_users:\n  u: %s\n", h5);
		fclose(f);
	}
	chmod(cfg, 0644);
	CHECK(wc_load(cfg, &wc, err, sizeof(err)) == 0);
	CHECK(wc.world_readable == 1);
	wc_free(&wc);
	chmod(cfg, 0640);
	CHECK(wc_load(cfg, &wc, err, sizeof(err)) == 0);
	CHECK(wc.world_readable == 0);
	wc_free(&wc);
	/* So is a world-readable TLS key. */
	snprintf(cfg, sizeof(cfg), "%s/tls.yml", tmpl);
	f = fopen(cfg, "w");
	if (f) {
		fprintf(f, "tls_server_config:\n  cert_file: %s/users.yml\n"
			"  key_file: %s/users.yml\n", tmpl, tmpl);
		fclose(f);
	}
	snprintf(path, sizeof(path), "%s/users.yml", tmpl);
	chmod(path, 0644);
	CHECK(wc_load(cfg, &wc, err, sizeof(err)) == 0);
	CHECK(wc.key_world_readable == 1 && wc.world_readable == 0);
	wc_free(&wc);
	chmod(path, 0600);
	CHECK(wc_load(cfg, &wc, err, sizeof(err)) == 0);
	CHECK(wc.key_world_readable == 0);
	wc_free(&wc);
	snprintf(path, sizeof(path), "%s/fifo", tmpl);
	alarm(0);
	unlink(cfg);
	snprintf(cfg, sizeof(cfg), "%s/users.yml", tmpl);
	unlink(cfg);
	snprintf(cfg, sizeof(cfg), "%s/empty.yml", tmpl);
	unlink(cfg);
	unlink(path);
	CHECK(rmdir(tmpl) == 0);
}

TEST(listen)
{
	char host[64], err[200];
	unsigned port;

	CHECK(listen_parse("127.0.0.1:9477", host, sizeof(host), &port, err,
			   sizeof(err)) == 0);
	CHECK(strcmp(host, "127.0.0.1") == 0 && port == 9477);
	CHECK(listen_parse("[::1]:80", host, sizeof(host), &port, err,
			   sizeof(err)) == 0);
	CHECK(strcmp(host, "::1") == 0 && port == 80);
	CHECK(listen_parse(":9100", host, sizeof(host), &port, err,
			   sizeof(err)) == 0 && host[0] == '\0');
	CHECK(listen_parse("::1:80", host, sizeof(host), &port, err,
			   sizeof(err)) < 0);
	CHECK(listen_parse("host", host, sizeof(host), &port, err,
			   sizeof(err)) < 0);
	CHECK(listen_parse("h:65536", host, sizeof(host), &port, err,
			   sizeof(err)) < 0);
	CHECK(listen_parse("h:-1", host, sizeof(host), &port, err,
			   sizeof(err)) < 0);
	CHECK(listen_parse("h:", host, sizeof(host), &port, err,
			   sizeof(err)) < 0);
}

/* A snapshot by hand: two processes, a counter each, a histogram. */
/* A stream filled a few bytes at a time writes what ex_write() writes
 * at once, with the same numbers (self metrics off: no durations). */
static void check_streamed(const struct tp_snapshot *s,
			   const struct ex_config *c, enum ex_format f)
{
	static const size_t steps[] = { 1, 7, 100, 4096 };
	struct ex_self self = { 0 };
	struct ex_result whole, part;
	struct tp_buf a = { 0 }, b = { 0 };

	ex_write(&a, s, c, f, &self, 0, &whole);
	struct ex_index ix;

	/* An index without places over @s, borrowed (not freed). */
	memset(&ix, 0, sizeof(ix));
	ix.snap = *s;
	for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
		struct ex_stream *st = ex_stream_open(&ix, NULL, c, f, &self,
						      0);
		unsigned calls = 0;

		tp_buf_reset(&b);
		while (ex_stream_fill(st, &b, b.len + steps[k]))
			calls++;
		ex_stream_close(st, &part);
		CHECK(b.len == a.len && memcmp(tp_buf_str(&a), tp_buf_str(&b),
					       a.len) == 0);
		CHECK(memcmp(&whole, &part, sizeof(whole)) == 0);
		/* Small steps stop between series: several calls. */
		CHECK(steps[k] > 1 || calls > 1);
	}
	tp_buf_free(&a);
	tp_buf_free(&b);
}

TEST(write)
{
	struct tp_snapshot s = { 0 };
	struct tp_series v[4];
	struct tp_segment seg[2];
	char *ln[] = { "q" }, *lv[] = { "x\"y\\z\n" };
	int64_t buckets[16] = { 1, 0, 0, 2, 0, 0, 0, 0, 5 };
	struct ex_config c = { .pid_label = "pid", .process_label = "process",
			       .zone_label = "zone" };
	struct ex_self self = { 0 };
	struct ex_result res;
	struct tp_buf b = { 0 };
	const char *t;

	memset(v, 0, sizeof(v));
	memset(seg, 0, sizeof(seg));
	seg[0].info.pid = 10;
	seg[1].info.pid = 11;
	for (int i = 0; i < 3; i++) {
		v[i].kind = TALLY_COUNTER;
		v[i].name = "a_total";
		v[i].key = "a_total";
		v[i].help = "";
		v[i].unit = "";
		v[i].pid = 10 + (i > 0);
		strcpy(v[i].proc, "p");
		strcpy(v[i].zone, "z");
	}
	v[0].value = INT64_MIN;
	v[1].value = 9007199254740993ll;
	v[1].nlabels = 1;
	v[1].label_names = ln;
	v[1].label_values = lv;
	v[1].key = "a_total{q=\"x\"}";
	v[2].value = 5; /* the same series as v[0] in another process */
	v[3].kind = TALLY_HISTOGRAM;
	v[3].name = "h";
	v[3].key = "h";
	v[3].help = "H";
	v[3].unit = "";
	v[3].pid = 10;
	strcpy(v[3].proc, "p");
	v[3].sub_bits = 1;
	v[3].max_bits = 8;
	v[3].nbuckets = 16;
	v[3].buckets = buckets;
	v[3].value = 8;
	v[3].sum = 77;
	s.series = v;
	s.nseries = 4;
	s.segs = seg;
	s.nsegs = 2;
	ex_write(&b, &s, &c, EX_TEXT, &self, tp_now_ns(), &res);
	t = tp_buf_str(&b);
	CHECK(strstr(t, "a_total{pid=\"10\",process=\"p\"} -9223372036854775808\n"));
	CHECK(strstr(t, "a_total{q=\"x\\\"y\\\\z\\n\",pid=\"11\",process=\"p\"} "
		      "9007199254740993\n"));
	CHECK(strstr(t, "a_total{pid=\"11\",process=\"p\"} 5\n"));
	/* sub_bits 1: buckets 0 {0}, 1 {1}, 2 {2,3}, 3 {4..7}, ...; octave
	 * edges 0, 1, 3, 7, ...; cumulative. */
	CHECK(strstr(t, "h_bucket{pid=\"10\",process=\"p\",le=\"0\"} 1\n"));
	CHECK(strstr(t, "h_bucket{pid=\"10\",process=\"p\",le=\"3\"} 3\n"));
	CHECK(strstr(t, "h_bucket{pid=\"10\",process=\"p\",le=\"7\"} 3\n"));
	CHECK(strstr(t, "h_bucket{pid=\"10\",process=\"p\",le=\"127\"} 8\n"));
	CHECK(!strstr(t, "le=\"255\""));
	CHECK(strstr(t, "h_bucket{pid=\"10\",process=\"p\",le=\"+Inf\"} 8\n"));
	CHECK(strstr(t, "h_count{pid=\"10\",process=\"p\"} 8\n"));
	CHECK(strstr(t, "h_sum{pid=\"10\",process=\"p\"} 77\n"));
	CHECK(strstr(t, "# TYPE a_total counter\n"));
	CHECK(res.series == 4 && res.conflicts == 0);
	tp_buf_reset(&b);
	check_streamed(&s, &c, EX_TEXT);
	check_streamed(&s, &c, EX_OPENMETRICS);

	/* OpenMetrics: family "a", samples a_total, le as floats, # EOF. */
	ex_write(&b, &s, &c, EX_OPENMETRICS, &self, tp_now_ns(), &res);
	t = tp_buf_str(&b);
	CHECK(strstr(t, "# TYPE a counter\n"));
	CHECK(strstr(t, "le=\"7.0\"} 3\n"));
	CHECK(strlen(t) > 6 && strcmp(t + strlen(t) - 6, "# EOF\n") == 0);
	tp_buf_reset(&b);

	/* A gauge named like the counter's base clashes: the family that
	 * comes second (a_total) is left out. */
	v[2].kind = TALLY_GAUGE;
	v[2].name = "a";
	v[2].key = "a";
	ex_write(&b, &s, &c, EX_OPENMETRICS, &self, tp_now_ns(), &res);
	CHECK(res.conflicts == 2); /* both series of a_total */
	check_streamed(&s, &c, EX_OPENMETRICS);
	tp_buf_free(&b);
}

/* What a body hands back when its text is done: counted, and freed. */
static int bodies_done;

static void body_done(const struct ex_result *res, void *arg)
{
	CHECK(res != NULL);
	bodies_done++;
	ex_index_free(arg);
}

/* A body read @max bytes at a time, inflated when gzip; it takes @snap. */
static void read_body(struct tp_snapshot *snap, const struct ex_config *c,
		      enum ex_format f, int gz, size_t max, struct tp_buf *out)
{
	struct ex_self self = { 0 };
	struct tp_buf raw = { 0 };
	static char chunk[65536];
	static struct ex_index ix;
	struct ex_body *b;
	ssize_t n;
	int done = bodies_done;

	ex_index_of_snapshot(&ix, snap);
	b = ex_body_new(&ix, NULL, c, f, &self, 0, gz, body_done, &ix);
	CHECK(ex_body_gzip(b) == gz);
	while ((n = ex_body_read(b, chunk, max)) > 0)
		tp_buf_putn(&raw, chunk, (size_t)n);
	CHECK(n == 0);
	CHECK(ex_body_read(b, chunk, max) == 0);
	CHECK(bodies_done == done + 1 && ix.snap.series == NULL);
	ex_body_free(b);
	CHECK(bodies_done == done + 1);
	tp_buf_reset(out);
	if (!gz) {
		tp_buf_putn(out, tp_buf_str(&raw), raw.len);
	} else {
		z_stream z;
		int rc;

		memset(&z, 0, sizeof(z));
		CHECK(inflateInit2(&z, 15 + 16) == Z_OK);
		z.next_in = (Bytef *)raw.p;
		z.avail_in = (uInt)raw.len;
		do {
			z.next_out = (Bytef *)chunk;
			z.avail_out = sizeof(chunk);
			rc = inflate(&z, Z_NO_FLUSH);
			tp_buf_putn(out, chunk, sizeof(chunk) - z.avail_out);
		} while (rc == Z_OK);
		CHECK(rc == Z_STREAM_END && z.avail_in == 0);
		inflateEnd(&z);
	}
	tp_buf_free(&raw);
}

/*
 * A body (body.h) of many series, plain and gzip, read in pieces of
 * several sizes: the text of ex_write(), whole; the body takes the
 * snapshot and frees it.
 */
TEST(body)
{
	enum { N = 20000 };
	struct ex_config c = { .pid_label = "pid", .process_label = "process" };
	static const size_t maxes[] = { 1, 1000, 65536 };
	struct ex_self self = { 0 };
	struct tp_buf want = { 0 }, got = { 0 };
	struct ex_result res;

	for (int gz = 0; gz < 2; gz++)
		for (size_t k = 0; k < 3; k++) {
			struct tp_snapshot s = { 0 };

			s.arena = tp_xcalloc(1, sizeof(*s.arena));
			s.series = tp_xcalloc(N, sizeof(*s.series));
			s.segs = tp_xcalloc(1, sizeof(*s.segs));
			s.segs[0].path = tp_xstrdup("x");
			s.nsegs = 1;
			s.segs[0].info.pid = 10;
			for (unsigned i = 0; i < N; i++) {
				struct tp_series *v = &s.series[s.nseries++];
				char name[32];

				snprintf(name, sizeof(name), "m%u_total", i % 7);
				v->kind = TALLY_COUNTER;
				v->name = tp_arena_strdup(s.arena, name);
				v->key = v->name;
				v->help = v->unit = "";
				v->pid = 10 + (int)(i % 5);
				v->value = (int64_t)i * 1000003;
				v->arena = 1;
				strcpy(v->proc, "p");
			}
			tp_buf_reset(&want);
			ex_write(&want, &s, &c, EX_OPENMETRICS, &self, 0, &res);
			CHECK(want.len > 3 * EX_BODY_CHUNK);
			read_body(&s, &c, EX_OPENMETRICS, gz,
				  k == 0 && gz ? 7 : maxes[k], &got);
			CHECK(s.nseries == 0 && s.series == NULL);
			CHECK(got.len == want.len &&
			      memcmp(got.p, want.p, want.len) == 0);
		}
	tp_buf_free(&want);
	tp_buf_free(&got);
}

static void body_cut(const struct ex_result *res, void *arg)
{
	CHECK(res == NULL);
	*(int *)arg += 1;
}

/* A body freed before its end (the client went away) hands its index
 * back once, with no numbers. */
TEST(body_cut)
{
	enum { N = 8000 }; /* more text than one chunk */
	struct ex_config c = { .pid_label = "pid" };
	struct tp_snapshot s = { 0 };
	static struct tp_series v[N];
	struct ex_index ix;
	struct ex_body *b;
	char buf[16];
	int cut = 0;

	for (int i = 0; i < N; i++) {
		v[i].kind = TALLY_COUNTER;
		v[i].name = v[i].key = "a_total";
		v[i].help = v[i].unit = "";
		v[i].value = i;
	}
	s.series = v;
	s.nseries = N;
	memset(&ix, 0, sizeof(ix));
	ix.snap = s; /* borrowed: not freed */
	b = ex_body_new(&ix, NULL, &c, EX_TEXT, NULL, 0, 1, body_cut, &cut);
	CHECK(ex_body_read(b, buf, sizeof(buf)) > 0);
	CHECK(cut == 0);
	ex_body_free(b);
	CHECK(cut == 1);
}

/* Two services define one name otherwise (help, label names): their
 * series are written under the first one's HELP, and counted. */
TEST(redefined)
{
	struct tp_snapshot s = { 0 };
	struct tp_series v[3];
	struct tp_segment seg[3];
	char *ln[] = { "q" }, *lv[] = { "x" };
	struct ex_config c = { .pid_label = "pid", .process_label = "process",
			       .zone_label = "zone", .self_metrics = 1 };
	struct ex_self self = { 0 };
	struct ex_result res;
	struct tp_buf b = { 0 };
	const char *t;

	memset(v, 0, sizeof(v));
	memset(seg, 0, sizeof(seg));
	for (int i = 0; i < 3; i++) {
		seg[i].info.pid = 10 + i;
		v[i].kind = TALLY_COUNTER;
		v[i].name = "a_total";
		v[i].key = "a_total";
		v[i].help = "Requests.";
		v[i].unit = "";
		v[i].pid = 10 + i;
		v[i].value = i;
		strcpy(v[i].proc, "p");
		strcpy(v[i].zone, "z");
	}
	s.series = v;
	s.nseries = 3;
	s.segs = seg;
	s.nsegs = 3;
	ex_write(&b, &s, &c, EX_TEXT, &self, tp_now_ns(), &res);
	CHECK(res.redefined == 0);
	CHECK(strstr(tp_buf_str(&b), "tally_exporter_series_redefined 0\n"));
	tp_buf_reset(&b);
	v[1].help = "Bytes.";
	v[2].nlabels = 1;
	v[2].label_names = ln;
	v[2].label_values = lv;
	v[2].key = "a_total{q=\"x\"}";
	ex_write(&b, &s, &c, EX_TEXT, &self, tp_now_ns(), &res);
	t = tp_buf_str(&b);
	CHECK(res.redefined == 2 && res.series == 3 && res.conflicts == 0);
	CHECK(strstr(t, "# HELP a_total Requests.\n"));
	CHECK(!strstr(t, "Bytes."));
	CHECK(strstr(t, "tally_exporter_series_redefined 2\n"));
	tp_buf_free(&b);
}

/* A fractional counter (format 2.6) is written as an exact decimal. */
TEST(fractional)
{
	struct tp_snapshot s = { 0 };
	struct tp_series v[2];
	struct tp_segment seg[2];
	struct ex_config c = { .pid_label = "pid", .process_label = "process",
			       .zone_label = "zone" };
	struct ex_self self = { 0 };
	struct ex_result res;
	struct tp_buf b = { 0 };
	const char *t;

	memset(v, 0, sizeof(v));
	memset(seg, 0, sizeof(seg));
	for (int i = 0; i < 2; i++) {
		seg[i].info.pid = 10 + i;
		v[i].kind = TALLY_COUNTER;
		v[i].name = i ? "b_total" : "a_total";
		v[i].key = v[i].name;
		v[i].help = "";
		v[i].unit = "";
		v[i].pid = 10 + i;
		v[i].fractional = 1;
		strcpy(v[i].proc, "p");
		strcpy(v[i].zone, "z");
	}
	v[0].value = 3;
	v[0].frac = 750000001;
	v[1].value = 9007199254740993ll; /* beyond a double's integers */
	v[1].frac = 500000000;
	s.series = v;
	s.nseries = 2;
	s.segs = seg;
	s.nsegs = 2;
	ex_write(&b, &s, &c, EX_TEXT, &self, tp_now_ns(), &res);
	t = tp_buf_str(&b);
	CHECK(strstr(t, "a_total{pid=\"10\",process=\"p\"} 3.750000001\n"));
	CHECK(strstr(t, "b_total{pid=\"11\",process=\"p\"} "
		      "9007199254740993.5\n"));
	tp_buf_free(&b);
}

/* One counter of @value in a new zone @zone of this process. */
static struct tally_zone *sums_zone(const char *zone, const char *name,
				    int64_t value, unsigned flags)
{
	struct tally_zone_opts o = { .flags = flags };
	struct tally_metric_desc d = { .kind = TALLY_COUNTER, .name = name,
				       .help = "Jobs \"done\"." };
	struct tally_zone *z = tally_zone_create(zone, &o);
	tally_counter c;

	CHECK(z != NULL);
	CHECK_EQ(tally_counter_register(z, &d, &c), 0);
	tally_counter_add(&c, value);
	return z;
}

/*
 * ex_write_sums() (sums.h, what the Python package calls): the segments
 * of one zone summed across processes, another zone's left out, a file
 * that cannot be read listed and skipped, in both formats.
 */
TEST(write_sums)
{
	struct tp_collect_opts co = { 0 };
	struct tp_snapshot got = { 0 };
	struct tp_buf b = { 0 };
	char junk[512], errbuf[256];
	pid_t pid = fork();
	int status;
	FILE *f;

	if (pid == 0) {
		/* Another process of the zone, gone before the read. */
		sums_zone("sums_a", "sums_total", 2, TALLY_ZONE_PERSIST);
		_exit(0);
	}
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && status == 0);
	sums_zone("sums_a", "sums_total", 3, 0);
	sums_zone("sums_b", "other_total", 100, 0);
	snprintf(junk, sizeof(junk), "%s/junk.1.0.tally", harness_dir());
	CHECK((f = fopen(junk, "w")) != NULL);
	fputs("not a segment", f);
	fclose(f);

	CHECK_EQ(ex_write_sums(&b, &co, "sums_a", EX_TEXT, &got, errbuf,
			       sizeof(errbuf)), 0);
	CHECK(strcmp(tp_buf_str(&b), "# HELP sums_total Jobs \"done\".\n"
		     "# TYPE sums_total counter\nsums_total 5\n") == 0);
	CHECK_EQ(got.nsegs, 2);
	CHECK_EQ(got.nskipped, 1);
	CHECK(strcmp(got.skipped[0].path, junk) == 0);
	tp_snapshot_free(&got);
	tp_buf_free(&b);

	CHECK_EQ(ex_write_sums(&b, &co, NULL, EX_OPENMETRICS, NULL, errbuf,
			       sizeof(errbuf)), 0);
	CHECK(strstr(tp_buf_str(&b), "\nother_total 100\n"));
	CHECK(strstr(tp_buf_str(&b), "\nsums_total 5\n# EOF\n"));
	tp_buf_free(&b);
	unlink(junk);
}

/*
 * A summary (format 2.7): TYPE summary, its _count and exact _sum, no
 * bucket, in both formats; a classic histogram of the same name in
 * another segment is another type: a conflict, not written.
 */
TEST(summary)
{
	struct tp_snapshot s = { 0 };
	struct tp_series v[2];
	struct tp_segment seg[2];
	int64_t one[1] = { 4 }, two[1] = { 1 };
	struct ex_config c = { .pid_label = "pid", .process_label = "process",
			       .zone_label = "zone" };
	struct ex_self self = { 0 };
	struct ex_result res;
	const char *t;

	memset(v, 0, sizeof(v));
	memset(seg, 0, sizeof(seg));
	for (int i = 0; i < 2; i++) {
		seg[i].info.pid = 10 + i;
		v[i].kind = TALLY_HISTOGRAM;
		v[i].classic = 1;
		v[i].name = "order_value_dollars";
		v[i].key = v[i].name;
		v[i].help = "What orders were worth.";
		v[i].unit = "";
		v[i].pid = 10 + i;
		v[i].nbuckets = 1;
		strcpy(v[i].proc, "p");
		strcpy(v[i].zone, "z");
	}
	v[0].summary = 1;
	v[0].buckets = one;
	v[0].value = 4;
	v[0].sum = 2;
	v[0].frac = 550000000;
	v[0].fsum = 2.55;
	v[1].buckets = two;
	v[1].value = 1;
	v[1].sum = 1;
	v[1].fsum = 1;
	s.series = v;
	s.nseries = 2;
	s.segs = seg;
	s.nsegs = 2;
	for (int f = 0; f < 2; f++) {
		struct tp_buf b = { 0 };

		ex_write(&b, &s, &c, f ? EX_OPENMETRICS : EX_TEXT, &self,
			 tp_now_ns(), &res);
		t = tp_buf_str(&b);
		CHECK(strstr(t, "# TYPE order_value_dollars summary\n"));
		CHECK(strstr(t, "order_value_dollars_count{pid=\"10\","
			      "process=\"p\"} 4\n"));
		CHECK(strstr(t, "order_value_dollars_sum{pid=\"10\","
			      "process=\"p\"} 2.55\n"));
		CHECK(!strstr(t, "order_value_dollars_bucket"));
		CHECK(!strstr(t, "pid=\"11\""));
		CHECK(res.conflicts == 1);
		tp_buf_free(&b);
	}
}

/* What info_and_enum's snapshot @s is written as, in OpenMetrics (@om)
 * or in the text format. */
static void check_info_enum(const struct tp_snapshot *s,
			    const struct ex_config *c, int om)
{
	struct ex_self self = { 0 };
	struct ex_result res;
	struct tp_buf b = { 0 };
	const char *t;

	ex_write(&b, s, c, om ? EX_OPENMETRICS : EX_TEXT, &self, tp_now_ns(),
		 &res);
	t = tp_buf_str(&b);
	CHECK(strstr(t, om ? "# TYPE build info\n" :
		      "# TYPE build_info gauge\n"));
	CHECK(strstr(t, om ? "# HELP build H.\n" : "# HELP build_info H.\n"));
	CHECK(strstr(t, "\nbuild_info{version=\"1.2\"} 1\n"));
	CHECK(!strstr(t, "\nbuild{"));
	CHECK(strstr(t, om ? "# TYPE state stateset\n" :
		      "# TYPE state gauge\n"));
	CHECK(strstr(t, "\nstate{state=\"up\"} 1\n"));
	CHECK(strstr(t, "\nstate{state=\"down\"} 0\n"));
	CHECK(res.conflicts == 1);
	tp_buf_free(&b);
}

/*
 * An info metric (format 2.8): its series as <name>_info{pairs} 1, TYPE
 * <name>_info gauge in the text format and <name> info in OpenMetrics;
 * an enum: TYPE gauge, or stateset, each state's 0 or 1.  A plain gauge
 * of the info's name in another segment is another type: a conflict.
 */
TEST(info_and_enum)
{
	struct tp_series v[4];
	struct tp_segment seg[2];
	struct tp_snapshot s = { .series = v, .nseries = 4, .segs = seg,
				 .nsegs = 2 };
	char *ln[4][1] = { { "version" }, { "state" }, { "state" }, { "x" } };
	char *lv[4][1] = { { "1.2" }, { "up" }, { "down" }, { "1" } };
	const char *names[4] = { "build", "state", "state", "build" };
	struct ex_config c = { .aggregate = 1 };

	memset(v, 0, sizeof(v));
	memset(seg, 0, sizeof(seg));
	for (int i = 0; i < 4; i++) {
		v[i].kind = TALLY_FGAUGE;
		v[i].name = (char *)names[i];
		v[i].key = v[i].name;
		v[i].help = "H.";
		v[i].unit = "";
		v[i].pid = i == 3 ? 11 : 10;
		v[i].nlabels = 1;
		v[i].label_names = ln[i];
		v[i].label_values = lv[i];
		v[i].fvalue = i == 2 ? 0.0 : 1.0;
		v[i].value = i == 2 ? 0 : 1;
		strcpy(v[i].proc, "p");
		strcpy(v[i].zone, "z");
	}
	seg[0].info.pid = 10;
	seg[1].info.pid = 11;
	v[0].info = 1;
	v[1].stateset = v[2].stateset = 1;
	check_info_enum(&s, &c, 0);
	check_info_enum(&s, &c, 1);
}

/* Label names that clash: renamed or left out, never written twice. */
/*
 * Every tally_exporter_* metric but the scrape's duration, exactly, from
 * known numbers: the definitions and filling of selfmetrics.c as
 * write_self() prints them.  Each number is different, so a metric that
 * reads another's is caught; a version holding a quote is escaped.
 */
TEST(self_metrics_exact)
{
	static const char *const want[] = {
		"# HELP tally_exporter_build_info tally-exporter's version and "
		"libmicrohttpd's.\n# TYPE tally_exporter_build_info gauge\n"
		"tally_exporter_build_info{version=\"1\\\"2\","
		"libmicrohttpd=\"0.9\"} 1\n",
		"\ntally_exporter_segments_read 1\n",
		"\ntally_exporter_scrape_segments_skipped{reason=\"corrupt\"} 1\n"
		"tally_exporter_scrape_segments_skipped{reason=\"foreign\"} 0\n"
		"tally_exporter_scrape_segments_skipped{reason=\"version\"} 0\n"
		"tally_exporter_scrape_segments_skipped{reason=\"vanished\"} 0\n"
		"tally_exporter_scrape_segments_skipped{reason=\"symlink\"} 2\n"
		"tally_exporter_scrape_segments_skipped{reason=\"unreadable\"} 0\n",
		"# TYPE tally_exporter_segments_skipped_total counter\n"
		"tally_exporter_segments_skipped_total{reason=\"corrupt\"} 21\n"
		"tally_exporter_segments_skipped_total{reason=\"foreign\"} 22\n"
		"tally_exporter_segments_skipped_total{reason=\"version\"} 23\n"
		"tally_exporter_segments_skipped_total{reason=\"vanished\"} 24\n"
		"tally_exporter_segments_skipped_total{reason=\"symlink\"} 25\n"
		"tally_exporter_segments_skipped_total{reason=\"unreadable\"} 26\n",
		"\ntally_exporter_scrape_records_skipped 3\n",
		"\ntally_exporter_connections_evicted_total 17\n",
		"\ntally_exporter_dead_segments 13\n",
		"# TYPE tally_exporter_dead_segment_bytes gauge\n"
		"tally_exporter_dead_segment_bytes 14\n",
		"\ntally_exporter_series 0\n",
		"\ntally_exporter_series_conflicts 0\n",
		"\ntally_exporter_series_redefined 0\n",
		"\ntally_exporter_label_clashes_total{action=\"renamed\"} 15\n"
		"tally_exporter_label_clashes_total{action=\"dropped\"} 16\n",
		"\ntally_exporter_retired_series 11\n",
		"\ntally_exporter_retired_segments_total 12\n",
		"\ntally_exporter_scrapes_total 7\n",
		"\ntally_exporter_collect_duration_seconds 0.250000\n",
	};
	struct tp_skipped sk[3] = { { NULL, NULL, EINVAL },
				    { NULL, NULL, ELOOP },
				    { NULL, NULL, ELOOP } };
	struct tp_segment seg[2];
	struct ex_self self = {
		.collect_seconds = 0.25, .scrapes = 7,
		.skipped_total = { 21, 22, 23, 24, 25, 26 },
		.retired_series = 11, .retired_segments = 12,
		.dead_segments = 13, .dead_bytes = 14,
		.label_clashes_total = { 15, 16 }, .conns_evicted = 17,
		.version = "1\"2", .mhd_version = "0.9",
	};
	struct ex_config c = { .self_metrics = 1 };
	struct tp_snapshot s = { 0 };
	struct tp_buf b = { 0 };
	struct ex_result res;
	const char *t;

	memset(seg, 0, sizeof(seg));
	seg[0].records_skipped = 3;
	seg[1].stale = 1;             /* not read this time: not counted */
	seg[1].records_skipped = 100;
	s.segs = seg;
	s.nsegs = 2;
	s.skipped = sk;
	s.nskipped = 3;
	ex_write(&b, &s, &c, EX_TEXT, &self, tp_now_ns(), &res);
	t = tp_buf_str(&b);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (!strstr(t, want[i]))
			harness_fail(__FILE__, __LINE__, "no \"%s\" in:\n%s",
				     want[i], t);
	CHECK(strstr(t, "\ntally_exporter_scrape_duration_seconds "));
	tp_buf_free(&b);
}

TEST(label_clashes)
{
	struct tp_snapshot s = { 0 };
	struct tp_series v[5];
	struct tp_segment seg[1];
	char *le_n[] = { "le" }, *le_v[] = { "x" };
	char *pid_n[] = { "pid" }, *pid_v[] = { "mine" };
	char *both_n[] = { "pid", "tally_pid" }, *both_v[] = { "1", "2" };
	char *dup_n[] = { "a", "a" }, *dup_v[] = { "1", "2" };
	char *ex_n[] = { "exported_le", "le" }, *ex_v[] = { "1", "2" };
	int64_t buckets[16] = { 1 };
	struct ex_config c = { .pid_label = "pid", .process_label = "process",
			       .zone_label = "zone" };
	struct ex_self self = { 0 };
	struct ex_result res;
	struct tp_buf b = { 0 };
	const char *t;

	memset(v, 0, sizeof(v));
	memset(seg, 0, sizeof(seg));
	seg[0].info.pid = 10;
	self.label_clashes_total[0] = 100;
	for (int i = 0; i < 5; i++) {
		v[i].kind = TALLY_COUNTER;
		v[i].help = "";
		v[i].unit = "";
		v[i].pid = 10;
		v[i].nlabels = 1;
		strcpy(v[i].proc, "p");
		strcpy(v[i].zone, "z");
	}
	v[0].kind = TALLY_HISTOGRAM;
	v[0].name = v[0].key = "h";
	v[0].label_names = le_n;
	v[0].label_values = le_v;
	v[0].sub_bits = 1;
	v[0].max_bits = 8;
	v[0].nbuckets = 16;
	v[0].buckets = buckets;
	v[0].value = 1;
	v[1].name = v[1].key = "p_total";
	v[1].label_names = pid_n;
	v[1].label_values = pid_v;
	v[2].name = v[2].key = "both_total";
	v[2].nlabels = 2;
	v[2].label_names = both_n;
	v[2].label_values = both_v;
	v[3].name = v[3].key = "dup_total";
	v[3].nlabels = 2;
	v[3].label_names = dup_n;
	v[3].label_values = dup_v;
	v[4] = v[0];
	v[4].name = v[4].key = "h2";
	v[4].nlabels = 2;
	v[4].label_names = ex_n;
	v[4].label_values = ex_v;
	s.series = v;
	s.nseries = 5;
	s.segs = seg;
	s.nsegs = 1;
	c.self_metrics = 1;
	ex_write(&b, &s, &c, EX_TEXT, &self, tp_now_ns(), &res);
	t = tp_buf_str(&b);
	CHECK(strstr(t, "h_bucket{exported_le=\"x\",pid=\"10\",process=\"p\","
		      "le=\"+Inf\"} 1\n"));
	CHECK(strstr(t, "h_count{exported_le=\"x\",pid=\"10\",process=\"p\"} 1\n"));
	CHECK(strstr(t, "p_total{pid=\"mine\",tally_pid=\"10\",process=\"p\"} 0\n"));
	CHECK(!strstr(t, "both_total{"));
	CHECK(!strstr(t, "dup_total{"));
	CHECK(!strstr(t, "h2_"));
	CHECK(res.labels_renamed == 2);
	CHECK(res.labels_dropped == 3);
	CHECK(strstr(t, "tally_exporter_label_clashes_total{action=\"renamed\"} "
		      "102\n"));
	CHECK(strstr(t, "tally_exporter_label_clashes_total{action=\"dropped\"} "
		      "3\n"));
	c.self_metrics = 0;
	check_streamed(&s, &c, EX_TEXT);
	tp_buf_free(&b);
}

/*
 * The label-clash rules, each for every kind: the exposition of one series
 * a case, with its labels (all values "v") as a segment holds them, from
 * pid 10 of process "p" (ours: pid and process).  Each case says what is
 * written between the braces, or NULL when the series is left out, and
 * whether it counts as renamed:
 *   - "le" is the histograms' own: a histogram's becomes exported_le; a
 *     counter's or gauge's stays le;
 *   - a label named as one of ours keeps its name, and ours is written
 *     tally_<name> (each of ours that meets one; several count once);
 *   - tally_<ours> alone is written as it is, and not counted;
 *   - a name twice, or a renamed one that meets another (pid with
 *     tally_pid, le with exported_le on a histogram), leaves the series
 *     out; a counter's exported_le with le is written as it is;
 *   - labels out of order are written in their order.
 * With --aggregate nothing is ours: pid stays pid, nothing is renamed.
 */
struct clash_case {
	unsigned n;
	const char *names[3];
	const char *want[3];    /* counter, gauge, histogram: the braces */
	int renamed[3];
};

static const struct clash_case clash_cases[] = {
	{ 1, { "le" }, {
	  "le=\"v\",pid=\"10\",process=\"p\"",
	  "le=\"v\",pid=\"10\",process=\"p\"",
	  "exported_le=\"v\",pid=\"10\",process=\"p\"" }, { 0, 0, 1 } },
	{ 1, { "pid" }, {
	  "pid=\"v\",tally_pid=\"10\",process=\"p\"",
	  "pid=\"v\",tally_pid=\"10\",process=\"p\"",
	  "pid=\"v\",tally_pid=\"10\",process=\"p\"" }, { 1, 1, 1 } },
	{ 1, { "process" }, {
	  "process=\"v\",pid=\"10\",tally_process=\"p\"",
	  "process=\"v\",pid=\"10\",tally_process=\"p\"",
	  "process=\"v\",pid=\"10\",tally_process=\"p\"" }, { 1, 1, 1 } },
	{ 2, { "pid", "process" }, {
	  "pid=\"v\",process=\"v\",tally_pid=\"10\",tally_process=\"p\"",
	  "pid=\"v\",process=\"v\",tally_pid=\"10\",tally_process=\"p\"",
	  "pid=\"v\",process=\"v\",tally_pid=\"10\",tally_process=\"p\"" },
	  { 1, 1, 1 } },
	{ 1, { "tally_pid" }, {
	  "tally_pid=\"v\",pid=\"10\",process=\"p\"",
	  "tally_pid=\"v\",pid=\"10\",process=\"p\"",
	  "tally_pid=\"v\",pid=\"10\",process=\"p\"" }, { 0, 0, 0 } },
	{ 2, { "pid", "tally_pid" }, { NULL, NULL, NULL }, { 0, 0, 0 } },
	{ 2, { "process", "tally_process" }, { NULL, NULL, NULL },
	  { 0, 0, 0 } },
	{ 2, { "a", "a" }, { NULL, NULL, NULL }, { 0, 0, 0 } },
	{ 2, { "exported_le", "le" }, {
	  "exported_le=\"v\",le=\"v\",pid=\"10\",process=\"p\"",
	  "exported_le=\"v\",le=\"v\",pid=\"10\",process=\"p\"",
	  NULL }, { 0, 0, 0 } },
	{ 2, { "b", "a" }, {
	  "b=\"v\",a=\"v\",pid=\"10\",process=\"p\"",
	  "b=\"v\",a=\"v\",pid=\"10\",process=\"p\"",
	  "b=\"v\",a=\"v\",pid=\"10\",process=\"p\"" }, { 0, 0, 0 } },
	{ 2, { "zz", "pid" }, {
	  "zz=\"v\",pid=\"v\",tally_pid=\"10\",process=\"p\"",
	  "zz=\"v\",pid=\"v\",tally_pid=\"10\",process=\"p\"",
	  "zz=\"v\",pid=\"v\",tally_pid=\"10\",process=\"p\"" },
	  { 1, 1, 1 } },
	{ 1, { "zone" }, {
	  "zone=\"v\",pid=\"10\",process=\"p\"",
	  "zone=\"v\",pid=\"10\",process=\"p\"",
	  "zone=\"v\",pid=\"10\",process=\"p\"" }, { 0, 0, 0 } },
};

enum { NCLASH = sizeof(clash_cases) / sizeof(clash_cases[0]) };

/* Series v[k * NCLASH + i]: case i as a counter (k 0), a gauge (1) or a
 * histogram (2), of pid 10 of process "p", named in @names. */
static void clash_series(struct tp_series *v, char (*names)[16],
			 int64_t *buckets)
{
	static const unsigned kinds[3] = { TALLY_COUNTER, TALLY_GAUGE,
					   TALLY_HISTOGRAM };
	static const char *const vals[3] = { "v", "v", "v" };

	for (unsigned k = 0; k < 3; k++)
		for (unsigned i = 0; i < NCLASH; i++) {
			struct tp_series *x = &v[k * NCLASH + i];

			snprintf(names[k * NCLASH + i], sizeof(names[0]),
				 "%c%02u%s", "cgh"[k], i,
				 k == 0 ? "_total" : "");
			x->name = x->key = names[k * NCLASH + i];
			x->kind = kinds[k];
			x->help = x->unit = "";
			x->pid = 10;
			strcpy(x->proc, "p");
			strcpy(x->zone, "z");
			x->nlabels = clash_cases[i].n;
			x->label_names = (char **)clash_cases[i].names;
			x->label_values = (char **)vals;
			if (kinds[k] == TALLY_HISTOGRAM) {
				x->sub_bits = 1;
				x->max_bits = 8;
				x->nbuckets = 16;
				x->buckets = buckets;
				x->value = 1;
			}
		}
}

/* With --aggregate nothing is ours: the labels as the segment holds
 * them, or NULL (left out) when a name is there twice or le meets
 * exported_le on a histogram. */
static const char *clash_want_aggregated(unsigned i, unsigned k)
{
	const struct clash_case *cc = &clash_cases[i];
	int twice = cc->n == 2 && !strcmp(cc->names[0], cc->names[1]);
	int le_meets = k == 2 && !strcmp(cc->names[0], "exported_le");

	return twice || le_meets ? NULL : "";
}

/* The sample line case @i of kind @k must be written as, with @head
 * (its name and brace) first; *@renamed: whether it counts as renamed. */
static void clash_line(unsigned i, unsigned k, int agg, const char *head,
		       const char *want, char *line, size_t n, int *renamed)
{
	const struct clash_case *cc = &clash_cases[i];
	char *p = line;

	*renamed = cc->renamed[k];
	if (!agg) {
		snprintf(line, n, "%s%s} %d\n", head, want, k == 2);
		return;
	}
	p += sprintf(p, "%s", head);
	for (unsigned j = 0; j < cc->n; j++)
		p += sprintf(p, "%s%s=\"v\"", j ? "," : "",
			     k == 2 && !strcmp(cc->names[j], "le") ?
			     "exported_le" : cc->names[j]);
	sprintf(p, "} %d\n", k == 2);
	*renamed = k == 2 && strstr(line, "exported_le=");
}

/* Checks exposition @t of every case against what it must hold; counts
 * the series renamed and dropped. */
static void clash_check(const char *t, int agg, unsigned *renamed,
			unsigned *dropped)
{
	for (unsigned k = 0; k < 3; k++)
		for (unsigned i = 0; i < NCLASH; i++) {
			const char *want = agg ? clash_want_aggregated(i, k) :
					   clash_cases[i].want[k];
			char line[300], head[32];
			int r;

			snprintf(head, sizeof(head), "%c%02u%s{", "cgh"[k], i,
				 k == 0 ? "_total" : k == 2 ? "_count" : "");
			if (!want) {
				if (strstr(t, head))
					harness_fail(__FILE__, __LINE__,
						     "case %u kind %u "
						     "written:\n%s", i, k, t);
				(*dropped)++;
				continue;
			}
			clash_line(i, k, agg, head, want, line, sizeof(line),
				   &r);
			if (!strstr(t, line))
				harness_fail(__FILE__, __LINE__,
					     "case %u kind %u: no \"%s\" in:\n%s",
					     i, k, line, t);
			*renamed += (unsigned)r;
		}
}

TEST(label_clash_rules)
{
	static char names[3 * NCLASH][16];
	struct tp_series v[3 * NCLASH];
	struct tp_segment seg[1];
	int64_t buckets[16] = { 1 };
	struct ex_self self = { 0 };
	struct ex_result res;

	for (int agg = 0; agg < 2; agg++) {
		struct ex_config c = { .pid_label = "pid",
				       .process_label = "process",
				       .zone_label = "zone",
				       .aggregate = agg };
		struct tp_snapshot s = { 0 };
		struct tp_buf b = { 0 };
		unsigned renamed = 0, dropped = 0;

		memset(v, 0, sizeof(v));
		memset(seg, 0, sizeof(seg));
		seg[0].info.pid = 10;
		clash_series(v, names, buckets);
		s.series = v;
		s.nseries = 3 * NCLASH;
		s.segs = seg;
		s.nsegs = 1;
		ex_write(&b, &s, &c, EX_TEXT, &self, tp_now_ns(), &res);
		clash_check(tp_buf_str(&b), agg, &renamed, &dropped);
		CHECK_EQ(res.labels_renamed, renamed);
		CHECK_EQ(res.labels_dropped, dropped);
		tp_buf_free(&b);
	}
}

/* A queue of logins from the addresses named by the letters of @q ("AAB":
 * two from A, then one from B), in @a. */
static unsigned mkq(const char *q, unsigned char (*a)[AUTHQ_ADDR])
{
	unsigned n = 0;

	for (; *q; q++, n++) {
		memset(a[n], 0, AUTHQ_ADDR);
		a[n][0] = 4;
		a[n][1] = 127;
		a[n][4] = (unsigned char)*q;
	}
	return n;
}

static const unsigned char *addr_of(char c)
{
	static unsigned char a[26][AUTHQ_ADDR];
	char s[2] = { c, 0 };

	mkq(s, &a[c - 'A']);
	return a[c - 'A'];
}

#define CQ (const unsigned char (*)[AUTHQ_ADDR])

/*
 * Clean logins (a configured user with no recent failure, marked 'c' in
 * @clean): the first clean one is checked next, whatever the turns of
 * addresses; a clean one is never dropped; a clean newcomer makes room by
 * dropping an unclean login even from an address with fewer logins than
 * its own (so a flood from many addresses cannot keep it out), and finds
 * no room only when every queued login is clean.
 */
static void login_queue_clean(unsigned char (*a)[AUTHQ_ADDR])
{
	static const struct { const char *q, *clean; char last; unsigned want;
	} next[] = {
		{ "AB", ".c", 0, 1 }, { "ABC", ".cc", 0, 1 },
		{ "AAB", "c..", 'A', 0 }, { "AB", "..", 0, 0 },
	};
	static const struct { const char *q, *clean; unsigned same;
			      int newcomer, want; } drop[] = {
		{ "AAB", "c..", 1, 0, 1 }, { "AAB", "cc.", 1, 0, -1 },
		{ "AB", "..", 3, 1, 1 }, { "AB", "c.", 3, 1, 1 },
		{ "AB", "cc", 0, 1, -1 }, { "ABB", "...", 2, 0, -1 },
		{ "ABB", "...", 2, 1, 2 },
	};
	unsigned char c[8];

	for (unsigned i = 0; i < sizeof(next) / sizeof(next[0]); i++) {
		unsigned n = mkq(next[i].q, a), got;

		for (unsigned k = 0; k < n; k++)
			c[k] = next[i].clean[k] == 'c';
		got = authq_next(CQ a, c, n, next[i].last ?
				 addr_of(next[i].last) : NULL);
		if (got != next[i].want)
			harness_fail(__FILE__, __LINE__, "next of %s (clean "
				     "%s): %u, want %u", next[i].q,
				     next[i].clean, got, next[i].want);
	}
	for (unsigned i = 0; i < sizeof(drop) / sizeof(drop[0]); i++) {
		unsigned n = mkq(drop[i].q, a);
		int got;

		for (unsigned k = 0; k < n; k++)
			c[k] = drop[i].clean[k] == 'c';
		got = authq_drop(CQ a, c, n, NULL, drop[i].same,
				 drop[i].newcomer);
		if (got != drop[i].want)
			harness_fail(__FILE__, __LINE__, "drop in %s (clean %s, "
				     "newcomer %s) for one with %u: %d, want "
				     "%d", drop[i].q, drop[i].clean,
				     drop[i].newcomer ? "clean" : "not clean",
				     drop[i].same, got, drop[i].want);
	}
}

/*
 * The login queue's order among addresses, each rule and each tie: the
 * next login is the first from the address with the fewest logins queued
 * (among equals, the first queued), the address checked last after every
 * other; a full queue drops the most recently queued login of the
 * address with the most logins queued or being checked (among equals, the
 * last queued), and only for an address with fewer.
 */
TEST(login_queue_order)
{
	static const struct { const char *q; char last; unsigned want; } next[] = {
		{ "A", 0, 0 }, { "AB", 0, 0 }, { "BA", 0, 0 },
		{ "AAB", 0, 2 }, { "ABB", 0, 0 }, { "BBA", 0, 2 },
		{ "AB", 'A', 1 }, { "BA", 'B', 1 }, { "AB", 'C', 0 },
		{ "AA", 'A', 0 }, { "AAB", 'B', 0 }, { "ABBCC", 0, 0 },
		{ "AABBC", 'C', 0 }, { "AABBCC", 'A', 2 }, { "ABAB", 'A', 1 },
	};
	static const struct { const char *q; char running; unsigned same;
			      int want; } drop[] = {
		{ "AAB", 0, 1, 1 }, { "AAB", 0, 2, -1 }, { "ABA", 0, 1, 2 },
		{ "AB", 0, 0, 1 }, { "BA", 0, 0, 1 }, { "AB", 0, 1, -1 },
		{ "ABAB", 0, 0, 3 }, { "ABAB", 0, 1, 3 }, { "ABAB", 0, 2, -1 },
		{ "BA", 'A', 1, 1 }, { "AB", 'A', 1, 0 }, { "AB", 'C', 0, 1 },
		{ "AABB", 'B', 2, 3 }, { "AABB", 'A', 2, 1 },
		{ "AAAAAAAA", 0, 0, 7 }, { "AAAAAAAA", 0, 7, 7 },
		{ "AAAAAAAA", 0, 8, -1 },
	};
	unsigned char a[8][AUTHQ_ADDR];

	for (unsigned i = 0; i < sizeof(next) / sizeof(next[0]); i++) {
		unsigned n = mkq(next[i].q, a), got;

		got = authq_next(CQ a, NULL, n, next[i].last ?
				 addr_of(next[i].last) : NULL);
		if (got != next[i].want)
			harness_fail(__FILE__, __LINE__, "next of %s (last %c): "
				     "%u, want %u", next[i].q,
				     next[i].last ? next[i].last : '-', got,
				     next[i].want);
	}
	for (unsigned i = 0; i < sizeof(drop) / sizeof(drop[0]); i++) {
		unsigned n = mkq(drop[i].q, a);
		int got = authq_drop(CQ a, NULL, n, drop[i].running ?
				     addr_of(drop[i].running) : NULL,
				     drop[i].same, 0);

		if (got != drop[i].want)
			harness_fail(__FILE__, __LINE__, "drop in %s (running "
				     "%c) for one with %u: %d, want %d",
				     drop[i].q, drop[i].running ?
				     drop[i].running : '-', drop[i].same, got,
				     drop[i].want);
	}
	/* Counts: queued and being checked, by the whole address. */
	CHECK_EQ(authq_count(CQ a, mkq("ABA", a), addr_of('A'), addr_of('A')), 3);
	login_queue_clean(a);
	CHECK_EQ(authq_count(CQ a, mkq("ABA", a), NULL, addr_of('B')), 1);
	CHECK_EQ(authq_count(CQ a, mkq("ABA", a), addr_of('A'), addr_of('C')), 0);
}

/* --- retain.h, on snapshots made by hand (heap memory, as collected) --- */

static void seg_add(struct tp_snapshot *s, const char *path, int pid,
		    uint64_t gen)
{
	struct tp_segment *g;

	s->segs = tp_xrealloc(s->segs, (s->nsegs + 1) * sizeof(*s->segs));
	g = &s->segs[s->nsegs++];
	memset(g, 0, sizeof(*g));
	g->path = tp_xstrdup(path);
	g->info.path = g->path;
	g->info.pid = pid;
	g->info.start_ticks = 1000 + (uint64_t)pid;
	g->info.created_ns = 7;
	g->info.generation = gen;
	snprintf(g->info.zone_name, sizeof(g->info.zone_name), "w");
}

/* A series of the last segment added. */
static void ser_add(struct tp_snapshot *s, const char *name, unsigned kind,
		    int64_t value)
{
	struct tp_series *x;

	s->series = tp_xrealloc(s->series, (s->nseries + 1) *
				sizeof(*s->series));
	x = &s->series[s->nseries++];
	memset(x, 0, sizeof(*x));
	x->pid = s->segs[s->nsegs - 1].info.pid;
	x->nprocs = 1;
	strcpy(x->proc, "w");
	strcpy(x->zone, "w");
	x->key = tp_xstrdup(name);
	x->name = tp_xstrdup(name);
	x->help = tp_xstrdup("");
	x->unit = tp_xstrdup("");
	x->kind = kind;
	x->value = value;
	s->segs[s->nsegs - 1].nseries++;
}

static void skip_add(struct tp_snapshot *s, const char *path, int err)
{
	s->skipped = tp_xrealloc(s->skipped, (s->nskipped + 1) *
				 sizeof(*s->skipped));
	s->skipped[s->nskipped].path = tp_xstrdup(path);
	s->skipped[s->nskipped].reason = tp_xstrdup("test");
	s->skipped[s->nskipped].err = err;
	s->nskipped++;
}

static int64_t agg_value(const struct tp_snapshot *a, const char *key)
{
	for (size_t i = 0; i < a->nseries; i++)
		if (strcmp(a->series[i].key, key) == 0)
			return a->series[i].value;
	return -1;
}

/* A segment found corrupt half-way while --aggregate reads it: what it
 * gave is left out of the sums, as a snapshot leaves it out, and the
 * series first met in it come where they are met in the segments kept. */
TEST(aggset_corrupt_segment)
{
	struct tp_snapshot raw = { .unsorted = 1 }, bad = { .unsorted = 1 };
	struct ex_aggset *a = tp_xcalloc(1, sizeof(*a));
	size_t at = 0;

	seg_add(&raw, "/d/w.1.tally", 1, 1);
	ser_add(&raw, "c", TALLY_COUNTER, 10);
	seg_add(&raw, "/d/w.3.tally", 3, 1);
	ser_add(&raw, "y", TALLY_COUNTER, 4);
	ser_add(&raw, "c", TALLY_COUNTER, 20);
	seg_add(&bad, "/d/w.2.tally", 2, 1);
	ser_add(&bad, "y", TALLY_COUNTER, 100);
	ser_add(&bad, "x", TALLY_COUNTER, 5);
	ex_aggset_begin(a);
	ex_aggset_give(&raw.series[at++], a);
	ex_aggset_seg_end(&raw.segs[0], a);
	ex_aggset_give(&bad.series[0], a);
	ex_aggset_give(&bad.series[1], a);
	ex_aggset_seg_end(NULL, a);          /* w.2: corrupt half-way */
	ex_aggset_give(&raw.series[at++], a);
	ex_aggset_give(&raw.series[at++], a);
	ex_aggset_seg_end(&raw.segs[1], a);
	ex_aggset_end_read(a, &raw);
	ex_aggset_finish(a, NULL, 0);
	a->refs = 1;
	CHECK(a->nents == 3 && a->agg.nsegs == 2 && a->agg.nseries == 2);
	CHECK(agg_value(&a->agg, "c") == 30);
	CHECK(agg_value(&a->agg, "y") == 4);
	CHECK(agg_value(&a->agg, "x") == -1);
	CHECK(strcmp(a->agg.series[0].key, "c") == 0 &&
	      strcmp(a->agg.series[1].key, "y") == 0);
	CHECK(a->agg.series[0].nprocs == 2 && a->agg.series[1].nprocs == 1 &&
	      a->agg.series[1].pids[0] == 3);
	ex_aggset_put(a);
	tp_snapshot_free(&raw);
	tp_snapshot_free(&bad);
}

/* One scrape of --aggregate made of @raw: its sums in *@out (a
 * reference, let go with ex_aggset_put()). */
static struct ex_aggset *retain_scrape(struct ex_retain *r,
				       struct tp_snapshot *raw, int complete)
{
	struct ex_aggset *a = tp_xcalloc(1, sizeof(*a));

	ex_aggset_of_snapshot(a, raw);
	tp_snapshot_free(raw);
	ex_retain_update(r, a, complete);
	ex_aggset_finish(a, r->gone, r->ngone);
	a->refs++;
	return a;
}

TEST(retain)
{
	struct ex_retain r = { 0 };
	struct tp_snapshot s1 = { .unsorted = 1 }, s2 = { .unsorted = 1 };
	struct tp_snapshot s3 = { .unsorted = 1 };
	struct ex_aggset *a;

	/* Scrape 1: worker 1 (c, g, r) and worker 2 (c). */
	seg_add(&s1, "/d/w.1.tally", 1, 5);
	ser_add(&s1, "c", TALLY_COUNTER, 10);
	ser_add(&s1, "g", TALLY_GAUGE, 3);
	ser_add(&s1, "r", TALLY_COUNTER, 7);
	seg_add(&s1, "/d/w.2.tally", 2, 1);
	ser_add(&s1, "c", TALLY_COUNTER, 20);
	a = retain_scrape(&r, &s1, 1);
	CHECK(r.ngone == 0);
	CHECK(agg_value(&a->agg, "c") == 30);
	CHECK(a->nents == 4 && a->agg.nseries == 3);
	ex_aggset_put(a);

	/* Scrape 2: worker 1 removed r (its generation moved); worker 2's
	 * file is there but could not be read: carried, not retired. */
	seg_add(&s2, "/d/w.1.tally", 1, 6);
	ser_add(&s2, "c", TALLY_COUNTER, 11);
	ser_add(&s2, "g", TALLY_GAUGE, 3);
	skip_add(&s2, "/d/w.2.tally", EACCES);
	a = retain_scrape(&r, &s2, 1);
	CHECK(r.ngone == 1 && r.segments_retired == 0);
	CHECK(a->agg.nsegs == 2 && a->agg.segs[1].stale && a->nents == 3);
	CHECK(agg_value(&a->agg, "c") == 31);
	CHECK(agg_value(&a->agg, "r") == 7);   /* removed, retired */
	CHECK(agg_value(&a->agg, "g") == 3);
	ex_aggset_put(a);

	/* Scrape 3: worker 2's file is gone, worker 1's gauge too (a gauge
	 * is not retained). */
	seg_add(&s3, "/d/w.1.tally", 1, 7);
	ser_add(&s3, "c", TALLY_COUNTER, 12);
	a = retain_scrape(&r, &s3, 1);
	CHECK(r.segments_retired == 1 && r.ngone == 2);
	CHECK(agg_value(&a->agg, "c") == 32);
	CHECK(agg_value(&a->agg, "r") == 7);
	CHECK(agg_value(&a->agg, "g") == -1);
	ex_aggset_put(a);

	/* Scrape 4: the directory could not be listed (nothing read):
	 * worker 1 is carried, not retired, and comes back uncounted
	 * twice in scrape 5. */
	{
		struct tp_snapshot s4 = { .unsorted = 1 };
		struct tp_snapshot s5 = { .unsorted = 1 };

		a = retain_scrape(&r, &s4, 0);
		CHECK(r.segments_retired == 1 && a->agg.nsegs == 1 &&
		      a->agg.segs[0].stale);
		CHECK(agg_value(&a->agg, "c") == 32);
		ex_aggset_put(a);
		seg_add(&s5, "/d/w.1.tally", 1, 7);
		ser_add(&s5, "c", TALLY_COUNTER, 13);
		a = retain_scrape(&r, &s5, 1);
		CHECK(r.segments_retired == 1);
		CHECK(agg_value(&a->agg, "c") == 33);
		ex_aggset_put(a);
	}
	ex_retain_free(&r);
}
