"""Clients of exporter-flood (flood.sh).  argv: COMMAND PORT ...

addresses PORT SECONDS USERS...
    100 clients, one from each of 127.0.1.1 to 127.0.1.100, send wrong
    passwords without pause (for user alice, which is configured, and
    for users that are not) while a client from 127.0.0.2 makes the
    first login of each of USERS (configured, password 'right pass')
    once, one after the other.  Prints the status of each login; exit 0
    when every one got 200.
"""
import base64, socket, sys, threading, time

cmd, port = sys.argv[1], int(sys.argv[2])


def request(src, auth, timeout=20):
    """One GET /metrics on a new connection from address src: status."""
    s = socket.socket()
    s.settimeout(timeout)
    try:
        s.bind((src, 0))
        s.connect(("127.0.0.1", port))
        s.sendall(("GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                   "Authorization: Basic %s\r\n\r\n" %
                   base64.b64encode(auth.encode()).decode()).encode())
        data = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
        return int(data.split(b" ", 2)[1]) if data else 0
    except (OSError, ValueError, IndexError):
        return 0
    finally:
        s.close()


def addresses(seconds, users):
    stop = time.monotonic() + seconds
    counts = {}

    def flood(i):
        src = "127.0.1.%d" % (1 + i)
        k = 0
        while time.monotonic() < stop:
            user = "alice" if k % 2 else "mallory%d" % i
            st = request(src, "%s:wrong %d" % (user, k), timeout=5)
            counts[st] = counts.get(st, 0) + 1
            k += 1

    threads = [threading.Thread(target=flood, args=(i,), daemon=True)
               for i in range(100)]
    for t in threads:
        t.start()
    time.sleep(1.5)  # the queue is full of wrong passwords by now
    got = []
    for u in users:
        got.append(request("127.0.0.2", "%s:right pass" % u))
    for t in threads:
        t.join()
    print("  first logins of %s: %s; the flood's answers: %s" %
          (" ".join(users), " ".join(map(str, got)),
           ", ".join("%d x%d" % kv for kv in sorted(counts.items()))))
    return all(st == 200 for st in got)


if cmd == "addresses":
    sys.exit(0 if addresses(float(sys.argv[3]), sys.argv[4:]) else 1)
sys.exit(2)
