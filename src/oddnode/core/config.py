"""Site and user defaults for the command line: ``config.yaml`` files.

Read, lowest precedence first: the built-in defaults, ``/etc/oddnode/config.yaml``
(the site's), ``$XDG_CONFIG_HOME/oddnode/config.yaml`` (``~/.config`` when
unset; the user's), then the environment (``ODDNODE_DB``); the command line
overrides them all.  ``$ODDNODE_CONFIG`` names one file that replaces both
files (a site's wrapper, a test).  A file is a YAML mapping of the keys in
:data:`KEYS`; a relative path in it is taken from the file's directory.

Every setting keeps where it came from, so that ``oddnode config show`` can
say which file to edit.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oddnode.core.connection import DEFAULT_CONNECT_TIMEOUT, DEFAULT_FANOUT
from oddnode.core.inputs import InputError, parse_yaml, quote, read_text

if TYPE_CHECKING:
    from oddnode.report import documents

SYSTEM_FILE = Path("/etc/oddnode/config.yaml")
CONFIG_ENV = "ODDNODE_CONFIG"
TRANSPORTS = ("local", "ssh", "slurm")
_USER = re.compile(r"^[A-Za-z_][A-Za-z0-9._-]*$")
BUILT_IN = "built-in"
# The longest duration any setting, option or plan value may give: a week
# is longer than any check; beyond it a typo (1e23) would pass for a timeout
# that never comes, or overflow the timers that wait for it.
MAX_SECONDS = 7 * 24 * 3600.0
# The most ssh connections at once: each is a process with its descriptors,
# and no site runs more than some thousands.
MAX_FANOUT = 65536


class ConfigError(ValueError):
    """A configuration file that cannot be used: names the file, the line and the key."""

    def __init__(self, source: str, problem: str, key: str | None = None, line: int | None = None) -> None:
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {key}: {problem}" if key else f"{where}: {problem}")
        self.source, self.key, self.line, self.problem = source, key, line, problem


def seconds(value: Any) -> float:
    """``value`` as a duration: a finite number of seconds above 0 and at
    most MAX_SECONDS; ValueError saying so (nan, inf, 0, -5, text)."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        number = math.nan
    if isinstance(value, bool) or not 0 < number <= MAX_SECONDS:
        raise ValueError(f"a number of seconds above 0 and at most {MAX_SECONDS:g}, not {quote(value)}")
    return number


def expand_user(path: Path) -> Path:
    """``~`` and ``~user`` expanded; ValueError naming an unknown user."""
    try:
        return path.expanduser()
    except RuntimeError:
        raise ValueError(f"{quote(str(path))}: its ~ names no user of this machine") from None


def _path(value: Any, base: Path) -> Path:
    if not isinstance(value, str) or not value.strip():
        raise TypeError("a path (text)")
    try:
        path = expand_user(Path(value))
    except ValueError:
        raise TypeError("a path whose ~USER is a user of this machine") from None
    return path if path.is_absolute() else base / path


def _user(value: Any, base: Path) -> str:
    if not isinstance(value, str) or not _USER.match(value):
        raise TypeError("a user name (letters, digits, '.', '_', '-')")
    return value


def _seconds(value: Any, base: Path) -> float:
    if isinstance(value, str):  # $ODDNODE_... text; a file's YAML gives numbers
        value = value.strip()
    elif not isinstance(value, (int, float)):
        raise TypeError(f"a number of seconds above 0 and at most {MAX_SECONDS:g}")
    try:
        return seconds(value)
    except ValueError:
        raise TypeError(f"a number of seconds above 0 and at most {MAX_SECONDS:g}") from None


def _fanout(value: Any, base: Path) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_FANOUT:
        raise TypeError(f"a whole number of connections from 1 to {MAX_FANOUT}")
    return value


def _transport(value: Any, base: Path) -> str:
    if value not in TRANSPORTS:
        raise TypeError(f"one of {', '.join(TRANSPORTS)}")
    return value


@dataclass(frozen=True)
class Key:
    """One setting: what it sets, how its value is checked, its default and its variable."""

    meaning: str
    parse: Callable[[Any, Path], Any]
    default: Any = None
    environment: str | None = None


KEYS: dict[str, Key] = {
    "store": Key("results store, the --db default", _path, Path("oddnode.duckdb"), "ODDNODE_DB"),
    "ssh_config": Key("ssh client configuration file (--ssh-config)", _path),
    "user": Key("remote user for ssh (-l/--user)", _user),
    "connect_timeout": Key("seconds ssh may take to connect (--connect-timeout)", _seconds),
    "fanout": Key("ssh connections at once (--fanout)", _fanout),
    "transport": Key("local, ssh or slurm (--transport)", _transport),
    "topology": Key("topology file (--topology)", _path),
    "expectations": Key("expectations file, check's --expect default", _path),
}


@dataclass(frozen=True)
class Setting:
    """A value and where it came from: 'built-in', '$ODDNODE_DB', 'FILE:LINE' or 'command line'."""

    value: Any
    origin: str


