#!/usr/bin/env python3
"""bad_input.py URL ADMIN_TOKEN SERVER_PID HTTP_C: a table of bad requests for every route
of the server's route table (read from HTTP_C, src/server/http.c, so that a new route
without cases fails here), for test_bad_input.sh; not a test itself.

Each case must be answered 4xx with a JSON {"error": "..."} (never a 5xx, a hang or a
dropped connection), and /healthz must answer within 2 s after it. The table is run
three times; the server's resident memory after the third run must be within 16 MiB
of where it was after the first. Then hostile bodies are sent from six threads for
a few seconds while /healthz and the job list must keep answering within 1.5 s: a
slow body on one HTTP thread leaves the others answering. Prints figures; exits 1
with every failure."""
import http.client
import json
import re
import sys
import threading
import time

URL, ADMIN, PID, HTTP_C = sys.argv[1:5]
HOST, PORT = URL.split("//")[1].split(":")
PORT = int(PORT)
failures = []


def request(method, path, body=None, headers=None, token=None, timeout=20):
    """(status, body bytes) or (None, reason)."""
    c = http.client.HTTPConnection(HOST, PORT, timeout=timeout)
    h = dict(headers or {})
    if token:
        h["Authorization"] = "Bearer " + token
    try:
        c.putrequest(method, path, skip_accept_encoding=True)
        if body is not None and "Content-Length" not in h and "Transfer-Encoding" not in h:
            h["Content-Length"] = str(len(body))
        for k, v in h.items():
            c.putheader(k, v)
        c.endheaders()
        if body is not None:
            if h.get("Transfer-Encoding") == "chunked":
                for i in range(0, len(body), 65536):
                    part = body[i:i + 65536]
                    c.send(b"%x\r\n" % len(part) + part + b"\r\n")
                c.send(b"0\r\n\r\n")
            else:
                c.send(body)
        r = c.getresponse()
        return r.status, r.read()
    except Exception as e:  # noqa: BLE001 - a dropped connection is a finding
        return None, repr(e)
    finally:
        c.close()


def rss_kib():
    with open("/proc/%s/status" % PID) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def make_tokens():
    toks = {"admin": ADMIN}
    for role, extra in (("agent", {}), ("member", {"team": "search"})):
        st, b = request("POST", "/api/v1/tokens",
                        json.dumps(dict(role=role, name="bad-" + role, **extra)).encode(),
                        token=ADMIN)
        if st != 201:
            sys.exit("cannot make a %s token: %s %r" % (role, st, b))
        toks[role] = json.loads(b)["token"]
    # one job, so that ids that exist are tried as well as ids that do not
    st, b = request("POST", "/api/v1/jobs",
                    b'{"name": "target", "team": "search", "gpus": 1, "command": ["x"]}',
                    {"Content-Type": "application/json"}, ADMIN)
    if st != 201:
        sys.exit("cannot submit the target job: %s %r" % (st, b))
    return toks


# values each number or name field must refuse: of the wrong type, out of range, not a
# whole number, too large for any integer
NUMBERS = [b"-1", b"1.5", b"1e400", b"99999999999999999999999", b"\"abc\"", b"NaN",
           b"Infinity", b"[1]", b"{}", b"\"\"", b"0x10", b"1e5", b"true"]
GENERIC_BODIES = [
    ("empty", b""),
    ("blank", b"   \n"),
    ("deep array", b"[" * 100000),
    ("deep object", b'{"a":' * 20000 + b"1" + b"}" * 20000),
    ("invalid UTF-8", b'{"name": "\xff\xfe"}'),
    ("raw NUL", b'{"name": "a\x00b"}'),
    ("escaped NUL", b'{"name": "a\\u0000b"}'),
    ("array", b"[]"),
    ("string", b'"x"'),
    ("number", b"42"),
    ("null", b"null"),
    ("true", b"true"),
    ("unknown field", b'{"colour": "red"}'),
    ("trailing garbage", b"{} x"),
    ("YAML", b"a: b\n"),
    ("two objects", b"{}{}"),
    ("lone surrogate", b'{"name": "\\ud800"}'),
    ("huge string", b'{"name": "' + b"a" * 900000 + b'"}'),
    ("many keys", b"{" + b",".join(b'"k%d": 1' % i for i in range(60000)) + b"}"),
]


