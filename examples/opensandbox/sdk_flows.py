"""OpenSandbox SDK programs, unchanged, against agentbox serve.

Two flows the OpenSandbox project shows its users, with the SDK's default
settings (its default resource request of 1 CPU and 2Gi included):

  langgraph   the LangGraph example's sandbox steps: create, write two
              files, run python3 /tmp/math.py, the fallback python
              /tmp/math.py, read back, kill
  quickstart  the SDK README's tour: a streamed command, write, read,
              search and delete files, PYTHONPATH in the environment, a
              script under /app run with python, renew, pause, resume,
              get_info, the code interpreter, kill

Run it against a server on loopback (agentbox serve with no key listens on
127.0.0.1:8080):

  SANDBOX_DOMAIN=127.0.0.1:8080 python3 examples/opensandbox/sdk_flows.py

with the opensandbox and code-interpreter packages importable. It exits
non-zero on the first step that does not do what the SDK's user expects.
The committed Go tests (server/opensandbox) send the same requests.
"""

import asyncio
import os
import sys
from datetime import timedelta

from code_interpreter import CodeInterpreter
from opensandbox import Sandbox
from opensandbox.config import ConnectionConfig
from opensandbox.models.execd import ExecutionHandlers
from opensandbox.models.filesystem import SearchEntry, WriteEntry


def config() -> ConnectionConfig:
    return ConnectionConfig(
        domain=os.getenv("SANDBOX_DOMAIN", "127.0.0.1:8080"),
        api_key=os.getenv("SANDBOX_API_KEY"),
        request_timeout=timedelta(seconds=120),
    )


def stdout_of(execution) -> str:
    return "".join(m.text for m in execution.logs.stdout).strip()


def check(what: str, ok: bool, detail="") -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {what}" + (f": {detail}" if detail else ""))
    if not ok:
        sys.exit(1)


async def langgraph() -> None:
    cfg = config()
    image = os.getenv("SANDBOX_IMAGE", "agentbox-sandbox:latest")
    sandbox = await Sandbox.create(image, connection_config=cfg)
    check("create with the SDK's defaults", bool(sandbox.id), sandbox.id)
    await sandbox.files.write_file("/tmp/math.py", "result = 137 * 42\nprint(result)\n")
    await sandbox.files.write_file("/tmp/notes.txt", "LangGraph + OpenSandbox\n")
    run = await sandbox.commands.run("python3 /tmp/math.py")
    check("python3 /tmp/math.py", stdout_of(run) == "5754" and not run.error, stdout_of(run))
    run = await sandbox.commands.run("python /tmp/math.py")
    check("fallback python /tmp/math.py", stdout_of(run) == "5754" and not run.error, stdout_of(run))
    notes = await sandbox.files.read_file("/tmp/notes.txt")
    check("read back /tmp/notes.txt", notes == "LangGraph + OpenSandbox\n", repr(notes))
    await sandbox.kill()
    check("kill", True)


async def quickstart() -> None:
    cfg = config()
    image = os.getenv("SANDBOX_IMAGE", "agentbox-sandbox:latest")
    sandbox = await Sandbox.create(
        image,
        connection_config=cfg,
        timeout=timedelta(minutes=30),
        env={"PYTHONPATH": "/app"},
        metadata={"project": "demo"},
    )
    check("create with PYTHONPATH", bool(sandbox.id), sandbox.id)

    lines = []

    async def on_stdout(msg):
        lines.append(msg.text.strip())

    run = await sandbox.commands.run(
        'for i in 1 2 3; do echo "Count $i"; sleep 0.2; done',
        handlers=ExecutionHandlers(on_stdout=on_stdout),
    )
    check("streamed command", lines == ["Count 1", "Count 2", "Count 3"], lines)

    await sandbox.files.write_files([WriteEntry(path="/tmp/hello.txt", data="Hello World", mode=644)])
    content = await sandbox.files.read_file("/tmp/hello.txt")
    check("write and read /tmp/hello.txt", content == "Hello World", repr(content))
    found = await sandbox.files.search(SearchEntry(path="/tmp", pattern="*.txt"))
    check("search /tmp for *.txt", any(f.path == "/tmp/hello.txt" for f in found), [f.path for f in found])
    await sandbox.files.delete_files(["/tmp/hello.txt"])
    found = await sandbox.files.search(SearchEntry(path="/tmp", pattern="*.txt"))
    check("delete /tmp/hello.txt", not any(f.path == "/tmp/hello.txt" for f in found))

    await sandbox.files.write_files([
        WriteEntry(path="/app/helper.py", data="GREETING = 'hello from /app'\n"),
        WriteEntry(path="/app/script.py", data="import helper\nprint(helper.GREETING)\n"),
    ])
    run = await sandbox.commands.run("python /app/script.py")
    check("python /app/script.py (PYTHONPATH=/app)", stdout_of(run) == "hello from /app", stdout_of(run) or run.error)

    await sandbox.renew(timedelta(minutes=30))
    info = await sandbox.get_info()
    check("renew", info.expires_at is not None, info.expires_at)
    await sandbox.pause()
    info = await sandbox.get_info()
    check("pause", "aus" in str(info.status.state), info.status.state)
    try:
        await sandbox.commands.run("true")
        check("a command on a paused sandbox is refused", False)
    except Exception as e:  # the SDK's API error, with the server's code
        check("a command on a paused sandbox is refused", "SANDBOX_PAUSED" in repr(e) or "409" in str(e), f"{type(e).__name__}: {e}")
    sandbox = await Sandbox.resume(sandbox_id=sandbox.id, connection_config=cfg)
    info = await sandbox.get_info()
    check("resume", "unning" in str(info.status.state), info.status.state)

    ci = await CodeInterpreter.create(sandbox)
    await ci.codes.run("x = 41")
    r = await ci.codes.run("x + 1")
    check("code interpreter keeps state", r.result and r.result[0].text == "42", r.result)

    await sandbox.kill()
    check("kill", True)


async def main() -> None:
    flows = sys.argv[1:] or ["langgraph", "quickstart"]
    for name in flows:
        print(f"== {name}")
        await {"langgraph": langgraph, "quickstart": quickstart}[name]()


if __name__ == "__main__":
    asyncio.run(main())
