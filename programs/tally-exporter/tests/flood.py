"""Clients of exporter-flood (flood.sh).  argv: COMMAND PORT ...

addresses PORT SECONDS USERS...
    100 clients, one from each of 127.0.1.1 to 127.0.1.100, send wrong
    passwords without pause (for user alice, which is configured, and
    for users that are not); once the queue is full (a flood's login
    answered 429), a client from 127.0.0.2 makes the first login of each
    of USERS (configured, password 'right pass') once, one after the
    other, and the flood stops when the last is answered (or after
    SECONDS, a bound for a hang).  Prints the status of each login; exit
    0 when every one got 200.
slow PORT SECONDS NADDR NCONN
    NCONN clients from each of NADDR addresses (127.0.2.1 ...) open a
    connection and send a request one byte a second, reconnecting when
    cut or refused (0.2 s later: with more clients than places the table
    stays full, and those waiting for a place do not spin); from 1 s on,
    when every place is taken, a client from 127.0.0.2 scrapes every
    0.5 s (without keep-alive), 3 times at least and until SECONDS after
    the start, giving up after SCRAPE_TIMEOUT_S as Prometheus does.
    Prints the scrapes' statuses; exit 0 when every one got 200.  (A
    bound, not a measurement: a scrape that finds no place waits for the
    exporter to cut a slow connection, its request timeout of 10 s.)
"""
import socket, sys, threading, time

import rawhttp

cmd, port = sys.argv[1], int(sys.argv[2])
SCRAPE_TIMEOUT_S = 5


def request(src, auth, timeout=20):
    """One GET /metrics on a new connection from address src: status."""
    return rawhttp.get(port, src, auth=auth, timeout=timeout)


def addresses(seconds, users):
    stop = time.monotonic() + seconds
    done = threading.Event()
    counts = {}
    lock = threading.Lock()

    def flood(i):
        src = "127.0.1.%d" % (1 + i)
        k = 0
        while not done.is_set() and time.monotonic() < stop:
            user = "alice" if k % 2 else "mallory%d" % i
            st = request(src, "%s:wrong %d" % (user, k), timeout=5)
            with lock:
                counts[st] = counts.get(st, 0) + 1
            k += 1

    threads = [threading.Thread(target=flood, args=(i,), daemon=True)
               for i in range(100)]
    for t in threads:
        t.start()
    # The queue is full of wrong passwords once one of them is dropped.
    while 429 not in counts and time.monotonic() < stop:
        time.sleep(0.02)
    full = 429 in counts
    got = []
    for u in users:
        got.append(request("127.0.0.2", "%s:right pass" % u))
    # The flood's clients stop after their request in flight, unjoined:
    # those queued would wait for the bcrypt checks of the whole queue.
    done.set()
    with lock:
        counts = dict(counts)
    print("  first logins of %s: %s; the flood's answers: %s" %
          (" ".join(users), " ".join(map(str, got)),
           ", ".join("%d x%d" % kv for kv in sorted(counts.items()))))
    return full and all(st == 200 for st in got)


def get(src, timeout=10):
    """A GET /metrics without credentials: status (0: none in time)."""
    return rawhttp.get(port, src, timeout=timeout)


def slow(seconds, naddr, nconn):
    start = time.monotonic()
    done = threading.Event()
    req = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200

    def client(src):
        while not done.is_set():
            s = socket.socket()
            s.settimeout(2)
            try:
                s.bind((src, 0))
                s.connect(("127.0.0.1", port))
                for b in req:
                    s.sendall(bytes([b]))
                    if done.wait(1):
                        break
            except OSError:
                time.sleep(0.2)
            finally:
                s.close()

    threads = [threading.Thread(target=client, args=("127.0.2.%d" % (1 + a),),
                                daemon=True)
               for a in range(naddr) for _ in range(nconn)]
    for t in threads:
        t.start()
    time.sleep(1)  # every place is taken by now
    got = []
    while time.monotonic() < start + seconds - 1 or len(got) < 3:
        got.append(get("127.0.0.2", SCRAPE_TIMEOUT_S))
        time.sleep(0.5)
    done.set()
    for t in threads:
        t.join()
    print("  %d scrapes during the slow flood: %s" %
          (len(got), " ".join(map(str, got))))
    return all(st == 200 for st in got)


if cmd == "slow":
    sys.exit(0 if slow(float(sys.argv[3]), int(sys.argv[4]),
                       int(sys.argv[5])) else 1)
if cmd == "addresses":
    sys.exit(0 if addresses(float(sys.argv[3]), sys.argv[4:]) else 1)
sys.exit(2)
