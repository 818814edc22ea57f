"""Running one workload process and reading its output (the trainer's and replayer's formats,
docs/trainer.md and docs/replay.md), plus chameleond for runs that need a daemon."""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

TIME_RE = re.compile(r"^(?:step|iteration) (\d+) .*time ([0-9.]+)$")
STRIP_TIME_RE = re.compile(r" time [0-9.]+$")
EXECUTOR_RE = re.compile(r"executor: (limit=.*)$")  # the shim's CHAMELEON_DEBUG=stats line
PERSISTENT_RE = re.compile(r"^chameleon-(?:train-sim|replay): persistent bytes (\d+)$")


@dataclass
class Build:
    """Paths of the binaries a build directory holds."""
    root: str

    def bin(self, name):
        return os.path.join(self.root, "bin", name)

    @property
    def simgpu_dir(self):
        return os.path.join(self.root, "simgpu")

    @property
    def shim(self):
        return os.path.abspath(os.path.join(self.root, "lib", "libchameleon.so"))

    def missing(self):
        need = [self.bin("chameleon-train-sim"), self.bin("chameleon-replay"),
                self.bin("chameleond"), self.bin("chameleonctl"), self.shim,
                os.path.join(self.simgpu_dir, "libcuda.so.1")]
        return [p for p in need if not os.path.exists(p)]


@dataclass
class Result:
    """One process's outcome, parsed."""
    rc: int
    stdout: str
    stderr: str
    wall_s: float
    times: list = field(default_factory=list)       # per step/iteration, virtual seconds
    results: list = field(default_factory=list)     # output lines without times (to diff)
    peak: int = 0
    checksum: str = ""
    executor: dict = field(default_factory=dict)    # the shim's exit line (CHAMELEON_DEBUG=stats)
    persistent: int = None                           # bytes live between steps (the tool's stderr)
    daemon: dict = field(default_factory=dict)      # last `chameleonctl client 1 --json` seen

    @property
    def ok(self):
        return self.rc == 0 and bool(self.checksum)

    def steady_time(self, last=4):
        """Median of the last `last` step times: steps after the policy settled."""
        tail = self.times[-last:]
        return statistics.median(tail) if tail else None

    def oom_line(self):
        for line in self.stderr.splitlines():
            if "out of memory" in line:
                return line.strip()
        return ""


def parse(rc, out, err, wall):
    r = Result(rc, out, err, wall)
    for line in out.splitlines():
        m = TIME_RE.match(line)
        if m:
            r.times.append(float(m.group(2)))
        r.results.append(STRIP_TIME_RE.sub("", line))
        if line.startswith("peak "):
            r.peak = int(line.split()[1])
        elif line.startswith("checksum "):
            r.checksum = line.split()[1]
    for line in err.splitlines():
        p = PERSISTENT_RE.search(line)
        if p:
            r.persistent = int(p.group(1))
        m = EXECUTOR_RE.search(line)
        if m:
            pairs = (kv.split("=", 1) for kv in m.group(1).split() if "=" in kv)
            r.executor = {k: int(v) for k, v in pairs if v.isdigit()}
    return r


def run(argv, env_extra, timeout, poll=None):
    """Runs argv with os.environ + env_extra; poll(): called every 0.25 s while it runs."""
    env = dict(os.environ)
    env.update({k: str(v) for k, v in env_extra.items()})
    start = time.monotonic()
    with tempfile.TemporaryFile() as out_f, tempfile.TemporaryFile() as err_f:
        proc = subprocess.Popen(argv, env=env, stdout=out_f, stderr=err_f)
        deadline = start + timeout
        try:
            while proc.poll() is None and time.monotonic() <= deadline:
                if poll:
                    poll()
                time.sleep(0.25)
        finally:  # timeout, or evaluate itself interrupted: never leave the workload behind
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        wall = time.monotonic() - start
        out_f.seek(0)
        err_f.seek(0)
        out = out_f.read().decode(errors="replace")
        err = err_f.read().decode(errors="replace")
    rc = proc.returncode if proc.returncode is not None else -9
    if wall >= timeout:
        err += f"\nevaluate: killed after {timeout} s\n"
        rc = 124
    if os.environ.get("EVALUATE_VERBOSE"):
        print(f"    {wall:6.1f} s rc {rc}: {' '.join(argv[1:])}", file=sys.stderr, flush=True)
    return parse(rc, out, err, wall)


class Daemon:
    """A private chameleond on a temporary socket, for one run (fresh state each time)."""

    def __init__(self, build, env=None, args=(), client=1):
        self.build = build
        self.env = dict(os.environ, **(env or {}))
        self.args = list(args)  # e.g. ["--config", path]
        self.client = client    # the client poll() describes (the run's first, by default)
        self.dir = tempfile.mkdtemp(prefix="chameleon-eval-")
        self.socket = os.path.join(self.dir, "d.sock")
        self.proc = None
        self.last = {}
        self.stages = []  # (iterations, stage) of every poll, in order

    def __enter__(self):
        log = open(os.path.join(self.dir, "daemon.log"), "w")
        self.proc = subprocess.Popen([self.build.bin("chameleond"), "--socket", self.socket,
                                      "--metrics-listen", "127.0.0.1:0", *self.args],
                                     stdout=log, stderr=log, env=self.env)
        deadline = time.monotonic() + 10
        while not os.path.exists(self.socket):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("chameleond did not start: " + self.log())
            time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        subprocess.run(["rm", "-rf", self.dir], check=False)

    def log(self):
        try:
            with open(os.path.join(self.dir, "daemon.log")) as f:
                return f.read()[-2000:]
        except OSError:
            return ""

    def first_stable(self):
        """Iterations the client had done when a poll first saw it STABLE (None: never). The
        last view alone misleads: a program's epilogue (the trainer's checksum read-back, ~13k
        copies) ends the loop and the daemon rightly goes back to WARMUP before the exit."""
        return next((it for it, stage in self.stages if stage == "STABLE"), None)

    def ctl(self, *args):
        """chameleonctl's JSON answer to `args` on this daemon's socket, {} when none."""
        try:
            p = subprocess.run([self.build.bin("chameleonctl"), "--socket", self.socket,
                                "--json", *args], capture_output=True, timeout=20)
            return json.loads(p.stdout) if p.returncode == 0 else {}
        except (subprocess.TimeoutExpired, ValueError):
            return {}

    def poll(self):
        """Keeps the latest detailed view of self.client (client 1: the run's only client)."""
        reply = self.ctl("client", str(self.client))
        if reply:
            self.last = reply.get("client", reply)
            self.stages.append((self.last.get("iterations"), self.last.get("stage")))


def start_poller(daemon):
    """poll() for run(): at most one chameleonctl call in flight, off the polling thread."""
    busy = threading.Lock()

    def poll():
        if busy.acquire(blocking=False):
            def work():
                try:
                    daemon.poll()
                finally:
                    busy.release()
            threading.Thread(target=work, daemon=True).start()
    return poll