def config_files(environ: Mapping[str, str] = os.environ) -> list[Path]:
    """The files read, lowest precedence first: $ODDNODE_CONFIG alone, else the system's and the user's."""
    try:
        if environ.get(CONFIG_ENV):
            return [expand_user(Path(environ[CONFIG_ENV]))]
        home = environ.get("XDG_CONFIG_HOME") or str(Path(environ.get("HOME") or Path.home()) / ".config")
        return [SYSTEM_FILE, expand_user(Path(home)) / "oddnode" / "config.yaml"]
    except (ValueError, RuntimeError) as err:
        raise ConfigError(f"${CONFIG_ENV}", str(err)) from None


def parse_config(text: str, source: str, base: Path) -> dict[str, Setting]:
    """The settings one file's text gives, checked; ``source`` names it in
    errors and origins.  A key given twice, or YAML nested past the limit
    of oddnode.core.inputs, is refused."""
    import yaml  # only where a file is read: every command loads the settings, few have a file

    try:
        data = parse_yaml(text, source)
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except InputError as err:
        raise ConfigError(source, err.detail, line=err.line) from None
    except yaml.YAMLError as err:
        raise ConfigError(source, f"not valid YAML: {quote(str(err))}") from None
    if data is None:
        return {}
    if not isinstance(data, dict) or not isinstance(root, yaml.MappingNode):
        raise ConfigError(source, "expected a mapping of settings (key: value)", line=1)
    lines = {str(key_node.value): key_node.start_mark.line + 1 for key_node, _ in root.value}
    settings = {}
    for key, value in data.items():
        line = lines.get(str(key))
        if key not in KEYS:
            raise ConfigError(source, f"unknown setting (known: {', '.join(KEYS)})", key=str(key), line=line)
        try:
            parsed = KEYS[key].parse(value, base)
        except TypeError as err:
            raise ConfigError(source, f"must be {err}, not {quote(value)}", key=key, line=line) from None
        settings[key] = Setting(parsed, f"{source}:{line}")
    return settings


def load_config_file(path: Path) -> dict[str, Setting]:
    """The settings of one file (a directory, FIFO, device or unreadable
    file is an error)."""
    try:
        text = read_text(path)
    except InputError as err:
        raise ConfigError(str(path), f"cannot read the file: {err.detail}") from None
    return parse_config(text, str(path), path.parent)


@dataclass(frozen=True)
class Settings:
    """Every key's effective value and origin, before the command line."""

    values: dict[str, Setting]
    files: tuple[Path, ...]  # the files read, lowest precedence first

    def __getitem__(self, key: str) -> Any:
        return self.values[key].value

    def origin(self, key: str) -> str:
        return self.values[key].origin


def load_settings(environ: Mapping[str, str] = os.environ) -> Settings:
    """Built-in defaults, then the files, then the environment; $ODDNODE_CONFIG
    must exist, the system's and the user's files may be absent."""
    values = {key: Setting(spec.default, BUILT_IN) for key, spec in KEYS.items()}
    read = []
    explicit = bool(environ.get(CONFIG_ENV))
    for path in config_files(environ):
        if not explicit and not path.exists():
            continue
        values.update(load_config_file(path))
        read.append(path)
    for key, spec in KEYS.items():
        if spec.environment and environ.get(spec.environment):
            try:
                parsed = spec.parse(environ[spec.environment], Path.cwd())
            except TypeError as err:
                raise ConfigError(f"${spec.environment}", f"must be {err}, not {quote(environ[spec.environment])}") \
                    from None
            values[key] = Setting(parsed, f"${spec.environment}")
    return Settings(values, tuple(read))


def effective(settings: Settings, given: Mapping[str, Any]) -> dict[str, Setting]:
    """The settings after the command line: a value given there (not None) wins."""
    merged = dict(settings.values)
    for key, value in given.items():
        if value is not None:
            merged[key] = Setting(value, "command line")
    return merged


def settings_document(settings: Settings, clush: Any = None) -> documents.Config:
    """The effective settings as JSON data: each key's value and origin, the
    files read, and clush.conf's settings for ssh (an ``oddnode.reach.ssh.ClushSettings``)."""
    document: dict[str, Any] = {
        "files": [str(path) for path in settings.files],
        "settings": {key: {"value": str(s.value) if isinstance(s.value, Path) else s.value, "origin": s.origin}
                     for key, s in settings.values.items()},
    }
    if clush is not None:
        # How ssh reaches the nodes where no configuration file says: clush.conf's
        # value, else oddnode's own default (Connection's module holds them).
        fallbacks = {"fanout": (clush.fanout, DEFAULT_FANOUT), "connect_timeout": (clush.connect_timeout,
                     DEFAULT_CONNECT_TIMEOUT), "user": (clush.ssh_user, None)}
        where = f"clush.conf ({clush.files[-1]})" if clush.files else "clush.conf"
        for key, (from_clush, default) in fallbacks.items():
            if document["settings"][key]["value"] is None:
                document["settings"][key] = ({"value": from_clush, "origin": where} if from_clush is not None
                                             else {"value": default, "origin": document["settings"][key]["origin"]})
        document["clush_conf"] = {"files": list(clush.files),
                                  **{name: getattr(clush, name) for name in
                                     ("fanout", "connect_timeout", "ssh_user", "ssh_path", "ssh_options")}}
    return document
