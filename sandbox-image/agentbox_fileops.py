# The files API's helper: one call of the files API in a session's
# container, as the sandbox user, beside the kernel. The init runs it for the
# host over the session's channel (agentbox_tools.py: forked from the init,
# never exec'd, so that it stays undumpable); an engine exec can run it too
# (python3 -I -S -B agentbox_fileops.py OP REQUEST). It sees the container's filesystem with the sandbox
# user's permissions, so no path it is given can reach the host: a link the
# code planted resolves inside the container, where the sandbox user can
# only reach what it could reach anyway.
#
# REQUEST is a JSON object. Every answer on standard output is JSON lines;
# "read" then sends the file's bytes. An OSError becomes
# {"kind": ..., "message": ...}; the host maps kinds onto its sentinels.
# Only what every op needs is imported here: the helper starts once per
# call, so its imports are part of every round trip (fnmatch and shutil
# cost more than the rest together).
import errno
import json
import os
import stat
import sys
import time

OUT = None  # standard output, binary (main or serve sets it)
INP = None  # standard input, binary and buffered: every read of a call goes
# through it, so that what it read ahead (the next call's) is never lost
BROKEN = False  # the answer went short of what it announced (a file shrank)

KINDS = {
    errno.ENOENT: "not_found",
    errno.EISDIR: "is_dir",
    errno.ENOTDIR: "not_dir",
    errno.EACCES: "permission",
    errno.EPERM: "permission",
    errno.EROFS: "permission",
    errno.ENOSPC: "no_space",
    errno.EDQUOT: "no_space",
    errno.EEXIST: "exists",
    errno.ENOTEMPTY: "not_empty",
    errno.ENAMETOOLONG: "bad_path",
    errno.ELOOP: "bad_path",
    errno.EFBIG: "too_large",
    errno.EBUSY: "busy",
}


def fail(kind, message):
    return {"kind": kind, "message": message}


# Errnos whose words say more than their kind does.
TELLING = {errno.EROFS, errno.EDQUOT, errno.ELOOP, errno.ENAMETOOLONG, errno.EBUSY}


# What a write to the read-only root (or /data) is told.
READ_ONLY = "read-only file system: write under /session (the home folder), /app, /workspace or /tmp"


def oserr(e):
    if isinstance(e, OSError) and e.errno:
        kind = KINDS.get(e.errno, "io")
        if e.errno == errno.EROFS:
            return fail(kind, READ_ONLY)
        telling = kind == "io" or e.errno in TELLING
        return fail(kind, os.strerror(e.errno) if telling else "")
    return fail("io", str(e))


def send(obj):
    OUT.write(json.dumps(obj, ensure_ascii=True).encode() + b"\n")


def kind_of(mode):
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "other"


def describe(path, st):
    d = {
        "path": path,
        "type": kind_of(st.st_mode),
        "size": st.st_size,
        "mode": stat.S_IMODE(st.st_mode),
        "mtime_ns": st.st_mtime_ns,
    }
    if stat.S_ISLNK(st.st_mode):
        try:
            d["target"] = os.readlink(path)
        except OSError:
            pass
    return d


def read_exact(inp, n):
    data = inp.read(n)
    if data is None or len(data) != n:
        raise EOFError("the host's stream ended inside a file")
    return data


ABORT = 0xFFFFFFFF


def write_one(inp, head, staged=None):
    # Each file arrives as chunks (4-byte big-endian length, then bytes),
    # ended by a zero length, or by ABORT when the host stops it (a cap, a
    # reader that failed). The bytes go to a new temporary name beside the
    # target, which replaces the target only once whole, so code never
    # sees half a file, and whatever was at the target (a link, a named
    # pipe) is replaced, never followed or opened.
    path, mode = head["path"], head["mode"]
    parent, name = os.path.split(path)
    error, fd, tmp, total, aborted = None, None, None, 0, False
    try:
        try:
            os.makedirs(parent, exist_ok=True)
        except FileExistsError:
            raise NotADirectoryError(errno.ENOTDIR, "a file is in the way")
        tmp = os.path.join(parent, ".%s.%s.part" % (name[:64], os.urandom(6).hex()))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as e:
        error = oserr(e)
    while True:
        n = int.from_bytes(read_exact(inp, 4), "big")
        if n == 0:
            break
        if n == ABORT:
            aborted = True
            break
        data = read_exact(inp, n)
        total += n
        if fd is None or error is not None:
            continue  # the rest is read and dropped, to reach the next file
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        except OSError as e:
            error = oserr(e)
    if fd is not None:
        try:
            if error is None and not aborted:
                os.fchmod(fd, mode)
            os.close(fd)
            if error is None and not aborted:
                if os.path.isdir(path) and not os.path.islink(path):
                    raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
                if staged is not None:
                    staged.append((tmp, path))  # put in place by commit
                else:
                    os.rename(tmp, path)
                tmp = None
        except OSError as e:
            error = error or oserr(e)
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return {"path": path, "size": total, "error": error, "aborted": aborted}


