"""iperf3 client JSON output (``iperf3 -c ... -J``).

Benchmarks ``iperf3.tcp`` / ``iperf3.udp``, with ``.reverse`` for ``-R``
(data flows server -> client, the other way through a pair) and for the
reverse half of ``--bidir``.  Metrics from ``end.sum_sent`` and
``end.sum_received``: ``sender.bandwidth`` and ``receiver.bandwidth`` in MB/s
(iperf3's bits_per_second / 8 / 10^6, MB/s so that every oddnode network
tool shares one unit), ``sender.retransmits`` (TCP, count, lower is better),
``receiver.jitter`` (UDP, ms as iperf3 gives it) and
``receiver.lost_percent`` (UDP, lower is better).

A JSON ``"error"`` (e.g. "unable to connect to server: Connection refused")
and the text client's "iperf3: error - ..." line give an invalid output with
that text in ``problems``: the pair failed, which the importer records.  The
text client output of a successful run rounds to three significant digits
and is refused with a ParseError that says to use ``-J``.
"""

from __future__ import annotations

import re
from typing import Any

from oddnode.core.inputs import clip
from oddnode.core.model import Direction
from oddnode.parsers.base import (
    Measurement, ParsedOutput, ParseError, json_document, json_number, mapping,
)
from oddnode.core.units import canonical_unit

_TEXT_ERROR = re.compile(r"^iperf3: error - (.*?)\s*$", re.MULTILINE)
_TEXT_OUTPUT = re.compile(r"^(Connecting to host|Server listening on|\[ ID\] Interval|iperf Done\.)",
                          re.MULTILINE)
_BITS_PER_BYTE = 8
_BYTES_PER_MB = 1e6


def _load(text: str, source: str) -> tuple[dict[str, Any], int] | None:
    """The JSON document and the line it starts on, or None for a text
    client's error line."""
    found = json_document(text, source, "iperf3")
    if found is None:
        if _TEXT_ERROR.search(text):
            return None
        if _TEXT_OUTPUT.search(text):
            raise ParseError(source, None, "iperf3 text output is not parsed: it rounds to three "
                                           "significant digits; run the client with -J (--json)")
        raise ParseError(source, None, "not iperf3 output: no JSON object")
    document, line = found
    if not isinstance(document, dict) or "start" not in document or "end" not in document:
        raise ParseError(source, line, "not iperf3 -J output: no 'start' and 'end' keys")
    return document, line


def _summary(benchmark: str, sums: tuple[object, object], parameters: dict[str, Any], udp: bool,
             where: tuple[str, int], names: tuple[str, str]) -> list[Measurement]:
    found = []
    sent, received = (None if block is None else mapping(block, *where, f"end.{name}")
                      for block, name in zip(sums, names))

    def add(value: object, unit: str, direction: Direction, metric: str, source_unit: str, what: str,
            scale: float = 1.0) -> None:
        found.append(Measurement(benchmark, json_number(value, *where, what) * scale, canonical_unit(unit),
                                 direction, metric=metric, parameters={**parameters, "source_unit": source_unit}))

    for side, block, name in (("sender", sent, names[0]), ("receiver", received, names[1])):
        if not block or "bits_per_second" not in block:
            continue
        add(block["bits_per_second"], "MB/s", Direction.HIGHER, f"{side}.bandwidth", "bits/s",
            f"end.{name}.bits_per_second", 1 / _BITS_PER_BYTE / _BYTES_PER_MB)
    if not udp and sent and "retransmits" in sent:
        add(sent["retransmits"], "count", Direction.LOWER, "sender.retransmits", "count",
            f"end.{names[0]}.retransmits")
    if udp and received:
        if "jitter_ms" in received:
            add(received["jitter_ms"], "ms", Direction.LOWER, "receiver.jitter", "ms", f"end.{names[1]}.jitter_ms")
        if "lost_percent" in received:
            add(received["lost_percent"], "%", Direction.LOWER, "receiver.lost_percent", "%",
                f"end.{names[1]}.lost_percent")
    return found


def parse_iperf3(text: str, source: str) -> ParsedOutput:
    """End-of-test sums of one iperf3 client run."""
    found = _load(text, source)
    if found is None:
        return ParsedOutput(tool="iperf3", measurements=[], valid=False,
                            problems=[f"iperf3: {clip(m.group(1))}" for m in _TEXT_ERROR.finditer(text)])
    document, line = found
    where = (source, line)
    start = mapping(document["start"], *where, "start")
    end = mapping(document["end"] or {}, *where, "end")
    test = mapping(start.get("test_start", {}), *where, "start.test_start")
    protocol = str(test.get("protocol", "TCP")).lower()
    udp = protocol == "udp"
    reverse = bool(test.get("reverse", 0))
    parameters = {key: test[key] for key in ("num_streams", "blksize", "duration", "omit", "target_bitrate")
                  if key in test}
    parameters.update(protocol=protocol, reverse=reverse)
    configuration = {
        "version": start.get("version"),
        "system_info": start.get("system_info"),
        "time": mapping(start.get("timestamp", {}), *where, "start.timestamp").get("time"),
        "server": mapping(start.get("connecting_to", {}), *where, "start.connecting_to").get("host"),
        "sender_tcp_congestion": end.get("sender_tcp_congestion"),
        "receiver_tcp_congestion": end.get("receiver_tcp_congestion"),
    }
    benchmark = f"iperf3.{protocol}" + (".reverse" if reverse else "")
    names = ("sum_sent", "sum_received")
    measurements = _summary(benchmark, (end.get(names[0]), end.get(names[1])), parameters, udp, where, names)
    if "sum_sent_bidir_reverse" in end or "sum_received_bidir_reverse" in end:  # --bidir
        names = ("sum_sent_bidir_reverse", "sum_received_bidir_reverse")
        measurements += _summary(f"iperf3.{protocol}.reverse", (end.get(names[0]), end.get(names[1])),
                                 {**parameters, "bidir": True}, udp, where, names)
    problems = []
    if "error" in document:
        problems.append(f"iperf3: {clip(document['error'])}")
    elif not measurements:
        raise ParseError(source, line, "iperf3 JSON without end-of-test sums (sum_sent / sum_received)")
    return ParsedOutput(tool="iperf3", measurements=measurements, valid=not problems,
                        problems=problems, configuration=configuration)
