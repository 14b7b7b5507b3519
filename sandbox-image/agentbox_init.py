"""agentbox init: PID 1 of a sandbox container.

It owns everything that must outlive the Python namespace:

* it starts the kernel worker (agentbox_kernel.py) and restarts it when it
  dies, so a crash of user code never ends the container or /session;
* it captures the worker's file descriptors 1 and 2 (so print, C extensions
  and subprocesses are all seen), caps them per execution keeping head and
  tail, and streams them to the client that asked;
* it accepts any number of clients, each on an abstract Unix socket or on the
  `docker exec` stream that agentbox_bridge.py hands over (the host's way in),
  serializes their executions, sends each
  client only its own replies, and keeps recent results so a client that
  reconnects after a crash gets the result of an execution by id, or the same
  result again instead of running the code twice;
* it turns timeouts and interrupts into SIGINT, and kills and restarts a worker
  that ignores SIGINT for longer than the grace period, saying that state was
  lost;
* it reaps orphaned processes, as any PID 1 must;
* it keeps user code away from itself: started as root with a handful of
  capabilities, it runs the worker as the sandbox user (AGENTBOX_USER) with
  none, so that code can neither trace it, read its memory, signal it, nor
  talk to its sockets (it serves only peers of its own uid).

The wire protocol (one JSON object per line) is described in kernel/doc.go of
the Go module; PROTOCOL must equal kernel.ProtocolVersion there.
Standard library only.
"""

import codecs
import collections
import ctypes
import errno
import os
import select
import selectors
import signal
import socket
import stat
import struct
import sys
import time
import uuid

# The init runs as `python3 -I` (the Dockerfile): no PYTHON* variable, no
# user site folder (HOME is /session, which the sandbox writes) and not its
# own folder on the path, which is put there here, read-only as it is.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentbox_frames import decode, encode  # noqa: E402
import agentbox_tools  # noqa: E402

PROTOCOL = 4
# "@name" is an abstract Unix socket: nothing on the filesystem that user code
# could delete, and private to the container's network namespace.
SOCKET = os.environ.get("AGENTBOX_SOCKET", "@agentbox/kernel")
if SOCKET.startswith("@"):
    SOCKET = "\0" + SOCKET[1:]
# The bridge hands over its standard input and output on this one.
HANDOFF = SOCKET + ".handoff"
# A socket the host dials itself, without an engine exec: the Docker driver
# mounts a folder of its host here (root's, mode 0700) and names the path.
# A stream on it skips the engine and its shim, which relay every byte of
# an exec's stream (a raw socket's round trip took a tenth of an exec
# stream's, docs/drivers.md). Unset, or where the host cannot see it (gVisor keeps sockets in
# its own kernel, a remote engine's folder is not the host's), the host
# goes through the bridge.
HOST_SOCKET = os.environ.get("AGENTBOX_HOST_SOCKET", "")
HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "agentbox_kernel.py")
MAX_OUTPUT = int(os.environ.get("AGENTBOX_MAX_OUTPUT", str(1 << 20)))
GRACE = float(os.environ.get("AGENTBOX_INTERRUPT_GRACE", "5"))
# How long the worker may take to describe its namespace (an inspect
# request) before it is interrupted, then killed GRACE later: its answer
# runs reprs of user objects, and a request that code stole from the
# worker's pipe is never answered at all. The host gives up after 10 s.
INSPECT_TIMEOUT = float(os.environ.get("AGENTBOX_INSPECT_TIMEOUT", "5"))
KEEP_RESULTS = int(os.environ.get("AGENTBOX_KEEP_RESULTS", "32"))
KEEP_BYTES = 64 << 20
# How long the frames of a starting execution may wait to leave with its
# result (see Init.flush_clients).
HOLD = 0.002
MAX_FRAME = 256 << 20
MAX_ID = 256
ORPHAN_OUTPUT = 64 << 10
# The worker reads requests on CONTROL_FD and writes replies on CONTROL_FD + 1.
CONTROL_FD = 3
# Where the worker lives: its home and working folder.
SESSION_DIR = "/session"
# The folders the worker is told to use, and those the image's links point
# at (/app and /workspace, where programs written for other sandboxes keep
# their files): made before the first client can ask for a file in them.
SESSION_FOLDERS = ("artifacts", "data", "app", "workspace")
# The variables the session was created with, in the container's (the
# init's own) environment under this prefix (sandboximage.UserEnvPrefix):
# they are the worker's, by their own names, never the init's.
USER_ENV_PREFIX = "AGENTBOX_ENV_"
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
# What one read asks for. Not more: os.read allocates the size asked up front,
# and a megabyte costs more than the read itself; a pipe holds 64 KiB anyway.
READ_SIZE = 64 << 10


def log(msg):
    # The container's own log (docker logs), for whoever debugs the sandbox.
    try:
        os.write(2, ("agentbox-init: %s\n" % msg).encode("utf-8", "replace"))
    except OSError:
        pass


# -- privileges: the init and the sandbox user ---------------------------------

def parse_user(spec):
    """Returns (uid, gid) for "uid", "uid:gid", "name" or "name:group"; None
    when spec is empty."""
    if not spec:
        return None
    import grp
    import pwd
    user, _, group = spec.partition(":")
    try:
        uid = int(user)
        gid = uid
    except ValueError:
        pw = pwd.getpwnam(user)
        uid, gid = pw.pw_uid, pw.pw_gid
    if group:
        try:
            gid = int(group)
        except ValueError:
            gid = grp.getgrnam(group).gr_gid
    return uid, gid


def libc():
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def make_undumpable():
    """No core dumps and no /proc/1/{mem,fd,environ} for anyone but root, even
    if the worker ever shared our uid."""
    c = libc()
    if c is None or c.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        log("could not make the init undumpable")


def drop_bounding_set():
    """Clears the capability bounding set of this (worker) process, so that
    nothing it executes can gain a capability, whatever file it runs."""
    c = libc()
    if c is None:
        return
    for cap in range(64):
        if c.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == errno.EINVAL:
            break  # past the last capability this kernel knows


class SandboxUser:
    """Runs what the init does on behalf of user code (listing its files) with
    the sandbox user's permissions: effective ids only, so the init keeps its
    real uid, and with it its protection from that user."""

    def __init__(self, ids):
        self.ids = ids if ids is not None and os.geteuid() == 0 and ids[0] != 0 else None

    def __enter__(self):
        if self.ids is not None:
            os.setegid(self.ids[1])
            os.seteuid(self.ids[0])
        return self

    def __exit__(self, *exc):
        if self.ids is not None:
            os.seteuid(0)
            os.setegid(0)
        return False


def worker_env(environ, control_fd):
    """The worker's environment: the container's without agentbox's own
    settings, with the session's variables under their own names."""
    env = {k: v for k, v in environ.items() if not k.startswith("AGENTBOX_")}
    for k, v in environ.items():
        name = k[len(USER_ENV_PREFIX):]
        if k.startswith(USER_ENV_PREFIX) and name and not name.startswith("AGENTBOX_"):
            env[name] = v
    env["AGENTBOX_CONTROL_FD"] = str(control_fd)
    return env


def peer_uid(sock):
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    return struct.unpack("3i", creds)[1]


# -- cgroup: tell an out-of-memory kill from any other SIGKILL ------------------

def oom_kills():
    for path, key in (("/sys/fs/cgroup/memory.events", "oom_kill"), ("/sys/fs/cgroup/memory/memory.oom_control", "oom_kill")):
        try:
            with open(path) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) == 2 and parts[0] == key:
                        return int(parts[1])
        except (OSError, ValueError):
            continue
    return None


def describe_exit(status, oom_before, oom_after):
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = "signal %d" % sig
        if sig == signal.SIGKILL and oom_before is not None and oom_after is not None and oom_after > oom_before:
            limit = " of %d MiB" % (MEMORY_LIMIT >> 20) if MEMORY_LIMIT else ""
            return "killed by the out-of-memory killer (the sandbox's memory limit%s was reached)" % limit, True
        return "killed by signal %d (%s)" % (sig, name), False
    return "exited with code %d" % os.WEXITSTATUS(status), False


