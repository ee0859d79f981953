"""`/metrics` across a group of workers (`service.workers`): every scrape, whichever
worker answers it, carries the whole group's series, aggregated.

The supervisor gives each worker `GATEWAY_WORKER_ID` and, with more than one worker,
one `PROMETHEUS_MULTIPROC_DIR` for the group. The request path does not change: a
worker keeps its numbers as plain Python values (`plain.py`, `HotCounters`), as a lone
process does, and copies them into its own files in that directory once a second (with
the histograms' folding, `Metrics.folding`), before it answers a scrape, and when it
stops. The files are prometheus_client's multiprocess files (`MmapedDict`, named
`counter_<pid>.db`, `histogram_<pid>.db`, `gauge_<mode>_<pid>.db`), so the library's
own `MultiProcessCollector` merges them at a scrape and its `mark_process_dead(pid)`
(the supervisor's, when a worker dies) drops a dead worker's live gauges:

- counters and histograms: summed over every worker that ever wrote, dead ones too
  (a restarted worker's counts add to its predecessor's: no counter goes back);
- gauges: each by its definition's `across_workers` mode (`GAUGE_MODES`): `livesum`
  (in-flight requests, open streams...), `livemax` (the same fact on every worker), or
  `worker`: a per-process state (the circuit breaker, the capability mode) shown for
  each live worker with a `worker` label (its `GATEWAY_WORKER_ID`) rather than merged.

A scrape sees another worker's values as of its last copy: at most a second old
(`FOLD_EVERY`). A worker killed outright loses at most that second of counts.
"""

from __future__ import annotations

import glob
import os
import time
from typing import Any, Iterable, Mapping

from prometheus_client import CollectorRegistry
from prometheus_client.mmap_dict import MmapedDict, mmap_key
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.registry import Collector

from gateway.observability.exposition import Exposition
from gateway.observability.plain import Family, PlainCollector

DIRECTORY_ENV = "PROMETHEUS_MULTIPROC_DIR"
WORKER_ENV = "GATEWAY_WORKER_ID"
WORKER_LABEL = "worker"
# A gauge's mode across workers → prometheus_client's file mode for it.
GAUGE_MODES = {"livesum": "livesum", "livemax": "livemax", "worker": "livemax"}


