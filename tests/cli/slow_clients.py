#!/usr/bin/env python3
"""slow_clients.py URL TOKEN: slow clients against a running gpuorch server on loopback
(for test_slow_clients.sh; not a test itself).

300 connections from 127.0.0.2 .. 127.0.0.6 (60 each, under the per-address limit of
64) trickle a byte a second: half never finish their headers, half send headers that
declare a 1000-byte body and then trickle the body. Meanwhile a normal client on
127.0.0.1 asks for /healthz and the job list every 0.2 s. Then 80 connections from
127.0.0.7 show the per-address limit. Checks:
  - the normal client is answered within 2 s every time, throughout;
  - every trickling connection is cut by the server at its deadline: not before 9 s
    (libmicrohttpd's idle timeout of 30 s never fires: a byte a second is never idle),
    and within 14 s of its start (headers: 10 s; the body: 10 s after the headers plus
    1000 bytes at 32 KiB/s);
  - of 80 connections from one address, at most 64 stay open; the rest are closed at
    once, and the normal client still gets in.
Prints one line of figures; exits 1 with the reason when a check fails."""
import socket
import sys
import threading
import time
import urllib.request

URL, TOKEN = sys.argv[1], sys.argv[2]
HOST, PORT = URL.split("//")[1].split(":")
PORT = int(PORT)
N_ADDR, PER_ADDR = 5, 60
failures = []


def fail(msg):
    failures.append(msg)


def normal_client(stop, worst):
    """GET /healthz and /api/v1/jobs until stop; the slowest answer in worst[0]."""
    while not stop.is_set():
        for path, auth in (("/healthz", False), ("/api/v1/jobs?limit=5", True)):
            rq = urllib.request.Request(URL + path)
            if auth:
                rq.add_header("Authorization", "Bearer " + TOKEN)
            t = time.monotonic()
            try:
                with urllib.request.urlopen(rq, timeout=10) as r:
                    r.read()
                    ok = r.status == 200
            except Exception as e:  # noqa: BLE001 - any failure is the finding
                ok = False
                fail("normal client: %s %s" % (path, e))
            dt = time.monotonic() - t
            worst[0] = max(worst[0], dt)
            if ok and dt > 2:
                fail("normal client: %s took %.1f s" % (path, dt))
        time.sleep(0.2)


def trickle(addr, body, out):
    """One slow client; appends (seconds until the server cut it, or None)."""
    s = socket.socket()
    s.bind((addr, 0))
    s.settimeout(30)
    t0 = time.monotonic()
    try:
        s.connect((HOST, PORT))
        if body:
            s.sendall(b"POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                      + TOKEN.encode() + b"\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 1000\r\n\r\n")
        else:
            s.sendall(b"GET /api/v1/jobs HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        s.setblocking(False)
        while time.monotonic() - t0 < 25:
            try:
                if s.recv(4096) == b"":
                    break  # closed by the server
            except BlockingIOError:
                pass
            s.send(b"a")
            time.sleep(1)
        else:
            out.append(None)
            return
    except (ConnectionError, OSError):
        pass
    out.append(time.monotonic() - t0)
    s.close()


def main():
    stop = threading.Event()
    worst = [0.0]
    nc = threading.Thread(target=normal_client, args=(stop, worst))
    nc.start()

    cut = []
    threads = []
    for a in range(N_ADDR):
        for i in range(PER_ADDR):
            t = threading.Thread(target=trickle, args=("127.0.0.%d" % (a + 2), i % 2, cut))
            t.start()
            threads.append(t)
    for t in threads:
        t.join()
    never = sum(1 for c in cut if c is None)
    early = [c for c in cut if c is not None and c < 9]
    late = [c for c in cut if c is not None and c > 14]
    if len(cut) != N_ADDR * PER_ADDR:
        fail("%d of %d slow clients reported" % (len(cut), N_ADDR * PER_ADDR))
    if never:
        fail("%d slow clients were never cut off" % never)
    if early:
        fail("%d slow clients were cut before 9 s (first at %.1f s)" % (len(early), min(early)))
    if late:
        fail("%d slow clients were cut after 14 s (last at %.1f s)" % (len(late), max(late)))

    # the per-address limit: 80 from one address, at most 64 kept
    socks, closed = [], 0
    for i in range(80):
        s = socket.socket()
        s.bind(("127.0.0.7", 0))
        s.connect((HOST, PORT))
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        socks.append(s)
    time.sleep(1)
    for s in socks:
        s.setblocking(False)
        try:
            if s.recv(4096) == b"":
                closed += 1
        except BlockingIOError:
            pass
        except ConnectionError:
            closed += 1
    kept = len(socks) - closed
    if kept > 64 or kept < 60:
        fail("of 80 connections from one address %d stayed open (limit 64)" % kept)
    time.sleep(0.5)
    for s in socks:
        s.close()
    stop.set()
    nc.join()
    cuts = [c for c in cut if c is not None]
    print("slow clients: %d cut between %.1f s and %.1f s; one address held %d of 80; "
          "the normal client's slowest answer %.2f s"
          % (len(cuts), min(cuts) if cuts else 0, max(cuts) if cuts else 0, kept, worst[0]))
    if failures:
        for f in failures[:20]:
            print("FAIL:", f, file=sys.stderr)
        sys.exit(1)


main()
