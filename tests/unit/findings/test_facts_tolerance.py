"""The inconsistent-fact rule judges numbers by their own spread, whatever a
site calls its keys or its nodes: natural jitter (MemTotal, CPU MHz) and
integers a few ppm apart are one value at 8 to 10,000 nodes, a node with a
quarter less memory is named alone, and counts, dates, codes and versions
that differ are still named."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from oddnode.findings import find_all
from oddnode.findings.expectations import check_expectations, parse_expectations, snapshot
from oddnode.findings.facts import CLOSE_RELATIVE, NOT_REPORTED, is_date_shaped, one_value, parse_number
from oddnode.core.model import Dataset, Severity

# Keys a site's scripts may use for MemTotal in kB: none of them is ours.
MEMORY_KEYS = ("mem_total_kb", "MemTotal", "physmem_kb", "Mem Total (kB)")
MEMORY_GIB = "Mem Total (GiB)"
MEMTOTAL_KB = 263_856_012  # 256 GiB less the kernel's reservations
SCHEMES = ("cn", "rack", "gpu", "unpadded")


@functools.cache
def node_names(scheme: str, n: int) -> list[str]:
    """n node names in a site's scheme: cn-0001, r01n01, gpu001, node1."""
    return {
        "cn": [f"cn-{i:04d}" for i in range(1, n + 1)],
        "rack": [f"r{i // 16 + 1:02d}n{i % 16 + 1:02d}" for i in range(n)],
        "gpu": [f"gpu{i:03d}" for i in range(1, n + 1)],
        "unpadded": [f"node{i}" for i in range(1, n + 1)],
    }[scheme]


def memory_kb(rng: np.random.Generator, n: int) -> np.ndarray:
    """MemTotal of identical nodes: a few hundred kB to a few MB apart, in
    4 kB pages, the jitter normal, uniform or Laplace-shaped."""
    width = np.exp(rng.uniform(np.log(200), np.log(4000)))  # kB, about the range of most nodes
    shape = rng.integers(3)
    if shape == 0:
        jitter = rng.normal(0, width / 4, n)
    elif shape == 1:
        jitter = rng.uniform(-width / 2, width / 2, n)
    else:
        jitter = rng.laplace(0, width / 8, n)
    base = MEMTOTAL_KB + 4 * int(rng.integers(-50_000, 50_000))
    return base + 4 * np.round(jitter / 4).astype(np.int64)


def cpu_mhz(rng: np.random.Generator, n: int) -> np.ndarray:
    """/proc/cpuinfo's cpu MHz: near the nominal clock with turbo off, or
    anywhere from 800 to 3,500 MHz on idle nodes with a powersave governor."""
    if rng.random() < 0.5:
        return rng.uniform(800.0, 3500.0, n)
    nominal = rng.choice([2100.0, 2400.0, 2600.0, 3000.0])
    return nominal + rng.normal(0, np.exp(rng.uniform(np.log(0.5), np.log(30.0))), n)


def site_facts(rng: np.random.Generator, names: list[str], small_memory: str | None = None,
               planted: tuple[str, ...] = MEMORY_KEYS) -> dict:
    """A site's inventory of identical nodes, key -> node -> value, with
    jitter where real nodes have it; ``small_memory`` has a quarter less in
    the ``planted`` memory keys (and in GiB when its kB key is planted)."""
    n = len(names)
    columns: dict[str, list[str]] = {}
    for key in MEMORY_KEYS:
        kb = memory_kb(rng, n)
        if small_memory is not None and key in planted:
            kb[names.index(small_memory)] = kb[names.index(small_memory)] * 3 // 4
        columns[key] = [str(v) for v in kb.tolist()]
    decimals = int(rng.integers(1, 3))
    columns[MEMORY_GIB] = [f"{v / 2**20:.{decimals}f}" for v in kb.tolist()]  # from the last kB key
    columns["cpu MHz"] = [f"{v:.3f}" for v in cpu_mhz(rng, n).tolist()]
    columns["BogoMIPS"] = [f"{v:.2f}" for v in (4788.0 + rng.normal(0, rng.uniform(0.2, 2.0), n)).tolist()]
    for key, value in (("Cores", "64"), ("MTU eth0", "9000"), ("numa nodes", "8"), ("BIOS date", "20240112"),
                       ("nvidia driver", "535.104"), ("port speed", "200000"), ("kernel", "5.14")):
        columns[key] = [value] * n
    return {key: dict(zip(names, values)) for key, values in columns.items()}


