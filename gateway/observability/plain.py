"""Metric families kept as plain Python numbers, turned into samples only when scraped.

prometheus_client's own Counter/Histogram take a lock and walk objects on every
`inc`/`observe` (~1-2 µs each); a turn records a dozen of them. Everything here runs on
the event loop's one thread (the database's timings are taken in the loop too), so a
child is a slot holding a float: `inc` is an add, `observe` a bisect and an add. Same
API as prometheus_client's (`labels(*values)` → a child with `inc`/`dec`/`set`/`observe`),
and callers keep the children they bind.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any, Callable, Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector


class Value:
    """A counter's or a gauge's child."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        # An int until something adds a float: `+= 1` on an int is Python's own fast
        # path (an int added to a float is not); written as a float either way.
        self.value: float = 0

    def inc(self, amount: float = 1) -> None:
        self.value += amount

    def dec(self, amount: float = 1) -> None:
        self.value -= amount

    def set(self, value: float) -> None:
        self.value = value


# Pending observations a histogram child sorts into its buckets at once.
FOLD_AT = 128


class Buckets:
    """A histogram's child: per-bucket counts (not cumulative) and the sum, plus the
    observations not yet sorted into them (`pending`).

    Observing is an append: the hot paths write `child.pending.append(amount)` inline
    and `Metrics.folding` folds every histogram once a second (and a scrape folds first),
    so an observation costs no call and no length check. `observe()`, for everything
    else, also folds when `FOLD_AT` are pending, so a child used on its own stays
    bounded. `fold()` sorts what is pending once and counts it into the buckets with one
    bisect per bound, where a bisect per observation cost more than the rest of recording
    a turn (bench/README.md, "Metrics")."""

    __slots__ = ("bounds", "counts", "sum", "pending")

    def __init__(self, bounds: tuple[float, ...]):
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)   # the last: +Inf
        self.sum = 0.0
        self.pending: list[float] = []

    def observe(self, amount: float) -> None:
        pending = self.pending
        pending.append(amount)
        if len(pending) >= FOLD_AT:
            self.fold()

    def fold(self) -> None:
        pending = self.pending
        if not pending:
            return
        self.pending = []
        pending.sort()
        counts, start = self.counts, 0
        for index, bound in enumerate(self.bounds):
            end = bisect_right(pending, bound, start)   # `le` buckets: amount <= bound
            counts[index] += end - start
            start = end
        counts[-1] += len(pending) - start
        self.sum += sum(pending)


class Counted:
    """A counter child that is the number of observations of histogram children: a turn
    observed once in `ls_llm_inference_duration_seconds` is one `ls_llm_calls_total`, so
    the call is counted by that observation instead of by an add of its own."""

    __slots__ = ("_of",)

    def __init__(self, *of: Buckets):
        self._of = of

    @property
    def value(self) -> int:
        return sum(sum(buckets.counts) + len(buckets.pending) for buckets in self._of)


class Summed:
    """A counter child that is the sum of other counter children, read when scraped:
    `children` is kept by its owner and may grow."""

    __slots__ = ("children",)

    def __init__(self, children: list[Value]):
        self.children = children

    @property
    def value(self) -> float:
        return sum(child.value for child in self.children)


class Read:
    """A gauge's child read from the gateway's own state when scraped (`read()`),
    rather than kept up to date by the code it counts."""

    __slots__ = ("_read",)

    def __init__(self, read: Callable[[], float]):
        self._read = read

    @property
    def value(self) -> float:
        return self._read()


class Family:
    """One metric and its children, by label values."""

    def __init__(self, name: str, kind: str, help: str, labels: tuple[str, ...],
                 buckets: tuple[float, ...] | None = None):
        self.name, self.kind, self.help, self.label_names = name, kind, help, labels
        self.bounds = tuple(float(bound) for bound in buckets) if buckets else ()
        self.children: dict[tuple[str, ...], Any] = {}
        if not labels:
            self._unlabelled = self.labels()

    def labels(self, *values: str) -> Any:
        child = self.children.get(values)
        if child is None:
            if len(values) != len(self.label_names):
                raise ValueError(f"{self.name} takes labels {self.label_names}, not {values}")
            child = self.children[values] = Buckets(self.bounds) if self.kind == "histogram" else Value()
        return child

    def derive(self, values: tuple[str, ...], child: Counted | Summed) -> None:
        """A counter child read from other children (`Counted`, `Summed`) when scraped."""
        if self.kind != "counter" or len(values) != len(self.label_names) or values in self.children:
            raise ValueError(f"{self.name}: cannot derive {values}")
        self.children[values] = child

    def read_from(self, read: Callable[[], float]) -> None:
        """An unlabelled gauge read from the gateway's state when scraped (`Read`)."""
        if self.kind != "gauge" or self.label_names:
            raise ValueError(f"{self.name}: cannot be read from state")
        self.children[()] = self._unlabelled = Read(read)

    # An unlabelled family is its own child.
    def inc(self, amount: float = 1) -> None:
        self._unlabelled.inc(amount)

    def dec(self, amount: float = 1) -> None:
        self._unlabelled.dec(amount)

    def set(self, value: float) -> None:
        self._unlabelled.set(value)

    def observe(self, amount: float) -> None:
        self._unlabelled.observe(amount)

    def fold(self) -> None:
        """A histogram's pending observations into its buckets."""
        if self.kind == "histogram":
            for child in list(self.children.values()):
                child.fold()

    def sample_family(self) -> Any:
        children = list(self.children.items())
        if self.kind == "counter":
            counter = CounterMetricFamily(self.name.removesuffix("_total"), self.help, labels=self.label_names)
            for values, child in children:
                counter.add_metric(values, child.value)
            return counter
        if self.kind == "gauge":
            gauge = GaugeMetricFamily(self.name, self.help, labels=self.label_names)
            for values, child in children:
                gauge.add_metric(values, child.value)
            return gauge
        self.fold()
        histogram = HistogramMetricFamily(self.name, self.help, labels=self.label_names)
        edges = [*(repr(bound) for bound in self.bounds), "+Inf"]
        for values, child in children:
            cumulative, buckets = 0, []
            for edge, count in zip(edges, list(child.counts)):
                cumulative += count
                buckets.append((edge, cumulative))
            histogram.add_metric(values, buckets, child.sum)
        return histogram


class PlainCollector(Collector):
    def __init__(self, families: Iterable[Family]):
        self._families = tuple(families)
        # Set by the gateway's renderer while it collects (`exposition.py`): the families
        # themselves, written from their numbers, rather than the library's samples.
        self.as_families = False

    def collect(self) -> Iterable[Any]:
        if self.as_families:
            yield from self._families
            return
        for family in self._families:
            yield family.sample_family()