def field_bodies(template, field, bad):
    """Bodies of template (a dict) with field set to each of bad (JSON texts), and the
    field given twice."""
    out = []
    key = json.dumps(field)
    for n in bad:
        d = json.dumps(template)
        d = d.replace(key + ": " + json.dumps(template[field]), key + ": " + n.decode(), 1)
        out.append(("%s=%s" % (field, n.decode()[:20]), d.encode()))
    d = json.dumps(template)[:-1]
    out.append(("duplicate %s" % field,
                (d + ", " + key + ": " + json.dumps(template[field]) + "}").encode()))
    return out


JOB = {"name": "n", "team": "search", "gpus": 1, "command": ["x"]}
# route -> (token, path to use, field templates for its body, accepted statuses)
NAMES = [b"[1]", b"{}", b"\"\"", b"\"a b\"", b"\"a\\u0001\"", b"1e400"]
# route -> (token, path to use, [(template, field, values it must refuse)])
BODY_ROUTES = {
    ("POST", "/api/v1/jobs"): ("admin", "/api/v1/jobs", [
        (JOB, "gpus", NUMBERS + [b"17"]),
        (JOB, "name", NAMES),
        (JOB, "command", [b"{}", b"[]", b"[[1]]", b"\"\"", b"[\"\"]", b"1e400"]),
        (dict(JOB, workers=1), "workers", NUMBERS + [b"0"]),
        (dict(JOB, gpu_memory="1GiB", gpus=None), "gpu_memory",
         [b"-1", b"\"0\"", b"\"1e400GiB\"", b"\"99999999999999999999GiB\"", b"[1]", b"{}"]),
        (dict(JOB, env={"A": "b"}), "env",
         [b"[]", b"\"x\"", b"{\"1A\": \"x\"}", b"{\"A\": [1]}", b"{\"A\": {}}"]),
        (dict(JOB, priority="low"), "priority", [b"5", b"\"urgent\"", b"[]", b"{}", b"\"\""]),
    ]),
    ("PATCH", "/api/v1/jobs/{}"): ("admin", "/api/v1/jobs/1", [
        ({"priority": "high"}, "priority",
         [b"5", b"-1", b"\"urgent\"", b"[]", b"{}", b"\"\"", b"true", b"1e400"])]),
    ("PUT", "/api/v1/teams/{}"): ("admin", "/api/v1/teams/search", [
        ({"burst_gpus": 20}, "burst_gpus", [b"-1", b"1e400", b"\"abc\"", b"[]", b"{}", b"true",
                                            b"NaN"]),
        ({"weight": 1}, "weight", [b"-1", b"\"abc\"", b"1e400", b"[]", b"{}", b"true"]),
        ({"budget_gpu_hours_per_month": 1}, "budget_gpu_hours_per_month",
         [b"-1", b"1e13", b"\"x\"", b"[]"])]),
    ("POST", "/api/v1/tokens"): ("admin", "/api/v1/tokens", [
        ({"role": "viewer", "name": "x"}, "role", [b"5", b"\"root\"", b"[]", b"{}", b"null",
                                                   b"\"\""]),
        ({"role": "viewer", "name": "x"}, "name", [b"5", b"[]", b"{}"]),
        ({"role": "member", "team": "search"}, "team", [b"\"nobody\"", b"5", b"[]", b"{}"])]),
    ("POST", "/api/v1/agent/heartbeat"): ("agent", "/api/v1/agent/heartbeat", [
        ({"node": "nope", "workers": []}, "node", [b"5", b"[]", b"{}", b"null", b"\"\""]),
        ({"node": "nope", "workers": []}, "workers",
         [b"\"x\"", b"{}", b"5", b"[5]", b"[{\"job\": \"x\"}]", b"[{\"job\": 1e400}]",
          b"[{\"job\": -1, \"rank\": -1}]"])]),
}
ID_PARAMS = ["abc", "0", "-1", "1.5", "99999999999999999999", "1" + "0" * 400, "%00", "%ff",
             "1%2F2", "1e3", "%20", "+1", "0x1", "999999"]
