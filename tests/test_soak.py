"""bench/soak.py's smoke (issue 42): a 5-second soak of `gateway serve` with every
transport and faults, so the soak still runs when the gateway changes. The real soak
(10 minutes, 64 clients) is bench-only: bench/README.md."""

from __future__ import annotations

from bench import soak


def test_a_short_soak_passes_and_reports_every_transport(tmp_path):
    report = tmp_path / "soak.md"
    assert soak.main(["--minutes", "0.08", "--concurrency", "6", "--fault-share", "0.3",
                      "--output", str(report)]) == 0, report.read_text()
    text = report.read_text()
    assert "Verdict: **pass**" in text
    for transport in soak.TRANSPORTS:
        row = next(line for line in text.splitlines() if line.startswith(f"| {transport} |"))
        assert int(row.split("|")[2]) > 0, row    # clean turns of it ran, and ended as they should
    for fault in soak.FAULTS:
        assert f"| `{fault}` |" in text
