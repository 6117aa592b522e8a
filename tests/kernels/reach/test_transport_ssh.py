"""The ssh transport.

Three layers: pure functions (options, quoting, status classification);
ClusterShell driving a fake ``ssh`` that logs the argv it gets and plays the
remote side locally; and, where this machine has sshd and we are root, real
sshd instances on loopback addresses (127.0.0.2, 127.0.0.3) with generated
host and client keys and strict host key checking.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from oddnode.core.nodes import NodeNameError
from oddnode.reach import NodeStatus, TransportError, get_transport, python_command
from oddnode.reach.ssh import REMOTE_WRAPPER, SSH_CONNECTION_ERRORS, SshTransport, classify, remote_command, ssh_options

from support.processes import alive

ECHO_ARGS = "import json, sys; print(json.dumps(sys.argv[1:]))"


def tricky_args(canary: Path) -> list[str]:
    """Arguments a shell or ClusterShell would rewrite if either got the chance."""
    return ["a b", "'single'", '"double"', f"$(touch {canary})", f"`touch {canary}`", "*", "$HOME", "",
            "; echo injected", "%hosts", "%{hosts}", "100%", "%h", "tab\there"]


# -- pure functions -------------------------------------------------------------


def test_ssh_options_pass_the_config_and_batch_mode(tmp_path):
    config = tmp_path / "ssh config"
    assert ssh_options(config) == ["-F", str(config), "-oBatchMode=yes"]
    assert ssh_options(None) == ["-oBatchMode=yes"]


def test_task_info_never_turns_host_key_checking_off(tmp_path):
    config = tmp_path / "ssh_config"
    config.write_text("")
    transport = SshTransport(ssh_config=config, fanout=8, connect_timeout=2.5, user="admin")
    info = transport.task_info()
    assert info == {
        "fanout": 8,
        "connect_timeout": 3,  # ssh takes whole seconds: rounded up, never to 0
        "ssh_options": shlex.join(["-F", str(config), "-oBatchMode=yes"]),
        "ssh_user": "admin",
    }
    assert "stricthostkeychecking" not in json.dumps(info).lower()


def test_options_are_checked():
    with pytest.raises(TransportError, match="fanout"):
        SshTransport(fanout=0)
    with pytest.raises(TransportError, match="connect_timeout"):
        SshTransport(connect_timeout=0)
    with pytest.raises(TransportError, match="user"):
        SshTransport(user="-oProxyCommand=x")
    with pytest.raises(TransportError, match="not a file"):
        SshTransport(ssh_config="/nonexistent/ssh_config")


@pytest.mark.parametrize("bad", ["node1;reboot", "-oProxyCommand=touch /tmp/x", "a b", "node[1-2]", "@group", ""])
def test_invalid_node_names_are_rejected_before_anything_runs(bad):
    with pytest.raises(NodeNameError):
        get_transport("ssh").run(["node1", bad], ["true"], timeout=5)


def test_remote_command_quotes_every_word():
    args = tricky_args(Path("/tmp/canary"))
    command = remote_command(["prog", *args])
    assert shlex.split(command) == ["prog", *args]
    assert "%hosts" not in command and "%{hosts}" not in command


def test_remote_command_survives_a_real_shell(tmp_path):
    canary = tmp_path / "canary"
    args = tricky_args(canary)
    command = remote_command([sys.executable, "-c", ECHO_ARGS, *args])
    done = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == args
    assert not canary.exists()


@pytest.mark.parametrize(
    ("exit_code", "stderr", "timed_out", "expected"),
    [
        (0, "", False, NodeStatus.OK),
        (1, "", False, NodeStatus.FAILED),
        (255, "", False, NodeStatus.FAILED),  # the remote command's own 255
        (255, "some tool: fatal\n", False, NodeStatus.FAILED),
        (255, "ssh: connect to host n1 port 22: Connection refused\r\n", False, NodeStatus.UNREACHABLE),
        (255, "ssh: connect to host n1 port 22: Connection timed out\n", False, NodeStatus.UNREACHABLE),
        (255, "ssh: connect to host n1 port 22: No route to host\n", False, NodeStatus.UNREACHABLE),
        (255, "ssh: Could not resolve hostname n1: Name or service not known\n", False, NodeStatus.UNREACHABLE),
        (255, "No ED25519 host key is known for n1.\nHost key verification failed.\n", False,
         NodeStatus.UNREACHABLE),
        (255, "root@n1: Permission denied (publickey).\n", False, NodeStatus.UNREACHABLE),
        (1, "ssh: connect to host n1 port 22: Connection refused\n", False, NodeStatus.FAILED),
        (None, "", True, NodeStatus.TIMEOUT),
        (None, "", False, NodeStatus.UNREACHABLE),
    ],
)
def test_classify(exit_code, stderr, timed_out, expected):
    assert classify(exit_code, stderr, timed_out=timed_out) is expected


def test_connection_errors_include_those_asked_for():
    for message in ("Connection refused", "Connection timed out", "No route to host",
                    "Could not resolve hostname", "Host key verification failed", "Permission denied"):
        assert message in SSH_CONNECTION_ERRORS


# -- ClusterShell with a fake ssh ---------------------------------------------------

# A stand-in for ssh: logs its argv (one JSON line per call), then plays the
# remote side. Hosts named down* refuse the connection; badkey* fail host key
# verification; others run the command here, split into words as the remote
# shell would, with FAKE_NODE set to the host. exec keeps one process, so a
# timeout that kills "ssh" leaves nothing behind.
FAKE_SSH = """\
#!{python}
import json, os, shlex, sys
with open(os.environ["FAKE_SSH_LOG"], "a") as log:
    log.write(json.dumps(sys.argv) + "\\n")