NAME_PARAMS = ["nobody", "%00", "%ff", "a" * 3000, "..", "%2e%2e", "search%00"]
QUERIES = {
    "/api/v1/jobs": ["state=x", "state=", "state=%00", "limit=-1", "limit=abc",
                     "limit=99999999999999999999", "limit=1.5", "state=pending,,x"],
    "/api/v1/jobs/1/logs": ["rank=-1", "rank=abc", "rank=99999999999999999999", "offset=-5",
                            "offset=abc", "run=99999999999", "run=1.5", "rank=5"],
    "/api/v1/usage": ["group_by=colour", "group_by=team,team", "from=abc",
                      "to=1e9", "from=99999999999999999999999", "format=xml", "include_idle=maybe",
                      "from=%00"],
    "/api/v1/utilization": ["minutes=0", "minutes=abc", "minutes=99999999999",
                            "minutes=-1", "minutes=1.5"],
    "/api/v1/agent/logs/1/0": ["run=abc", "run=0", "offset=-1", "offset=abc",
                               "run=99999999999999999999&offset=0", "", "run=1"],
}


def read_routes():
    text = open(HTTP_C).read()
    return re.findall(r'\{"(GET|POST|PUT|PATCH|DELETE)", "([^"]+)", ACT_\w+, \w+\}', text)


def cases(toks):
    """(name, method, path, body, headers, token, allowed statuses)."""
    out = []
    routes = read_routes()
    if len(routes) < 15:
        failures.append("read only %d routes from %s" % (len(routes), HTTP_C))
    ct = {"Content-Type": "application/json"}
    for method, pattern in routes:
        covered = False
        if (method, pattern) in BODY_ROUTES:
            covered = True
            tok, path, fields = BODY_ROUTES[(method, pattern)]
            for name, body in GENERIC_BODIES:
                out.append((name, method, path, body, ct, toks[tok]))
            for tmpl, field, bad in fields:
                for name, body in field_bodies(tmpl, field, bad):
                    out.append((name, method, path, body, ct, toks[tok]))
            out.append(("2 MiB declared", method, path, b"a" * (2 << 20), ct, toks[tok]))
            out.append(("1 GiB declared", method, path, b"a" * 1024,
                        dict(ct, **{"Content-Length": str(1 << 30)}), toks[tok]))
            out.append(("1.5 MiB chunked", method, path, b" " * (3 << 19),
                        dict(ct, **{"Transfer-Encoding": "chunked"}), toks[tok]))
        if "{}" in pattern or "{*}" in pattern:
            covered = True
            params = NAME_PARAMS if "teams" in pattern or "web" in pattern else ID_PARAMS
            tok = "agent" if "/agent/" in pattern else "admin"
            for p in params:
                path = pattern.replace("{*}", p).replace("{}", p, 1).replace("{}", "0")
                if "/agent/logs/" in pattern:
                    path += "?run=1&offset=0"
                body = b"{}" if method in ("PUT", "PATCH", "POST") else None
                out.append(("param " + p[:20], method, path, body, ct, toks[tok]))
        base = pattern.replace("{}", "1", 1).replace("{}", "0")
        if base in QUERIES:
            covered = True
            tok = "agent" if "/agent/" in pattern else "admin"
            for q in QUERIES[base]:
                body = b"x" if method == "POST" else None
                out.append(("query " + q[:30], method, base + "?" + q, body, {}, toks[tok]))
        if method == "GET" and "{" not in pattern:
            covered = True
            # no token, a bad one, a huge one, a wrong role
            out.append(("no token", method, pattern, None, {}, None))
            out.append(("bad token", method, pattern, None, {}, "gpo_" + "A" * 43))
            out.append(("huge token", method, pattern, None, {}, "x" * 6000))
            if pattern.startswith("/api/v1/") and not pattern.startswith("/api/v1/agent"):
                out.append(("agent token", method, pattern, None, {}, toks["agent"]))
        if not covered:
            failures.append("route %s %s has no bad cases in bad_input.py" % (method, pattern))
    # outside the table: methods, paths, headers
    out.append(("unknown method", "BREW", "/api/v1/jobs", None, {}, ADMIN))
    out.append(("no route", "GET", "/api/v1/jobs/1/logs/more", None, {}, ADMIN))
    out.append(("double slash", "GET", "/api/v1//jobs", None, {}, ADMIN))
    out.append(("long path", "GET", "/api/v1/" + "a" * 6000, None, {}, ADMIN))
    out.append(("YAML typed JSON", "POST", "/api/v1/jobs", b"{\"name\": ",
                {"Content-Type": "application/yaml"}, ADMIN))
    out.append(("JSON typed YAML", "POST", "/api/v1/jobs", b"name: a\n", ct, ADMIN))
    return out