def fact_findings(facts: dict[str, dict[str, str]]) -> dict:
    return {f.subject: f for f in find_all(Dataset(facts=facts), rules=["inconsistent-fact"])}


# ---------------------------------------------------------------- jitter and faults at any size

SIZES = (8, 100, 484, 10_000)
CLUSTERS = 200


@pytest.mark.slow
@pytest.mark.parametrize("n", SIZES)
def test_jitter_under_any_key_name_is_one_value_and_a_quarter_less_memory_is_named_alone(n):
    """Each cluster has a node with a quarter less memory in two of its four
    kB keys (in turn): those name it alone, with its value and the others'
    range; the other keys, all jitter, name nothing."""
    for seed in range(CLUSTERS):
        rng = np.random.default_rng([n, seed])
        names = node_names(SCHEMES[seed % len(SCHEMES)], n)
        small = names[int(rng.integers(n))]
        planted = (MEMORY_KEYS[seed % 4], MEMORY_KEYS[(seed + 1) % 4])
        facts = site_facts(rng, names, small, planted)
        found = fact_findings(facts)
        expected = {*planted, MEMORY_GIB} if MEMORY_KEYS[-1] in planted else set(planted)
        assert set(found) == expected, (seed, {key: f.message[:200] for key, f in found.items()})
        for key, finding in found.items():
            value = facts[key].pop(small)
            others = np.array(list(facts[key].values()), dtype=float)
            assert finding.nodes == small and finding.severity is Severity.WARNING
            assert finding.evidence["minority"] == {value: small}
            assert f"{small}: {value}" in finding.message
            if "one_value" not in finding.evidence:  # the others hold one value, rounded alike
                assert len(set(others)) == 1 and f"have {key} {finding.evidence['majority']};" in finding.message
                continue
            low, high = finding.evidence["one_value"]["range"]
            assert (float(low), float(high)) == (others.min(), others.max())
            assert f"{low} to {high}" in finding.message


@pytest.mark.slow
def test_10000_nodes_and_200_keys_warn_of_the_small_node_and_note_the_brief_command():
    rng = np.random.default_rng(10)
    names = node_names("cn", 10_000)
    facts = site_facts(rng, names, small_memory="cn-0042")  # 17 keys, 6 of them jittering
    for index in range(140):
        facts[f"fact{index}"] = dict.fromkeys(names, "identical")
    for index in range(40):
        facts[f"process.daemon{index}"] = dict.fromkeys(names, "running")
    facts["process.cron"] = {"cn-0007": "running"}
    facts["process_seen.cron"] = {"cn-0007": "1/5 snapshots in 2.0 s, 0.00 s CPU"}
    found = fact_findings(facts)
    assert {f.nodes: f.severity for f in found.values()} == {"cn-0042": Severity.WARNING, "cn-0007": Severity.INFO}


def test_our_own_memory_facts_name_a_small_node_once():
    """memory_total_gib is derived from memory_total_kb by collect: one
    finding for one fault, as the testbed's check expects."""
    from oddnode.measure.collect.inventory import derive_facts

    names = node_names("cn", 8)
    kb = {node: 263856012 - 4096 * i for i, node in enumerate(names)}
    kb["cn-0006"] = kb["cn-0006"] * 3 // 4
    reports = {node: derive_facts({"memory_total_kb": str(value)}) for node, value in kb.items()}
    facts = {key: {node: report[key] for node, report in reports.items()} for key in reports["cn-0001"]}
    assert set(facts) == {"memory_total_kb", "memory_total_gib"}
    found = fact_findings(facts)
    assert {(key, f.nodes) for key, f in found.items()} == {("memory_total_kb", "cn-0006")}


