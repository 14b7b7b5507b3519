# agentbox_probes.py: short questions the host asks inside a container,
# one run each, standard library only (run as python3 -I -S -B).
#
#   commands  prints how many shell supervisors run in the container: root
#             processes running agentbox_supervisor.py (its path is an
#             argument of their command line, or, forked by the init, their
#             name is agentbox-cmd). Sandbox code cannot start a
#             root process, so it cannot fake one; the sweep counts them
#             so that one manager does not evict a session while another
#             runs a command in it.
#   complete  reads Python source on stdin and prints "complete",
#             "incomplete" or "invalid" by the rules of Python's
#             interactive prompt (code.InteractiveConsole):
#             codeop.compile_command in "single" mode returns a code object
#             (complete), None (incomplete), or raises (invalid). Warnings
#             the compiler gives (invalid escape sequences, say) are the
#             kernel's to show, not the check's.
import os
import sys

SUPERVISOR = "/opt/agentbox/agentbox_supervisor.py"
# What the init names a supervisor it forks for the host (agentbox_tools.py).
TOOL_NAME = b"agentbox-cmd"


def count_supervisors(proc="/proc", supervisor=SUPERVISOR):
    mark = supervisor.encode()
    n = 0
    for pid in os.listdir(proc):
        if not pid.isdigit():
            continue
        try:
            with open("%s/%s/status" % (proc, pid), "rb") as f:
                status = f.read().splitlines()
            uid = [l for l in status if l.startswith(b"Uid:")][0].split()[1]
            name = [l for l in status if l.startswith(b"Name:")][0].split(None, 1)[1].strip()
            with open("%s/%s/cmdline" % (proc, pid), "rb") as f:
                argv = f.read().split(b"\0")
        except (OSError, IndexError):
            continue
        if uid == b"0" and (mark in argv or name == TOOL_NAME):
            n += 1
    return n


def completeness(src):
    import codeop
    import warnings

    warnings.simplefilter("ignore")
    try:
        return "complete" if codeop.compile_command(src, "<input>", "single") is not None else "incomplete"
    except (SyntaxError, ValueError, OverflowError, MemoryError, RecursionError):
        return "invalid"


def main(argv):
    if argv[1:] == ["commands"]:
        print(count_supervisors())
        return 0
    if argv[1:] == ["complete"]:
        sys.stdout.write(completeness(sys.stdin.buffer.read().decode("utf-8", "replace")))
        return 0
    sys.stderr.write("usage: agentbox_probes.py commands | complete\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