# answers that may be 2xx: public routes asked without a token, a member's own list
PUBLIC = {"/healthz", "/readyz", "/metrics", "/", "/web/{*}"}


def check(case, public_ok):
    name, method, path, body, headers, tok = case
    st, b = request(method, path, body, headers, tok)
    what = "%s %s [%s]" % (method, path[:60], name)
    if st is None:
        failures.append("%s: no answer: %s" % (what, b))
        return
    if public_ok and st < 300:
        return
    if not 400 <= st < 500:
        failures.append("%s: HTTP %d: %r" % (what, st, b[:200]))
        return
    try:
        err = json.loads(b)["error"]
        if not isinstance(err, str) or not err:
            raise ValueError
    except Exception:  # noqa: BLE001
        failures.append("%s: HTTP %d without a JSON error: %r" % (what, st, b[:200]))
    t = time.monotonic()
    hs, _ = request("GET", "/healthz", timeout=5)
    if hs != 200 or time.monotonic() - t > 2:
        failures.append("%s: /healthz answered %s after %.1f s" % (what, hs, time.monotonic() - t))


def run_table(table):
    for c in table:
        public = c[0] in ("no token", "bad token", "huge token", "agent token") and \
            (c[2] in PUBLIC or c[2].startswith("/web/"))
        check(c, public)


def hostile_in_parallel(toks, seconds=6):
    bodies = [
        (b"[x]\n" + b"[" * 65000, "application/yaml"),
        (b"{" + b",".join(b'"unknown_key_%d": 1' % i for i in range(40000)) + b"}",
         "application/json"),
        (json.dumps([dict(JOB, name="p%d" % i) for i in range(999)] + [{"name": "bad",
                    "gpus": "x"}]).encode(), "application/json"),
        (b"---\n" * 16000, "application/yaml"),
        (b'{"name": "a", "env": {' + b",".join(b'"V%d": "x"' % i for i in range(20000)) + b"}}",
         None),
        (b"- name: j\n  gpus: [" + b"1, " * 20000 + b"]\n", "application/yaml"),
    ]
    stop = threading.Event()
    sent = [0]

    def attacker(body, ct):
        while not stop.is_set():
            st, b = request("POST", "/api/v1/jobs", body, {"Content-Type": ct} if ct else {},
                            toks["member"], timeout=30)
            sent[0] += 1
            if st is None or not 400 <= st < 500:
                failures.append("hostile body %r...: HTTP %s %r" % (body[:30], st, b[:100]))

    threads = [threading.Thread(target=attacker, args=b) for b in bodies]
    for t in threads:
        t.start()
    worst, n = 0.0, 0
    t_end = time.monotonic() + seconds
    while time.monotonic() < t_end:
        for path, tok in (("/healthz", None), ("/api/v1/jobs?limit=5", ADMIN)):
            t = time.monotonic()
            st, _ = request("GET", path, token=tok, timeout=10)
            dt = time.monotonic() - t
            worst = max(worst, dt)
            n += 1
            if st != 200 or dt > 1.5:
                failures.append("while hostile bodies were read: %s answered %s in %.2f s"
                                % (path, st, dt))
        time.sleep(0.05)
    stop.set()
    for t in threads:
        t.join()
    return worst, n, sent[0]


def main():
    toks = make_tokens()
    table = cases(toks)
    run_table(table)
    rss1 = rss_kib()
    run_table(table)
    run_table(table)
    rss3 = rss_kib()
    if rss3 - rss1 > 16 << 10:
        failures.append("resident memory grew from %d to %d KiB over two runs of the table"
                        % (rss1, rss3))
    worst, n, sent = hostile_in_parallel(toks)
    print("bad input: %d cases x 3 runs; RSS %d KiB after the first, %d KiB after the third; "
          "%d hostile bodies in parallel, /healthz and the list answered %d times, the slowest "
          "in %.2f s" % (len(table), rss1, rss3, sent, n, worst))
    if failures:
        seen = set()
        for f in failures:
            if f not in seen:
                print("FAIL:", f, file=sys.stderr)
                seen.add(f)
        sys.exit(1)


main()
