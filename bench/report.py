"""Ratios, the printed table, the JSON document and the PNG chart."""
from __future__ import annotations

import json
import os
import platform
import time

import psutil

SCANS = ("W5", "W5L", "W5C")


def _type(engine: str) -> str | None:
    return engine.split("/", 1)[1] if "/" in engine else None


def baselines(workload: str, ours: str, engines) -> dict[str, str]:
    """Which engines an `ours` engine is compared with in a workload: label -> engine name."""
    t = _type(ours)
    out = {}
    for e in engines:
        if e.startswith("ours") or (_type(e) not in (None, t)):
            continue
        if e.startswith("floor/") and workload.split("@")[0] in SCANS:
            label = "floor(pyarrow)"
        elif e.startswith("spark_parquet/") or e.startswith("floor/"):
            label = "floor"
        else:
            label = e.split("/")[0]
        out[label] = e
    return out


def ratios(cells: dict) -> dict:
    """{workload: {ours_engine: {baseline label: ours median / baseline median}}}."""
    out: dict = {}
    for w, row in cells.items():
        for ours, cell in row.items():
            if not ours.startswith("ours") or not cell["median_s"]:
                continue
            for label, other in baselines(w, ours, row).items():
                if row[other]["median_s"]:
                    out.setdefault(w, {}).setdefault(ours, {})[label] = cell["median_s"] / row[other]["median_s"]
    return out


def machine() -> dict:
    return {"cpus": psutil.cpu_count(), "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
            "platform": platform.platform(), "python": platform.python_version(), "versions": _versions()}


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("pyspark", "pyarrow", "deltalake", "pyiceberg", "hudi"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


def _workload_key(w: str):
    from bench.workloads import ORDER

    base, _, size = w.partition("@")
    return ORDER.index(base) if base in ORDER else 99, int(size or 0)


def _fmt(x, spec="{:.3f}") -> str:
    return "-" if x is None else spec.format(x)


def table(doc: dict) -> str:
    """One row per workload x engine: median s, peak memory, files/MB written, check, our ratios to it."""
    cells, rat = doc["cells"], doc["ratios"]
    exp = doc.get("expected_after_w2") or {}
    head = ["workload", "engine", "median s", "py MB", "py +MB", "jvm MB", "files", "MB wr", "check", "ours / this"]
    lines = []
    for w in sorted(cells, key=_workload_key):
        for e in sorted(cells[w]):
            c = cells[w][e]
            if c["errors"] and not c["runs_s"]:
                lines.append([w, e, "n/a", "", "", "", "", "", "", c["errors"][0][:90]])
                continue
            check = ""
            if w == "W5" and c["results"] and exp.get("count") is not None:
                r = c["results"][0]
                ok = r["count"] == exp["count"] and abs(r["total"] - exp["sum"]) <= 1e-6 * abs(exp["sum"])
                check = "ok" if ok else f"MISMATCH {r['count']}"
                if e.startswith("spark_parquet/mor") and not ok:
                    check = "base only"
            vs = []
            for ours, per in sorted(rat.get(w, {}).items()):
                for label, value in per.items():
                    if cells[w].get(e) is c and baselines(w, ours, cells[w]).get(label) == e:
                        vs.append(f"{ours.replace('ours_', '')} {value:.2f}x")
            lines.append([w, e, _fmt(c["median_s"]), _fmt(c["py_peak_mb"], "{:.0f}"),
                          _fmt(c.get("py_growth_mb"), "{:.0f}"), _fmt(c["jvm_peak_mb"], "{:.0f}"),
                          _fmt(c["files_written"], "{:.0f}"), _fmt(c["bytes_written"] and c["bytes_written"] / 1e6, "{:.1f}"),
                          check, ", ".join(vs)])
    widths = [max(len(str(r[i])) for r in [head] + lines) for i in range(len(head))]
    fmt = lambda r: "  ".join(str(v).ljust(widths[i]) for i, v in enumerate(r)).rstrip()  # noqa: E731
    out = [fmt(head), fmt(["-" * w for w in widths])] + [fmt(r) for r in lines]
    if doc.get("spark_startup_s") is not None:
        out.append(f"Spark session start-up: {doc['spark_startup_s']:.1f} s (not in any cell)")
    return "\n".join(out)


def save(doc: dict, results_dir: str, chart: bool = True) -> tuple[str, str | None]:
    os.makedirs(results_dir, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    json_path = os.path.join(results_dir, f"{stamp}.json")
    with open(json_path, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True, default=str)
    png_path = None
    if chart and doc["ratios"]:
        png_path = os.path.join(results_dir, f"{stamp}.png")
        plot(doc, png_path)
    return json_path, png_path


def plot(doc: dict, path: str) -> None:
    """One panel per ours engine: bars of ours/baseline per workload (log scale; < 1 means we are faster)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rat = doc["ratios"]
    ours = sorted({o for per in rat.values() for o in per})
    labels = sorted({lab for per in rat.values() for d in per.values() for lab in d})
    workloads = sorted(rat, key=_workload_key)
    fig, axes = plt.subplots(len(ours), 1, figsize=(max(8, 1.1 * len(workloads) * max(1, len(labels)) / 2), 3.2 * len(ours)),
                             squeeze=False)
    width = 0.8 / max(1, len(labels))
    for ax, o in zip(axes[:, 0], ours):
        for j, lab in enumerate(labels):
            xs, ys = [], []
            for i, w in enumerate(workloads):
                v = rat[w].get(o, {}).get(lab)
                if v:
                    xs.append(i + j * width - 0.4 + width / 2)
                    ys.append(v)
            ax.bar(xs, ys, width, label=lab, color=plt.cm.tab10(j % 10))
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        ax.set_xticks(range(len(workloads)), workloads)
        ax.set_ylabel("ours / baseline")
        ax.set_title(f"{o}: time ratio (lower is better)")
        ax.legend(fontsize=7, ncol=len(labels))
    cfg = doc["config"]
    fig.suptitle(f"hudi-lakehouse bench: {cfg['rows']:,} rows, batch {cfg['batch']:,}, median of {cfg['runs']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(doc: dict) -> str:
    """Workload rows x engine columns of median seconds, as a Markdown table (for the README)."""
    cells = doc["cells"]
    engines = sorted({e for row in cells.values() for e in row},
                     key=lambda e: (not e.startswith("ours"), e))
    out = ["| workload | " + " | ".join(engines) + " |", "|---|" + "---|" * len(engines)]
    for w in sorted(cells, key=_workload_key):
        row = cells[w]
        vals = []
        for e in engines:
            c = row.get(e)
            vals.append("" if c is None else ("n/a" if not c["median_s"] else f"{c['median_s']:.2f}"))
        out.append(f"| {w} | " + " | ".join(vals) + " |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.report RESULT.json [--png]`: print the table and a Markdown table again; redraw the PNG."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m bench.report")
    p.add_argument("json")
    p.add_argument("--png", action="store_true", help="redraw the chart next to the JSON")
    a = p.parse_args(argv)
    with open(a.json) as f:
        doc = json.load(f)
    print(table(doc))
    print()
    print(markdown(doc))
    if a.png and doc["ratios"]:
        plot(doc, a.json[:-5] + ".png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