# ---------------------------------------------------------------- close integers with a majority

CLOSE_KEYS = ("MemTotal", "physmem_kb", "Mem Total (kB)")
NODE_SIZES_GIB = (16, 32, 64, 128, 256, 512, 1024, 2048)
CLOSE_CLUSTERS = {8: 60, 100: 60, 484: 40, 10_000: 6}


def close_memory(rng: np.random.Generator, names: list[str], kinds: int) -> dict[str, str]:
    """MemTotal in kB of identical nodes that take ``kinds`` values 4 kB apart
    (a firmware reserving a page more on some): one value on 60 to 90% of the
    nodes, or the nodes split about evenly."""
    gib = int(rng.choice(NODE_SIZES_GIB))
    base = 4 * int(gib * 2**18 * rng.uniform(0.95, 0.99))  # in 4 kB pages, less the kernel's share
    if rng.random() < 0.5:
        first = rng.uniform(0.6, 0.9)
        shares = np.array([first, *[(1 - first) / (kinds - 1)] * (kinds - 1)])
    else:
        shares = np.full(kinds, 1 / kinds)
    offsets = 4 * rng.permutation(kinds)  # 0, 4 or 8 kB above the lowest, in any order of majority
    values = base + offsets[rng.choice(kinds, size=len(names), p=shares)]
    return dict(zip(names, map(str, values.tolist())))


def close_facts(rng: np.random.Generator, names: list[str], kinds: int) -> dict[str, dict[str, str]]:
    facts = {key: close_memory(rng, names, kinds) for key in CLOSE_KEYS}
    for key, value in (("cores", "64"), ("GPUs", "8"), ("firmware date", "20240312"), ("build", "19041")):
        facts[key] = dict.fromkeys(names, value)
    return facts


