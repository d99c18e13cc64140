"""Load and hostile clients against tally-exporter.  argv: PORT PID.

1. 64 connections (keep-alive, HTTP/1.1) scrape /metrics for 4 s while,
   at the same time, hostile clients run: malformed request lines,
   oversized headers, a client that sends one byte a second.  Every
   scrape must succeed (status 200, full body).
2. The slow client is cut off (the exporter's request timeout, 3 s, is
   shorter than the load, so the cut happens under it).
3. The exporter's memory (VmRSS) stays bounded.
"""
import socket, sys, threading, time

port, pid = int(sys.argv[1]), int(sys.argv[2])
DUR = 4.0
stats = {"ok": 0, "err": 0}
lock = threading.Lock()
errors = []

def rss():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0

def read_response(f):
    status = f.readline()
    if not status:
        raise IOError("connection closed")
    code = int(status.split()[1])
    length = None
    chunked = False
    while True:
        h = f.readline()
        if h in (b"\r\n", b""):
            break
        k, _, v = h.decode().partition(":")
        if k.lower() == "content-length":
            length = int(v)
        if k.lower() == "transfer-encoding" and "chunked" in v.lower():
            chunked = True
    if chunked:  # a streamed scrape: chunks until one of size 0
        body = b""
        while True:
            size = int(f.readline().split(b";")[0], 16)
            chunk = f.read(size)
            if len(chunk) != size or f.readline() != b"\r\n":
                raise IOError("short chunk")
            if size == 0:
                return code, body
            body += chunk
    body = f.read(length) if length else b""
    if length is not None and len(body) != length:
        raise IOError("short body")
    return code, body

def worker():
    end = time.time() + DUR
    s = None
    while time.time() < end:
        try:
            if s is None:
                s = socket.create_connection(("127.0.0.1", port), timeout=10)
                f = s.makefile("rb")
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            code, body = read_response(f)
            if code != 200 or b"tally_exporter_scrape_duration_seconds" not in body:
                raise IOError(f"status {code}")
            with lock:
                stats["ok"] += 1
        except Exception as e:
            with lock:
                stats["err"] += 1
                errors.append(repr(e))
            try:
                s.close()
            except Exception:
                pass
            s = None
    if s:
        s.close()

def hostile(payload, expect_close=True):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(payload)
        data = s.recv(4096)
        s.close()
        return data
    except Exception as e:
        return repr(e).encode()

slow_result = {}
def slowloris():
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    t0 = time.time()
    req = b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + b"X-Slow: " + b"a" * 100
    try:
        for c in req:
            s.sendall(bytes([c]))
            time.sleep(1)
        slow_result["cut"] = None
    except OSError:
        slow_result["cut"] = time.time() - t0
    s.close()

rss0 = rss()
st = threading.Thread(target=slowloris)
st.start()
ts = [threading.Thread(target=worker) for _ in range(64)]
for t in ts:
    t.start()
bad = []
t_end = time.time() + DUR - 1
while time.time() < t_end:
    r = hostile(b"GARBAGE\r\n\r\n")
    if not (r.startswith(b"HTTP/1.1 4") or r == b""):
        bad.append(("garbage", r[:60]))
    r = hostile(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100000 + b"\r\n\r\n")
    if not (r.startswith(b"HTTP/1.1 4") or r == b"" or b"Error" in r):
        bad.append(("big header", r[:60]))
    r = hostile(b"\x00\xff\x16\x03\x01 binary\r\n\r\n")
    r = hostile(b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n" + b"x" * 1000)
    time.sleep(0.2)
for t in ts:
    t.join()
rss1 = rss()
print(f"scrapes: {stats['ok']} ok, {stats['err']} errors in {DUR:.0f} s with 64 connections; "
      f"exporter RSS {rss0} kB -> {rss1} kB")
if stats["err"] or stats["ok"] < 64:
    print("errors:", errors[:5])
    sys.exit(1)
if bad:
    print("unexpected answers:", bad[:3])
    sys.exit(1)
st.join(timeout=30)
cut = slow_result.get("cut")
print(f"slow client (1 byte/s) cut off after {cut} s")
if cut is None or cut > 15:
    sys.exit(1)
if rss1 > rss0 + 200 * 1024:
    print("RSS grew by more than 200 MiB")
    sys.exit(1)
print("ok")
