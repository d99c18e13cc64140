"""Hostile clients for exporter-auth (auth.sh) and exporter-auth-timing
(auth-timing.sh).  argv: COMMAND PORT ...

Pass or fail depends on what the exporter answered (statuses, what the
attacker held), never on how fast: the time bounds below are checked
only with AUTH_TIMING=1 in the environment (exporter-auth-timing, CTest
label "timing", which tools/run-tests.sh reports without failing);
otherwise the times are printed.

timing PORT USER PASSWORD
    Median time of a failed login with a known user and with an unknown
    one, interleaved (21 each, after 4 of warm-up).  Exit 0 when the two
    medians are within 10% of each other (3 tries: the machine is shared);
    timing only (exporter-unit webconfig_login_cost counts what each costs).
flood PORT USER PASSWORD SECONDS
    24 clients from 127.0.0.1 send wrong passwords without pause; once
    the exporter refuses them (429: their address's places in the queue
    are taken; never within 10 s fails), a client from 127.0.0.2 logs in (the first login: not
    remembered yet) and then scrapes every 0.2 s, at least 3 times and
    until SECONDS after the start; then the flood stops.  Exit 0 when
    every scrape of the right client got 200 (timed: within SLOW_S, and
    the first login, which waits for bcrypt behind the attacker's,
    within 5 s).
spread PORT USER PASSWORD SECONDS
    16 clients, 4 from each of 127.0.0.1 to 127.0.0.4, send wrong
    passwords 10 ms apart (fewer addresses than queue places, so they
    can fill the queue between them); once each address has been
    refused (429: its places are taken, and so the queue's 8), a client
    from 127.0.0.9 makes its first login once, and the flood stops when
    it is answered (or after SECONDS, a bound for a hang).  Exit 0 when
    that login got 200 (timed: within 5 s).
slow PORT SECONDS NCONN MAXHELD
    NCONN clients from 127.0.0.1 open connections and send a request one
    byte a second, reconnecting when cut, while a client from 127.0.0.2
    scrapes every 0.5 s, for SECONDS and at least until the attacker has
    been seen holding MAXHELD connections (or 30 s, a bound for a hang)
    and 3 scrapes were made after that.  Exit 0 when every scrape got 200
    (timed: within SLOW_S), the attacker never held more than MAXHELD
    connections at once and was seen holding MAXHELD (its share full).
"""
import os, socket, statistics, subprocess, sys, threading, time

import rawhttp

cmd, port = sys.argv[1], int(sys.argv[2])
# A scrape slower than this counts as starved (see slow()), when timed.
TIMED = os.environ.get("AUTH_TIMING") == "1"
SLOW_S = 2.5 if TIMED else float("inf")
FIRST_S = 5.0 if TIMED else float("inf")
# Without time bounds, a request still ends: a hang is a failure.
TIMEOUT_S = 10 if TIMED else 30


def request(src, path="/metrics", auth=None, timeout=TIMEOUT_S):
    """One GET on a new connection from address src: (status, seconds)."""
    t = time.monotonic()
    status = rawhttp.get(port, src, path, auth, timeout)
    return status, time.monotonic() - t


def timing(user, password):
    for attempt in range(3):
        known, unknown = [], []
        for i in range(25):
            a = request("127.0.0.1", auth="%s:wrong%d" % (user, i))
            b = request("127.0.0.1", auth="nosuchuser%d:wrong%d" % (i, i))
            if a[0] != 401 or b[0] != 401:
                print("unexpected status", a[0], b[0])
                return 1
            if i >= 4:
                known.append(a[1])
                unknown.append(b[1])
        mk, mu = statistics.median(known), statistics.median(unknown)
        ratio = mu / mk
        print("failed login: known user %.1f ms, unknown user %.1f ms "
              "(medians of 21, ratio %.3f)" % (mk * 1e3, mu * 1e3, ratio))
        if 0.9 <= ratio <= 1.1:
            return 0
    return 1


codes_lock = threading.Lock()


def attack(nthreads, end, send):
    """Starts nthreads attackers (daemons); attacker k calls send(k, i) for
    its i-th try, which returns the status, until time end or until the
    event returned is set.  Returns the threads, the count of each status
    (complete once the threads are joined) and that event.  A caller that
    is done sets the event and need not join: an attacker's login in the
    queue waits for the bcrypt checks of those before it."""
    codes = {}
    lock = codes_lock
    stop = threading.Event()

    def attacker(k):
        i = 0
        while not stop.is_set() and (end is None or time.monotonic() < end):
            st = send(k, i)
            i += 1
            with lock:
                codes[st] = codes.get(st, 0) + 1

    ts = [threading.Thread(target=attacker, args=(k,), daemon=True)
          for k in range(nthreads)]
    for t in ts:
        t.start()
    return ts, codes, stop