host, command = sys.argv[-2], sys.argv[-1]
if host.startswith("down"):
    sys.stderr.write(f"ssh: connect to host {{host}} port 22: Connection refused\\r\\n")
    sys.exit(255)
if host.startswith("badkey"):
    sys.stderr.write(f"No ED25519 host key is known for {{host}}.\\r\\nHost key verification failed.\\r\\n")
    sys.exit(255)
argv = shlex.split(command)
os.execvpe(argv[0], argv, dict(os.environ, FAKE_NODE=host))
"""


@pytest.fixture
def fake_ssh(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ssh = bin_dir / "ssh"
    ssh.write_text(FAKE_SSH.format(python=sys.executable))
    ssh.chmod(0o755)
    log = tmp_path / "ssh-argv.jsonl"
    log.touch()
    config = tmp_path / "ssh_config"
    config.write_text("# oddnode test\n")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SSH_LOG", str(log))
    return SimpleNamespace(config=config, calls=lambda: [json.loads(line) for line in log.read_text().splitlines()])


def node_script(body: str) -> list[str]:
    """A Python probe that knows which fake node it runs on."""
    return python_command("import os, sys, time\nnode = os.environ['FAKE_NODE']\n" + body, sys.executable)


def test_fake_ssh_gets_our_options_and_one_host_per_call(fake_ssh):
    transport = SshTransport(ssh_config=fake_ssh.config, connect_timeout=4, user="admin")
    results = transport.run(["n1", "n2"], ["echo", "hi there"], timeout=30)
    assert {node: result.stdout for node, result in results.items()} == {"n1": "hi there\n", "n2": "hi there\n"}
    calls = fake_ssh.calls()
    assert sorted(call[-2] for call in calls) == ["n1", "n2"]
    for call in calls:
        # The node enforces the timeout, in the wrapper that also stops the command with its ssh client.
        assert shlex.split(call[-1]) == ["sh", "-c", REMOTE_WRAPPER, "oddnode-ssh", "30", "echo", "hi there"]
        assert call[1:3] == ["-F", str(fake_ssh.config)]
        assert "-oBatchMode=yes" in call
        assert "-oConnectTimeout=4" in call
        assert call[call.index("-l") + 1] == "admin"
        assert not any("stricthostkeychecking=no" in arg.lower().replace(" ", "") for arg in call)


def test_every_node_gets_its_own_result(fake_ssh):
    nodes = [f"node{number:03d}" for number in range(1, 21)]
    script = "print('I am', node)\nprint('note from', node, file=sys.stderr)\nsys.exit(int(node[-2:]) % 3)\n"
    results = SshTransport(ssh_config=fake_ssh.config).run(nodes, node_script(script), timeout=60)
    assert sorted(results) == nodes
    for node in nodes:
        result = results[node]
        assert result.stdout == f"I am {node}\n"
        assert result.stderr == f"note from {node}\n"  # kept apart from stdout
        assert result.exit_code == int(node[-2:]) % 3
        assert result.status is (NodeStatus.OK if result.exit_code == 0 else NodeStatus.FAILED)
        assert result.duration > 0


def test_unreachable_nodes_keep_ssh_s_reason_and_spare_the_others(fake_ssh):
    results = SshTransport(ssh_config=fake_ssh.config).run(
        ["down1", "n1", "badkey1", "n2"], node_script("print(node)\nsys.exit(255 if node == 'n2' else 0)\n"),
        timeout=30)
    assert results["n1"].ok and results["n1"].stdout == "n1\n"
    assert results["down1"].status is NodeStatus.UNREACHABLE
    assert results["down1"].exit_code is None
    assert "Connection refused" in results["down1"].stderr
    assert results["badkey1"].status is NodeStatus.UNREACHABLE
    assert "Host key verification failed" in results["badkey1"].stderr
    # A remote program's own exit 255 is a failure, not a lost connection.
    assert results["n2"].status is NodeStatus.FAILED and results["n2"].exit_code == 255


@pytest.mark.timing
def test_timeout_cuts_one_node_and_not_the_others(fake_ssh):
    script = "print('started', os.getpid(), flush=True)\ntime.sleep(30 if node == 'slow1' else 0)\n"
    started = time.monotonic()
    results = SshTransport(ssh_config=fake_ssh.config).run(["n1", "slow1", "n2"], node_script(script), timeout=1.5)
    assert time.monotonic() - started < 5
    assert results["n1"].ok and results["n2"].ok
    slow = results["slow1"]
    assert slow.status is NodeStatus.TIMEOUT
    assert slow.exit_code is None
    assert slow.stdout.startswith("started")  # output before the cut is kept
    assert 1 <= slow.duration <= 1.5 + 1e-6
    pid = int(slow.stdout.split()[1])
    deadline = time.monotonic() + 2
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)


def test_fanout_limits_concurrent_connections(fake_ssh, tmp_path):
    script = (
        f"open({str(tmp_path / 'spans')!r}, 'a').write(f'{{time.time()}} start\\n')\n"
        "time.sleep(0.3)\n"
        f"open({str(tmp_path / 'spans')!r}, 'a').write(f'{{time.time()}} end\\n')\n"
    )
    results = SshTransport(ssh_config=fake_ssh.config, fanout=2).run(
        [f"n{number}" for number in range(6)], node_script(script), timeout=30)
    assert all(result.ok for result in results.values())
    running = most = 0
    for _, event in sorted(line.split() for line in (tmp_path / "spans").read_text().splitlines()):
        running += 1 if event == "start" else -1
        most = max(most, running)
    assert most == 2


def test_arguments_reach_the_program_unchanged(fake_ssh, tmp_path):
    canary = tmp_path / "canary"
    args = tricky_args(canary)
    results = SshTransport(ssh_config=fake_ssh.config).run(["n1"], [sys.executable, "-c", ECHO_ARGS, *args],
                                                           timeout=30)
    assert json.loads(results["n1"].stdout) == args
    assert not canary.exists()


def test_missing_ssh_client_is_a_transport_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(TransportError, match="ssh not found"):
        SshTransport().run(["n1"], ["true"], timeout=5)


# -- real sshd on loopback addresses --------------------------------------------------

SSHD = Path("/usr/sbin/sshd")
LIVE_ADDRESSES = {"fake1": "127.0.0.2", "fake2": "127.0.0.3"}
DOWN_ADDRESS = "127.0.0.4"  # no sshd listens there

live = pytest.mark.skipif(
    not (SSHD.exists() and hasattr(os, "geteuid") and os.geteuid() == 0
         and shutil.which("ssh") and shutil.which("ssh-keygen")),
    reason="needs root, /usr/sbin/sshd, ssh and ssh-keygen (apt-get install openssh-server)",
)


def _keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)], check=True)
    kind, key = path.with_name(path.name + ".pub").read_text().split()[:2]
    return f"{kind} {key}"


def _free_port(address: str) -> int:
    with socket.socket() as probe:
        probe.bind((address, 0))
        return probe.getsockname()[1]


def _descendants(pid: int) -> list[int]:
    """Every process below pid, deepest first (sshd's per-connection children
    and the commands they run)."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in map(int, children):
            found += [*_descendants(child), child]
    return found