class GroupFiles:
    """This process's metrics in the group's directory: `write(registry)` copies every
    value the registry's collectors hold into this process's files."""

    def __init__(self, directory: str, worker: str, gauge_modes: Mapping[str, str], pid: int | None = None):
        self.directory, self.worker = directory, worker
        self._given_pid = pid
        self.pid = 0   # this process's id, taken at its first write (`_own`)
        self._gauge_modes = dict(gauge_modes)
        self._files: dict[str, MmapedDict] = {}
        self._keys: dict[tuple[str, str, tuple[tuple[str, str], ...]], tuple[str, str]] = {}
        # This write's gauges, by file: a gauge's series can go (the capability mode's
        # labels change once probed), and its file is then written whole without it.
        self._gauges: dict[str, dict[str, float]] = {}
        self._gauge_keys: dict[str, set[str]] = {}   # each gauge file's series at the last write
        self._written: dict[str, float] = {}   # what each key's slot holds, by key
        # A plain family's children's slots, by (family, label values), and each histogram
        # child's (count, sum) at its last write.
        self._children: dict[tuple[str, tuple[str, ...]], Any] = {}
        self._histograms: dict[tuple[str, tuple[str, ...]], tuple[int, float]] = {}
        self.replaced = 0   # gauge files rewritten whole (a series gone)

    def _own(self) -> None:
        """The files are this process's, by its id: taken at the first write, and again
        in a process forked after it (the parent's files are the parent's)."""
        pid = self._given_pid or os.getpid()
        if pid == self.pid:
            return
        for mapped in self._files.values():
            mapped.close()   # a forked child's view of its parent's files, never written to
        self._forget()
        self.pid = pid
        _set_aside(self.directory, pid)

    def _forget(self) -> None:
        """Nothing of the files this process had open, nor of what it wrote to them."""
        self._files.clear()
        self._keys.clear()
        self._gauge_keys.clear()
        self._written.clear()
        self._children.clear()
        self._histograms.clear()

    def _slot(self, kind: str, metric: str, sample: str, labels: tuple[tuple[str, str], ...],
              help_text: str) -> tuple[str, str]:
        """The file (by kind) and the key a sample is written under."""
        at = (kind, sample, labels)
        slot = self._keys.get(at)
        if slot is None:
            if kind == "gauge":
                mode = self._gauge_modes.get(metric)
                if mode is None:
                    raise ValueError(f"{metric}: a gauge without a mode across workers")
                if mode == "worker":
                    labels = (*labels, (WORKER_LABEL, self.worker))
                kind = f"gauge_{GAUGE_MODES[mode]}"
            names = [name for name, _ in labels]
            slot = self._keys[at] = (kind, mmap_key(metric, sample, names, [v for _, v in labels], help_text))
        return slot

    def _put(self, kind: str, key: str, value: float, now: float) -> None:
        gauges = self._gauges.get(kind)
        if gauges is not None:
            gauges[key] = value
            return
        if self._written.get(key) == value:
            return   # most series do not move in a second: no write
        mapped = self._files.get(kind)
        if mapped is None:
            mapped = self._files[kind] = MmapedDict(self._path(kind))
        mapped.write_value(key, value, now)
        self._written[key] = value

    def _path(self, kind: str) -> str:
        return os.path.join(self.directory, f"{kind}_{self.pid}.db")

    def write(self, registry: Collector, plain: PlainCollector) -> None:
        self._own()
        now = time.time()
        self._gauges = {f"gauge_{mode}": {} for mode in set(GAUGE_MODES.values())}
        plain.as_families = True   # its own `Family` objects, read from their numbers (synchronous)
        try:
            # The registry yields the plain collector's `Family` objects too, not only its Metrics.
            metrics: Iterable[Any] = registry.collect()
            for metric in metrics:
                if metric.__class__ is Family:
                    self._family(metric, now)
                else:
                    self._metric(metric, now)
        finally:
            plain.as_families = False
        gauges, self._gauges = self._gauges, {}
        for kind, values in gauges.items():
            gone = self._gauge_keys.get(kind, set()) - values.keys()
            if gone:   # rare: the file rewritten without them
                self._replace(kind, values, now)
            else:
                for key, value in values.items():
                    self._put(kind, key, value, now)
            self._gauge_keys[kind] = set(values)

    def _replace(self, kind: str, values: dict[str, float], now: float) -> None:
        """A gauge file written whole beside it, then renamed over it: a reader sees the
        last write or this one, never a mix (`*.db.tmp` is no collector's file)."""
        path = self._path(kind)
        mapped = self._files.pop(kind, None)
        if mapped is not None:
            mapped.close()
        for key in self._gauge_keys.get(kind, ()):
            self._written.pop(key, None)
        if os.path.exists(path + ".tmp"):
            os.remove(path + ".tmp")   # a write cut short: MmapedDict would keep its keys
        writing = MmapedDict(path + ".tmp")
        try:
            for key, value in values.items():
                writing.write_value(key, value, now)
        finally:
            writing.close()
        os.replace(path + ".tmp", path)
        self.replaced += 1
        for key, value in values.items():
            self._written[key] = value

    def _family(self, family: Family, now: float) -> None:
        kind, name, slots = family.kind, family.name, self._children
        if kind != "histogram":
            for values, child in list(family.children.items()):
                slot = slots.get((name, values))
                if slot is None:
                    slot = slots[name, values] = self._slot(kind, name.removesuffix("_total") if kind == "counter"
                                                            else name, name, tuple(zip(family.label_names, values)),
                                                            family.help)
                file, key = slot
                self._put(file, key, child.value, now)
            return
        family.fold()
        seen = self._histograms
        for values, child in list(family.children.items()):
            counts = list(child.counts)
            state = (sum(counts), child.sum)
            if seen.get((name, values)) == state:
                continue   # no observation since the last write: none of its slots moved
            buckets = slots.get((name, values))
            if buckets is None:
                buckets = slots[name, values] = self._histogram_slots(family, values)
            for (file, key), count in zip(buckets, counts):
                self._put(file, key, count, now)
            file, key = buckets[-1]
            self._put(file, key, child.sum, now)
            seen[name, values] = state

    def _histogram_slots(self, family: Family, values: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
        """A histogram child's slots: one per bucket (per bucket, not cumulative: the
        collector adds them up over workers, then cumulates), then its sum's."""
        name, labels = family.name, tuple(zip(family.label_names, values))
        edges = [*(repr(bound) for bound in family.bounds), "+Inf"]
        return (*(self._slot("histogram", name, name + "_bucket", (*labels, ("le", edge)), family.help)
                  for edge in edges),
                self._slot("histogram", name, name + "_sum", labels, family.help))

    def _metric(self, metric: Any, now: float) -> None:
        """A counter's or a gauge's family from a collector's samples (`HotCounters`,
        `StateCollector`)."""
        if metric.type not in ("counter", "gauge"):
            raise ValueError(f"{metric.name}: a {metric.type} cannot be shared across workers from its samples")
        for sample in metric.samples:
            if sample.name != metric.name and not (metric.type == "counter" and sample.name == metric.name + "_total"):
                continue   # `_created`: not kept (disable_created_metrics)
            self._put(*self._slot(metric.type, metric.name, sample.name, tuple(sample.labels.items()),
                                  metric.documentation), sample.value, now)

    def close(self) -> None:
        """This process's files closed, and its live gauges removed: a stopped worker has
        nothing in flight (the supervisor's `mark_process_dead` does the same for one
        that died)."""
        for mapped in self._files.values():
            mapped.close()
        self._forget()
        if self.pid:
            mark_process_dead(self.pid, self.directory)


def _set_aside(directory: str, pid: int) -> None:
    """A dead process's files that had this process's id (ids are reused): its counts are
    kept under another name, not overwritten by this one's from zero."""
    for path in glob.glob(os.path.join(directory, f"*_{pid}.db")):
        kind = os.path.basename(path).split("_")[0]
        if kind == "gauge":
            os.remove(path)   # a dead process's gauges are not live
            continue
        taken = 0
        while os.path.exists(aside := os.path.join(directory, f"{kind}_{pid}-{taken}.db")):
            taken += 1
        os.rename(path, aside)


class GroupExposition:
    """`render()`: this process's values copied to its files, then every worker's files
    merged and written by the gateway's renderer (`exposition.py`)."""

    def __init__(self, files: GroupFiles, registry: Collector, plain: PlainCollector):
        self.files, self._registry, self._plain = files, registry, plain
        merged = CollectorRegistry(auto_describe=False)
        MultiProcessCollector(merged, files.directory)
        self._exposition = Exposition(merged)

    def write(self) -> None:
        self.files.write(self._registry, self._plain)

    def render(self) -> bytes:
        self.write()
        return self._exposition.render()

    def close(self) -> None:
        self.write()   # the last counts of a worker that stops are kept
        self.files.close()


def from_environment(definitions: Iterable[Any], registry: Collector, plain: PlainCollector,
                     environ: Mapping[str, str] = os.environ, pid: int | None = None) -> GroupExposition | None:
    """The group's exposition when this process is one of a group's workers
    (`PROMETHEUS_MULTIPROC_DIR` set), None otherwise (a lone process: nothing changes)."""
    directory = environ.get(DIRECTORY_ENV)
    if not directory:
        return None
    if not os.path.isdir(directory):
        raise ValueError(f"{DIRECTORY_ENV}={directory!r} is not a directory")
    worker = environ.get(WORKER_ENV) or str(os.getpid() if pid is None else pid)
    return GroupExposition(GroupFiles(directory, worker, modes_of(definitions), pid), registry, plain)


def modes_of(definitions: Iterable[Any]) -> dict[str, str]:
    """Every gauge definition's mode across workers, by the gauge's name."""
    modes = {}
    for definition in definitions:
        if definition.kind == "gauge":
            if definition.across_workers not in GAUGE_MODES:
                raise ValueError(f"{definition.name}: across_workers must be one of {sorted(GAUGE_MODES)}")
            modes[definition.name] = definition.across_workers
    return modes
