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

    def collect(self) -> Iterable:
        yield self._metric


def _escape_value(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _series(name: str, labels: dict[str, str]) -> str:
    if not labels:
        return escape_metric_name(name)
    pairs = ",".join(f'{escape_label_name(key)}="{_escape_value(value)}"' for key, value in sorted(labels.items()))
    return f"{escape_metric_name(name)}{{{pairs}}}"


def _header(name: str, kind: str, documentation: str) -> str:
    if kind == "counter":
        name += "_total"
    shown = escape_metric_name(name)
    help_text = documentation.replace("\\", r"\\").replace("\n", r"\n")
    return f"# HELP {shown} {help_text}\n# TYPE {shown} {_TYPES[kind]}\n"


class Exposition:
    """Renders a registry; one per registry, as it keeps that registry's series."""

    def __init__(self, registry: Collector):
        self._registry = registry
        self._headers: dict[tuple[str, str, str], str] = {}
        self._series: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}

    def render(self) -> bytes:
        headers, series = self._headers, self._series
        if len(series) > MAX_CACHED:
            series.clear()
        out: list[str] = []
        for metric in self._registry.collect():
            if metric.type not in _TYPES:
                out.append(generate_latest(_One(metric)).decode())
                continue
            key = (metric.name, metric.type, metric.documentation)
            header = headers.get(key)
            if header is None:
                header = headers[key] = _header(*key)
            start = len(out)
            out.append(header)
            moved = tuple(metric.name + suffix for suffix in _MOVED_SUFFIXES)
            for sample in metric.samples:
                if sample.timestamp is not None or sample.name in moved:
                    del out[start:]
                    out.append(generate_latest(_One(metric)).decode())
                    break
                labels = sample.labels
                at = (sample.name, tuple(labels.items()))
                line = series.get(at)
                if line is None:
                    line = series[at] = _series(sample.name, labels) + " "
                out.append(line)
                out.append(floatToGoString(sample.value))
                out.append("\n")
        return "".join(out).encode()
