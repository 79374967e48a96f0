"""Real servers on 127.0.0.1 for the remote-shard tests and benchmark (docs/remote-shards-design.md §9).

Plain classes and context managers, no pytest inside (bench/remote_bench.py imports this module):

    with nginx(root, workdir) as web:        # static files with byte ranges, ETags, If-Match
        url = web.url + "/shard-000.tar"; ...; web.requests()
    with s3_server(workdir) as s3:           # @20minutes/s3rver 4.0.4, SigV4 verified
        s3.upload(path, "train/shard-000.tar"); env.update(s3.env())
    with fault_proxy(web.port, {"delay_ms": 20}, log_path) as proxy:
        url = proxy.url + "/shard-000.tar"; ...; proxy.log()

Every server is a child process that is stopped on exit of its context (or stop()), within a bound,
and that also goes away on its own when this process dies: nginx through a parent-death signal
(setpriv --pdeathsig), s3_server.js and fault_proxy.py when their stdin pipe closes.
"""
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NGINX = os.environ.get("STOKER_NGINX", "/usr/sbin/nginx")
S3_DIR = os.path.join(REPO, "tests", "fixtures", "s3")
S3_SERVER_JS = os.path.join(S3_DIR, "s3_server.js")
FAULT_PROXY = os.path.join(REPO, "tests", "fixtures", "fault_proxy.py")

S3_BUCKET = "stoker-test"
S3_ACCESS_KEY = "S3RVER"
S3_SECRET_KEY = "S3RVER"
S3_REGION = "us-east-1"
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

READY_S = 5.0      # a server must accept connections within this
STOP_S = 5.0       # graceful stop bound, then kill


class FixtureUnavailable(RuntimeError):
    """A server cannot run here (binary or node_modules missing): tests skip with str(exc)."""


class FixtureError(RuntimeError):
    """A server failed to start or misbehaved."""


def free_port():
    """A currently free TCP port on 127.0.0.1 (bind to 0, read, close; callers retry EADDRINUSE)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _can_connect(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _tail(path, n=4000):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - n))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return "(no file)"


def _read_jsonl(path):
    out = []
    try:
        with open(path, "r", encoding="utf-8") as f:
            for line in f:
                if line.endswith("\n") and line.strip():
                    out.append(json.loads(line))
    except FileNotFoundError:
        pass
    return out


def _poll_jsonl(path, min_count=0, timeout=2.0):
    """_read_jsonl(path) once it holds at least min_count records, or when timeout seconds have
    passed: a server writes its log line after answering, so a client that just got its answer
    may see the line a moment later."""
    deadline = time.monotonic() + timeout
    while True:
        recs = _read_jsonl(path)
        if len(recs) >= min_count or time.monotonic() > deadline:
            return recs
        time.sleep(0.02)


def _children(pid):
    """Direct children of pid (from /proc), for the last-resort kill of nginx workers."""
    kids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as f:
                stat = f.read().decode("latin-1")
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid:
            kids.append(int(d))
    return kids


def _running(pid):
    """Whether pid is a live process (a zombie, dead but not yet reaped, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _kill_and_wait(pids, bound=2.0):
    """SIGKILLs pids and waits (up to bound seconds) until none runs: a signal is delivered
    asynchronously, and on a loaded machine a killed process can run on for a moment."""
    for k in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(k, signal.SIGKILL)
    deadline = time.monotonic() + bound
    while any(_running(k) for k in pids) and time.monotonic() < deadline:
        time.sleep(0.01)


def _stop_process(proc, sig=signal.SIGTERM, bound=STOP_S):
    """Signals proc, waits up to bound, then SIGKILLs it (and returns once it is reaped)."""
    if proc is None or proc.poll() is not None:
        return
    try:
        proc.send_signal(sig)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=bound)
        return
    except subprocess.TimeoutExpired:
        pass
    proc.kill()
    proc.wait(timeout=bound)


_SETPRIV = shutil.which("setpriv")


