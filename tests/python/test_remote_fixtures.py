"""Self-tests of the remote-shard test servers (tests/python/remote_servers.py): nginx, s3rver and
the fault proxy, exercised with http.client and the curl CLI (not stoker). No timing assertions."""
import http.client
import http.server
import os
import re
import signal
import socket
import subprocess
import threading
import time
import xml.etree.ElementTree as ET

import pytest

import remote_servers as rs

EMPTY = rs.EMPTY_SHA256


def _data(n, seed=1):
    """n deterministic pseudo-random bytes."""
    import random
    return random.Random(seed).randbytes(n)


def _get(port, path, headers=None, method="GET", conn=None):
    c = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request(method, path, headers=headers or {})
    r = c.getresponse()
    body = r.read()
    return r, body, c


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purposes
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture()
def webroot(tmp_path):
    root = tmp_path / "www"
    (root / "train").mkdir(parents=True)
    data = _data(200_000)
    (root / "train" / "shard-000.tar").write_bytes(data)
    (root / "train" / "shard-000.idx").write_bytes(b"index\n" * 10)
    return root, data


@pytest.fixture()
def web(webroot, tmp_path):
    with rs.nginx(webroot[0], tmp_path / "nginx") as server:
        yield server


@pytest.fixture()
def s3(tmp_path):
    reason = rs.s3_unavailable_reason()
    if reason:
        pytest.skip(reason)
    with rs.s3_server(tmp_path / "s3") as server:
        yield server


@pytest.fixture()
def make_proxy(tmp_path):
    """Starts fault proxies; every one is stopped at the end of the test."""
    started = []

    def make(upstream_port, schedule=None):
        p = rs.FaultProxy(upstream_port, schedule, tmp_path / f"proxy{len(started)}.log")
        started.append(p)
        return p.start()

    yield make
    for p in started:
        p.stop()


# -------------------------------------------------------------------------------------------- nginx

def test_free_port_is_bindable():
    port = rs.free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_nginx_serves_file(web, webroot):
    r, body, _ = _get(web.port, "/train/shard-000.tar")
    assert r.status == 200
    assert body == webroot[1]
    assert web.url == f"http://127.0.0.1:{web.port}"
    r, _, _ = _get(web.port, "/train/missing.tar")
    assert r.status == 404
    reqs = web.requests(min_count=2)
    assert [(q["method"], q["path"], q["status"]) for q in reqs] == [
        ("GET", "/train/shard-000.tar", 200), ("GET", "/train/missing.tar", 404)]
    assert reqs[0]["bytes"] == len(webroot[1]) and reqs[0]["range"] is None


def test_nginx_range_and_access_log(web, webroot):
    r, body, _ = _get(web.port, "/train/shard-000.tar", {"Range": "bytes=10-19"})
    assert r.status == 206
    assert body == webroot[1][10:20]
    assert r.getheader("Content-Range") == f"bytes 10-19/{len(webroot[1])}"
    (rec,) = web.requests(min_count=1)
    assert rec["range"] == "bytes=10-19" and rec["status"] == 206 and rec["bytes"] == 10
    assert rec["method"] == "GET" and rec["path"] == "/train/shard-000.tar"


def test_nginx_etag_if_match(web, webroot):
    path = webroot[0] / "train" / "shard-000.tar"
    r, _, conn = _get(web.port, "/train/shard-000.tar", method="HEAD")
    etag = r.getheader("ETag")
    st = os.stat(path)
    assert etag == '"%x-%x"' % (int(st.st_mtime), st.st_size)  # ngx_http_set_etag
    r, body, _ = _get(web.port, "/train/shard-000.tar", {"If-Match": etag, "Range": "bytes=0-99"}, conn=conn)
    assert r.status == 206 and body == webroot[1][:100]
    r, _, conn = _get(web.port, "/train/shard-000.tar", {"If-Match": '"wrong"'}, conn=conn)
    assert r.status == 412
    # "shard changed mid-epoch": a rewrite (new size and mtime) gets a new ETag; the old one fails
    path.write_bytes(webroot[1][:1000])
    os.utime(path, (st.st_mtime + 10, st.st_mtime + 10))
    r, _, _ = _get(web.port, "/train/shard-000.tar", {"If-Match": etag, "Range": "bytes=0-99"})
    assert r.status == 412
    reqs = web.requests(min_count=4)
    assert [q["status"] for q in reqs] == [200, 206, 412, 412]
    assert reqs[2]["if_match"] == '"wrong"' and reqs[3]["if_match"] == etag
    assert [q["connection_requests"] for q in reqs] == [1, 2, 3, 1]


