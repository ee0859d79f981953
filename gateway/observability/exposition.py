"""The text `/metrics` answers: prometheus_client's text format (0.0.4), byte for byte
what its `generate_latest` writes, made without re-escaping every label on every scrape.

`generate_latest` validates and escapes each label name and value of each sample on
every scrape (~12 µs a line, ~8 ms a scrape of a gateway that has served a few routes
and models: bench/README.md, "Metrics"). A series' labels do not change between scrapes,
so this renderer writes a sample's `name{labels}` once, keeps it by the sample's name
and label values, and formats only the value each scrape. The families still come from
the registry's collectors, and anything other than a plain counter, gauge or histogram
sample (a timestamp, OpenMetrics-only samples) is written by `generate_latest` itself.
"""

from __future__ import annotations

from typing import Any, Iterable

from prometheus_client import generate_latest
from prometheus_client.openmetrics.exposition import escape_label_name, escape_metric_name
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from gateway.observability.plain import Family, PlainCollector

_TYPES = {"counter": "counter", "gauge": "gauge", "histogram": "histogram", "untyped": "untyped",
          "unknown": "untyped"}
# Samples the library moves to a family of their own after the others (OpenMetrics').
_MOVED_SUFFIXES = ("_created", "_gsum", "_gcount")
# Cached series past this many mean label values are not bounded as they should be:
# start again rather than grow without end.
MAX_CACHED = 20_000


class _One(Collector):
    def __init__(self, metric: Any):
        self._metric = metric

    def collect(self) -> Iterable[Any]:
        yield self._metric


def _escape_value(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _series(name: str, labels: dict[str, str]) -> str:
    if not labels:
        return escape_metric_name(name)
    pairs = ",".join(f'{escape_label_name(key)}="{_escape_value(value)}"' for key, value in sorted(labels.items()))
    return f"{escape_metric_name(name)}{{{pairs}}}"


def _format_header(name: str, kind: str, documentation: str) -> str:
    if kind == "counter":
        name += "_total"
    shown = escape_metric_name(name)
    help_text = documentation.replace("\\", r"\\").replace("\n", r"\n")
    return f"# HELP {shown} {help_text}\n# TYPE {shown} {_TYPES[kind]}\n"


class Exposition:
    """Renders a registry; one per registry, as it keeps that registry's series.
    `plain`: the registry's collector of plain families (`observability/plain.py`),
    whose children are written straight from their numbers, without the library's
    sample objects (a family's samples, made and read again, were half a scrape)."""

    def __init__(self, registry: Collector, plain: PlainCollector | None = None):
        self._registry = registry
        self._plain = plain
        self._headers: dict[tuple[str, str, str], str] = {}
        self._series: dict[tuple[str, Any], Any] = {}

    def render(self) -> bytes:
        if len(self._series) > MAX_CACHED:
            self._series.clear()
        out: list[str] = []
        plain = self._plain
        if plain is not None:
            plain.as_families = True   # its collect() yields its `Family` objects (synchronous: no one else sees it)
        try:
            # The registry yields the plain collector's `Family` objects too, not only its Metrics.
            metrics: Iterable[Any] = self._registry.collect()
            for metric in metrics:
                if metric.__class__ is Family:
                    self._family(metric, out)
                else:
                    self._metric(metric, out)
        finally:
            if plain is not None:
                plain.as_families = False
        return "".join(out).encode()

    def _header(self, name: str, kind: str, documentation: str) -> str:
        key = (name, kind, documentation)
        header = self._headers.get(key)
        if header is None:
            header = self._headers[key] = _format_header(*key)
        return header

    def _metric(self, metric: Any, out: list[str]) -> None:
        """A family from any collector, from its samples."""
        if metric.type not in _TYPES:
            out.append(generate_latest(_One(metric)).decode())
            return
        series = self._series
        start = len(out)
        out.append(self._header(metric.name, metric.type, metric.documentation))
        moved = tuple(metric.name + suffix for suffix in _MOVED_SUFFIXES)
        for sample in metric.samples:
            if sample.timestamp is not None or sample.name in moved:
                del out[start:]
                out.append(generate_latest(_One(metric)).decode())
                return
            labels = sample.labels
            at = (sample.name, tuple(labels.items()))
            line = series.get(at)
            if line is None:
                line = series[at] = _series(sample.name, labels) + " "
            out.append(line)
            out.append(floatToGoString(sample.value))
            out.append("\n")

    def _family(self, family: Family, out: list[str]) -> None:
        """A plain family, straight from its children: the lines `Family.sample_family()`
        would make, in the same order."""
        kind, name, series = family.kind, family.name, self._series
        if kind == "counter":
            name = name.removesuffix("_total")
        out.append(self._header(name, kind, family.help))
        if kind == "histogram":
            family.fold()
        for values, child in list(family.children.items()):
            at = (family.name, values)
            lines = series.get(at)
            if lines is None:
                lines = series[at] = _family_lines(family, name, values)
            if kind != "histogram":
                out.append(lines)
                out.append(floatToGoString(child.value))
                out.append("\n")
                continue
            cumulative = 0
            for line, count in zip(lines, list(child.counts)):
                cumulative += count
                out.append(line)
                out.append(floatToGoString(cumulative))
                out.append("\n")
            out.append(lines[-2])
            out.append(floatToGoString(cumulative))
            out.append("\n")
            out.append(lines[-1])
            out.append(floatToGoString(child.sum))
            out.append("\n")


def _family_lines(family: Family, name: str, values: tuple[str, ...]) -> Any:
    """A child's `name{labels} ` prefix (a counter's or gauge's), or a histogram's: one
    per bucket, then `_count`'s and `_sum`'s."""
    labels = dict(zip(family.label_names, values))
    if family.kind == "counter":
        return _series(name + "_total", labels) + " "
    if family.kind != "histogram":
        return _series(name, labels) + " "
    edges = [*(repr(bound) for bound in family.bounds), "+Inf"]
    return (*(_series(name + "_bucket", {**labels, "le": edge}) + " " for edge in edges),
            _series(name + "_count", labels) + " ", _series(name + "_sum", labels) + " ")
