"""The analysis and picture of scripts/scaling_report.sh (run by it; not meant to be run alone).

Reads <work>/metrics_<N>_<r>.jsonl (rank 0's metrics of run r with N workers) and <work>/load_<N>_<r>
(the 1-minute load average before it), measures samples/s after the warm-up, keeps the best of the
runs of each N (other load only ever slows a run down), efficiency = speed at N / (N x speed at 1)
(seed 001), prints the table, writes <out>/scaling.json and <out>/scaling.png.
"""
import argparse
import json
import os
import platform

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, MaxNLocator  # noqa: E402


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "CPU"


def measure(path, n, batch, warmup):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    after = [r for r in rows if r["step"] >= warmup]
    if len(after) < 2:
        raise SystemExit("scaling_plot: %s has fewer than 2 metrics lines after step %d" % (path, warmup))
    first, last = after[0], after[-1]
    samples = (last["step"] - first["step"]) * batch * n
    speed = samples / (last["time"] - first["time"])
    curve = [(r["step"] * batch * n, r["loss"]) for r in rows]
    return speed, curve


def best_of(work, n, repeat, batch, warmup):
    runs = []
    for r in range(1, repeat + 1):
        speed, curve = measure(os.path.join(work, "metrics_%d_%d.jsonl" % (n, r)), n, batch, warmup)
        with open(os.path.join(work, "load_%d_%d" % (n, r))) as f:
            load = float(f.read().strip() or 0)
        runs.append({"samples_per_s": speed, "loss_curve": curve, "load": load})
    best = max(runs, key=lambda x: x["samples_per_s"])
    return dict(best, all_samples_per_s=[x["samples_per_s"] for x in runs],
                loads=[x["load"] for x in runs])


def table(results, cores):
    lines = ["workers  samples/s  ideal      efficiency  runs (samples/s)        load avg  note"]
    for r in results:
        note = "oversubscribed: %d workers on %d cores" % (r["workers"], cores) if r["oversubscribed"] else ""
        runs = " ".join("%.0f" % s for s in r["all_samples_per_s"])
        loads = " ".join("%.1f" % x for x in r["loads"])
        lines.append("%7d  %9.0f  %9.0f  %9.0f%%  %-22s  %-8s  %s" % (
            r["workers"], r["samples_per_s"], r["ideal"], 100 * r["efficiency"], runs, loads, note))
    return "\n".join(lines)


def draw(results, cores, args, path):
    ns = [r["workers"] for r in results]
    over = [r["oversubscribed"] for r in results]
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(15, 4.8))
    colors = ["#c0392b" if o else "#2e86c1" for o in over]

    ax1.plot(ns, [r["ideal"] for r in results], "--", color="#7f8c8d", label="ideal: N x speed at 1")
    ax1.plot(ns, [r["samples_per_s"] for r in results], "-", color="#2e86c1", zorder=2)
    ax1.scatter(ns, [r["samples_per_s"] for r in results], c=colors, s=60, zorder=3, label="measured")
    ax1.set_xscale("log", base=2)
    ax1.set_xticks(ns, [str(n) for n in ns])
    ax1.set_xlabel("workers (N)")
    ax1.set_ylabel("samples/s (all workers)")
    ax1.set_title("Throughput")
    ax1.set_ylim(bottom=0)
    ax1.grid(alpha=0.3)
    ax1.legend(loc="upper left", fontsize=9)

    pos = range(len(ns))
    bars = ax2.bar(pos, [100 * r["efficiency"] for r in results], color=colors,
                   hatch=["//" if o else "" for o in over], edgecolor="white")
    for b, r in zip(bars, results):
        ax2.text(b.get_x() + b.get_width() / 2, b.get_height() + 2, "%.0f%%" % (100 * r["efficiency"]),
                 ha="center", fontsize=10)
    ax2.axhline(100, ls="--", color="#7f8c8d")
    ax2.set_xticks(list(pos), [str(n) for n in ns])
    ax2.set_xlabel("workers (N)" + ("; red, hatched: oversubscribed (more workers than the %d cores)"
                                    % cores if any(over) else ""))
    ax2.set_ylabel("efficiency (%)")
    ax2.set_ylim(0, max(115, max(100 * r["efficiency"] for r in results) + 15))
    ax2.set_title("Scaling efficiency = speed at N / (N x speed at 1)", fontsize=10.5)

    for r in results:
        xs, ys = zip(*r["loss_curve"])
        ax3.plot(xs, ys, label="N = %d" % r["workers"], lw=1.5)
    ax3.xaxis.set_major_locator(MaxNLocator(6))
    ax3.xaxis.set_major_formatter(FuncFormatter(lambda x, _: "%gk" % (x / 1000) if x else "0"))
    ax3.set_xlabel("samples seen (all workers)")
    ax3.set_ylabel("training loss (mean over ranks)")
    ax3.set_title("Loss (N x %d samples per step, same lr)" % args.batch, fontsize=10.5)
    ax3.grid(alpha=0.3)
    ax3.legend(fontsize=9)

    loads = [x for r in results for x in r["loads"]]
    fig.suptitle("ddprun + train, CPU (shared-memory gradient sums) on %s (%d cores): %d samples per worker per step, %d steps "
                 "(first %d skipped), best of %d runs; load average before the runs %.1f to %.1f"
                 % (cpu_model(), cores, args.batch, args.steps, args.warmup, args.repeat,
                    min(loads), max(loads)), fontsize=11)
    fig.text(0.5, 0.01, args.command, ha="center", fontsize=9, family="monospace", color="#555555")
    fig.tight_layout(rect=(0, 0.04, 1, 0.95))
    fig.savefig(path, dpi=110)


def main():
    p = argparse.ArgumentParser()
    for name in ("--work", "--out", "--workers", "--command"):
        p.add_argument(name, required=True)
    for name in ("--cores", "--warmup", "--batch", "--steps", "--repeat"):
        p.add_argument(name, type=int, required=True)
    args = p.parse_args()
    ns = [int(n) for n in args.workers.split()]
    results = []
    for n in ns:
        results.append(dict(best_of(args.work, n, args.repeat, args.batch, args.warmup), workers=n,
                            oversubscribed=n > args.cores))
    base = next((r["samples_per_s"] for r in results if r["workers"] == 1), None)
    if base is None:
        raise SystemExit("scaling_plot: efficiency needs the run with 1 worker")
    for r in results:
        r["ideal"] = r["workers"] * base
        r["efficiency"] = r["samples_per_s"] / r["ideal"]
    print(table(results, args.cores))
    with open(os.path.join(args.out, "scaling.json"), "w") as f:
        json.dump({"command": args.command, "cores": args.cores, "cpu": cpu_model(),
                   "batch_per_worker": args.batch, "steps": args.steps, "warmup": args.warmup,
                   "repeat": args.repeat,
                   "results": [{k: v for k, v in r.items() if k != "loss_curve"} for r in results]},
                  f, indent=1)
        f.write("\n")
    png = os.path.join(args.out, "scaling.png")
    draw(results, args.cores, args, png)
    print("wrote %s and %s" % (png, os.path.join(args.out, "scaling.json")))


if __name__ == "__main__":
    main()