def _wait_listening(address: str, port: int, sshd: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if sshd.poll() is not None:
            raise RuntimeError(f"sshd on {address} exited {sshd.returncode}: {log.read_text()}")
        try:
            with socket.create_connection((address, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"sshd on {address}:{port} did not start: {log.read_text()}")


@pytest.fixture(scope="module")
def live_cluster(tmp_path_factory):
    """Two sshd instances of ours on 127.0.0.2 and 127.0.0.3, one address with
    none, and an alias whose known host key is wrong; stopped by their PIDs."""
    root = tmp_path_factory.mktemp("sshd")
    port = _free_port(LIVE_ADDRESSES["fake1"])
    client_key = root / "client_key"
    (root / "authorized_keys").write_text(_keygen(client_key) + "\n")
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory
    known_hosts = []
    daemons: list[subprocess.Popen] = []
    try:
        for name, address in LIVE_ADDRESSES.items():
            host_key = root / f"host_key_{name}"
            known_hosts.append(f"[{address}]:{port} {_keygen(host_key)}")
            config = root / f"sshd_config_{name}"
            config.write_text(
                f"ListenAddress {address}:{port}\n"
                f"HostKey {host_key}\n"
                f"AuthorizedKeysFile {root / 'authorized_keys'}\n"
                "PidFile none\n"
                "PermitRootLogin prohibit-password\n"
                "PubkeyAuthentication yes\n"
                "PasswordAuthentication no\n"
                "KbdInteractiveAuthentication no\n"
                "UsePAM no\n"
                "StrictModes no\n"
                "MaxStartups 64\n"
            )
            log = root / f"sshd_{name}.log"
            with log.open("w") as log_file:
                daemon = subprocess.Popen([str(SSHD), "-D", "-e", "-f", str(config)],
                                          stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            daemons.append(daemon)
            _wait_listening(address, port, daemon, log)
        # A key nobody serves: the host behind "wrongkey" must be refused.
        known_hosts.append(f"wrongkey {_keygen(root / 'unrelated_key')}")
        (root / "known_hosts").write_text("\n".join(known_hosts) + "\n")
        hosts = {**LIVE_ADDRESSES, "down1": DOWN_ADDRESS}
        blocks = [f"Host {name}\n  HostName {address}\n" for name, address in hosts.items()]
        blocks.append(f"Host wrongkey\n  HostName {LIVE_ADDRESSES['fake2']}\n  HostKeyAlias wrongkey\n")
        blocks.append(
            "Host *\n"
            "  User root\n"
            f"  Port {port}\n"
            f"  IdentityFile {client_key}\n"
            "  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {root / 'known_hosts'}\n"
            "  GlobalKnownHostsFile /dev/null\n"
            "  StrictHostKeyChecking yes\n"
            "  UpdateHostKeys no\n"
        )
        ssh_config = root / "ssh_config"
        ssh_config.write_text("".join(blocks))
        yield SimpleNamespace(ssh_config=ssh_config, port=port)
    finally:
        for daemon in daemons:
            for pid in _descendants(daemon.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            daemon.terminate()
            try:
                daemon.wait(5)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()


@live
def test_live_two_nodes_up_one_down(live_cluster):
    transport = get_transport("ssh", ssh_config=live_cluster.ssh_config, connect_timeout=5)
    results = transport.run(["fake1", "fake2", "down1"], ["sh", "-c", 'echo "$SSH_CONNECTION"; hostname'],
                            timeout=30)
    assert sorted(results) == ["down1", "fake1", "fake2"]
    for node, address in LIVE_ADDRESSES.items():
        result = results[node]
        assert result.status is NodeStatus.OK, result
        connection, hostname = result.stdout.splitlines()
        assert connection.split()[2:] == [address, str(live_cluster.port)]  # each reached its own sshd
        assert hostname == socket.gethostname()
        assert result.duration > 0
    down = results["down1"]
    assert down.status is NodeStatus.UNREACHABLE
    assert down.exit_code is None
    assert "Connection refused" in down.stderr


@live
def test_live_python_probe_and_exit_codes(live_cluster):
    script = "import sys\nprint('probe ok')\nprint('to stderr', file=sys.stderr)\nsys.exit(4)\n"
    results = get_transport("ssh", ssh_config=live_cluster.ssh_config).run(
        ["fake1", "fake2"], python_command(script, sys.executable), timeout=30)
    for result in results.values():
        assert result.status is NodeStatus.FAILED
        assert result.exit_code == 4
        assert result.stdout == "probe ok\n"
        assert result.stderr == "to stderr\n"


@pytest.mark.timing
@live
def test_live_timeout(live_cluster):
    started = time.monotonic()
    results = get_transport("ssh", ssh_config=live_cluster.ssh_config).run(
        ["fake1", "fake2"], ["sh", "-c", "echo $$; sleep 30"], timeout=2)
    elapsed = time.monotonic() - started
    remote_shells = [int(result.stdout) for result in results.values() if result.stdout.strip().isdigit()]
    # The node enforces the timeout itself: the remote command is gone too,
    # not left running by sshd to disturb what is measured next.
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and any(alive(pid) for pid in remote_shells):
        time.sleep(0.1)
    left = [pid for pid in remote_shells if alive(pid)]
    for pid in left:  # clean up before failing
        for stray in [*_descendants(pid), pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(stray, signal.SIGKILL)
    assert left == []
    assert elapsed < 6
    assert len(remote_shells) == 2  # output before the cut is kept
    for result in results.values():
        assert result.status is NodeStatus.TIMEOUT
        assert result.exit_code is None
        assert 1.5 <= result.duration <= 2 + 1e-6


@live
def test_live_wrong_host_key_is_unreachable(live_cluster):
    results = get_transport("ssh", ssh_config=live_cluster.ssh_config).run(["wrongkey", "fake1"], ["true"],
                                                                           timeout=30)
    assert results["fake1"].ok
    assert results["wrongkey"].status is NodeStatus.UNREACHABLE
    assert "Host key verification failed" in results["wrongkey"].stderr


@live
def test_live_arguments_reach_the_program_unchanged(live_cluster, tmp_path):
    canary = tmp_path / "canary"
    args = tricky_args(canary)
    results = get_transport("ssh", ssh_config=live_cluster.ssh_config).run(
        ["fake1"], [sys.executable, "-c", ECHO_ARGS, *args], timeout=30)
    assert results["fake1"].ok, results["fake1"]
    assert json.loads(results["fake1"].stdout) == args
    assert not canary.exists()


def test_run_each_gives_every_node_its_own_command_at_the_same_time(fake_ssh, tmp_path):
    # n1 and n2 each wait for the other's file: only concurrent commands finish.
    meet = ("import pathlib, sys, time\n"
            "mine, theirs = map(pathlib.Path, sys.argv[1:3])\n"
            "mine.touch()\n"
            "deadline = time.monotonic() + 20\n"
            "while not theirs.exists() and time.monotonic() < deadline:\n"
            "    time.sleep(0.05)\n"
            "print('met' if theirs.exists() else 'alone')\n")
    one, two = str(tmp_path / "one"), str(tmp_path / "two")
    commands = {
        "n1": [*python_command(meet, sys.executable), one, two],
        "n2": [*python_command(meet, sys.executable), two, one],
        "n3": ["echo", "same"], "n4": ["echo", "same"],
        "down1": ["echo", "never"],
    }
    results = SshTransport(ssh_config=fake_ssh.config).run_each(commands, timeout=60)
    assert {node: r.stdout for node, r in results.items() if r.ok} == {
        "n1": "met\n", "n2": "met\n", "n3": "same\n", "n4": "same\n"}
    assert results["down1"].status is NodeStatus.UNREACHABLE
    assert sorted(call[-2] for call in fake_ssh.calls()) == ["down1", "n1", "n2", "n3", "n4"]
