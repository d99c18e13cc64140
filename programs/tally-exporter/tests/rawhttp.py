"""rawhttp.py: one GET on a new connection from a chosen loopback address,
for the exporter's tests of hostile clients (auth.py, flood.py), which
need to say where a request comes from: the exporter queues and limits
logins by address, and no HTTP client library lets a test choose it."""
import base64, socket


def get(port, src, path="/metrics", auth=None, timeout=20):
    """GET path from address src to 127.0.0.1:port, with Basic credentials
    auth ("user:password") when given, on a connection the answer closes.
    Returns the status; 0 when none came within timeout or the answer was
    not HTTP."""
    s = socket.socket()
    s.settimeout(timeout)
    try:
        s.bind((src, 0))
        s.connect(("127.0.0.1", port))
        h = "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" % path
        if auth:
            h += "Authorization: Basic %s\r\n" % base64.b64encode(
                auth.encode()).decode()
        s.sendall((h + "\r\n").encode())
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
