"""The testbed and the check as a user drives them from the command line."""

import json

from support.cli import oddnode
from support.testbed import needs_root, session_instance


@needs_root
def test_testbed_commands_and_check_over_ssh(tmp_path):
    """The testbed and the check as a user drives them: up, fault, check, status, down."""
    state = tmp_path / "bed"
    env = {"ODDNODE_TESTBED_DIR": str(state)}
    try:
        assert "node[01-04]" in oddnode("testbed", "up", "--nodes", 4, "--instance", session_instance(),
                                            cwd=tmp_path, env=env).stdout
        oddnode("testbed", "fault", "bios-date", "node02", "09/02/2004", cwd=tmp_path, env=env)
        oddnode("testbed", "fault", "memory", "node04", "--percent", 70, cwd=tmp_path, env=env)
        assert "node02" in oddnode("testbed", "status", cwd=tmp_path, env=env).stdout
        result = oddnode("check", "--testbed", "--json", "--html", "check.html", cwd=tmp_path, env=env, check=False)
        assert result.returncode == 1  # not ready
        found = {(f["kind"], f["subject"], f["nodes"]) for f in json.loads(result.stdout)["findings"]}
        assert found == {("inconsistent-fact", "bios_date", "node02"), ("inconsistent-fact", "memory_total_kb", "node04")}
        assert "NOT READY" in (tmp_path / "check.html").read_text()
        result = oddnode("inventory", "--testbed", "--snapshot", "expect.yaml", cwd=tmp_path, env=env, check=False)
        assert result.returncode == 1 and "node02: 09/02/2004" in result.stdout  # a fact differs
        result = oddnode("diagnose", "--expect", "expect.yaml", cwd=tmp_path, env=env, check=False)
        assert result.returncode == 1 and "bios_date" in result.stdout  # the snapshot keeps the majority's date
    finally:
        oddnode("testbed", "down", cwd=tmp_path, env=env, check=False)
    assert not state.exists()