@pytest.mark.slow
@pytest.mark.parametrize("kinds", (2, 3))
@pytest.mark.parametrize("n", SIZES)
def test_close_memory_is_one_value_and_a_quarter_less_is_named_alone(n, kinds):
    """Two or three MemTotal values a few kB apart, whichever holds the
    majority, name nothing; a node with three quarters of the memory in one
    key is named alone there, the close values shown as one."""
    for seed in range(CLOSE_CLUSTERS[n]):
        rng = np.random.default_rng([n, kinds, seed])
        names = node_names(SCHEMES[seed % 3], n)
        facts = close_facts(rng, names, kinds)
        assert fact_findings(facts) == {}, seed
        key, small = CLOSE_KEYS[seed % 3], names[int(rng.integers(n))]
        facts[key][small] = str(int(facts[key][small]) * 3 // 4)
        found = fact_findings(facts)
        assert set(found) == {key}, seed
        finding = found[key]
        assert finding.nodes == small and finding.evidence["minority"] == {facts[key][small]: small}
        others = sorted({int(v) for node, v in facts[key].items() if node != small})
        if len(others) > 1:  # three values and the small node's, none a majority: four values, jitter
            reason = finding.evidence["one_value"]["reason"]
            assert reason == "close" or (kinds == 3 and reason == "jitter")
            assert finding.evidence["one_value"]["range"] == [str(others[0]), str(others[-1])]
            assert f"({others[0]} to {others[-1]}: one value, {reason})" in finding.message


def test_the_reported_cluster_analyzed_whole_names_nothing_but_the_small_node():
    """484 identical nodes, half reporting MemTotal 4 kB above the others,
    through every rule: no inconsistent fact; a quarter less names that node."""
    names = node_names("cn", 484)
    memory = {node: str(263856012 + 4 * (i % 2)) for i, node in enumerate(names)}
    facts = {"MemTotal": memory, "cores": dict.fromkeys(names, "128")}
    assert [f for f in find_all(Dataset(facts=facts)) if f.kind == "inconsistent-fact"] == []
    memory["cn-0123"] = str(263856012 * 3 // 4)
    found = [f for f in find_all(Dataset(facts=facts)) if f.kind == "inconsistent-fact"]
    assert [(f.subject, f.nodes) for f in found] == [("MemTotal", "cn-0123")]
    assert found[0].evidence["majority"] == "263856016"  # the halves' more common value, shown for both
    assert "(263856012 to 263856016: one value, close)" in found[0].message


IDENTIFIERS = [
    ("cores", "64", "128"),
    ("GPUs", "8", "7"),
    ("DIMMs", "16", "15"),
    ("firmware date", "20240312", "20240313"),
    ("BIOS build date", "20231231", "20240101"),
    ("build", "19041", "19042"),
    ("driver packed", "535104", "535129"),
    ("kernel version code", "331264", "331520"),
]


@pytest.mark.parametrize("key, usual, odd", IDENTIFIERS)
def test_identifiers_beside_close_memory_are_still_named(key, usual, odd):
    """Counts, dates and versions written as integers are named when they
    differ on one node, on a tenth or on 40% of the nodes."""
    for n, share in ((8, 1), (100, 10), (484, 194), (10_000, 1)):
        rng = np.random.default_rng([n, share])
        names = node_names("gpu", n)
        facts = close_facts(rng, names, 2)
        odd_nodes = set(rng.choice(names, size=share, replace=False).tolist())
        facts[key] = {node: odd if node in odd_nodes else usual for node in names}
        found = fact_findings(facts)
        assert set(found) == {key}, (n, share)
        assert found[key].evidence["counts"] == {usual: n - share, odd: share}
        assert "one_value" not in found[key].evidence


def test_identifiers_split_evenly_are_named_without_a_majority():
    names = node_names("rack", 100)
    for key, usual, odd in IDENTIFIERS:
        found = fact_findings({key: {node: (usual, odd)[i % 2] for i, node in enumerate(names)}})
        assert found[key].evidence["majority"] is None and "one_value" not in found[key].evidence, key


def test_one_value_of_close_integers():
    merged = one_value({"263856012": 300, "263856016": 150, "263856020": 34, "197892009": 1})
    assert merged.reason == "close" and merged.centre == "263856012"
    assert merged.members == {"263856012", "263856016", "263856020"}
    assert (merged.low, merged.high) == ("263856012", "263856020")
    low, high = merged.band  # as wide as the band lets a value join them
    assert low == pytest.approx(263856020 * (1 - CLOSE_RELATIVE))
    assert high == pytest.approx(263856012 * (1 + CLOSE_RELATIVE))
    # The minority close: the centre is still the most common of them.
    assert one_value({"263856012": 10, "263856016": 400}).centre == "263856016"
    # Two groups of close values: the one with more nodes.
    two = one_value({"263856012": 100, "263856016": 100, "527712024": 150, "527712028": 10})
    assert two.members == {"263856012", "263856016"}
    # Beyond the band, counts and dates: exact.
    assert one_value({"263856012": 300, "263859012": 184}) is None  # 3 MB: 11 ppm
    assert one_value({"128": 300, "127": 184}) is None
    assert one_value({"99999": 300, "99998": 184}) is None  # just beyond the band
    assert one_value({"20240312": 300, "20240313": 184}) is None
    assert one_value({"1977204.0": 300, "1977208.0": 184}) is None  # decimals: the rounding rule's
    assert one_value({"2.63856012e8": 300, "2.63856016e8": 184}) is None


def test_date_shape():
    for text in ("20240312", "19991231", "20240229", "19700101", " 20991231 "):
        assert is_date_shaped(text), text
    for text in ("20230229", "20241301", "20240132", "19691231", "21000101", "263856012", "2024031", "2024-03-12",
                 "33554432"):
        assert not is_date_shaped(text), text


def test_a_snapshot_of_close_memory_allows_the_band_not_one_value():
    """A baseline written from two close MemTotal values must pass a node
    with either, or a page more, and fail a node with a quarter less."""
    names = node_names("cn", 10)
    facts = {"MemTotal": {node: str(263856012 + 4 * (i % 2)) for i, node in enumerate(names)}}
    text = snapshot(facts, names)
    assert "# MemTotal: 263856012 to 263856016 on the nodes, one value (close)" in text
    expected = parse_expectations(text)
    assert check_expectations(expected, facts, names).failures == []
    facts["MemTotal"]["cn-0003"] = "263856020"
    facts["MemTotal"]["cn-0004"] = str(263856012 * 3 // 4)
    failures = check_expectations(expected, facts, names).failures
    assert [(f.subject, f.nodes) for f in failures] == [("MemTotal", "cn-0004")]


# ---------------------------------------------------------------- what still differs


@pytest.mark.parametrize(
    "key, majority, odd",
    [
        ("Cores", "64", "62"),
        ("cpus", "128", "126"),
        ("MTU eth0", "9000", "1500"),
        ("mtu_ib0", "1500", "1520"),
        ("port speed", "200000", "100000"),
        ("BIOS date", "20240112", "20230905"),
        ("firmware build", "4521", "4522"),
        ("nvidia driver", "535.104", "535.129"),
        ("kernel", "5.14", "5.15"),
        ("BIOS version", "1.10", "1.1"),
        ("numa nodes", "8", "4"),
        ("mem_kb", "1977204", "1977404"),  # 200 kB of 2 GB (100 ppm): beyond the close band
        ("BIOS date", "20240312", "20240313"),  # a day apart: 0.05 ppm, but a date
        ("build", "19041", "19042"),  # 52 ppm
        ("driver packed", "535104", "535129"),  # 47 ppm
        ("gpus", "8", "7"),
    ],
)
def test_numbers_that_must_match_are_named_even_beside_jitter(key, majority, odd):
    for n in (8, 484):
        rng = np.random.default_rng(n)
        names = node_names("rack", n)
        facts = site_facts(rng, names)
        facts[key] = dict.fromkeys(names, majority)
        facts[key][names[3]] = odd
        found = fact_findings(facts)
        assert set(found) == {key}
        assert found[key].nodes == names[3] and found[key].evidence["minority"] == {odd: names[3]}
        assert "one_value" not in found[key].evidence


def test_kinds_of_nodes_without_a_majority_are_named():
    """Three BIOS builds or two memory sizes are kinds of nodes, not jitter."""
    names = node_names("unpadded", 100)
    builds = {node: ("20240112", "20230905", "20221010")[i % 3] for i, node in enumerate(names)}
    sizes = {node: str(MEMTOTAL_KB + 4 * i) if i < 50 else str(2 * MEMTOTAL_KB + 4 * i)
             for i, node in enumerate(names)}
    found = fact_findings({"bios": builds, "physmem_kb": sizes})
    assert found["bios"].evidence["counts"] == {"20240112": 34, "20221010": 33, "20230905": 33}
    # 100 distinct values: jitter, around the lower half's median; the upper half is outside.
    assert found["physmem_kb"].nodes == "node[51-100]"


# ---------------------------------------------------------------- one_value


def counts(*values: str, each: int = 1) -> dict[str, int]:
    return {value: each for value in values}


def test_one_value_of_jitter_is_the_band_around_the_median():
    texts = {str(263856012 + 4 * i): 1 for i in range(-20, 22)}
    merged = one_value({**texts, "197892009": 1})  # the median is the 22nd of 43 values
    assert merged.reason == "jitter" and merged.centre == "263856012"
    assert merged.members == frozenset(texts)
    assert (merged.low, merged.high) == ("263855932", "263856096")
    low, high = merged.band
    assert 197892009 < low < 263855932 and high > 263856096


def test_rounding_merges_neighbouring_decimals_only():
    merged = one_value({"251.6": 300, "251.7": 184, "188.7": 1})
    assert merged.reason == "rounding" and merged.members == {"251.6", "251.7"}
    assert one_value({"251.52": 200, "251.53": 250, "251.54": 34}).members == {"251.52", "251.53", "251.54"}
    assert one_value({"251.6": 300, "251.9": 10}) is None  # three steps: a difference
    assert one_value({"5.14": 400, "5.15": 84}) is None  # the step is 0.2% of the value: a version
    assert one_value({"4521": 400, "4522": 84}) is None  # integers never round
    assert one_value({"535.104": 400, "535.129": 84}) is None


def test_few_values_without_a_majority_are_not_jitter():
    assert one_value(counts("64", "62", "60", each=10)) is None
    assert one_value({"4990.03": 4, "4990.07": 2, "4989.96": 1, "4990.00": 1}).reason == "jitter"


def test_parse_number_takes_plain_decimals_only():
    assert parse_number("263856012") == 263856012.0
    assert parse_number("251.6") == 251.6
    assert parse_number("-1") == -1.0
    for text in ("nan", "inf", "1_000", "6.1.0", "", "0x1f", "32 GB"):
        assert parse_number(text) is None, text


def test_text_and_absent_values_stay_apart_from_jitter():
    names = node_names("gpu", 12)
    kb = {node: str(263856012 - 4096 * i) for i, node in enumerate(names[:-1])}
    kb["gpu002"] = "unknown"
    found = fact_findings({"MemTotal": kb, "kernel": dict.fromkeys(names, "6.1")})
    assert found["MemTotal"].evidence["minority"] == {NOT_REPORTED: "gpu012", "unknown": "gpu002"}


# ---------------------------------------------------------------- processes


def nodes(n: int) -> list[str]:
    return [f"node{i:02d}" for i in range(1, n + 1)]


def process_facts(names: list[str], running: dict[str, list[str]]) -> dict[str, dict[str, str]]:
    facts = {"process.sshd": {node: "running" for node in names}, "kernel": {node: "6.1" for node in names}}
    for comm, where in running.items():
        facts[f"process.{comm}"] = {node: "running" for node in where}
    return facts


def test_process_on_a_minority_runs_there_only():
    names = nodes(8)
    found = fact_findings(process_facts(names, {"httpd": ["node03", "node05"]}))
    assert set(found) == {"process.httpd"}
    httpd = found["process.httpd"]
    assert httpd.nodes == "node[03,05]"
    assert httpd.message == "httpd runs on node[03,05] only"
    assert httpd.evidence["majority"] == "not running"
    assert httpd.evidence["counts"] == {"not running": 6, "running": 2}
    assert "stop httpd on node[03,05]" in httpd.remedy


def test_process_missing_on_a_minority_is_not_running_there():
    names = nodes(8)
    found = fact_findings(process_facts(names, {"slurmd": [n for n in names if n != "node04"]}))
    slurmd = found["process.slurmd"]
    assert slurmd.nodes == "node04"
    assert slurmd.message.endswith("not running on node04")
    assert slurmd.evidence["minority"] == {"not running": "node04"}
    assert "start slurmd on node04" in slurmd.remedy


def test_process_tie_has_no_majority():
    names = nodes(4)
    found = fact_findings(process_facts(names, {"cron": ["node01", "node02"]}))
    cron = found["process.cron"]
    assert cron.evidence["majority"] is None
    assert "cron runs on node[01-02] and is not running on node[03-04]" in cron.message


def test_nodes_without_a_process_list_are_not_reported_not_idle():
    """A node whose probe reported no processes at all is not said to run nothing."""
    names = nodes(5)
    facts = process_facts(names[:-1], {})
    facts["kernel"]["node05"] = "6.1"  # node05 is in the inventory, its process section failed
    found = fact_findings(facts)
    assert found["process.sshd"].evidence["minority"] == {NOT_REPORTED: "node05"}
    assert "not reported" in found["process.sshd"].message
