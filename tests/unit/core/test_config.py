"""Defaults from config.yaml, clush.conf for the ssh transport, -l and
--connect-timeout on every command that reaches nodes, and the transport
inside a Slurm allocation.  ssh is never run: targets are only built."""

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from support.cli import write
from oddnode.core import config
from oddnode.core.config import ConfigError, load_settings, parse_config
from oddnode.reach.ssh import ClushSettings, SshTransport, read_clush_conf

ALLOCATION = {"SLURM_JOB_NODELIST": "cn-a[17-18],gpu-b3", "SLURM_JOB_NUM_NODES": "3"}


@pytest.fixture
def files(tmp_path, monkeypatch):
    """A system and a user configuration file of our own, no $ODDNODE_CONFIG or $ODDNODE_DB."""
    system = tmp_path / "etc" / "config.yaml"
    monkeypatch.setattr(config, "SYSTEM_FILE", system)
    for name in ("ODDNODE_CONFIG", "ODDNODE_DB"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return system, tmp_path / "xdg" / "oddnode" / "config.yaml"


def test_precedence_user_over_system_over_built_in_with_origins(files, tmp_path):
    system, user = files
    write(system, "store: /srv/oddnode/site.duckdb\nfanout: 128\nuser: hpcadm\n")
    write(user, "# mine\nfanout: 16\nexpectations: rack7.yaml\n")
    settings = load_settings()
    assert settings["store"] == Path("/srv/oddnode/site.duckdb") and settings.origin("store") == f"{system}:1"
    assert settings["fanout"] == 16 and settings.origin("fanout") == f"{user}:2"
    assert settings["user"] == "hpcadm"
    # A relative path is taken from the file's directory, not the current one.
    assert settings["expectations"] == user.parent / "rack7.yaml"
    assert settings["transport"] is None and settings.origin("transport") == "built-in"
    assert settings.files == (system, user)


def test_environment_beats_files_and_oddnode_config_replaces_both(files, tmp_path, monkeypatch):
    system, user = files
    write(system, "store: site.duckdb\n")
    write(user, "connect_timeout: 4\n")
    monkeypatch.setenv("ODDNODE_DB", "/scratch/db.duckdb")
    assert load_settings().origin("store") == "$ODDNODE_DB"
    only = write(tmp_path / "only.yaml", "transport: slurm\n")
    monkeypatch.setenv("ODDNODE_CONFIG", str(only))
    settings = load_settings()
    assert settings["transport"] == "slurm" and settings["connect_timeout"] is None
    assert settings.files == (only,)
    monkeypatch.setenv("ODDNODE_CONFIG", str(tmp_path / "absent.yaml"))
    with pytest.raises(ConfigError, match="absent.yaml: cannot read"):
        load_settings()


@pytest.mark.parametrize("text, message", [
    ("fanout: 8\ncolour: blue\n", r"site.yaml:2: colour: unknown setting"),
    ("fanout: many\n", r"site.yaml:1: fanout: must be a whole number"),
    ("connect_timeout: 0\n", r"site.yaml:1: connect_timeout: must be a number of seconds above 0"),
    ("transport: rsh\n", r"site.yaml:1: transport: must be one of local, ssh, slurm"),
    ("user: 'root; reboot'\n", r"site.yaml:1: user: must be a user name"),
    ("store: [a, b]\n", r"site.yaml:1: store: must be a path"),
    ("fanout: 8\n  user: x\n", r"site.yaml:2: not valid YAML"),
    ("- fanout\n", r"site.yaml:1: expected a mapping"),
])
def test_a_bad_file_names_the_file_line_and_key(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_config(text, "site.yaml", Path("/etc/oddnode"))


def test_an_empty_file_sets_nothing():
    assert parse_config("# nothing yet\n", "site.yaml", Path(".")) == {}


# -- clush.conf ----------------------------------------------------------------


def test_clush_conf_is_read_and_our_options_override_it(tmp_path):
    clush = read_clush_conf(write(tmp_path / "clush.conf", "[Main]\nfanout: 32\nconnect_timeout: 7.5\n"
                                  "ssh_user: clusteradm\nssh_options: -oLogLevel=ERROR -p 2222\n"))
    assert (clush.fanout, clush.connect_timeout, clush.ssh_user) == (32, 7.5, "clusteradm")
    info = SshTransport(clush=clush).task_info()
    assert info["fanout"] == 32 and info["connect_timeout"] == 8 and info["ssh_user"] == "clusteradm"
    # oddnode's batch mode comes first: ssh keeps an option's first value.
    assert info["ssh_options"] == "-oBatchMode=yes -oLogLevel=ERROR -p 2222"
    info = SshTransport(clush=clush, fanout=4, connect_timeout=2, user="ops").task_info()
    assert (info["fanout"], info["connect_timeout"], info["ssh_user"]) == (4, 2, "ops")
    # Without clush.conf's settings, oddnode's own defaults.
    bare = SshTransport(clush=ClushSettings())
    assert (bare.fanout, bare.connect_timeout, bare.user) == (64, 10, None)


def test_clush_conf_search_order_ends_with_clustershell_cfgdir(tmp_path, monkeypatch):
    write(tmp_path / "xdg" / "clustershell" / "clush.conf", "[Main]\nfanout: 12\nssh_user: xdguser\n")
    write(tmp_path / "site" / "clush.conf", "[Main]\nfanout: 24\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("CLUSTERSHELL_CFGDIR", str(tmp_path / "site"))
    clush = read_clush_conf()
    assert clush.fanout == 24 and clush.ssh_user == "xdguser"
    assert clush.files[-1] == str(tmp_path / "site" / "clush.conf")


def test_a_bad_clush_conf_is_an_error_naming_it(tmp_path):
    bad = write(tmp_path / "clush.conf", "[Main]\nfanout: lots\n")
    with pytest.raises(ConfigError, match=r"clush.conf: fanout: \[Main\] fanout = 'lots'"):
        read_clush_conf(bad)
    with pytest.raises(ConfigError, match="not a valid clush.conf"):
        read_clush_conf(write(tmp_path / "broken.conf", "fanout: 3\n"))


# -- the transport inside an allocation ------------------------------------------


@pytest.fixture
def srun_here(tmp_path, monkeypatch):
    srun = write(tmp_path / "bin" / "srun", "#!/bin/sh\nexit 0\n")
    srun.chmod(0o755)
    monkeypatch.setenv("PATH", f"{srun.parent}{os.pathsep}{os.environ['PATH']}")


def test_inside_an_allocation_slurm_is_the_default(srun_here):
    from oddnode.app.check import make_target

    target = make_target([], None, environ=ALLOCATION)
    assert target.transport.name == "slurm" and target.nodes == ["cn-a17", "cn-a18", "gpu-b3"]
    # Nodes of the allocation: still srun; one outside it: ssh, which reaches any node.
    assert make_target(["gpu-b3"], None, environ=ALLOCATION).transport.name == "slurm"
    assert make_target(["gpu-b3", "login2"], None, environ=ALLOCATION).transport.name == "ssh"
    assert make_target([], "local", environ=ALLOCATION).transport.name == "local"
    assert make_target([], None, environ={}).transport.name == "local"


# -- the command line ------------------------------------------------------------


@pytest.fixture
def recorded(monkeypatch):
    """Reaching the nodes replaced by a recorder that stops the command."""
    import oddnode.reach.targets

    calls = []

    class Stop(ValueError):
        pass

    def record(connection, nodes, environ=None):
        calls.append({"nodes": nodes, **connection.to_json()})
        raise Stop("recorded")

    monkeypatch.setattr(oddnode.reach.targets, "reach", record)
    return calls


def invoke(*args):
    from oddnode.main import app

    return CliRunner().invoke(app, [str(arg) for arg in args])


def test_user_and_connect_timeout_reach_the_target_from_the_command_line_or_the_file(files, recorded, tmp_path):
    system, _ = files
    write(system, "user: hpcadm\nconnect_timeout: 20\nfanout: 8\ntransport: ssh\n")
    for command in (["inventory"], ["pairs"], ["processes"], ["numa"]):
        recorded.clear()
        result = invoke(*command, "-w", "cn-a[17-18]", "-l", "ops", "--connect-timeout", "3", "--db",
                        tmp_path / "s.duckdb")
        assert result.exit_code == 2 and "recorded" in result.output, (command, result.output)
        assert recorded[-1]["user"] == "ops" and recorded[-1]["connect_timeout"] == 3, command
        assert recorded[-1]["fanout"] == 8 and recorded[-1]["transport"] == "ssh"
    invoke("inventory", "-w", "cn-a17", "--fanout", "2", "--db", tmp_path / "s.duckdb")
    assert recorded[-1]["user"] == "hpcadm" and recorded[-1]["connect_timeout"] == 20 and recorded[-1]["fanout"] == 2


def test_the_store_comes_from_the_file_unless_given(files, tmp_path, monkeypatch):
    system, _ = files
    write(system, f"store: {tmp_path / 'site.duckdb'}\n")
    expect = write(tmp_path / "expect.yaml", "smt: off\n")
    monkeypatch.chdir(tmp_path)
    assert invoke("diagnose", "--expect", expect).exit_code == 0
    assert (tmp_path / "site.duckdb").exists() and not (tmp_path / "oddnode.duckdb").exists()
    assert invoke("diagnose", "--expect", expect, "--db", tmp_path / "own.duckdb").exit_code == 0
    assert (tmp_path / "own.duckdb").exists()


def test_a_bad_file_stops_a_command_with_status_2(files):
    system, _ = files
    write(system, "fanout: 8\nfan_out: 9\n")
    result = invoke("inventory", "-w", "cn-a17")
    assert result.exit_code == 2 and f"{system}:2: fan_out: unknown setting" in result.output


def test_config_show_says_where_each_setting_comes_from(files, monkeypatch):
    system, user = files
    write(system, "fanout: 128\n")
    write(user, "user: hpcadm\n")
    monkeypatch.setenv("ODDNODE_DB", "/scratch/db.duckdb")
    result = invoke("config", "show", "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["settings"]["fanout"] == {"value": 128, "origin": f"{system}:1"}
    assert document["settings"]["user"] == {"value": "hpcadm", "origin": f"{user}:1"}
    assert document["settings"]["store"] == {"value": "/scratch/db.duckdb", "origin": "$ODDNODE_DB"}
    assert document["files"] == [str(system), str(user)] and "clush_conf" in document


def test_check_expects_the_configured_file_unless_a_plan_file_decides(files, tmp_path):
    import yaml

    system, _ = files
    expect = write(tmp_path / "site" / "gpu-partition.yaml", "gpu_count: 8\n")
    write(system, f"expectations: {expect}\n")
    result = invoke("check", "--show-plan")
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.stdout)["expectations"] == str(expect)
    plan = write(tmp_path / "plan.yaml", "repetitions: 3\n")
    result = invoke("check", "--show-plan", "--plan", plan)
    assert yaml.safe_load(result.stdout)["expectations"] is None
    result = invoke("check", "--show-plan", "--expect", tmp_path / "other.yaml")
    assert yaml.safe_load(result.stdout)["expectations"] == str(tmp_path / "other.yaml")


def test_a_run_passes_user_timeout_and_clush_options_to_the_ssh_client(tmp_path):
    """clush.conf's ssh_path names a scripted client: it records its argv
    and runs the remote command here, as sshd's shell would."""
    log = tmp_path / "argv"
    client = write(tmp_path / "bin" / "fake-ssh", f'#!/bin/sh\necho "$@" >> {log}\n'
                   'for last; do :; done\nexec sh -c "$last"\n')
    client.chmod(0o755)
    clush = read_clush_conf(write(tmp_path / "clush.conf", f"[Main]\nssh_path: {client}\nssh_user: clusteradm\n"
                                  "ssh_options: -oLogLevel=ERROR\n"))
    transport = SshTransport(clush=clush, user="ops", connect_timeout=2.5)
    results = transport.run(["cn-a17", "gpu-b3"], ["echo", "hello"], timeout=20)
    assert {node: r.stdout for node, r in results.items()} == {"cn-a17": "hello\n", "gpu-b3": "hello\n"}
    lines = log.read_text().splitlines()
    assert len(lines) == 2
    for line in lines:
        words = line.split()
        assert words[:2] == ["-oBatchMode=yes", "-oLogLevel=ERROR"]
        assert "-l ops" in line and "clusteradm" not in line and "-oConnectTimeout=3" in words


def test_config_show_says_where_ssh_s_settings_come_from_when_no_file_sets_them(files):
    from oddnode.core.config import settings_document

    clush = ClushSettings(connect_timeout=15.0, files=("/etc/clustershell/clush.conf",))
    document = settings_document(load_settings(), clush)["settings"]
    assert document["connect_timeout"] == {"value": 15.0, "origin": "clush.conf (/etc/clustershell/clush.conf)"}
    assert document["fanout"] == {"value": 64, "origin": "built-in"}  # clush.conf is silent: oddnode's default
    assert document["user"]["value"] is None  # ssh's own
    system, _ = files
    write(system, "fanout: 8\n")
    assert settings_document(load_settings(), clush)["settings"]["fanout"]["value"] == 8