def test_nginx_closes_connection_after_412(web):
    """nginx 1.22 answers 412 with `Connection: keep-alive` and then closes the connection (the
    not-modified filter finalizes the request with an error): a client must not reuse it."""
    r, _, conn = _get(web.port, "/train/shard-000.idx", {"If-Match": '"wrong"'})
    assert r.status == 412 and r.getheader("Connection") == "keep-alive"
    with pytest.raises(ConnectionError):  # RemoteDisconnected or ConnectionResetError
        _get(web.port, "/train/shard-000.idx", conn=conn)


def test_nginx_stops_master_and_worker(webroot, tmp_path):
    server = rs.Nginx(webroot[0], tmp_path / "n2")
    with server:
        master = server.proc.pid
        deadline = time.monotonic() + 10  # the master forks its worker after it listens
        while not (workers := rs._children(master)) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert workers, "nginx has a worker process"
        assert _get(server.port, "/train/shard-000.idx")[0].status == 200
    assert not _pid_alive(master)
    assert not any(_pid_alive(w) for w in workers)


def test_nginx_start_failure_is_explained(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        with pytest.raises(rs.FixtureError, match="Address already in use"):
            rs.Nginx(tmp_path, tmp_path / "n3", port=port).start()


# -------------------------------------------------------------------------------------------- s3rver

def _signed_curl(s3, path, secret="S3RVER", headers=()):
    cmd = ["curl", "-sS", "--max-time", "20", "-w", "\n%{http_code}", "--aws-sigv4", "aws:amz:us-east-1:s3",
           "--user", f"S3RVER:{secret}", "-H", f"x-amz-content-sha256: {EMPTY}"]
    for h in headers:
        cmd += ["-H", h]
    out = subprocess.run(cmd + [s3.endpoint + path], stdout=subprocess.PIPE, check=True, timeout=30).stdout
    body, _, code = out.rpartition(b"\n")
    return int(code), body


def test_s3_upload_and_signed_get(s3, tmp_path):
    data = _data(70_000, seed=2)
    f = tmp_path / "obj.tar"
    f.write_bytes(data)
    s3.upload(f, "train/shard-000.tar")
    status, body = _signed_curl(s3, "/stoker-test/train/shard-000.tar")
    assert status == 200 and body == data
    status, body = _signed_curl(s3, "/stoker-test/train/shard-000.tar", headers=["Range: bytes=10-19"])
    assert status == 206 and body == data[10:20]
    assert s3.get("train/shard-000.tar") == (200, data)
    assert s3.env() == {"AWS_ENDPOINT_URL": s3.endpoint, "AWS_ACCESS_KEY_ID": "S3RVER",
                        "AWS_SECRET_ACCESS_KEY": "S3RVER", "AWS_REGION": "us-east-1"}
    reqs = s3.requests(min_count=4)
    assert [(q["method"], q["status"]) for q in reqs] == [("PUT", 200), ("GET", 200), ("GET", 206), ("GET", 200)]
    assert reqs[2]["range"] == "bytes=10-19"


def test_s3_wrong_secret_is_rejected(s3, tmp_path):
    f = tmp_path / "obj"
    f.write_bytes(b"x" * 100)
    s3.upload(f, "k")
    status, body = _signed_curl(s3, "/stoker-test/k", secret="not-the-secret")
    assert status == 403
    assert b"SignatureDoesNotMatch" in body
    status, body = s3.curl("GET", "/stoker-test/k", secret="nope")
    assert status == 403


def test_s3_list_objects_v2(s3, tmp_path):
    sizes = {"train/a.tar": 1000, "train/b.tar": 2345, "val/c.tar": 10}
    for key, n in sizes.items():
        f = tmp_path / "o"
        f.write_bytes(_data(n, seed=n))
        s3.upload(f, key)
    # curl 7.88 signs the query as written: it must be canonical (sorted, `/` as %2F)
    status, body = _signed_curl(s3, "/stoker-test?list-type=2&prefix=train%2F")
    assert status == 200, body
    ns = {"s3": "http://doc.s3.amazonaws.com/2006-03-01/"}
    root = ET.fromstring(body)
    contents = root.findall("s3:Contents", ns)
    listed = {c.find("s3:Key", ns).text: (int(c.find("s3:Size", ns).text), c.find("s3:ETag", ns).text)
              for c in contents}
    assert set(listed) == {"train/a.tar", "train/b.tar"}
    assert listed["train/b.tar"][0] == 2345
    assert re.fullmatch(r'"[0-9a-f]{32}"', listed["train/b.tar"][1])
    assert root.find("s3:KeyCount", ns).text == "2"


def test_s3_delete(s3, tmp_path):
    f = tmp_path / "o"
    f.write_bytes(b"abc")
    s3.upload(f, "gone.tar")
    s3.delete("gone.tar")
    status, body = s3.get("gone.tar")
    assert status == 404 and b"NoSuchKey" in body


def test_s3rver_quirks_are_as_documented(s3, tmp_path):
    """Pinned 4.0.4 behaviours that stoker must not rely on (design doc section 9)."""
    data = _data(5000, seed=3)
    f = tmp_path / "o"
    f.write_bytes(data)
    s3.upload(f, "q.tar")
    # an end of 0 reads as open-ended: bytes=0-0 returns the whole object (206)
    status, body = s3.get("q.tar", headers=["Range: bytes=0-0"])
    assert status == 206 and body == data
    # a suffix range reads as `0-N`: bytes=-10 returns the first 11 bytes
    status, body = s3.get("q.tar", headers=["Range: bytes=-10"])
    assert status == 206 and body == data[:11]
    # If-Match is ignored
    status, body = s3.get("q.tar", headers=['If-Match: "wrong"'])
    assert status == 200 and body == data
    # curl 7.88 does not sort the query for the signature: unsorted parameters fail
    status, body = _signed_curl(s3, "/stoker-test?prefix=q&list-type=2")
    assert status == 403 and b"SignatureDoesNotMatch" in body


def test_s3_server_stops(tmp_path):
    reason = rs.s3_unavailable_reason()
    if reason:
        pytest.skip(reason)
    server = rs.S3Server(tmp_path / "s3b")
    with server:
        pid = server.proc.pid
        assert socket.create_connection(("127.0.0.1", server.port), timeout=5)
    assert not _pid_alive(pid)


# -------------------------------------------------------------------------------------------- proxy

def test_proxy_forwards_and_logs_delay(web, webroot, make_proxy):
    p = make_proxy(web.port, {"delay_ms": 200})
    r, body, _ = _get(p.port, "/train/shard-000.tar", {"Range": "bytes=100-199"})
    assert r.status == 206 and body == webroot[1][100:200]
    (rec,) = p.log(min_count=1)
    assert rec["n"] == 1 and rec["action"] == "forward" and rec["delay_ms"] == 200
    assert rec["method"] == "GET" and rec["path"] == "/train/shard-000.tar" and rec["range"] == "bytes=100-199"
    assert rec["status"] == 206 and rec["bytes"] == 100 and rec["result"] == "ok"


def test_proxy_status_then_pass(web, webroot, make_proxy):
    p = make_proxy(web.port, {"delay_ms": 5, "rules": [
        {"requests": [1], "action": "status", "status": 503, "retry_after": 1},
        {"requests": [2], "action": "delay", "ms": 50}]})
    r, _, conn = _get(p.port, "/train/shard-000.tar")
    assert r.status == 503 and r.getheader("Retry-After") == "1"
    r, body, _ = _get(p.port, "/train/shard-000.tar", conn=conn)  # same connection, kept alive
    assert r.status == 200 and body == webroot[1]
    recs = p.log(min_count=2)
    assert [(x["n"], x["action"], x["status"], x["delay_ms"]) for x in recs] == [
        (1, "status", 503, 5), (2, "delay", 200, 55)]
    assert recs[0]["conn"] == recs[1]["conn"]
    assert len(web.requests(min_count=1)) == 1  # the 503 never reached nginx


def test_proxy_drop_after_bytes(web, webroot, make_proxy):
    p = make_proxy(web.port, {"rules": [{"every": 1, "action": "drop_after_bytes", "bytes": 10000}]})
    c = http.client.HTTPConnection("127.0.0.1", p.port, timeout=10)
    c.request("GET", "/train/shard-000.tar")
    r = c.getresponse()
    assert r.status == 200
    with pytest.raises(http.client.IncompleteRead) as e:
        r.read()
    assert e.value.partial == webroot[1][:10000]
    # curl: exit 18 (CURLE_PARTIAL_FILE)
    cp = subprocess.run(["curl", "-sS", "-o", os.devnull, "--max-time", "20", p.url + "/train/shard-000.tar"],
                        stderr=subprocess.PIPE, timeout=30)
    assert cp.returncode == 18, cp.stderr
    recs = p.log(min_count=2)
    assert [(x["action"], x["result"], x["bytes"]) for x in recs] == [("drop_after_bytes", "dropped", 10000)] * 2


def test_proxy_stall_after_bytes(web, webroot, make_proxy):
    p = make_proxy(web.port, {"rules": [{"requests": [1], "action": "stall_after_bytes", "bytes": 5000,
                                         "seconds": 1}]})
    c = http.client.HTTPConnection("127.0.0.1", p.port, timeout=20)
    c.request("GET", "/train/shard-000.tar")
    r = c.getresponse()
    with pytest.raises(http.client.IncompleteRead) as e:
        r.read()  # the proxy holds the socket silent for 1 s, then closes it
    assert e.value.partial == webroot[1][:5000]
    (rec,) = p.log(min_count=1)
    assert rec["action"] == "stall_after_bytes" and rec["result"] == "stalled" and rec["bytes"] == 5000


def test_proxy_reset(web, make_proxy):
    p = make_proxy(web.port, {"rules": [{"requests": [1], "action": "reset"}, {"requests": [2], "action": "close"}]})
    with pytest.raises(ConnectionError):  # ConnectionResetError (RemoteDisconnected is one too)
        _get(p.port, "/train/shard-000.tar")
    cp = subprocess.run(["curl", "-sS", "-o", os.devnull, "--max-time", "20", p.url + "/train/shard-000.tar"],
                        stderr=subprocess.PIPE, timeout=30)
    assert cp.returncode == 52, cp.stderr  # CURLE_GOT_NOTHING: the clean close
    r, _, _ = _get(p.port, "/train/shard-000.idx")
    assert r.status == 200
    recs = p.log(min_count=3)
    assert [(x["action"], x["result"]) for x in recs] == [("reset", "reset"), ("close", "closed"), ("forward", "ok")]


def test_proxy_keep_alive(web, webroot, make_proxy):
    p = make_proxy(web.port)
    r1, b1, conn = _get(p.port, "/train/shard-000.tar", {"Range": "bytes=0-9"})
    r2, b2, _ = _get(p.port, "/train/shard-000.idx", conn=conn)
    r3, b3, _ = _get(p.port, "/train/shard-000.tar", method="HEAD", conn=conn)
    assert (r1.status, b1) == (206, webroot[1][:10])
    assert (r2.status, b2) == (200, b"index\n" * 10)
    assert r3.status == 200 and b3 == b"" and int(r3.getheader("Content-Length")) == len(webroot[1])
    recs = p.log(min_count=3)
    assert len({x["conn"] for x in recs}) == 1 and [x["n"] for x in recs] == [1, 2, 3]
    ups = web.requests(min_count=3)
    assert [u["connection_requests"] for u in ups] == [1, 2, 3]  # one upstream connection too


def test_proxy_rule_filters(web, make_proxy):
    p = make_proxy(web.port, {"rules": [
        {"nth": [2], "path_suffix": ".tar", "method": "GET", "action": "status", "status": 429},
        {"every": 3, "action": "status", "status": 500, "times": 1}]})
    paths = ["/train/shard-000.idx", "/train/shard-000.tar", "/train/shard-000.idx", "/train/shard-000.tar",
             "/train/shard-000.tar", "/train/shard-000.idx"]
    conn = None
    statuses = []
    for path in paths:
        r, _, conn = _get(p.port, path + "?x=1", {"Range": "bytes=0-0"}, conn=conn)
        statuses.append(r.status)
    # 2nd .tar GET (request 4) -> 429; request 3 -> 500 (once: request 6 passes)
    assert statuses == [206, 206, 500, 429, 206, 206]


def test_proxy_fraction_is_deterministic(web, make_proxy):
    sched = {"rules": [{"fraction": 0.5, "seed": 7, "action": "status", "status": 503}]}
    runs = []
    for _ in range(2):
        p = make_proxy(web.port, sched)
        conn = None
        out = []
        for _ in range(20):
            r, _, conn = _get(p.port, "/train/shard-000.idx", conn=conn)
            out.append(r.status)
        runs.append(out)
    assert runs[0] == runs[1]
    assert 0 < runs[0].count(503) < 20


def test_proxy_bad_schedule_is_explained(tmp_path):
    with pytest.raises(rs.FixtureError, match="unknown action 'explode'"):
        rs.FaultProxy(1, {"rules": [{"always": True, "action": "explode"}]}, tmp_path / "p.log").start()


def test_proxy_upstream_down(make_proxy):
    p = make_proxy(rs.free_port())
    r, _, _ = _get(p.port, "/x")
    assert r.status == 502
    assert p.log(min_count=1)[0]["result"] == "upstream_error"


class _ChunkedHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for part in (b"hello ", b"chunked ", b"world"):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
        self.wfile.write(b"0\r\n\r\n")

    def log_message(self, *args):
        pass


def test_proxy_relays_chunked(make_proxy):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ChunkedHandler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        p = make_proxy(srv.server_address[1])
        r, body, conn = _get(p.port, "/c")
        assert r.status == 200 and body == b"hello chunked world"
        r, body, _ = _get(p.port, "/c", conn=conn)
        assert body == b"hello chunked world"
        assert [x["bytes"] for x in p.log(min_count=2)] == [19, 19]
    finally:
        srv.shutdown()
        srv.server_close()


def test_proxy_in_front_of_s3(s3, make_proxy, tmp_path):
    """SigV4 signs the Host header the client sent; the proxy passes it through unchanged. A PUT
    > 1 MiB makes curl send `Expect: 100-continue`, which the proxy answers itself."""
    data = _data(1_500_000, seed=4)
    f = tmp_path / "big.tar"
    f.write_bytes(data)
    p = make_proxy(s3.port, {"delay_ms": 1})
    cp = subprocess.run(["curl", "-sS", "-o", os.devnull, "-w", "%{http_code}", "--max-time", "30",
                         "--aws-sigv4", "aws:amz:us-east-1:s3", "--user", "S3RVER:S3RVER",
                         "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-T", str(f),
                         p.url + "/stoker-test/big.tar"], stdout=subprocess.PIPE, timeout=40)
    assert cp.stdout == b"200"
    status, body = _signed_curl(s3, "/stoker-test/big.tar")
    assert status == 200 and body == data
    r_status, r_body = _signed_curl(type("P", (), {"endpoint": p.url})(), "/stoker-test/big.tar",
                                    headers=["Range: bytes=1000-1999"])
    assert r_status == 206 and r_body == data[1000:2000]
    recs = p.log(min_count=2)
    assert [(x["method"], x["status"]) for x in recs] == [("PUT", 200), ("GET", 206)]


def test_proxy_stops_on_stdin_eof(web, tmp_path):
    p = rs.FaultProxy(web.port, {}, tmp_path / "p.log")
    p.start()
    pid = p.proc.pid
    p.proc.stdin.close()  # as if the test process died
    try:
        p.proc.wait(timeout=10)
    finally:
        p.stop()
    assert not _pid_alive(pid)


def test_proxy_max_seconds(web, tmp_path):
    p = rs.FaultProxy(web.port, {}, tmp_path / "p.log", max_seconds=0.5)
    p.start()
    try:
        assert p.proc.wait(timeout=10) == 0
    finally:
        p.stop()
    assert p.proc is None


def test_proxy_exits_on_sigterm(web, tmp_path):
    p = rs.FaultProxy(web.port, {}, tmp_path / "p.log")
    p.start()
    p.proc.send_signal(signal.SIGTERM)
    try:
        assert p.proc.wait(timeout=10) == 0
    finally:
        p.stop()