# -- memory: the container must outlive whatever eats its memory ---------------
#
# Under runc the kernel's OOM killer ends the largest process of the
# container's cgroup when the limit is reached: the worker, which the init
# restarts and reports. Under gVisor (runsc) the whole sandbox, its own kernel
# (the Sentry) included, is one cgroup on the host and the Sentry is the
# process the host's OOM killer ends: the container goes, and /session with it.
# So the init watches the container's memory itself and, past a ceiling below
# the limit, kills the largest process it started (the worker, or what the
# code ran), as the kernel would, but in time; under runc the kernel's OOM
# killer stays behind it, reported as before.

MIB = 1 << 20
# The processes' memory limit in bytes (session/create.go passes it); 0 or
# unset turns the watchdog off.
try:
    MEMORY_LIMIT = max(0, int(os.environ.get("AGENTBOX_MEMORY_LIMIT") or 0))
except ValueError:
    MEMORY_LIMIT = 0
# What files in memory (tmpfs: /session in TMPFS mode, /tmp, /dev/shm) may
# take besides, in bytes: the container's own limit is the sum of the two.
# Files are stopped by their file systems' sizes (ENOSPC), so up to this
# much shared memory is not the processes' and does not count against them:
# a full /session must neither starve the kernel nor have it killed.
try:
    FILES_MEMORY = max(0, int(os.environ.get("AGENTBOX_FILES_MEMORY") or 0))
except ValueError:
    FILES_MEMORY = 0
# How often the init looks: while code runs (or memory grew since the last
# look), and otherwise. One look costs a pread and a few finds: about 20 us
# under gVisor when memory is steady, 0.1-3 ms while it grows by a GB/s.
MEMORY_POLL_BUSY = 0.01
MEMORY_POLL_IDLE = 0.25
MEMORY_GROWTH = 8 * MIB  # grown by more between idle looks: look fast
# An execution that starts with the container already past the ceiling
# (files in /session fill its memory) may still add this much: enough to
# list and delete them, which a kill on the first look would forbid.
MEMORY_SLACK = 16 * MIB
# After killing a process, how long to wait for its memory to be freed
# before choosing another one.
MEMORY_VICTIM_WAIT = 1.0
# gVisor gives the pages of a removed tmpfs file back to MemFree some time
# after Shmem drops: for up to this long the gauge keeps not counting them.
FILES_RELEASE_WAIT = 10.0
# Under gVisor a timed look can come late: with the host's CPUs busy, 60-100
# ms passed unseen between two looks while a bytearray grew at 1.1-1.5 GB/s,
# enough to pass the limit from 100 MiB below it. Memory that has grown
# steadily over the last two windows is projected this far ahead; when that
# passes the hard level, the init stops sleeping between looks (a runnable
# process is not left waiting that long) until the growth stops or reaches
# the ceiling. A single burst (an import mapping its libraries) is not
# steady growth.
MEMORY_HORIZON = 0.2