def refused(codes, lock, n, limit):
    """Waits until codes (attack()'s, guarded by lock) counts n answers
    429 (the queue places the attackers may take are taken: True), or
    limit seconds (False)."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        with lock:
            if codes.get(429, 0) >= n:
                return True
        time.sleep(0.02)
    return False


def flood(user, password, seconds):
    end = time.monotonic() + seconds
    ts, codes, stop = attack(24, None, lambda k, i: request(
        "127.0.0.1", auth="%s:bad%d.%d" % (user, k, i))[0])
    full = refused(codes, codes_lock, 1, 10)
    good = "%s:%s" % (user, password)
    st, first = request("127.0.0.2", auth=good)
    worst, n, bad = 0.0, 0, 0
    # At least three scrapes under the flood, however long the first
    # login took on a loaded machine: the attackers go on until then.
    while time.monotonic() < end - 0.3 or n < 3:
        s2, dt = request("127.0.0.2", auth=good)
        n += 1
        worst = max(worst, dt)
        bad += s2 != 200 or dt > SLOW_S
        time.sleep(0.2)
    stop.set()
    with codes_lock:
        codes = dict(codes)
    print("flood of wrong passwords (status: count) %s; first login: %d in "
          "%.2f s; then %d scrapes, %d slow or failed, slowest %.2f s" %
          (dict(sorted(codes.items())), st, first, n, bad, worst))
    return 0 if full and st == 200 and first < FIRST_S and bad == 0 else 1


def spread(user, password, seconds):
    end = time.monotonic() + seconds
    full = set()  # the addresses refused at least once

    def send(k, i):
        st, _ = request("127.0.0.%d" % (1 + k % 4),
                        auth="%s:bad%d.%d" % (user, k, i))
        if st == 429:
            full.add(k % 4)
        # 16 clients 10 ms apart still take a freed place within a
        # millisecond or so, and leave the CPUs to the exporter.
        time.sleep(0.01)
        return st

    ts, codes, stop = attack(16, end, send)
    while len(full) < 4 and time.monotonic() < end:
        time.sleep(0.02)
    # One try, no retry on 429: Prometheus's first scrape after a restart
    # of the exporter.  Before the queue made room for an address with
    # fewer logins waiting, this was 429 for as long as the flood lasted.
    st, first = request("127.0.0.9", auth="%s:%s" % (user, password))
    stop.set()
    with codes_lock:
        codes = dict(codes)
    print("wrong passwords from 4 addresses (status: count) %s; first "
          "login from a fifth: %d in %.2f s" %
          (dict(sorted(codes.items())), st, first))
    return 0 if st == 200 and first < FIRST_S and len(full) == 4 else 1


def slow(seconds, nconn, maxheld):
    start = time.monotonic()
    done = threading.Event()
    held = [0]
    full_at = [None]  # when the attacker was first seen holding maxheld

    def one():
        while not done.is_set():
            s = socket.socket()
            s.settimeout(5)
            try:
                s.bind(("127.0.0.1", 0))
                s.connect(("127.0.0.1", port))
                s.sendall(b"GET /metrics HTTP/1.1\r\n")
                while not done.wait(1):
                    s.sendall(b"X")
            except OSError:
                pass
            s.close()
            time.sleep(0.05)

    def count():
        # Connections from 127.0.0.1 that the exporter accepted and holds
        # (ss -p names the process of a socket; one still in the listen
        # backlog has none).
        while not done.is_set():
            out = subprocess.run(
                ["ss", "-tnHp", "state", "established", "( sport = :%d )" %
                 port], capture_output=True, text=True).stdout
            now = sum(1 for l in out.splitlines()
                      if "users:((" in l and
                      l.split()[3].startswith("127.0.0.1:"))
            held[0] = max(held[0], now)
            if now >= maxheld and full_at[0] is None:
                full_at[0] = time.monotonic()
            done.wait(0.25)

    ts = [threading.Thread(target=one, daemon=True) for _ in range(nconn)]
    for t in ts:
        t.start()
    c = threading.Thread(target=count, daemon=True)
    c.start()
    time.sleep(1.0)
    worst, n, bad, after = 0.0, 0, 0, 0
    # Scrapes for SECONDS, and on until 3 of them were made while the
    # attacker held its whole share (30 s: a bound for a hang).
    while (time.monotonic() < start + seconds - 0.5 or after < 3) and \
            time.monotonic() < start + 30:
        full = full_at[0] is not None
        st, dt = request("127.0.0.2", timeout=max(15, TIMEOUT_S))
        n += 1
        after += full
        worst = max(worst, dt)
        # The aim is 1 s; the bound is looser because this client's own
        # threads share the host's CPUs with the exporter.  Without the
        # per-address share of connections the scrapes would wait
        # behind the attacker's.
        bad += st != 200 or dt > SLOW_S
        time.sleep(0.5)
    done.set()
    c.join()
    print("%d slow connections cycling from 127.0.0.1 (at most %d held by "
          "the exporter); %d scrapes from 127.0.0.2 (%d with its share "
          "full), %d slow or failed, slowest %.2f s" %
          (nconn, held[0], n, after, bad, worst))
    return 0 if after >= 3 and bad == 0 and held[0] == maxheld else 1


if cmd == "timing":
    sys.exit(timing(sys.argv[3], sys.argv[4]))
elif cmd == "flood":
    sys.exit(flood(sys.argv[3], sys.argv[4], float(sys.argv[5])))
elif cmd == "spread":
    sys.exit(spread(sys.argv[3], sys.argv[4], float(sys.argv[5])))
elif cmd == "slow":
    sys.exit(slow(float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])))
sys.exit(2)