def commit(staged):
    # Puts every staged file in place, in order; what cannot be is said.
    errors = []
    for tmp, path in staged:
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
            os.rename(tmp, path)
        except OSError as e:
            errors.append({"path": path, "error": oserr(e)})
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return errors


def op_write(req):
    # With "all", the files are staged beside their targets and put in
    # place only when the host sends {"commit": true} after the last one;
    # a stream that ends without it leaves nothing.
    # A commit with "whole" (the host sent the call in one piece, without
    # waiting for the files' answers) puts nothing in place when a file of
    # the call failed.
    inp = INP
    staged = [] if req.get("all") else None
    whole = True
    while True:
        line = inp.readline()
        if not line:
            break
        head = json.loads(line)
        if head.get("end"):
            break  # the host's files ended (a kept tool's input goes on)
        if staged is not None and head.get("commit"):
            if head.get("whole") and not whole:
                for tmp, _ in staged:
                    try:
                        os.unlink(tmp)
                    except OSError:
                        pass
                send({"committed": False, "errors": []})
            else:
                send({"committed": True, "errors": commit(staged)})
            staged = []
        else:
            r = write_one(inp, head, staged)
            whole = whole and r["error"] is None and not r["aborted"]
            send(r)
        OUT.flush()
    for tmp, _ in staged or []:
        try:
            os.unlink(tmp)
        except OSError:
            pass
    send({"done": True})


def op_read(req):
    path, offset, length, cap = req["path"], req["offset"], req["length"], req["max"]
    try:
        # O_NONBLOCK: a named pipe opens at once (and is refused below)
        # instead of waiting for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as e:
        send({"error": oserr(e)})
        return
    st = os.fstat(fd)
    if stat.S_ISDIR(st.st_mode):
        send({"error": fail("is_dir", "a folder, not a file")})
        return
    if not stat.S_ISREG(st.st_mode):
        send({"error": fail("not_regular", "a %s, not a regular file" % kind_of(st.st_mode))})
        return
    offset = min(offset, st.st_size)
    n = st.st_size - offset if length < 0 else min(length, st.st_size - offset)
    info = describe(path, st)
    if n > cap:
        send({"error": fail("too_large", "%d bytes to read" % n), "info": info})
        return
    info["offset"], info["length"] = offset, n
    send({"info": info})
    OUT.flush()
    while n > 0:
        try:
            sent = os.sendfile(1, fd, offset, min(n, 1 << 24))
        except OSError:
            data = os.pread(fd, min(n, 1 << 20), offset)
            OUT.write(data)
            OUT.flush()
            sent = len(data)
        if sent == 0:
            # The file shrank: the host sees the short read when the
            # output ends, so a kept tool must not answer again.
            global BROKEN
            BROKEN = True
            break
        offset += sent
        n -= sent


def op_stat(req):
    try:
        send({"info": describe(req["path"], os.lstat(req["path"]))})
    except OSError as e:
        send({"error": oserr(e)})


def sorted_dir(d):
    with os.scandir(d) as it:
        return sorted(it, key=lambda x: x.name)


def walk(top, enter):
    # Depth first, sorted: yields (entry, stat); enter(entry, stat) says
    # whether to go into a folder. Links are never entered; a subfolder the
    # sandbox user cannot read is left out.
    stack = [iter(sorted_dir(top))]
    while stack:
        x = next(stack[-1], None)
        if x is None:
            stack.pop()
            continue
        try:
            st = x.stat(follow_symlinks=False)
        except OSError:
            continue
        yield x, st
        if stat.S_ISDIR(st.st_mode) and enter(x, st):
            try:
                stack.append(iter(sorted_dir(x.path)))
            except OSError:
                pass


def op_list(req):
    top, limit = req["path"], req["limit"]
    try:
        st = os.stat(top)
        if not stat.S_ISDIR(st.st_mode):
            send({"error": fail("not_dir", "a %s, not a folder" % kind_of(st.st_mode))})
            return
        n = 0
        recursive = req["recursive"]
        for x, st in walk(top, lambda x, st: recursive):
            if n == limit:
                send({"done": True, "truncated": True})
                return
            send(describe(x.path, st))
            n += 1
    except OSError as e:
        send({"error": oserr(e)})
        return
    send({"done": True, "truncated": False})


MAGIC = set("*?[")


def op_glob(req):
    import fnmatch

    segs = [s for s in req["pattern"].split("/") if s]
    fixed = []
    while segs and not (MAGIC & set(segs[0])):
        fixed.append(segs.pop(0))
    top = "/" + "/".join(fixed)
    limit, budget = req["limit"], req["visit"]
    if not segs:
        try:
            send(describe(top, os.lstat(top)))
        except OSError:
            pass
        send({"done": True, "truncated": False})
        return
    deep = "**" in segs
    memo = {}
    skip = len(top.rstrip("/")) + 1

    def rel_of(p):
        return p[skip:].split("/")

    def match(i, names):
        key = (i, len(names))
        if key in memo:
            return memo[key]
        if i == len(segs):
            r = not names
        elif segs[i] == "**":
            r = any(match(i + 1, names[k:]) for k in range(len(names) + 1))
        else:
            r = bool(names) and fnmatch.fnmatchcase(names[0], segs[i]) and match(i + 1, names[1:])
        memo[key] = r
        return r

    def worth_entering(names):
        if deep:
            return True
        if len(names) >= len(segs):
            return False
        return all(fnmatch.fnmatchcase(n, s) for n, s in zip(names, segs))

    top = top.rstrip("/") or "/"
    n, visited = 0, 0
    try:
        for x, st in walk(top, lambda x, st: worth_entering(rel_of(x.path))):
            visited += 1
            if visited > budget:
                send({"done": True, "truncated": True})
                return
            memo.clear()
            if match(0, rel_of(x.path)):
                if n == limit:
                    send({"done": True, "truncated": True})
                    return
                send(describe(x.path, st))
                n += 1
    except OSError:
        pass
    send({"done": True, "truncated": False})