def _pdeathsig_prefix(sig="TERM"):
    """`setpriv --pdeathsig SIG` (util-linux): the child gets SIG when this thread exits."""
    return [_SETPRIV, f"--pdeathsig={sig}"] if _SETPRIV else []


def _wait_first_line(proc, path, what, bound=10.0):
    """Waits for the first full stdout line (written to path) of proc; returns it parsed as JSON."""
    deadline = time.monotonic() + bound
    while True:
        try:
            with open(path, "r", encoding="utf-8", errors="replace") as f:
                text = f.read()
        except FileNotFoundError:
            text = ""
        if "\n" in text:
            line = text.split("\n", 1)[0]
            try:
                return json.loads(line)
            except ValueError as e:
                raise FixtureError(f"{what}: unexpected first stdout line {line!r}") from e
        if proc.poll() is not None:
            return None
        if time.monotonic() > deadline:
            return None
        time.sleep(0.02)


# --------------------------------------------------------------------------------------------
# nginx
# --------------------------------------------------------------------------------------------

_NGINX_LOG_FORMAT = (
    "log_format stoker escape=json '{"
    '"request":"$request","status":$status,"range":"$http_range","bytes":$body_bytes_sent,'
    '"if_match":"$http_if_match","connection":$connection,"connection_requests":$connection_requests,'
    '"request_time":$request_time'
    "}';"
)


