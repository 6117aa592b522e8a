"""oddnode's inventory probe: runs ON a node and prints one JSON object.

Self-contained and stdlib-only, for Python >= 3.6 as found on older cluster
nodes (no walrus, no dataclasses, no annotations that evaluate generics).
Read-only: it reads /proc and /sys and runs a few query tools, each capped
at TOOL_TIMEOUT seconds.  Whatever needs root or a missing tool is skipped
with a note; each section is guarded so that one failure loses only itself.

Output: {"probe_version": 1, "hostname": str, "facts": {key: str},
"notes": [str], "elapsed": seconds}.  Fact keys are lower_snake_case,
dotted for per-item keys (nic.eth0.mtu).  Processes are sampled SNAPSHOTS
times over SAMPLE_SECONDS, which is most of the probe's time.

The package imports this file too (for parse_dmidecode_memory), so nothing
runs at import time; the probe runs only as __main__.
"""

import glob
import hashlib
import json
import os
import platform
import re
import socket
import subprocess
import sys
import time

PROBE_VERSION = 1
# Seconds any external tool may take; nvidia-smi on a node with a hung GPU
# would otherwise hold the whole inventory.
TOOL_TIMEOUT = 5
# Libraries larger than this are not hashed: reading them would dominate the
# probe's runtime for little gain (the soname version still identifies them).
HASH_LIMIT_BYTES = 512 * 1024 * 1024
# Query tools live in sbin on many distributions, which a non-interactive
# ssh session's PATH often lacks.
EXTRA_PATH = ("/usr/local/sbin", "/usr/sbin", "/sbin", "/usr/local/bin", "/usr/bin", "/bin")
# Block devices that are no disks: loop mounts, RAM disks, device-mapper volumes.
SKIPPED_DISK_PREFIXES = ("loop", "ram", "zram", "dm-")
# Virtual NICs whose names are random per container or VM; they would make
# every node look different from every other.
EPHEMERAL_NIC_PREFIXES = ("veth",)
# Libraries whose identity matters for benchmarks: C library, MPI, BLAS.
LIBRARY_PATTERNS = (
    re.compile(r"^libc\.so\.\d+$"),
    re.compile(r"^libmpi\.so"),
    re.compile(r"^libopenblas"),
    re.compile(r"^libblas\.so"),
    re.compile(r"^libmkl_rt"),
)

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def sanitise(name):
    """A name fit for a dotted fact key: anything but [A-Za-z0-9_.-] becomes '_'."""
    return _UNSAFE.sub("_", name)


def read_text(path):
    """A sysfs/procfs file's text, stripped; None when absent or unreadable."""
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace").strip()
    except (OSError, IOError):
        return None


def _tool_path(name):
    directories = os.environ.get("PATH", "").split(os.pathsep) + list(EXTRA_PATH)
    for directory in directories:
        if not directory:
            continue
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def run_tool(argv, notes):
    """stdout of a query tool, or None (with a note) when missing, slow or failing."""
    path = _tool_path(argv[0])
    if path is None:
        return None
    env = dict(os.environ)
    env["LC_ALL"] = "C"
    try:
        done = subprocess.run(
            [path] + list(argv[1:]),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            universal_newlines=True,
            timeout=TOOL_TIMEOUT,
            env=env,
        )
    except subprocess.TimeoutExpired:
        notes.append("%s timed out after %ss; its facts are skipped" % (" ".join(argv), TOOL_TIMEOUT))
        return None
    except OSError as err:
        notes.append("%s could not run: %s" % (" ".join(argv), err))
        return None
    if done.returncode != 0:
        message = (done.stderr or done.stdout).strip().splitlines()
        notes.append("%s exited %d: %s" % (" ".join(argv), done.returncode, message[0] if message else "no message"))
        return None
    return done.stdout


# ---------------------------------------------------------------- CPU


def _cpuinfo_blocks():
    text = read_text("/proc/cpuinfo") or ""
    blocks = []
    current = {}
    for line in text.splitlines():
        if not line.strip():
            if current:
                blocks.append(current)
                current = {}
            continue
        name, sep, value = line.partition(":")
        if sep:
            current[name.strip()] = value.strip()
    if current:
        blocks.append(current)
    return blocks