def op_remove(req):
    import shutil

    path = req["path"]
    try:
        st = os.lstat(path)
        if stat.S_ISDIR(st.st_mode):
            if req["recursive"]:
                shutil.rmtree(path)  # by descriptors; never follows a link
            else:
                os.rmdir(path)
        else:
            os.unlink(path)
    except OSError as e:
        send({"error": oserr(e)})
        return
    send({"ok": True})


def op_mkdir(req):
    path = req["path"]
    try:
        os.makedirs(path, req["mode"], exist_ok=True)
    except FileExistsError:
        send({"error": fail("not_dir", "a file is in the way")})
        return
    except OSError as e:
        send({"error": oserr(e)})
        return
    send({"ok": True})


def op_move(req):
    import shutil

    src, dst = req["src"], req["dst"]
    try:
        os.lstat(src)
        if not req["overwrite"] and os.path.lexists(dst):
            send({"error": fail("exists", "the destination exists")})
            return
        try:
            os.rename(src, dst)
        except OSError as e:
            if e.errno != errno.EXDEV:
                raise
            shutil.move(src, dst)  # another filesystem: copy, then remove
    except OSError as e:
        send({"error": oserr(e)})
        return
    send({"ok": True})


OPS = {
    "write": op_write,
    "read": op_read,
    "stat": op_stat,
    "list": op_list,
    "glob": op_glob,
    "remove": op_remove,
    "mkdir": op_mkdir,
    "move": op_move,
}



def main(op, req):
    """Runs one op with its request (a JSON object's text) on file
    descriptors 0 and 1."""
    global OUT, INP
    OUT = os.fdopen(1, "wb", buffering=1 << 16, closefd=False)
    INP = os.fdopen(0, "rb", buffering=1 << 20, closefd=False)
    OPS[op](json.loads(req))
    OUT.flush()


READY = b'{"ready": true}\n'
IDLE = b'{"idle": true}\n'
STALE = b'#stale\n'  # not JSON: told from any answer by its first byte
SKEW = 0.25  # seconds the container's clock may trail the host's
MAX_CALL = 1 << 20  # of one call's request, bytes


def serve():
    """Runs calls, one after another, on file descriptors 0 and 1, until
    the input ends: the files tool the host keeps (agentbox_tools.py), so
    that a call costs no fork. Each call is a 4-byte big-endian length and
    a JSON [op, request, confirm]. With confirm true (an op that changes
    something) the tool says READY and waits for one byte, b"g", before it
    runs the op: a call sent to a frozen container, which the host gave up
    on and let go, finds the end of the input when thawed and never runs.
    With confirm an object {"sent", "not_after", "body"} (the host's clock,
    in seconds; the bytes of the call that follow the message) the op runs
    at once if the tool reads it inside that window, else the tool drops
    the body and says STALE: a call read after its window, which the host
    has given up on by then, never runs.
    After an op whose answer is whole the tool says IDLE, the host's sign
    that the next call may come; after one that is not (a file that shrank
    while read) it ends."""
    global OUT, INP
    OUT = os.fdopen(1, "wb", buffering=1 << 16, closefd=False)
    INP = os.fdopen(0, "rb", buffering=1 << 20, closefd=False)
    while True:
        head = INP.read(4)
        if len(head) < 4:
            return
        n = int.from_bytes(head, "big")
        if n > MAX_CALL:
            raise ValueError("a call of %d bytes, at most %d" % (n, MAX_CALL))
        body = INP.read(n)
        if len(body) < n:
            return
        op, req, confirm = json.loads(body)
        if isinstance(confirm, dict):
            # Sent whole, with the host's clock: run only inside its
            # window (a container frozen past it, a tool stopped past it,
            # a clock that disagrees: the host asks again, the long way).
            if not confirm["sent"] - SKEW <= time.time() <= confirm["not_after"]:
                if len(INP.read(confirm.get("body", 0))) < confirm.get("body", 0):
                    return
                OUT.write(STALE + IDLE)
                OUT.flush()
                continue
        elif confirm:
            OUT.write(READY)
            OUT.flush()
            if INP.read(1) != b"g":
                return
        OPS[op](json.loads(req))
        if BROKEN:
            OUT.flush()
            return
        OUT.write(IDLE)
        OUT.flush()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