class Nginx:
    """nginx serving `root` on 127.0.0.1:port, all its files under `workdir`.

    Attributes: port, url ("http://127.0.0.1:PORT"), root, workdir, access_log, error_log, conf.
    nginx gets SIGTERM when the thread that started it exits (setpriv --pdeathsig): start it from
    a thread that outlives its use (the main thread).
    """

    def __init__(self, root, workdir, port=None):
        if not os.path.exists(NGINX):
            raise FixtureUnavailable(f"nginx not found at {NGINX} (install nginx-light: scripts/install-deps.sh)")
        self.root = os.path.abspath(str(root))
        self.workdir = os.path.abspath(str(workdir))
        self.conf = os.path.join(self.workdir, "nginx.conf")
        self.access_log = os.path.join(self.workdir, "access.log")
        self.error_log = os.path.join(self.workdir, "error.log")
        self.pid_file = os.path.join(self.workdir, "nginx.pid")
        self._fixed_port = port
        self.port = None
        self.url = None
        self.proc = None

    def _write_conf(self, port):
        w = self.workdir
        user = "user root root;\n" if os.geteuid() == 0 else ""
        temps = "".join(f"    {name}_temp_path {w}/{name}_temp;\n"
                        for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        text = (
            f"{user}daemon off;\nworker_processes 1;\npid {self.pid_file};\nerror_log {self.error_log};\n"
            "events {}\n"
            "http {\n"
            f"    {_NGINX_LOG_FORMAT}\n"
            f"    access_log {self.access_log} stoker;\n"
            f"{temps}"
            "    default_type application/octet-stream;\n"
            "    sendfile on;\n"
            "    max_ranges 1;\n"
            "    server {\n"
            f"        listen 127.0.0.1:{port};\n"
            f"        root {self.root};\n"
            "    }\n"
            "}\n")
        with open(self.conf, "w") as f:
            f.write(text)

    def start(self):
        os.makedirs(self.workdir, exist_ok=True)
        last = ""
        for _ in range(3):
            port = self._fixed_port or free_port()
            self._write_conf(port)
            with open(self.error_log, "a"):
                pass
            err_offset = os.path.getsize(self.error_log)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.pid_file)
            with open(os.path.join(self.workdir, "nginx.stderr"), "ab") as err:
                self.proc = subprocess.Popen(
                    _pdeathsig_prefix("TERM")
                    + [NGINX, "-p", self.workdir + "/", "-c", self.conf, "-e", self.error_log],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, close_fds=True)
            deadline = time.monotonic() + READY_S
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                # nginx writes its pid file after it bound the port (a connect alone could reach
                # whoever else holds the port)
                if self._pid_written() and _can_connect(port):
                    self.port = port
                    self.url = f"http://127.0.0.1:{port}"
                    return self
                time.sleep(0.02)
            alive = self.proc.poll() is None
            self._kill()
            with open(self.error_log, "rb") as f:
                f.seek(err_offset)
                last = f.read().decode("utf-8", "replace")
            if "Address already in use" in last and not self._fixed_port:
                continue  # another process took the port between free_port() and bind: retry
            break
        why = f"not ready within {READY_S:.0f} s" if alive else "exited"
        raise FixtureError(
            f"nginx did not start ({why}) in {self.workdir}; error.log tail:\n{last[-3000:] or _tail(self.error_log)}\n"
            f"stderr:\n{_tail(os.path.join(self.workdir, 'nginx.stderr'))}")

    def _pid_written(self):
        try:
            with open(self.pid_file) as f:
                return f.read().strip() == str(self.proc.pid)
        except OSError:
            return False

    def _kill(self):
        """Fast stop: SIGTERM, then SIGKILL the master and its workers."""
        if self.proc is None:
            return
        kids = _children(self.proc.pid)
        _stop_process(self.proc, signal.SIGTERM, 2.0)
        _kill_and_wait(kids)

    def stop(self):
        """Graceful stop (SIGQUIT), then SIGTERM, then SIGKILL (master and workers), bounded."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            kids = _children(self.proc.pid)
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(timeout=STOP_S)
            except subprocess.TimeoutExpired:
                _stop_process(self.proc, signal.SIGTERM, 2.0)
            _kill_and_wait(kids)  # a SIGKILLed master leaves its worker behind
        self.proc = None

    def requests(self, min_count=0, timeout=2.0):
        """Parsed access log: [{method, path, protocol, status, range, bytes, if_match, connection,
        connection_requests, request_time}]. nginx logs a request after answering it, so a caller
        that just got a response may ask for min_count entries (polls up to timeout)."""
        out = []
        for rec in _poll_jsonl(self.access_log, min_count, timeout):
            parts = rec.get("request", "").split(" ")
            out.append({
                "method": parts[0] if parts else "",
                "path": parts[1] if len(parts) > 1 else "",
                "protocol": parts[2] if len(parts) > 2 else "",
                "status": rec["status"],
                "range": rec["range"] or None,
                "bytes": rec["bytes"],
                "if_match": rec["if_match"] or None,
                "connection": rec["connection"],
                "connection_requests": rec["connection_requests"],
                "request_time": rec["request_time"],
            })
        return out

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


@contextlib.contextmanager
def nginx(root, workdir, port=None):
    """Context manager: a started Nginx serving root (files under workdir), stopped on exit."""
    server = Nginx(root, workdir, port)
    server.start()
    try:
        yield server
    finally:
        server.stop()


# --------------------------------------------------------------------------------------------
# S3 (s3rver)
# --------------------------------------------------------------------------------------------

def s3_unavailable_reason():
    """None when S3Server can run here, else why not (for pytest.skip)."""
    if not shutil.which("node"):
        return "node is not installed (the S3 fixture runs @20minutes/s3rver on node >= 20)"
    if not os.path.isdir(os.path.join(S3_DIR, "node_modules", "@20minutes", "s3rver")):
        return ("tests/fixtures/s3/node_modules is missing: run scripts/install-deps.sh "
                "(or npm ci --prefix tests/fixtures/s3)")
    if not shutil.which("curl"):
        return "curl is not installed (objects are uploaded with curl --aws-sigv4)"
    return None


class S3Server:
    """@20minutes/s3rver 4.0.4 on 127.0.0.1 (path-style, SigV4 verified, bucket stoker-test).

    Attributes: port, endpoint ("http://127.0.0.1:PORT"), bucket, workdir, data_dir, request_log.
    """

    bucket = S3_BUCKET
    access_key = S3_ACCESS_KEY
    secret_key = S3_SECRET_KEY
    region = S3_REGION

    def __init__(self, workdir):
        reason = s3_unavailable_reason()
        if reason:
            raise FixtureUnavailable(reason)
        self.workdir = os.path.abspath(str(workdir))
        self.data_dir = os.path.join(self.workdir, "s3data")
        self.request_log = os.path.join(self.workdir, "s3_requests.log")
        self._stdout = os.path.join(self.workdir, "s3_server.stdout")
        self._stderr = os.path.join(self.workdir, "s3_server.stderr")
        self.port = None
        self.endpoint = None
        self.proc = None

    def start(self):
        os.makedirs(self.data_dir, exist_ok=True)
        with open(self._stdout, "wb") as out, open(self._stderr, "ab") as err:
            self.proc = subprocess.Popen(
                ["node", S3_SERVER_JS, self.data_dir, self.request_log],
                stdin=subprocess.PIPE, stdout=out, stderr=err, cwd=S3_DIR, close_fds=True)
        first = _wait_first_line(self.proc, self._stdout, "s3_server.js", bound=15.0)
        if not first or "port" not in first:
            code = self.proc.poll()
            self.stop()
            raise FixtureError(f"s3_server.js did not start (exit code {code}); stderr:\n{_tail(self._stderr)}")
        self.port = int(first["port"])
        self.endpoint = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + READY_S
        while not _can_connect(self.port):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.stop()
                raise FixtureError(f"s3_server.js on port {self.port} does not accept connections; stderr:\n"
                                   f"{_tail(self._stderr)}")
            time.sleep(0.02)
        return self

    def stop(self):
        if self.proc is None:
            return
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        _stop_process(self.proc, signal.SIGTERM)
        self.proc = None

    def path(self, key):
        """Path-style object path, "/stoker-test/KEY" (key segments percent-encoded)."""
        return f"/{self.bucket}/{urllib.parse.quote(key, safe='/~')}"

    def url(self, key):
        """Path-style object URL, "http://127.0.0.1:PORT/stoker-test/KEY"."""
        return self.endpoint + self.path(key)

    def env(self):
        """Environment for an S3 client (stoker, aws CLI) pointed at this server."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": self.access_key,
                "AWS_SECRET_ACCESS_KEY": self.secret_key, "AWS_REGION": self.region}

    def curl(self, method, path, upload=None, headers=(), secret=None, timeout=30):
        """A SigV4-signed request with Debian's curl: returns (status, body bytes).

        path is the part after the endpoint, e.g. "/stoker-test/k" or
        "/stoker-test?list-type=2&prefix=a%2F". With curl 7.88 the query must already be in
        canonical form (parameters sorted by name, values percent-encoded: `/` as %2F), and the
        bucket URL has no trailing slash, or s3rver answers 403 SignatureDoesNotMatch."""
        payload = "UNSIGNED-PAYLOAD" if upload is not None else EMPTY_SHA256
        fd, body_path = tempfile.mkstemp(prefix="s3body-", dir=self.workdir)
        os.close(fd)
        try:
            cmd = ["curl", "-sS", "--max-time", str(timeout), "-o", body_path, "-w", "%{http_code}",
                   "--aws-sigv4", f"aws:amz:{self.region}:s3",
                   "--user", f"{self.access_key}:{self.secret_key if secret is None else secret}",
                   "-H", f"x-amz-content-sha256: {payload}"]
            cmd += ["-I"] if method == "HEAD" else ["-X", method]
            for h in headers:
                cmd += ["-H", h]
            if upload is not None:
                cmd += ["-T", str(upload)]
            cmd.append(self.endpoint + path)
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout + 5)
            if r.returncode != 0:
                raise FixtureError(f"curl {method} {path} failed (exit {r.returncode}): "
                                   f"{r.stderr.decode(errors='replace')}")
            with open(body_path, "rb") as f:
                return int(r.stdout.decode().strip() or 0), f.read()
        finally:
            os.unlink(body_path)

    def upload(self, local_path, key):
        """PUT a local file as stoker-test/KEY; raises FixtureError unless the status is 200."""
        status, body = self.curl("PUT", self.path(key), upload=local_path)
        if status != 200:
            raise FixtureError(f"upload of {local_path} to {key}: HTTP {status}: {body[:500]!r}")

    def delete(self, key):
        """DELETE stoker-test/KEY; raises FixtureError unless the status is 204 (or 200)."""
        status, body = self.curl("DELETE", self.path(key))
        if status not in (200, 204):
            raise FixtureError(f"delete of {key}: HTTP {status}: {body[:500]!r}")

    def get(self, key, headers=()):
        """Signed GET of stoker-test/KEY: (status, body)."""
        return self.curl("GET", self.path(key), headers=headers)

    def requests(self, min_count=0, timeout=2.0):
        """Requests the server finished: [{method, path, status, range, bytes}] (bytes: the
        Content-Length it answered with; null when none). The server logs a request when its
        response's 'finish' event runs, which can come after the client has the whole response: a
        caller that just got one may ask for min_count entries (polls up to timeout)."""
        return _poll_jsonl(self.request_log, min_count, timeout)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