def _online_cpu_dirs():
    dirs = []
    for path in glob.glob("/sys/devices/system/cpu/cpu[0-9]*"):
        if os.path.isdir(os.path.join(path, "topology")):
            dirs.append(path)
    return sorted(dirs, key=lambda p: int(re.sub(r"\D", "", os.path.basename(p))))


def probe_cpu(facts, notes):
    blocks = _cpuinfo_blocks()
    processors = [b for b in blocks if "processor" in b]
    first = processors[0] if processors else (blocks[0] if blocks else {})
    for field in ("model name", "Processor", "cpu", "CPU part"):
        if first.get(field):
            facts["cpu_model"] = first[field]
            break
    else:
        facts["cpu_model"] = platform.processor() or "unknown"
    facts["cpu_threads"] = str(len(processors) or os.cpu_count() or 0)

    packages = set()
    cores = set()
    for path in _online_cpu_dirs():
        package = read_text(os.path.join(path, "topology", "physical_package_id"))
        core = read_text(os.path.join(path, "topology", "core_id"))
        if package is None or core is None:
            continue
        packages.add(package)
        cores.add((package, core))
    if not cores:
        for block in processors:
            if "physical id" in block and "core id" in block:
                packages.add(block["physical id"])
                cores.add((block["physical id"], block["core id"]))
    if cores:
        facts["cpu_sockets"] = str(len(packages))
        facts["cpu_cores"] = str(len(cores))
    else:
        notes.append("CPU topology unavailable: cpu_sockets and cpu_cores not reported")

    control = read_text("/sys/devices/system/cpu/smt/control")
    if control:
        facts["smt"] = control
    elif cores:
        facts["smt"] = "on" if int(facts["cpu_threads"]) > len(cores) else "off"

    microcodes = sorted(set(b["microcode"] for b in processors if b.get("microcode")))
    if microcodes:
        facts["cpu_microcode"] = ",".join(microcodes)

    flags = set()
    for block in processors or blocks:
        flags.update((block.get("flags") or block.get("Features") or "").split())
    if flags:
        digest = hashlib.sha256(" ".join(sorted(flags)).encode("ascii", "replace")).hexdigest()
        facts["cpu_flags_digest"] = digest[:12]

    governors = {}
    for path in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor"):
        value = read_text(path)
        if value:
            governors[value] = governors.get(value, 0) + 1
    cpu0 = read_text("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    if cpu0:
        facts["cpu_governor"] = cpu0
    if len(governors) > 1:
        facts["cpu_governor_mixed"] = ",".join("%s:%d" % item for item in sorted(governors.items()))
    low = read_text("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_min_freq")
    high = read_text("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    if low and low.isdigit():
        facts["cpu_mhz_min"] = str(int(low) // 1000)  # sysfs gives kHz
    if high and high.isdigit():
        facts["cpu_mhz_max"] = str(int(high) // 1000)
    if not cpu0 and not high:
        notes.append("no cpufreq in /sys: cpu_governor and cpu_mhz_min/max not reported")


# ---------------------------------------------------------------- memory


def read_meminfo(path):
    """{field: first word} of a meminfo file (/proc/meminfo or a NUMA node's, whose
    lines start "Node 0"); empty when absent."""
    values = {}
    for line in (read_text(path) or "").splitlines():
        name, sep, rest = line.partition(":")
        if sep:
            words = rest.split()
            if words:
                values[name.split()[-1]] = words[0]  # "Node 0 MemTotal" -> MemTotal
    return values


def parse_dmidecode_memory(text):
    """Facts about the DIMMs from `dmidecode -t 17` text: a pure function.

    dimm_count: populated slots; dimm_sizes: sorted multiset like "8x32GB";
    dimm_speed: configured speed(s) of the populated DIMMs; dimm_layout:
    locators of the populated slots, comma-joined in the firmware's order.
    Slots with "No Module Installed" (or no size) are empty.
    """
    devices = []
    current = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped == "Memory Device":
            current = {}
            devices.append(current)
            continue
        if line.startswith("Handle "):
            current = None
            continue
        if current is None or not line.startswith("\t") or line.startswith("\t\t"):
            continue
        name, sep, value = stripped.partition(":")
        if sep:
            current[name.strip()] = value.strip()
    sizes = {}
    speeds = set()
    locators = []
    for device in devices:
        size_gb = _dimm_size_gb(device.get("Size", ""))
        if size_gb is None:
            continue
        sizes[size_gb] = sizes.get(size_gb, 0) + 1
        locators.append(device.get("Locator") or "?")
        speed = device.get("Configured Memory Speed") or device.get("Configured Clock Speed") or device.get("Speed")
        if speed and speed[0].isdigit():
            speeds.add(speed)
    facts = {"dimm_count": str(len(locators))}
    if sizes:
        facts["dimm_sizes"] = ",".join("%dx%sGB" % (sizes[s], _number(s)) for s in sorted(sizes))
        facts["dimm_layout"] = ",".join(locators)
    if speeds:
        facts["dimm_speed"] = ",".join(sorted(speeds, key=lambda s: (len(s), s)))
    return facts


def _dimm_size_gb(text):
    match = re.match(r"^(\d+(?:\.\d+)?)\s*(kB|KB|MB|GB|TB)$", text)
    if not match:
        return None  # "No Module Installed", "Unknown", "Not Installed"
    value = float(match.group(1))
    scale = {"kB": 1.0 / 1048576, "KB": 1.0 / 1048576, "MB": 1.0 / 1024, "GB": 1.0, "TB": 1024.0}[match.group(2)]
    size = value * scale
    return size if size > 0 else None


def _number(value):
    return ("%d" % value) if float(value).is_integer() else ("%g" % value)


def probe_memory(facts, notes):
    meminfo = read_meminfo("/proc/meminfo")
    if "MemTotal" in meminfo:
        facts["memory_total_kb"] = meminfo["MemTotal"]
    if "HugePages_Total" in meminfo:
        facts["hugepages_total"] = meminfo["HugePages_Total"]
    if "Hugepagesize" in meminfo:
        facts["hugepage_size_kb"] = meminfo["Hugepagesize"]
    thp = read_text("/sys/kernel/mm/transparent_hugepage/enabled")
    if thp:
        selected = re.search(r"\[([^\]]+)\]", thp)
        facts["transparent_hugepages"] = selected.group(1) if selected else thp

    if _tool_path("dmidecode") is None:
        notes.append("dmidecode not installed: DIMM facts not reported")
    elif not hasattr(os, "geteuid") or os.geteuid() != 0:
        notes.append("dmidecode needs root: DIMM facts not reported")
    else:
        text = run_tool(["dmidecode", "-t", "17"], notes)
        if text is not None:
            facts.update(parse_dmidecode_memory(text))


# ---------------------------------------------------------------- firmware, kernel, OS


DMI_FIELDS = (
    ("bios_vendor", "bios_vendor"),
    ("bios_version", "bios_version"),
    ("bios_date", "bios_date"),
    ("board_name", "board_name"),
    ("product_name", "product_name"),
    ("system_vendor", "sys_vendor"),
)


def probe_dmi(facts, notes):
    if not os.path.isdir("/sys/class/dmi/id"):
        notes.append("no /sys/class/dmi/id: BIOS and board facts not reported")
        return
    for key, name in DMI_FIELDS:
        value = read_text(os.path.join("/sys/class/dmi/id", name))
        if value:
            facts[key] = value


def probe_system(facts, notes):
    facts["kernel"] = platform.release()
    facts["arch"] = platform.machine()
    cmdline = read_text("/proc/cmdline")
    if cmdline is not None:
        facts["kernel_cmdline"] = cmdline
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        text = read_text(path)
        if text is None:
            continue
        for line in text.splitlines():
            if line.startswith("PRETTY_NAME="):
                facts["os"] = line.split("=", 1)[1].strip().strip("\"'")
                return
    notes.append("no PRETTY_NAME in /etc/os-release: os not reported")


# The per-NUMA-node facts (the affinity report and its findings read
# the same keys from a topology).
NUMA_CPUS_KEY = "numa.%s.cpus"
NUMA_MEMORY_KEY = "numa.%s.memory_kb"
NUMA_DISTANCES_KEY = "numa.%s.distances"


def probe_numa(facts, notes):
    nodes = glob.glob("/sys/devices/system/node/node[0-9]*")
    if not nodes:
        notes.append("no NUMA information in /sys/devices/system/node")
        return
    facts["numa_nodes"] = str(len(nodes))
    for path in nodes:
        index = os.path.basename(path)[len("node"):]
        cpus = read_text(os.path.join(path, "cpulist"))
        if cpus is not None:
            facts[NUMA_CPUS_KEY % index] = cpus
        meminfo = read_meminfo(os.path.join(path, "meminfo"))
        if "MemTotal" in meminfo:
            facts[NUMA_MEMORY_KEY % index] = meminfo["MemTotal"]
        # The firmware's distance row (ACPI SLIT: 10 local, 21 a socket
        # away): it changes with the BIOS's NUMA modes (sub-NUMA clustering,
        # NPS, node interleaving), which nodes meant to be identical share.
        distances = read_text(os.path.join(path, "distance"))
        if distances:
            facts[NUMA_DISTANCES_KEY % index] = " ".join(distances.split())


# ---------------------------------------------------------------- network


def probe_network(facts, notes):
    names = sorted(os.listdir("/sys/class/net")) if os.path.isdir("/sys/class/net") else []
    skipped = [n for n in names if n.startswith(EPHEMERAL_NIC_PREFIXES)]
    if skipped:
        notes.append("%d veth interface(s) skipped (names differ per container)" % len(skipped))
    ethtool_missing = _tool_path("ethtool") is None
    if ethtool_missing and names:
        notes.append("ethtool not installed: NIC firmware versions not reported")
    for name in names:
        base = os.path.join("/sys/class/net", name)
        if name == "lo" or name in skipped or not os.path.isdir(base):
            continue  # bonding_masters is a file, not an interface
        prefix = "nic.%s." % sanitise(name)
        driver_link = os.path.join(base, "device", "driver")
        physical = os.path.exists(driver_link)
        facts[prefix + "driver"] = os.path.basename(os.path.realpath(driver_link)) if physical else "virtual"
        speed = read_text(os.path.join(base, "speed"))
        facts[prefix + "speed"] = speed if speed else "unknown"  # unreadable while the link is down
        mtu = read_text(os.path.join(base, "mtu"))
        if mtu:
            facts[prefix + "mtu"] = mtu
        state = read_text(os.path.join(base, "operstate"))
        if state:
            facts[prefix + "state"] = state
        if physical and not ethtool_missing:
            info = run_tool(["ethtool", "-i", name], notes)
            for line in (info or "").splitlines():
                if line.startswith("firmware-version:"):
                    firmware = line.split(":", 1)[1].strip()
                    if firmware:
                        facts[prefix + "firmware"] = firmware
    ib_root = "/sys/class/infiniband"
    if not os.path.isdir(ib_root):
        return
    for device in sorted(os.listdir(ib_root)):
        dev_path = os.path.join(ib_root, device)
        firmware = read_text(os.path.join(dev_path, "fw_ver"))
        if firmware:
            facts["ib.%s.fw_ver" % sanitise(device)] = firmware
        ports = os.path.join(dev_path, "ports")
        for port in sorted(os.listdir(ports)) if os.path.isdir(ports) else []:
            prefix = "ib.%s.%s." % (sanitise(device), sanitise(port))
            state = read_text(os.path.join(ports, port, "state"))
            if state:
                facts[prefix + "state"] = state.split(":", 1)[-1].strip()  # "4: ACTIVE" -> ACTIVE
            rate = read_text(os.path.join(ports, port, "rate"))
            if rate:
                facts[prefix + "rate"] = rate


# ---------------------------------------------------------------- GPUs, disks, EDAC


def probe_gpus(facts, notes):
    if _tool_path("nvidia-smi") is None:
        notes.append("nvidia-smi not found: GPUs not inventoried")
        return
    text = run_tool(
        ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,ecc.mode.current", "--format=csv,noheader"],
        notes,
    )
    if text is None:
        return
    count = 0
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 4:
            continue
        prefix = "gpu.%d." % count
        facts[prefix + "model"] = fields[0]
        facts[prefix + "driver"] = fields[1]
        facts[prefix + "memory"] = fields[2]
        facts[prefix + "ecc"] = fields[3]
        count += 1
    facts["gpu_count"] = str(count)


def probe_disks(facts, notes):
    for name in sorted(os.listdir("/sys/block")) if os.path.isdir("/sys/block") else []:
        if name.startswith(SKIPPED_DISK_PREFIXES):
            continue
        base = os.path.join("/sys/block", name)
        prefix = "disk.%s." % sanitise(name)
        model = read_text(os.path.join(base, "device", "model"))
        if model:
            facts[prefix + "model"] = model
        sectors = read_text(os.path.join(base, "size"))
        if sectors and sectors.isdigit():
            facts[prefix + "size_gb"] = "%.1f" % (int(sectors) * 512 / 1e9)  # sysfs counts 512-byte sectors
        rotational = read_text(os.path.join(base, "queue", "rotational"))
        if rotational is not None:
            facts[prefix + "rotational"] = rotational


def probe_edac(facts, notes):
    controllers = glob.glob("/sys/devices/system/edac/mc/mc[0-9]*")
    if not controllers:
        notes.append("no EDAC memory controllers in /sys: memory error counts not reported")
        return
    corrected = uncorrected = 0
    for path in controllers:
        ce = read_text(os.path.join(path, "ce_count"))
        ue = read_text(os.path.join(path, "ue_count"))
        corrected += int(ce) if ce and ce.isdigit() else 0
        uncorrected += int(ue) if ue and ue.isdigit() else 0
    facts["edac_ce"] = str(corrected)
    facts["edac_ue"] = str(uncorrected)


# ---------------------------------------------------------------- sensors

# Where the kernel shows its sensors (a test points it elsewhere).
SYSFS = "/sys"
# The prefix of every sensor reading: measurements that differ from node to
# node and from minute to minute, not configuration.  The inconsistent-fact
# rule leaves them alone; correlate and dist read them (fact:sensor...).
SENSOR_PREFIX = "sensor."


def _sensor_number(text, scale):
    """A sysfs reading as a number in its unit (millidegrees / 1000 -> degrees C)."""
    try:
        value = int(text) / scale
    except (TypeError, ValueError):
        return None
    return ("%.1f" % value) if scale != 1 else str(int(value))


def probe_sensors(facts, notes):
    """Temperatures and fan speeds from hwmon and the thermal zones, and the
    CPUs' thermal throttling events since boot, as sensor.* readings."""
    found = 0
    chips = sorted(glob.glob(os.path.join(SYSFS, "class/hwmon/hwmon[0-9]*")))
    names = [read_text(os.path.join(chip, "name")) or "hwmon" for chip in chips]
    for chip, name in zip(chips, names):
        # Chips of one driver (coretemp of each socket) are told apart by their device.
        if names.count(name) > 1:
            name = os.path.basename(os.path.realpath(os.path.join(chip, "device"))) or name
        for kind, unit, scale in (("temp", "c", 1000.0), ("fan", "rpm", 1)):
            for reading in sorted(glob.glob(os.path.join(chip, kind + "[0-9]*_input"))):
                channel = os.path.basename(reading)[:-len("_input")]
                value = _sensor_number(read_text(reading), scale)
                if value is None:
                    continue
                label = read_text(os.path.join(chip, channel + "_label")) or channel
                facts["%s%s.%s_%s" % (SENSOR_PREFIX, sanitise(name), sanitise(label), unit)] = value
                found += 1
    for zone in sorted(glob.glob(os.path.join(SYSFS, "class/thermal/thermal_zone[0-9]*"))):
        value = _sensor_number(read_text(os.path.join(zone, "temp")), 1000.0)
        if value is not None:
            kind = read_text(os.path.join(zone, "type")) or os.path.basename(zone)
            facts["%sthermal.%s.%s_c" % (SENSOR_PREFIX, sanitise(kind), os.path.basename(zone))] = value
            found += 1
    throttled = {"core": 0, "package": {}}
    counted = False
    for cpu in glob.glob(os.path.join(SYSFS, "devices/system/cpu/cpu[0-9]*")):
        core = read_text(os.path.join(cpu, "thermal_throttle/core_throttle_count"))
        package = read_text(os.path.join(cpu, "thermal_throttle/package_throttle_count"))
        if core is not None and core.isdigit():
            counted = True
            throttled["core"] += int(core)
        if package is not None and package.isdigit():
            # Every CPU of a package shows the package's one count.
            socket_id = read_text(os.path.join(cpu, "topology/physical_package_id")) or cpu
            throttled["package"][socket_id] = int(package)
    if counted:
        facts[SENSOR_PREFIX + "cpu.core_throttle_events"] = str(throttled["core"])
        facts[SENSOR_PREFIX + "cpu.package_throttle_events"] = str(sum(throttled["package"].values()))
        found += 2
    if not found:
        notes.append("no temperature, fan or throttling sensor in /sys (hwmon, thermal zones): none reported")


# ---------------------------------------------------------------- libraries


_LDCONFIG_LINE = re.compile(r"^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S.*)$")


def _abi_tag(flags):
    """'libc6,x86-64, OS ABI: Linux 3.2.0' -> 'libc6,x86-64': the ABI, not the OS hint."""
    return ",".join(part.strip() for part in flags.split(",") if ":" not in part)


def _loaded_libc():
    """The C library mapped into this very process: it has the node's native ABI."""
    for line in (read_text("/proc/self/maps") or "").splitlines():
        path = line.split()[-1] if line.split() else ""
        if re.search(r"/libc[.-][^/]*so", path) or path.endswith("/libc.so.6"):
            return os.path.realpath(path)
    return None


def _version_key(text):
    return [int(part) for part in re.findall(r"\d+", text)]


def _library_version(soname, real_path):
    base = os.path.basename(real_path)
    if ".so." in base:
        return base.split(".so.", 1)[1]
    match = re.search(r"(\d+(?:\.\d+)+)", base)
    if match:
        return match.group(1)
    if ".so." in soname:
        return soname.split(".so.", 1)[1]
    return None


def _sha256_prefix(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()[:16]


def probe_libraries(facts, notes):
    libc = None
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):
        libc = None
    if not libc:
        name, version = platform.libc_ver()
        libc = ("%s %s" % (name, version)).strip() if name else None
    if not libc:
        text = run_tool(["ldd", "--version"], notes)
        lines = (text or "").strip().splitlines()
        libc = lines[0].strip() if lines else None
    if libc:
        facts["lib.libc"] = libc

    listing = run_tool(["ldconfig", "-p"], notes)
    if listing is None:
        notes.append("ldconfig unavailable: library paths and checksums not reported")
        return
    entries = []
    for line in listing.splitlines():
        match = _LDCONFIG_LINE.match(line)
        if match:
            entries.append((match.group(1), _abi_tag(match.group(2)), match.group(3).strip()))
    native = None
    loaded = _loaded_libc()
    for soname, tag, path in entries:
        if soname.startswith("libc.so.") and loaded and os.path.realpath(path) == loaded:
            native = tag
    chosen = {}
    for soname, tag, path in entries:
        if native is not None and tag != native:
            continue  # a 32-bit or foreign-ABI copy
        if not any(pattern.match(soname) for pattern in LIBRARY_PATTERNS):
            continue
        name = soname.split(".so", 1)[0]
        versioned = soname != name + ".so"
        rank = (versioned, _version_key(soname))
        if name not in chosen or rank > chosen[name][0]:
            chosen[name] = (rank, soname, path)
    for name in sorted(chosen):
        _, soname, path = chosen[name]
        key = "lib.%s." % sanitise(name)
        real = os.path.realpath(path)
        facts[key + "path"] = path
        version = _library_version(soname, real)
        if version:
            facts[key + "version"] = version
        try:
            if os.path.getsize(real) > HASH_LIMIT_BYTES:
                notes.append("%s larger than %d MiB: not hashed" % (real, HASH_LIMIT_BYTES >> 20))
            else:
                facts[key + "sha256"] = _sha256_prefix(real)
        except (OSError, IOError) as err:
            notes.append("cannot hash %s: %s" % (real, err))


# ---------------------------------------------------------------- processes

# One snapshot of /proc catches whatever happened to run at that instant (a
# cron job, a login, another tool's probe).  SNAPSHOTS of them over
# SAMPLE_SECONDS tell a command that stays from one passing through, and the
# CPU time each used in between tells a busy one from an idle daemon; the
# analysis judges both (oddnode.findings.processes).
SNAPSHOTS = 5
SAMPLE_SECONDS = 2.0
# /proc/<pid>/stat's flags bit of kernel threads (include/linux/sched.h).
PF_KTHREAD = 0x00200000


def stat_fields(text):
    """(comm, [field 3, field 4, ...]) of a /proc/<pid>/stat line, or None
    when it is not one.  The comm, in parentheses, may hold spaces and
    parentheses itself: the fields start after the last ')'.  Field n of
    proc(5), counted from 1 with pid and comm, is fields[n - 3]."""
    opening, closing = text.find("("), text.rfind(")")
    if opening < 0 or closing < opening:
        return None
    return text[opening + 1:closing], text[closing + 2:].split()


def parse_stat(text):
    """(comm, ppid, flags, CPU ticks, start tick) from a /proc/<pid>/stat
    line, or None when it is not one."""
    parsed = stat_fields(text)
    if parsed is None:
        return None
    comm, fields = parsed
    try:
        # Fields 4, 9, 14 + 15 (utime + stime) and 22 of proc(5).
        return comm, int(fields[1]), int(fields[6]), int(fields[11]) + int(fields[12]), int(fields[19])
    except (IndexError, ValueError):
        return None


def read_snapshot(proc="/proc"):
    """{(pid, start tick): (comm, ppid, CPU ticks)} of the user-space processes,
    and how many could not be read for want of permission (hidepid)."""
    processes = {}
    denied = 0
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        try:
            with open(os.path.join(proc, entry, "stat"), "rb") as handle:
                text = handle.read().decode("utf-8", "replace")
        except (OSError, IOError) as err:
            if getattr(err, "errno", None) in (1, 13):  # EPERM, EACCES: /proc mounted hidepid
                denied += 1
            continue  # most often the process just ended
        parsed = parse_stat(text)
        if parsed is None:
            continue
        comm, ppid, flags, ticks, start = parsed
        if flags & PF_KTHREAD or int(entry) == 2:
            continue  # a kernel thread, kthreadd among them
        processes[(int(entry), start)] = (comm, ppid, ticks)
    return processes, denied


def _own(snapshot, probe_pid, parent_pid):
    """The pids of the probe, its parent and the probe's descendants in one snapshot."""
    parents = dict((pid, ppid) for (pid, _), (_, ppid, _) in snapshot.items())
    own = set([probe_pid, parent_pid])
    for pid in parents:
        ancestor, seen = pid, 0
        while ancestor in parents and seen < len(parents):  # bounded: a reused pid could make a loop
            ancestor, seen = parents[ancestor], seen + 1
            if ancestor == probe_pid:
                own.add(pid)
                break
    return own


def summarise_snapshots(snapshots, probe_pid, parent_pid):
    """{comm: (snapshots it was seen in, CPU ticks its processes used over
    the sampling)}, the probe and its own processes left out.

    A process present in the first snapshot counts the ticks from there to
    its last sighting; one that started later counts all of its ticks.
    """
    first = snapshots[0] if snapshots else {}
    seen = {}
    last = {}
    for snapshot in snapshots:
        own = _own(snapshot, probe_pid, parent_pid)
        here = set()
        for key, (comm, _, ticks) in snapshot.items():
            if key[0] in own:
                continue
            here.add(comm)
            last[key] = (comm, ticks)
        for comm in here:
            seen[comm] = seen.get(comm, 0) + 1
    used = dict((comm, 0) for comm in seen)
    for key, (comm, ticks) in last.items():
        used[comm] += ticks - (first[key][2] if key in first else 0)
    return dict((comm, (seen[comm], used[comm])) for comm in seen)


def process_facts(summary, taken, window, ticks_per_second):
    """process.<comm> = running for every command seen, and process_seen.<comm>
    for those not seen in every snapshot or that used CPU time:
    "<seen>/<taken> snapshots in <window> s, <cpu> s CPU"."""
    facts = {}
    for comm, (seen, ticks) in summary.items():
        name = sanitise(comm)
        facts["process.%s" % name] = "running"
        if seen < taken or ticks > 0:
            facts["process_seen.%s" % name] = "%d/%d snapshots in %.1f s, %.2f s CPU" % (
                seen, taken, window, float(ticks) / ticks_per_second)
    return facts


def probe_processes(facts, notes):
    started = time.monotonic()
    snapshots = []
    denied = 0
    for index in range(SNAPSHOTS):
        if index:
            time.sleep(max(0.0, started + index * SAMPLE_SECONDS / (SNAPSHOTS - 1) - time.monotonic()))
        snapshot, unreadable = read_snapshot()
        snapshots.append(snapshot)
        denied = max(denied, unreadable)
    window = time.monotonic() - started
    try:
        ticks_per_second = os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError, AttributeError):
        ticks_per_second = 100  # USER_HZ on every Linux architecture
    summary = summarise_snapshots(snapshots, os.getpid(), os.getppid())
    facts.update(process_facts(summary, len(snapshots), window, ticks_per_second))
    if denied:
        notes.append("%d processes unreadable (/proc hidepid?): process list incomplete" % denied)


# ---------------------------------------------------------------- derived


# kB in a GiB: memory_total_gib is MemTotal (kB) / 2**20.
KB_PER_GIB = 1024 * 1024
_GPU_KEY = re.compile(r"^gpu\.(\d+)\.")


def derive_facts(facts):
    """The probe's facts plus those derived from them: memory_total_gib
    (which the analysis judges through memory_total_kb:
    findings.facts.DERIVED_FACTS), and gpu_count from the gpu.<i>.* keys
    when a probe reported GPUs without it; sorted by key.

    A node without nvidia-smi gets no gpu_count at all (its note says why):
    "0" would claim it was looked at and found to have none.
    """
    derived = dict(facts)
    memory_kb = facts.get("memory_total_kb", "")
    if memory_kb.isdigit():
        derived["memory_total_gib"] = "{:.1f}".format(int(memory_kb) / KB_PER_GIB)
    if "gpu_count" not in facts:
        indices = set()
        for key in facts:
            match = _GPU_KEY.match(key)
            if match:
                indices.add(match.group(1))
        if indices:
            derived["gpu_count"] = str(len(indices))
    return dict((key, derived[key]) for key in sorted(derived))


# ---------------------------------------------------------------- main


SECTIONS = (
    ("cpu", probe_cpu),
    ("memory", probe_memory),
    ("dmi", probe_dmi),
    ("system", probe_system),
    ("numa", probe_numa),
    ("network", probe_network),
    ("gpus", probe_gpus),
    ("disks", probe_disks),
    ("edac", probe_edac),
    ("sensors", probe_sensors),
    ("libraries", probe_libraries),
    ("processes", probe_processes),
)


def probe():
    """Run every section; a section that fails adds a note and loses only its own facts."""
    started = time.time()
    facts = {}
    notes = []
    for name, section in SECTIONS:
        try:
            section(facts, notes)
        except Exception as err:  # one broken section must not lose the others
            notes.append("section %s failed: %s: %s" % (name, type(err).__name__, err))
    try:
        hostname = socket.gethostname()
    except Exception:
        hostname = platform.node()
    return {
        "probe_version": PROBE_VERSION,
        "hostname": hostname,
        "facts": dict((str(k), str(v)) for k, v in sorted(facts.items())),
        "notes": notes,
        "elapsed": round(time.time() - started, 4),
    }


def main():
    sys.stdout.write(json.dumps(probe(), sort_keys=True) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
