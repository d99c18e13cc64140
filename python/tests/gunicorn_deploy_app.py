"""The WSGI app of test_deploy.py, in two versions: the version is read
from the file $DEPLOY_VERSION_FILE when a worker imports the app, so
that a gunicorn reload (HUP) or restart brings the other one.  Version 2
changes, as $DEPLOY_CHANGE says, the help text of deploy_hits ("help")
or the type of deploy_size, a counter in 1 and a gauge in 2 ("type");
deploy_requests is the same in both."""
import os
import time

import tally_metrics as tally
from wsgi_common import metrics, text

with open(os.environ["DEPLOY_VERSION_FILE"]) as f:
    VERSION = int(f.read().strip())
CHANGE = os.environ["DEPLOY_CHANGE"]
V2 = VERSION == 2

REQUESTS = tally.Counter("deploy_requests", "Requests served.", ["path"])
HITS = tally.Counter(
    "deploy_hits",
    "Hits, as version 2 counts them." if V2 and CHANGE == "help"
    else "Hits.")
if V2 and CHANGE == "type":
    SIZE = tally.Gauge("deploy_size", "Size.")
else:
    SIZE = tally.Counter("deploy_size", "Size.")


def app(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/metrics":
        return metrics(start_response)
    if path == "/version":
        return text(start_response, f"{VERSION} {os.getpid()}".encode())
    if path == "/slow":
        # Held until the test opens $DEPLOY_GATE (version 2 runs by
        # then), so that this worker counts after the redefinition,
        # into a child it makes then.
        deadline = time.monotonic() + 20
        while not os.path.exists(os.environ["DEPLOY_GATE"]) and \
                time.monotonic() < deadline:
            time.sleep(0.01)
        REQUESTS.labels("/slow").inc()
        HITS.inc()
        return text(start_response, f"{VERSION} {os.getpid()}".encode())
    REQUESTS.labels("/").inc()
    HITS.inc()
    if isinstance(SIZE, tally.Gauge):
        SIZE.set(VERSION)
    else:
        SIZE.inc()
    return text(start_response, b"ok\n")