@contextlib.contextmanager
def s3_server(workdir):
    """Context manager: a started S3Server (objects under workdir/s3data), stopped on exit."""
    server = S3Server(workdir)
    server.start()
    try:
        yield server
    finally:
        server.stop()


# --------------------------------------------------------------------------------------------
# fault proxy
# --------------------------------------------------------------------------------------------

class FaultProxy:
    """tests/fixtures/fault_proxy.py in a subprocess, in front of 127.0.0.1:upstream_port.

    schedule: a dict (or JSON string), see fault_proxy.py. Attributes: port, url, log_path.
    """

    def __init__(self, upstream_port, schedule=None, log_path=None, max_seconds=600):
        self.upstream_port = int(upstream_port)
        self.schedule = schedule if isinstance(schedule, str) else json.dumps(schedule or {})
        if log_path is None:
            self._tmpdir = tempfile.mkdtemp(prefix="fault_proxy-")
            log_path = os.path.join(self._tmpdir, "proxy.log")
        else:
            self._tmpdir = None
        self.log_path = os.path.abspath(str(log_path))
        self.max_seconds = max_seconds
        self.port = None
        self.url = None
        self.proc = None

    def start(self):
        d = os.path.dirname(self.log_path)
        os.makedirs(d, exist_ok=True)
        stdout = self.log_path + ".stdout"
        stderr = self.log_path + ".stderr"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(stdout)
        with open(stdout, "wb") as out, open(stderr, "ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, FAULT_PROXY, "--upstream-port", str(self.upstream_port), "--schedule", self.schedule,
                 "--log", self.log_path, "--max-seconds", str(self.max_seconds), "--exit-on-stdin-eof"],
                stdin=subprocess.PIPE, stdout=out, stderr=err, close_fds=True)
        first = _wait_first_line(self.proc, stdout, "fault_proxy.py")
        if not first or "port" not in first:
            code = self.proc.poll()
            self.stop()
            raise FixtureError(f"fault_proxy.py did not start (exit code {code}); stderr:\n{_tail(stderr)}")
        self.port = int(first["port"])
        self.url = f"http://127.0.0.1:{self.port}"
        return self

    def stop(self):
        if self.proc is None:
            return
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        _stop_process(self.proc, signal.SIGTERM)
        self.proc = None
        if self._tmpdir:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    def log(self, min_count=0, timeout=2.0):
        """Records the proxy wrote, one per request: {n, conn, t, method, path, range, action, rule,
        delay_ms, status, bytes, result}. Polls up to timeout for at least min_count records."""
        return _poll_jsonl(self.log_path, min_count, timeout)

    def cpu_seconds(self):
        """User + system CPU seconds the proxy process used so far (for the bench's report)."""
        if self.proc is None:
            return None
        try:
            with open(f"/proc/{self.proc.pid}/stat") as f:
                stat = f.read()
            fields = stat[stat.rindex(")") + 2:].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


@contextlib.contextmanager
def fault_proxy(upstream_port, schedule=None, log_path=None, max_seconds=600):
    """Context manager: a started FaultProxy, stopped on exit."""
    proxy = FaultProxy(upstream_port, schedule, log_path, max_seconds)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()