def memory_reserve(limit, kind):
    """Returns (reserve, overhead): how far below the limit the ceiling sits,
    and the part of it the gauge cannot see.

    Measured on 256 MiB and 1 GiB containers (Docker 20.10, cgroup v1, runsc
    0.0~20221219, ptrace platform): the host charges the container 20-31 MiB
    more than gVisor's /proc/meminfo says is used (the Sentry's own heap and
    kernel memory, the gofer), whatever the load (idle, 500 MiB anonymous,
    300 MiB tmpfs, numpy, pandas, scipy and sklearn imported); hence 48 MiB
    of overhead under gVisor, below which lies the hard level, and none under
    a cgroup gauge, which is the limit's own count. Below that, the larger of
    16 MiB and a thirty-second of the limit for growth between two looks at
    the pace the horizon does not project (a bytearray adds 10-16 MiB per
    look under gVisor; under runc the kernel's killer is behind anyway). So
    a 1 GiB limit puts the ceiling at 992 MiB under runc and 944 MiB under
    gVisor (hard level 976), 256 MiB at 240 and 192 (208); fast steady growth
    under gVisor is stopped a horizon earlier (a bytearray: at 840-900 MiB
    of 1 GiB, 180-200 of 256 MiB).

    Checked under load: three sandboxes filling their memory at once while
    two processes spun on the host's two cores, 24 of 24 1 GiB sandboxes
    survived bytearray(3 * 1024**3) (host peak 964 MiB), and 35 of 36 256 MiB
    ones survived numpy or a subprocess doing the same; the one lost had a
    look come more than 100 ms late. Unloaded, none is lost."""
    overhead = 48 * MIB if kind == "meminfo" else 0
    return overhead + max(16 * MIB, limit // 32), overhead


class MemoryGauge:
    """The memory of the container's processes that nothing can reclaim (no
    swap): anonymous memory, from the cgroup where the runtime shows it
    (runc); else, under gVisor, its own count of everything it holds
    (MemTotal - MemFree in /proc/meminfo, whose MemTotal is the container's
    limit there; page cache included, since on the host it is the Sentry's
    memory too). Shared memory (tmpfs files) up to `files` is left out of it
    (see FILES_MEMORY) and kept in self.shmem. The file stays open: a pread
    at 0 reads it afresh."""

    SOURCES = (
        ("/sys/fs/cgroup/memory.stat", "cgroup v2", (b"\nanon ", b"\nshmem ")),
        ("/sys/fs/cgroup/memory/memory.stat", "cgroup v1", (b"\ntotal_rss ", b"\ntotal_shmem ")),
        ("/proc/meminfo", "meminfo", (b"\nMemTotal:", b"\nMemFree:", b"\nShmem:")),
    )

    def __init__(self, fd, kind, keys, files=0):
        self.fd = fd
        self.kind = kind
        self.keys = keys
        self.files = files
        self.shmem = 0  # bytes of shared memory (tmpfs files) at the last read
        self.released = None  # (when, used then, bytes) of files removed (meminfo)

    @classmethod
    def open(cls, limit, files=0):
        for path, kind, keys in cls.SOURCES:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                continue
            g = cls(fd, kind, keys, files)
            total = g.field(0) if kind == "meminfo" else None
            # /proc/meminfo counts the container only where its total is the
            # container's limit (gVisor); elsewhere it is the host's.
            whole = limit + files
            if g.read() is not None and (total is None or total * 1024 <= whole + whole // 16):
                return g
            os.close(fd)
        return None

    def field(self, i, data=None):
        if data is None:
            data = b"\n" + os.pread(self.fd, 8192, 0)
        key = self.keys[i]
        at = data.find(key)
        if at < 0:
            raise ValueError("no %r" % key)
        at += len(key)
        return int(data[at:data.find(b"\n", at)].split()[0])

    def read(self):
        """Returns the bytes the processes use, or None."""
        try:
            data = b"\n" + os.pread(self.fd, 8192, 0)
            if self.kind == "meminfo":
                used = (self.field(0, data) - self.field(1, data)) * 1024
                try:
                    shmem = self.field(2, data) * 1024
                except ValueError:
                    shmem = 0  # not said: files count as the processes'
                if shmem < self.shmem:
                    # Files removed: Shmem drops at once, MemFree later.
                    self.released = (time.monotonic(), used, min(self.shmem, self.files) - min(shmem, self.files))
                self.shmem = shmem
                lag = 0
                if self.released is not None:
                    when, then, amount = self.released
                    if time.monotonic() - when < FILES_RELEASE_WAIT and used > then - amount // 2:
                        lag = amount
                    else:
                        self.released = None
                return used - min(self.shmem, self.files) - lag
            anon = self.field(0, data)
            self.shmem = self.field(1, data)
            # Shared memory past what files may take is the processes'
            # (MAP_SHARED anonymous memory, say).
            return anon + max(0, self.shmem - self.files)
        except (OSError, ValueError, IndexError):
            return None


def tmpfs_used(path):
    """Returns the bytes that files take in the tmpfs mounted at path, or
    None when path is not a tmpfs mount point (a BIND /session)."""
    try:
        with open("/proc/self/mountinfo", "rb") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 4 and fields[4] == path.encode():
                    sep = fields.index(b"-")
                    if fields[sep + 1] != b"tmpfs":
                        return None
                    st = os.statvfs(path)
                    return (st.f_blocks - st.f_bfree) * st.f_frsize
    except (OSError, ValueError, IndexError):
        pass
    return None


def started_processes():
    """Returns [(resident bytes, pid, name)] of the processes the init
    started, directly or not (its descendants: the worker and whatever the
    code ran, not what `docker exec` runs), largest first."""
    procs = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                st = f.read()
            end = st.rindex(b")")
            fields = st[end + 2:].split()
            procs[int(name)] = (int(fields[1]), int(fields[21]) * page, st[st.find(b"(") + 1:end].decode("utf-8", "replace"), fields[0])
        except (OSError, ValueError, IndexError):
            continue
    mine = {1: True}

    def descends(pid):
        seen = []
        while pid not in mine:
            info = procs.get(pid)
            if info is None or len(seen) > 4096:
                break
            seen.append(pid)
            pid = info[0]
        ok = mine.get(pid, False)
        for p in seen:
            mine[p] = ok
        return ok

    out = [(rss, pid, name) for pid, (_, rss, name, state) in procs.items() if pid != 1 and state not in (b"Z", b"X") and descends(pid)]
    out.sort(reverse=True)
    return out


class MemoryWatch:
    """The watchdog's state: the gauge, the ceiling, the last reading, and
    the level at which the current phase (an execution, or the idle time
    after it) began."""

    def __init__(self, limit):
        self.limit = limit
        self.gauge = MemoryGauge.open(limit, FILES_MEMORY) if limit else None
        self.ceiling = self.hard = limit
        if self.gauge is not None:
            reserve, overhead = memory_reserve(limit, self.gauge.kind)
            self.ceiling = limit - reserve
            self.hard = limit - overhead
        self.last = 0
        self.floor = 0
        self.next = 0.0
        self.victim = None  # (when, reading, its resident bytes) of the last kill
        # The kernel's own OOM kills so far (cgroup v1 or v2; None when it
        # does not say), to tell when it ended a process since the last look.
        self.ooms = oom_kills()
        self.at = 0.0  # when the current pace window began
        self.window = 0  # the reading then
        self.rate = 0.0  # bytes per second over the last window
        self.sustained = 0.0  # the lesser of the last two windows' paces
        # How far ahead growth is projected: under gVisor, whose Sentry the
        # host kills with the container, far enough to cover a late look;
        # under runc not at all (the kernel's killer is behind the ceiling).
        self.horizon = MEMORY_HORIZON if self.gauge is not None and self.gauge.kind == "meminfo" else 0.0

    def describe(self):
        if self.gauge is None:
            return "memory watchdog off (%s)" % ("no memory limit given" if not self.limit else "no memory gauge in this runtime")
        return "memory watchdog: limit %d MiB, ceiling %d MiB, files in memory %d MiB apart, gauge %s" % (self.limit >> 20, self.ceiling >> 20, FILES_MEMORY >> 20, self.gauge.kind)

    def threshold(self):
        """The level that ends a process: the ceiling, or a little above the
        phase's starting level when that was past it, never above the level
        at which the container itself is at risk."""
        return max(self.ceiling, min(self.floor + MEMORY_SLACK, self.hard))

    def mark(self):
        """A phase begins at the last reading (not while a killed process's
        memory is still being given back: see settle)."""
        if self.victim is None:
            self.floor = self.last

    def settle(self, used, now):
        """After a kill, returns True while the victim's memory is still
        counted. gVisor gives it back 40-100 ms after the process is gone
        (measured: 200 MiB in 45 ms, 600 MiB in 95 ms), so deciding before
        would kill a second process for the first one's memory; past the
        hard level it decides at once all the same. Once the memory is back
        (or MEMORY_VICTIM_WAIT has passed), what remains is the floor of a
        new phase: files that fill the memory, say, which killing more
        processes would not free."""
        if self.victim is None:
            return False
        when, before, rss = self.victim
        if used > before - rss // 2 and now - when < MEMORY_VICTIM_WAIT and used <= self.hard:
            return True
        self.victim = None
        self.floor = used
        return False

    def why(self, used):
        text = "the sandbox's memory limit of %d MiB was nearly reached: %d MiB in use by its processes" % (self.limit >> 20, used >> 20)
        # Files in memory are counted apart; saying how much they take (and
        # how much of it is /session, which the code can clean up) tells
        # the code what else holds the memory.
        shmem = self.gauge.shmem if self.gauge is not None else 0
        session = tmpfs_used(SESSION_DIR)
        if shmem >> 20 or session:
            text += "; files in memory take %d MiB apart from that" % (shmem >> 20)
            if session is not None:
                text += ", %d MiB of files under %s" % (session >> 20, SESSION_DIR)
        return text


# -- output capture -----------------------------------------------------------

class Capture:
    """One stream (stdout or stderr) of one execution: streams the head, keeps a
    ring of the tail, and reports how much was cut between them."""

    def __init__(self, name, limit):
        self.name = name
        self.head_limit = limit - limit // 2
        self.tail_limit = limit // 2
        self.total = 0
        self.tail = collections.deque()
        self.tail_size = 0
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def feed(self, data):
        """Returns the text to stream now."""
        out = b""
        room = self.head_limit - self.total
        if room > 0:
            out = data[:room]
            data = data[room:]
        self.total += len(out)
        if data:
            self.total += len(data)
            self.tail.append(data)
            self.tail_size += len(data)
            while self.tail_size - len(self.tail[0]) >= self.tail_limit:
                self.tail_size -= len(self.tail.popleft())
        return self.decoder.decode(out) if out else ""

    def finish(self):
        """Returns (text to stream at the end, bytes cut)."""
        tail = b"".join(self.tail)
        cut = 0
        if len(tail) > self.tail_limit:
            cut = self.total - self.head_limit - self.tail_limit
            tail = tail[len(tail) - self.tail_limit:]
        text = self.decoder.decode(b"", final=True)
        if cut:
            text += "\n[agentbox: %d bytes of %s cut here; the cap is %d bytes]\n" % (cut, self.name, self.head_limit + self.tail_limit)
            text += tail.decode("utf-8", "replace")
        else:
            text += codecs.decode(tail, "utf-8", "replace") if tail else ""
        self.tail.clear()
        self.tail_size = 0
        return text, cut


# -- listing files (artifacts) --------------------------------------------------

def valid_scan(root, limit):
    return isinstance(root, str) and root.startswith("/") and isinstance(limit, int) and not isinstance(limit, bool) and limit >= 1


def open_dir(path, dir_fd=None):
    """Opens the folder path (relative to dir_fd) without following a link.
    O_NOFOLLOW alone is not enough: Debian's gVisor (runsc 0.0~20221219)
    follows a link to a folder when O_DIRECTORY is given too, so the folder
    opened must be the one lstat finds at path; else ELOOP, as Linux says."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        st, at = os.fstat(fd), os.stat(path, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISDIR(at.st_mode) or (st.st_dev, st.st_ino) != (at.st_dev, at.st_ino):
        os.close(fd)
        raise OSError(errno.ELOOP, "not a folder of its own (a link?)", path)
    return fd


def list_files(root, limit):
    """Returns ([{path, size, mtime_ns, kind}], more) for the entries under
    root, at most limit. Links are reported as links, never followed, root
    included (as "."); names that are not UTF-8 are reported as "badname".

    Every lookup starts at a descriptor of root rather than at "/": for a
    user without privileges, each path resolved from "/" costs a permission
    check through the engine's FUSE root file system, seven times the stat
    itself (a thousand files took 27 ms instead of 4)."""
    files, more = [], False
    try:
        top = open_dir(root)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            try:
                st = os.lstat(root)
            except OSError:
                return files, more
            if stat.S_ISLNK(st.st_mode):
                files.append({"path": ".", "size": st.st_size, "mtime_ns": st.st_mtime_ns, "kind": "link"})
        return files, more
    try:
        stack = [""]
        while stack and not more:
            rel = stack.pop()
            try:
                fd = open_dir(rel, top) if rel else os.dup(top)
            except OSError:
                continue
            try:
                with os.scandir(fd) as it:
                    for entry in it:
                        path = rel + "/" + entry.name if rel else entry.name
                        try:
                            st = entry.stat(follow_symlinks=False)
                        except OSError:
                            continue
                        if stat.S_ISDIR(st.st_mode):
                            stack.append(path)
                            continue
                        kind = "file" if stat.S_ISREG(st.st_mode) else "link" if stat.S_ISLNK(st.st_mode) else "other"
                        try:
                            path.encode("utf-8")
                        except UnicodeEncodeError:
                            # Not UTF-8: the host could not name it back.
                            kind, path = "badname", path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
                        files.append({"path": path, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "kind": kind})
                        if len(files) >= limit:
                            more = True
                            break
            except OSError:
                pass
            finally:
                os.close(fd)
    finally:
        os.close(top)
    return files, more


# -- clients ------------------------------------------------------------------

class Client:
    """One client connection. A client speaks the protocol over its socket, or
    over the two ends of its `docker exec` stream, which agentbox_bridge.py
    hands over (SCM_RIGHTS) so that the init reads and writes them itself:
    that spares every frame a relay through the bridge, one process wake-up
    and two copies each way. The bridge's socket then carries nothing; it
    closes when the bridge is gone, and the init closes it to let the bridge
    (and with it the exec) end."""

    def __init__(self, init, sock, rfd=None, wfd=None):
        self.init = init
        self.sock = sock
        self.rfd = sock.fileno() if rfd is None else rfd
        self.wfd = sock.fileno() if wfd is None else wfd
        self.rbuf = bytearray()
        self.wbuf = bytearray()
        self.closed = False
        self.want_write = False
        self.tools = {}  # req -> agentbox_tools.Tool
        self.payload = None  # (msg, n): an "in" frame whose n bytes are still to come
        sock.setblocking(False)
        os.set_blocking(self.rfd, False)
        os.set_blocking(self.wfd, False)

    def register(self):
        sel = self.init.sel
        sel.register(self.rfd, selectors.EVENT_READ, self)
        if self.sock.fileno() != self.rfd:
            sel.register(self.sock, selectors.EVENT_READ, self)

    def unregister(self):
        sel = self.init.sel
        for fd in {self.rfd, self.wfd, self.sock.fileno()}:
            try:
                sel.unregister(fd)
            except (KeyError, ValueError):
                pass

    def close(self):
        for fd in {self.rfd, self.wfd} - {self.sock.fileno()}:
            os.close(fd)
        self.sock.close()

    def send(self, msg):
        # Frames are queued and written once per turn of the event loop (see
        # Init.flush_clients), so the frames one event produces cross the
        # engine's stream as one write.
        if self.closed:
            return
        self.wbuf += encode(msg)
        self.init.dirty.add(self)

    def send_data(self, msg, data):
        # A frame followed by raw bytes (a tool's output).
        if self.closed:
            return
        self.wbuf += encode(msg)
        self.wbuf += data
        self.init.dirty.add(self)

    def flush(self):
        while self.wbuf and not self.closed:
            try:
                n = os.write(self.wfd, self.wbuf)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                self.init.drop_client(self)
                return
            del self.wbuf[:n]
        want = bool(self.wbuf) and not self.closed
        if want != self.want_write and not self.closed:
            self.want_write = want
            sel = self.init.sel
            if self.wfd == self.rfd:
                sel.modify(self.wfd, selectors.EVENT_READ | (selectors.EVENT_WRITE if want else 0), self)
            elif want:
                sel.register(self.wfd, selectors.EVENT_WRITE, self)
            else:
                sel.unregister(self.wfd)

    def on_event(self, fd, mask):
        if fd == self.wfd and mask & selectors.EVENT_WRITE:
            self.flush()
        if fd != self.rfd:
            if fd != self.wfd and mask & selectors.EVENT_READ:
                # The bridge's socket: it never speaks after the handover,
                # so this is its end (the exec was killed).
                self.init.drop_client(self)
            return
        if mask & selectors.EVENT_READ and not self.closed:
            try:
                data = os.read(self.rfd, READ_SIZE)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if not data:
                self.init.drop_client(self)
                return
            self.rbuf += data
            while not self.closed:
                if self.payload is not None:
                    msg, n = self.payload
                    if len(self.rbuf) < n:
                        break
                    self.payload = None
                    chunk = bytes(self.rbuf[:n])
                    del self.rbuf[:n]
                    self.init.tool_input(self, msg, chunk)
                    continue
                nl = self.rbuf.find(b"\n")
                if nl < 0:
                    if len(self.rbuf) > MAX_FRAME:
                        self.send({"type": "error", "code": "frame_too_large", "message": "request larger than %d bytes" % MAX_FRAME})
                        self.init.drop_client(self)
                    break
                line = bytes(self.rbuf[:nl])
                del self.rbuf[: nl + 1]
                if line.strip():
                    need = self.init.handle_request(self, line)
                    if need is not None:
                        self.payload = need


# -- executions -----------------------------------------------------------------

class Execution:
    def __init__(self, exec_id, code, timeout, owner):
        self.id = exec_id
        self.code = code
        self.timeout = timeout
        self.subscribers = [owner] if owner is not None else []
        self.events = []  # recorded for replay to late subscribers
        self.event_bytes = 0
        self.result = None
        self.count = None
        self.started = None
        self.deadline = None
        self.kill_at = None
        self.timed_out = False
        self.interrupted = False
        self.killed = False
        self.captures = None  # name -> Capture, made on the first output
        self.scan = None  # (folder, max): list its files into the result

    def capture(self, name):
        cap = self.captures.get(name)
        if cap is None:
            cap = self.captures[name] = Capture(name, MAX_OUTPUT)
        return cap

    def record(self, msg):
        # Consecutive chunks of one stream are merged so a replay stays small.
        last = self.events[-1] if self.events else None
        if msg["type"] == "stream" and last is not None and last["type"] == "stream" and last["name"] == msg["name"]:
            self.events[-1] = dict(last, text=last["text"] + msg["text"])
        else:
            self.events.append(msg)
        if "text" in msg:
            self.event_bytes += len(msg["text"])
        elif "data" in msg:
            self.event_bytes += sum(len(v) for v in msg["data"].values())

    def publish(self, msg):
        self.record(msg)
        for c in self.subscribers:
            c.send(msg)

    def subscribe(self, client):
        for msg in self.events:
            client.send(msg)
        if self.result is not None:
            client.send(dict(self.result, replayed=True))
        elif client not in self.subscribers:
            self.subscribers.append(client)


class Worker:
    def __init__(self, pid, requests, ctrl, out, err, oom):
        self.pid = pid
        self.requests = requests  # pipe to its CONTROL_FD
        self.ctrl = ctrl  # pipe from its CONTROL_FD + 1
        self.out = out
        self.err = err
        self.outputs = select.poll()  # out and err, for drain_output
        for fd in (out, err):
            self.outputs.register(fd, select.POLLIN)
        self.rbuf = bytearray()
        self.ready = False
        self.started = time.monotonic()
        self.oom = oom
        self.python = None
        self.memory_kill = None  # why the watchdog killed it
        self.killed_for = None  # why the init killed it otherwise (a forged frame, a deadline)
        # The nonce of the request it answers now, and of the one before
        # (a background thread's late display() carries that one).
        self.nonce = None
        self.last_nonce = None


def _strings(d):
    return isinstance(d, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in d.items())


def well_formed(msg):
    """Whether a display or done frame has the shape the kernel gives it
    (see agentbox_kernel.py), so that the init can record it and the host
    decode it."""
    kind = msg.get("type")
    if kind == "display":
        return isinstance(msg.get("kind", ""), str) and _strings(msg.get("data", {}))
    if kind == "done":
        e = msg.get("error")
        return e is None or (isinstance(e, dict) and isinstance(e.get("name"), str) and isinstance(e.get("value"), str)
                             and isinstance(e.get("traceback"), list) and all(isinstance(x, str) for x in e["traceback"]))
    return True


class Init:
    def __init__(self):
        self.sel = selectors.DefaultSelector()
        self.clients = set()
        self.dirty = set()  # clients with frames queued this turn
        self.hold = None  # (execution, until): its subscribers' frames wait
        self.held = set()  # clients whose frames wait for self.hold
        self.executions = collections.OrderedDict()  # id -> Execution (queued, running, done)
        self.done = collections.deque()  # ids of finished executions, oldest first
        self.done_bytes = 0  # their recorded output
        self.queue = collections.deque()  # Execution or ("inspect", client, req)
        self.current = None  # Execution or inspect tuple in the worker
        self.inspect_deadline = None  # of the inspect tuple in the worker
        self.inspect_kill_at = None
        self.worker = None
        self.restarts = 0
        self.count = 0
        self.pending_restart = None  # why the worker restarted while no execution ran
        self.orphan = {"stdout": bytearray(), "stderr": bytearray()}
        self.respawn_at = None
        self.crash_times = collections.deque(maxlen=5)
        self.started = time.time()
        self.stopping = False
        # Started as root without saying whom to run code as: the image's
        # sandbox user, never root by accident.
        default_user = "1000:1000" if os.getuid() == 0 else ""
        self.user = parse_user(os.environ.get("AGENTBOX_USER", default_user))
        self.refused = 0
        self.as_user = SandboxUser(self.user)
        self.uid = os.getuid()
        self.memory = MemoryWatch(MEMORY_LIMIT)

    # -- set-up ---------------------------------------------------------

    def listen(self):
        self.listeners = {}
        for name, kind in ((SOCKET, "stream"), (HANDOFF, "handoff")):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.bind(name)
            sock.listen(64)
            sock.setblocking(False)
            self.sel.register(sock, selectors.EVENT_READ, "listen")
            self.listeners[sock] = kind
        if HOST_SOCKET:
            self.listen_host(HOST_SOCKET)

    def listen_host(self, path):
        """Listens on the host's socket, accepted as the stream one is (the
        same peer check): the folder is root's alone, the socket too."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            try:
                os.unlink(path)  # an earlier init's, in a restarted container
            except FileNotFoundError:
                pass
            old = os.umask(0o177)
            try:
                sock.bind(path)
            finally:
                os.umask(old)
            sock.listen(64)
        except OSError as e:
            sock.close()
            log("no host socket at %s (the host uses the bridge): %s" % (path, e))
            return
        sock.setblocking(False)
        self.sel.register(sock, selectors.EVENT_READ, "listen")
        self.listeners[sock] = "stream"

    def signals(self):
        r, w = os.pipe()
        os.set_blocking(r, False)
        os.set_blocking(w, False)
        signal.set_wakeup_fd(w)
        # What arrived is what the handlers saw, never the bytes in the
        # wake-up pipe: under gVisor the sandbox user can open the init's
        # pipes through /proc/1/fd and write a forged SIGTERM there.
        self.arrived = set()
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, lambda s, f: self.arrived.add(s))
        self.sel.register(r, selectors.EVENT_READ, "signal")
        self.sigpipe = r

    def seed_matplotlib(self):
        # The image ships a prebuilt font cache; copy it where matplotlib may write.
        src = os.path.join(HERE, "mplcache")
        dst = os.environ.get("MPLCONFIGDIR")
        if not dst or not os.path.isdir(src):
            return
        try:
            os.makedirs(dst, exist_ok=True)
            for name in os.listdir(src):
                target = os.path.join(dst, name)
                if not os.path.exists(target) and os.path.isfile(os.path.join(src, name)):
                    with open(os.path.join(src, name), "rb") as f, open(target, "wb") as g:
                        g.write(f.read())
        except OSError as e:
            log("matplotlib cache: %s" % e)

    # -- the worker -----------------------------------------------------

    def spawn(self):
        # Pipes, not a socket pair: reading a frame from a Unix stream socket
        # also wakes the peer if it sleeps in recv (one wait queue serves its
        # readers and its writers waiting for room), a needless wake-up of the
        # worker per frame; a pipe wakes a writer only when it was full.
        req_r, req_w = os.pipe()
        ctrl_r, ctrl_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        oom = oom_kills()
        pid = os.fork()
        if pid == 0:
            try:
                os.setsid()
                for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                    signal.signal(sig, signal.SIG_DFL)
                signal.set_wakeup_fd(-1)
                # The init asks the kernel's OOM killer to spare it
                # (oom_score_adj -1000, session/create.go, where the engine
                # can grant it): the worker and what it runs are its victims
                # instead, first of all. Raising one's score needs no
                # privilege; code may lower its own back, at most to the
                # init's.
                try:
                    with open("/proc/self/oom_score_adj", "w") as f:
                        f.write("1000")
                except OSError:
                    pass
                try:
                    self.become_sandbox_user()
                except Exception as e:
                    log("cannot start the kernel as the sandbox user %r: %s" % (self.user, e))
                    raise
                null = os.open(os.devnull, os.O_RDONLY)
                os.dup2(null, 0)
                os.dup2(out_w, 1)
                os.dup2(err_w, 2)
                os.dup2(req_r, CONTROL_FD)
                os.dup2(ctrl_w, CONTROL_FD + 1)
                os.closerange(CONTROL_FD + 2, 65536)
                env = worker_env(os.environ, CONTROL_FD)
                os.execve(sys.executable, [sys.executable, "-u", WORKER], env)
            finally:
                os._exit(127)
        for fd in (req_r, ctrl_w, out_w, err_w):
            os.close(fd)
        for fd in (ctrl_r, out_r, err_r):
            os.set_blocking(fd, False)
        self.worker = Worker(pid, req_w, ctrl_r, out_r, err_r, oom)
        self.sel.register(ctrl_r, selectors.EVENT_READ, "ctrl")
        self.sel.register(out_r, selectors.EVENT_READ, "stdout")
        self.sel.register(err_r, selectors.EVENT_READ, "stderr")

    def become_sandbox_user(self):
        """In the worker, before it runs anything: the sandbox user, no
        supplementary groups, no capabilities, not even in the bounding set.
        Failing any step is fatal: a worker must never run as the init."""
        self.drop_to_sandbox_user()
        self.seed_matplotlib()

    def drop_to_sandbox_user(self):
        """The sandbox user's ids for good, in /session: the worker's and
        the files tool's first step (see become_sandbox_user)."""
        ids = self.user
        if ids is not None and os.getuid() == 0 and ids[0] != 0:
            drop_bounding_set()
            os.setgroups([])
            os.setresgid(ids[1], ids[1], ids[1])
            os.setresuid(ids[0], ids[0], ids[0])
            if os.getuid() != ids[0] or os.geteuid() != ids[0]:
                raise OSError("still uid %d after setresuid" % os.geteuid())
        try:
            os.chdir(SESSION_DIR)
        except OSError:
            pass

    def read_output(self, name, fd):
        while True:
            try:
                data = os.read(fd, READ_SIZE)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if not data:
                self.sel.unregister(fd)
                os.close(fd)
                w = self.worker
                if w is not None and fd in (w.out, w.err):
                    w.outputs.unregister(fd)
                    setattr(w, "out" if name == "stdout" else "err", None)
                return
            ex = self.current if isinstance(self.current, Execution) else None
            if ex is None:
                buf = self.orphan[name]
                buf += data[: max(0, ORPHAN_OUTPUT - len(buf))]
            else:
                text = ex.capture(name).feed(data)
                if text:
                    ex.publish({"type": "stream", "id": ex.id, "name": name, "text": text})
            if len(data) < READ_SIZE:
                return  # a pipe gives less only when it is empty now

    def drain_output(self):
        # Output the worker wrote before the frame at hand comes first. One
        # poll of both pipes: a read that finds nothing costs an exception,
        # and there is usually nothing.
        w = self.worker
        if w is None:
            return
        for fd, _ in w.outputs.poll(0):
            self.read_output("stdout" if fd == w.out else "stderr", fd)

    def read_ctrl(self):
        w = self.worker
        try:
            data = os.read(w.ctrl, READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self.close_ctrl(w)
            return
        w.rbuf += data
        while self.worker is w:
            nl = w.rbuf.find(b"\n")
            if nl < 0:
                return
            line = bytes(w.rbuf[:nl])
            del w.rbuf[: nl + 1]
            try:
                msg = decode(line)
            except ValueError:
                msg = None
            if not isinstance(msg, dict):
                # The kernel writes JSON objects only: this was written by
                # code (and was a crash of PID 1 when it was a list).
                self.kill_worker(w, "was killed because a frame that is no JSON object (%r) reached its reply pipe, forged by the code" % line[:80])
                continue
            self.on_worker(msg)

    def on_worker(self, msg):
        kind = msg.get("type")
        w = self.worker
        if kind == "ready" and not w.ready and w.nonce is None:
            w.ready = True
            if self.memory.gauge is not None:
                self.memory.last = self.memory.gauge.read() or 0
                self.memory.mark()
            self.worker.python = msg.get("python")
            self.dispatch()
            return
        if w.killed_for is not None:
            return  # on its way out: nothing it still says counts
        n = msg.get("n")
        if n is None or n != w.nonce:
            if n is not None and n == w.last_nonce and kind == "display":
                return  # a background thread's display() after its cell: dropped, as ever
            # User code wrote into the worker's reply pipe (or a process it
            # forked did): nothing it says there may pass for the kernel's
            # answer, and the kernel that shares its pipes is not to be
            # trusted with the next request either.
            self.kill_worker(w, "was killed because a frame forged by the code (%r, not the kernel's answer) reached its reply pipe" % (kind,))
            return
        cur = self.current
        if kind == "state" and isinstance(cur, tuple):
            _, client, req = cur
            msg["req"] = req
            msg.pop("n", None)
            client.send(msg)
            self.current = None
            w.last_nonce, w.nonce = w.nonce, None
            self.inspect_deadline = self.inspect_kill_at = None
            self.dispatch()
            return
        if not isinstance(cur, Execution):
            return
        if not well_formed(msg):
            # Only code (that found the nonce) writes these: PID 1 must not
            # choke on them, nor pass them on to the host.
            self.kill_worker(w, "was killed because a malformed %r frame, forged by the code, reached its reply pipe" % (kind,))
            return
        if kind == "display":
            self.drain_output()  # output written before display() comes first
            cur.publish({"type": "display", "id": cur.id, "kind": msg.get("kind", "display_data"), "data": msg.get("data", {})})
        elif kind == "done":
            w.last_nonce, w.nonce = w.nonce, None
            self.drain_output()
            self.memory.mark()
            self.finish(cur, msg.get("error"))
            self.current = None
            self.trim_results()
            self.dispatch()

    def kill_worker(self, w, why):
        """Kills the worker for a reason of the init's (its death is then
        reported as any other, with why, and state lost)."""
        if w.killed_for is None:
            w.killed_for = why
            log("kernel %s" % why)
        try:
            os.killpg(w.pid, signal.SIGKILL)
        except OSError:
            pass

    def finish(self, ex, error, died=None):
        cut = {}
        for name in ("stdout", "stderr"):
            cap = ex.captures.get(name)
            if cap is None:
                continue
            text, n = cap.finish()
            if text:
                ex.publish({"type": "stream", "id": ex.id, "name": name, "text": text})
            if n:
                cut[name] = n
        restarted = died is not None
        state_lost = restarted
        reason = died
        if self.pending_restart is not None:
            restarted = True
            state_lost = True
            reason = reason or self.pending_restart
            self.pending_restart = None
        ex.result = {
            "type": "result",
            "id": ex.id,
            "execution_count": ex.count,
            "status": "error" if error else "ok",
            "error": error,
            "timed_out": ex.timed_out,
            "interrupted": ex.interrupted,
            "kernel_restarted": restarted,
            "state_lost": state_lost,
            "restart_reason": reason,
            "truncated": cut,
            "duration_ms": round((time.monotonic() - ex.started) * 1000, 3),
        }
        if ex.scan is not None:
            # Listed here, in the same frame, so that finding an execution's
            # new files costs no extra round trip.
            with self.as_user:
                ex.result["files"], ex.result["more"] = list_files(*ex.scan)
        subscribers, ex.subscribers = ex.subscribers, []
        for c in subscribers:
            c.send(ex.result)
            # Everything about ex is queued now: out in one write, whatever
            # the next execution's hold says.
            c.flush()
        ex.captures = None
        self.done.append(ex.id)
        self.done_bytes += ex.event_bytes

    def trim_results(self):
        while self.done and (len(self.done) > KEEP_RESULTS or self.done_bytes > KEEP_BYTES):
            self.done_bytes -= self.executions.pop(self.done.popleft()).event_bytes

    def reap(self):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if self.worker is not None and pid == self.worker.pid:
                self.worker_died(status)

    def worker_died(self, status):
        w = self.worker
        self.drain_output()
        for fd in (w.out, w.err):
            if fd is not None:
                self.sel.unregister(fd)
                os.close(fd)
        self.close_ctrl(w)
        # Whatever else the worker's process group left behind goes with it.
        try:
            os.killpg(w.pid, signal.SIGKILL)
        except OSError:
            pass
        self.worker = None
        self.restarts += 1
        how, oom = describe_exit(status, w.oom, oom_kills())
        if w.memory_kill is not None:
            how, oom = w.memory_kill, True
        elif w.killed_for is not None:
            how = w.killed_for
        cur = self.current
        self.current = None
        self.inspect_deadline = self.inspect_kill_at = None
        if self.stopping:
            return
        log("kernel %s; restarting it" % how)
        if isinstance(cur, Execution):
            if cur.killed and w.killed_for is None:
                why = "timed out" if cur.timed_out else "was interrupted"
                reason = "the code %s and did not stop within %gs of SIGINT, so the kernel was killed and restarted" % (why, GRACE)
                error = {"name": "KernelKilled", "value": reason + "; all variables and imports are lost", "traceback": []}
            else:
                reason = "the kernel %s" % how
                error = {"name": "OutOfMemory" if oom else "KernelDied", "value": reason + "; it was restarted and all variables and imports are lost", "traceback": []}
            self.finish(cur, error, died=reason)
            self.trim_results()
        else:
            if isinstance(cur, tuple):
                cur[1].send({"type": "error", "req": cur[2], "code": "kernel_died", "message": "the kernel %s while answering" % how})
            self.pending_restart = "the kernel %s" % how
        self.crash_times.append(time.monotonic())
        # A worker that cannot even start must not spin PID 1 at full speed.
        if len(self.crash_times) == self.crash_times.maxlen and self.crash_times[-1] - self.crash_times[0] < 5:
            self.respawn_at = time.monotonic() + 2
        elif w.memory_kill is not None:
            # Not before its memory is given back (see MemoryWatch.settle):
            # a new worker's imports on top of it could pass the limit.
            self.respawn_at = time.monotonic()
        else:
            self.spawn()

    # -- requests -------------------------------------------------------

    def handle_request(self, client, line):
        try:
            msg = decode(line)
            if not isinstance(msg, dict):
                raise ValueError("not an object")
        except ValueError as e:
            client.send({"type": "error", "code": "bad_request", "message": "request is not a JSON object: %s" % e})
            return
        kind = msg.get("type")
        req = msg.get("req")
        if kind in ("in", "eof", "ack", "close", "spawn"):
            return self.tool_request(client, kind, req, msg)
        if kind == "execute":
            self.request_execute(client, msg, req)
        elif kind == "get":
            ex = self.executions.get(msg.get("id"))
            if ex is None:
                client.send({"type": "error", "req": req, "id": msg.get("id"), "code": "unknown_execution", "message": "no execution with id %r is known to this kernel (it never ran here, or its result was dropped to make room)" % (msg.get("id"),)})
                return
            ex.subscribe(client)
        elif kind == "interrupt":
            target = msg.get("id")
            cur = self.current
            if isinstance(cur, Execution) and (target is None or target == cur.id):
                self.interrupt(cur, timed_out=False)
            else:
                ex = self.executions.get(target)
                if ex is not None and ex.result is None and ex in self.queue:
                    # Never started: it finishes as interrupted without running.
                    self.queue.remove(ex)
                    ex.interrupted = True
                    self.finish_unstarted(ex)
        elif kind == "inspect":
            self.queue.append(("inspect", client, req))
            self.dispatch()
        elif kind == "ping":
            client.send({"type": "pong", "req": req})
        elif kind == "scan":
            self.scan(client, msg, req)
        else:
            client.send({"type": "error", "req": req, "code": "bad_request", "message": "unknown request type %r" % (kind,)})

    # -- tools (agentbox_tools.py) ---------------------------------------

    def tool_request(self, client, kind, req, msg):
        """Handles a tool frame; for "in", returns (msg, n): n bytes of
        input follow the line."""
        if not isinstance(req, str) or not req or len(req) > MAX_ID:
            client.send({"type": "error", "code": "bad_request", "message": "a tool frame needs a \"req\" string"})
            self.drop_client(client)
            return None
        if kind == "in":
            n = msg.get("n")
            if not isinstance(n, int) or isinstance(n, bool) or n < 0 or n > agentbox_tools.CHUNK:
                client.send({"type": "error", "req": req, "code": "bad_request", "message": "an \"in\" frame carries 0 to %d bytes" % agentbox_tools.CHUNK})
                self.drop_client(client)
                return None
            return (msg, n)
        tool = client.tools.get(req)
        if kind == "spawn":
            name = msg.get("tool")
            if name not in agentbox_tools.TOOLS:
                client.send({"type": "error", "req": req, "code": "bad_request", "message": "unknown tool %r (the init runs %s)" % (name, ", ".join(agentbox_tools.TOOLS))})
                return None
            if tool is not None:
                client.send({"type": "error", "req": req, "code": "bad_request", "message": "tool %r is running on this connection" % req})
                return None
            try:
                agentbox_tools.preload()
                tool = agentbox_tools.spawn(self, client, req, name)
            except OSError as e:
                client.send({"type": "error", "req": req, "code": "spawn_failed", "message": "start the %s tool: %s" % (name, e)})
                return None
            client.tools[req] = tool
            client.send({"type": "spawned", "req": req, "pid": tool.pid})
        elif tool is None:
            return None  # a tool that ended, or was let go: nothing to do
        elif kind == "eof":
            tool.end_input()
        elif kind == "ack":
            n = msg.get("n")
            if isinstance(n, int) and not isinstance(n, bool) and n > 0:
                tool.acked(n)
        elif kind == "close":
            tool.close()
        return None

    def tool_input(self, client, msg, data):
        tool = client.tools.get(msg.get("req"))
        if tool is None:
            return
        if not tool.feed(data):
            client.send({"type": "error", "req": tool.req, "code": "bad_request", "message": "input beyond the tool's window"})
            tool.close()

    def scan(self, client, msg, req):
        """Lists the files under a folder (the host looks for new artifacts
        after each execution). Symbolic links are reported, never followed;
        a missing folder is an empty list."""
        root, limit = msg.get("path"), msg.get("max", 10000)
        if not valid_scan(root, limit):
            client.send({"type": "error", "req": req, "code": "bad_request", "message": "scan needs an absolute \"path\" and a positive \"max\""})
            return
        with self.as_user:
            files, more = list_files(root, limit)
        client.send({"type": "files", "req": req, "files": files, "more": more})

    def finish_unstarted(self, ex):
        ex.started = time.monotonic()
        ex.captures = {}
        self.finish(ex, {"name": "KeyboardInterrupt", "value": "interrupted before it started", "traceback": []})
        self.trim_results()

    def request_execute(self, client, msg, req):
        code = msg.get("code")
        exec_id = msg.get("id") or uuid.uuid4().hex
        timeout = msg.get("timeout")
        if not isinstance(code, str):
            client.send({"type": "error", "req": req, "id": exec_id, "code": "bad_request", "message": "execute needs a string field \"code\""})
            return
        if not isinstance(exec_id, str) or len(exec_id) > MAX_ID:
            client.send({"type": "error", "req": req, "code": "bad_request", "message": "execution id must be a string of at most %d characters" % MAX_ID})
            return
        if timeout is not None and (not isinstance(timeout, (int, float)) or timeout <= 0):
            client.send({"type": "error", "req": req, "id": exec_id, "code": "bad_request", "message": "timeout must be a positive number of seconds"})
            return
        ex = self.executions.get(exec_id)
        if ex is not None:
            # The same id again: never run twice; give this client the result.
            if ex.code != code:
                client.send({"type": "error", "req": req, "id": exec_id, "code": "id_conflict", "message": "execution id %r was already used for different code" % exec_id})
                return
            client.send({"type": "accepted", "req": req, "id": exec_id, "duplicate": True})
            ex.subscribe(client)
            return
        scan = msg.get("scan")
        if scan is not None and not (isinstance(scan, dict) and valid_scan(scan.get("path"), scan.get("max", 10000))):
            client.send({"type": "error", "req": req, "id": exec_id, "code": "bad_request", "message": "scan needs an absolute \"path\" and a positive \"max\""})
            return
        ex = Execution(exec_id, code, timeout, client)
        if scan is not None:
            ex.scan = (scan["path"], scan.get("max", 10000))
        self.executions[exec_id] = ex
        self.queue.append(ex)
        client.send({"type": "accepted", "req": req, "id": exec_id, "duplicate": False, "queued": len(self.queue) - 1 + (1 if self.current is not None else 0)})
        self.dispatch()

    def interrupt(self, ex, timed_out):
        if ex.kill_at is not None:
            return
        if timed_out:
            ex.timed_out = True
        else:
            ex.interrupted = True
        w = self.worker
        if w is not None:
            try:
                os.kill(w.pid, signal.SIGINT)
            except OSError:
                pass
        ex.kill_at = time.monotonic() + GRACE

    def dispatch(self):
        w = self.worker
        if self.current is not None or w is None or not w.ready or w.ctrl is None or not self.queue:
            return
        item = self.queue.popleft()
        # A fresh nonce per request: the replies must echo it (on_worker).
        w.nonce = os.urandom(8).hex()
        if isinstance(item, tuple):
            self.current = item
            self.inspect_deadline = time.monotonic() + INSPECT_TIMEOUT
            self.send_worker({"type": "inspect", "req": item[2], "n": w.nonce})
            return
        ex = item
        self.count += 1
        ex.count = self.count
        ex.started = time.monotonic()
        if ex.timeout:
            ex.deadline = ex.started + ex.timeout
        ex.captures = {}
        self.current = ex
        self.memory.mark()
        self.memory.next = min(self.memory.next, ex.started + MEMORY_POLL_BUSY)
        # The worker first: the frames below wait for the end of the turn.
        self.send_worker({"type": "execute", "id": ex.id, "code": ex.code, "count": ex.count, "n": w.nonce})
        for name in ("stdout", "stderr"):
            if self.orphan[name]:
                # Output written between executions (a background thread) is
                # not dropped: it opens the next execution's stream.
                text = ex.capture(name).feed(bytes(self.orphan[name]))
                self.orphan[name].clear()
                if text:
                    ex.publish({"type": "stream", "id": ex.id, "name": name, "text": text})
        ex.publish({"type": "started", "id": ex.id, "execution_count": ex.count})
        self.release_hold()
        self.hold = (ex, ex.started + HOLD)

    def close_ctrl(self, w):
        if w.ctrl is not None:
            self.sel.unregister(w.ctrl)
            os.close(w.ctrl)
            os.close(w.requests)
            w.ctrl = w.requests = None

    def send_worker(self, msg):
        # A blocking write: the worker is idle, reading.
        view = memoryview(encode(msg))
        try:
            while view:
                view = view[os.write(self.worker.requests, view):]
        except OSError as e:
            log("send to the kernel: %s" % e)  # its death is handled by SIGCHLD

    def drop_client(self, client):
        if client.closed:
            return
        client.closed = True
        for tool in list(client.tools.values()):
            tool.close()
        client.unregister()
        client.close()
        self.clients.discard(client)
        for ex in self.executions.values():
            if client in ex.subscribers:
                ex.subscribers.remove(client)
        self.queue = collections.deque(q for q in self.queue if not (isinstance(q, tuple) and q[1] is client))

    def hello(self, client):
        w = self.worker
        client.send({
            "type": "hello",
            "protocol": PROTOCOL,
            "init_pid": os.getpid(),
            "kernel_pid": w.pid if w else None,
            "python": w.python if w else None,
            "restarts": self.restarts,
            "execution_count": self.count,
            "busy": self.current is not None,
            "started": self.started,
            "max_output": MAX_OUTPUT,
            "tools": list(agentbox_tools.TOOLS),
        })

    # -- the loop ---------------------------------------------------------

    def timers(self, now):
        cur = self.current
        if isinstance(cur, Execution):
            if cur.deadline is not None and now >= cur.deadline and cur.kill_at is None:
                self.interrupt(cur, timed_out=True)
            if cur.kill_at is not None and now >= cur.kill_at and not cur.killed and self.worker is not None:
                cur.killed = True
                try:
                    os.killpg(self.worker.pid, signal.SIGKILL)
                except OSError:
                    pass
        elif isinstance(cur, tuple) and self.worker is not None and self.inspect_deadline is not None:
            if self.inspect_kill_at is None and now >= self.inspect_deadline:
                try:
                    os.kill(self.worker.pid, signal.SIGINT)
                except OSError:
                    pass
                self.inspect_kill_at = now + GRACE
            elif self.inspect_kill_at is not None and now >= self.inspect_kill_at:
                self.inspect_deadline = self.inspect_kill_at = None
                self.kill_worker(self.worker, "was killed because it did not answer a state inspection within %gs and %gs of SIGINT (code took its request, or a __repr__ never returned)" % (INSPECT_TIMEOUT, GRACE))
        if self.memory.gauge is not None and now >= self.memory.next:
            self.watch_memory(now)
        if self.respawn_at is not None and now >= self.respawn_at and self.worker is None and self.memory.victim is None:
            self.respawn_at = None
            self.spawn()

    def watch_memory(self, now):
        """Kills the largest process the init started when the container's
        memory passes the threshold; the worker's death is then reported as
        OutOfMemory (see worker_died), another process's on the execution's
        stderr."""
        m = self.memory
        used = m.gauge.read()
        fast = self.current is not None
        if used is not None:
            m.last = used
            settling = m.settle(used, now)
            if now - m.at >= MEMORY_POLL_BUSY:
                # The pace, over windows of a busy look or more (looks that
                # spin come microseconds apart).
                grew = used - m.window
                rate = grew / (now - m.at)
                m.sustained, m.rate = min(rate, m.rate), rate
                m.at, m.window = now, used
                fast = fast or grew > MEMORY_GROWTH
            over = used > m.threshold()
            if over and not settling and self.worker is not None and self.worker.ready:
                self.kill_for_memory(used, now)
            elif used + m.sustained * m.horizon > m.hard and self.worker is not None:
                # On course to pass the hard level within the horizon at the
                # pace of the last two windows: look again at once, and on
                # until the growth stops or reaches the ceiling, rather than
                # trust a timer to wake the init in time.
                m.next = now
                return
            fast = fast or m.victim is not None
        m.next = now + (MEMORY_POLL_BUSY if fast else MEMORY_POLL_IDLE)

    def kill_for_memory(self, used, now):
        m = self.memory
        w = self.worker
        # Growth stops first, in one call: choosing reads /proc, which under
        # gVisor on a busy machine takes long enough for a bytearray to add
        # tens of MiB.
        try:
            os.killpg(w.pid, signal.SIGSTOP)
        except OSError:
            pass
        ooms, m.ooms = m.ooms, oom_kills()
        if ooms is not None and m.ooms is not None and m.ooms > ooms:
            # Under runc the kernel's killer is right behind the ceiling,
            # and it just ended a process whose memory is still counted
            # (or on its way back): wait for it as for a victim of ours,
            # rather than take a second process, the kernel itself maybe,
            # for the first one's memory.
            m.victim = (now, used, max(used - m.floor, 0))
            try:
                os.killpg(w.pid, signal.SIGCONT)
            except OSError:
                pass
            return
        procs = started_processes()
        rss, pid, name = procs[0] if procs else (0, w.pid, "python3")
        why = m.why(used)
        m.victim = (now, used, rss)
        if pid == w.pid:
            w.memory_kill = "killed by the out-of-memory watchdog (%s)" % why
            try:
                os.killpg(w.pid, signal.SIGKILL)
            except OSError:
                pass
            return
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            os.killpg(w.pid, signal.SIGCONT)
        except OSError:
            pass
        note = "\n[agentbox: process %d (%s, %d MiB) was killed: %s]\n" % (pid, name, rss >> 20, why)
        cur = self.current
        if isinstance(cur, Execution):
            self.drain_output()
            text = cur.capture("stderr").feed(note.encode())
            if text:
                cur.publish({"type": "stream", "id": cur.id, "name": "stderr", "text": text})
        else:
            log(note.strip())

    def next_timeout(self, now):
        times = []
        cur = self.current
        if isinstance(cur, Execution):
            if cur.deadline is not None and cur.kill_at is None:
                times.append(cur.deadline)
            if cur.kill_at is not None and not cur.killed:
                times.append(cur.kill_at)
        elif isinstance(cur, tuple) and self.inspect_deadline is not None:
            times.append(self.inspect_deadline if self.inspect_kill_at is None else self.inspect_kill_at)
        if self.respawn_at is not None and self.memory.victim is None:
            times.append(self.respawn_at)
        if self.memory.gauge is not None:
            times.append(self.memory.next)
        if self.held:
            times.append(self.hold[1])
        if not times:
            return None
        return max(0.0, min(times) - now)

    def make_folders(self):
        # As the sandbox user: /session is the sandbox's, and a BIND one
        # holds what an earlier container left (mkdir follows no link).
        with self.as_user:
            for name in SESSION_FOLDERS:
                try:
                    os.mkdir(os.path.join(SESSION_DIR, name), 0o755)
                except FileExistsError:
                    pass
                except OSError as e:
                    log("make %s/%s: %s" % (SESSION_DIR, name, e))

    def run(self):
        self.signals()
        make_undumpable()
        self.make_folders()
        self.listen()
        log(self.memory.describe())
        self.spawn()
        while True:
            for key, mask in self.sel.select(self.next_timeout(time.monotonic())):
                what = key.data
                if what == "listen":
                    self.accept(key.fileobj)
                elif what == "signal":
                    if self.on_signals():
                        return 0
                elif what == "ctrl":
                    if self.worker is not None and self.worker.ctrl == key.fd:
                        self.read_ctrl()
                elif what in ("stdout", "stderr"):
                    # Not a pipe of a worker that died earlier in this batch
                    # (closed then; no new worker reuses its number while a
                    # respawn waits).
                    if self.worker is not None and key.fd in (self.worker.out, self.worker.err):
                        self.read_output(what, key.fd)
                elif isinstance(what, Client):
                    what.on_event(key.fd, mask)
                elif isinstance(what, agentbox_tools.Tool):
                    what.on_event(key.fd, mask)
                elif what == "handoff":
                    self.accept_handoff(key.fileobj)
            now = time.monotonic()
            self.timers(now)
            self.flush_clients(now)

    def release_hold(self):
        self.hold = None
        self.dirty |= self.held
        self.held.clear()

    def flush_clients(self, now):
        """Writes what each client has queued, except the frames of an
        execution that started less than HOLD ago: they wait until it ends or
        HOLD has passed. Each write costs the engine's stream a turn through
        the engine, its shim and the client (a round trip's worth of CPU,
        spent while the kernel runs the code on a machine with few cores), so
        a short execution's accepted, started, output and result leave as one
        write; a longer one streams as before, at most HOLD late."""
        hold = self.hold
        if hold is not None and (now >= hold[1] or hold[0] is not self.current):
            self.release_hold()
            hold = None
        while self.dirty:
            c = self.dirty.pop()
            if hold is not None and c in hold[0].subscribers:
                self.held.add(c)
            else:
                c.flush()

    def accept(self, listener):
        while True:
            try:
                sock, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                if e.errno in (errno.EMFILE, errno.ENFILE):
                    log("accept: %s" % e)
                return
            uid = peer_uid(sock)
            if uid != self.uid and uid != 0:
                # User code (another uid) knocking: it gets nothing, not
                # even a hello. Root is the host's bridge (docker exec -u 0)
                # also when this init runs unprivileged.
                self.refused += 1
                if self.refused <= 3:
                    log("refused a connection from uid %s" % uid)
                sock.close()
                continue
            if self.listeners[listener] == "handoff":
                # Its first message carries the stream's two ends.
                sock.setblocking(False)
                self.sel.register(sock, selectors.EVENT_READ, "handoff")
            else:
                self.add_client(Client(self, sock))

    def accept_handoff(self, sock):
        self.sel.unregister(sock)
        try:
            _, fds, _, _ = socket.recv_fds(sock, 16, 2, socket.MSG_CMSG_CLOEXEC)
        except OSError:
            fds = []
        if len(fds) != 2:
            for fd in fds:
                os.close(fd)
            sock.close()
            return
        self.add_client(Client(self, sock, fds[0], fds[1]))

    def add_client(self, client):
        self.clients.add(client)
        client.register()
        self.hello(client)

    def on_signals(self):
        # The pipe only wakes the loop; self.arrived says what came.
        try:
            while os.read(self.sigpipe, 512):
                pass
        except (BlockingIOError, InterruptedError):
            pass
        arrived, self.arrived = self.arrived, set()
        self.reap()  # cheap, and a SIGCHLD may share a wake-up with others
        if arrived & {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}:
            self.stopping = True
            if self.worker is not None:
                try:
                    os.killpg(self.worker.pid, signal.SIGKILL)
                except OSError:
                    pass
            return True
        return False


def main():
    if os.getpid() != 1:
        log("not PID 1 (pid %d): orphans will not be reaped here" % os.getpid())
    try:
        Init().run()
    except Exception as e:
        log("fatal: %r" % (e,))
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
