"""The markdown tables scripts/bench/recovery_bench.py prints (`labels`: mode -> its name)."""
import statistics


def ms(x):
    return "%.0f" % (x * 1e3) if x >= 0.1 else "%.1f" % (x * 1e3)


def spread(values):
    if not values:
        return "failed"
    return "%s ms (%s–%s)" % (ms(statistics.median(values)), ms(min(values)), ms(max(values)))


def print_latency(rows, labels, kills):
    print("### Time from a worker SIGKILL to the first step completed after it\n")
    print("KILLS=%d kills of the highest rank per cell, median (min–max); steps redone: mean (max); "
          "ratio = median / in place's median.\n" % kills)
    print("| workers | mode | kill → next step | steps redone | ratio to in place |")
    print("|---|---|---|---|---|")
    base = {}
    for spec, mode, times, redone in rows:
        if mode == "inplace" and times:
            base[spec] = statistics.median(times)
    for spec, mode, times, redone in rows:
        ratio = "%.1f×" % (statistics.median(times) / base[spec]) if times and spec in base else "–"
        red = "%.1f (%d)" % (statistics.mean(redone), max(redone)) if redone else "–"
        print("| %s | %s | %s | %s | %s |" % (spec.replace("x", " × "), labels[mode], spread(times),
                                               red, ratio))
    print()


def print_goodput(rows, labels, topology, kill_every, duration, ref_seconds):
    print("### Goodput: %s, a SIGKILL of a random worker every %g s for %g s\n" %
          (topology.replace("x", " × "), kill_every, duration))
    print("Goodput = net steps in the faulted run ÷ (fault-free steps/s × its duration). Fault-free "
          "steps/s: a separate run of %g s (ref. run), or the faulted run's own steps/s over the second "
          "half of each interval between kills (in-run), which shares its load.\n" % ref_seconds)
    print("| mode | fault-free steps/s: ref. run / in-run | net steps with kills | kills | "
          "goodput vs ref. run | goodput vs in-run | cost per kill (in-run) |")
    print("|---|---|---|---|---|---|---|")
    for mode, rate, steps, kills, secs, g, inrun in rows:
        per_kill = (secs - steps / inrun) / kills if kills else 0
        print("| %s | %.1f / %.1f | %d in %.0f s | %d | %.1f%% | **%.1f%%** | %.2f s |" %
              (labels[mode], rate, inrun, steps, secs, kills, 100 * g, 100 * steps / inrun / secs,
               per_kill))
    print()


def print_node_loss(rows, labels, rdzv_conf, node_kills):
    hb = dict(kv.split("=") for kv in rdzv_conf.split(","))
    hbt = float(hb.get("heartbeat_timeout", "15"))
    print("### Node loss at 2 × 2 (`--nnodes 1:2`): node 1's agent SIGKILLed\n")
    print("`--rdzv-conf %s`; %d losses, the world grown back to 4 between them; median (min–max).\n"
          % (rdzv_conf, node_kills))
    print("| mode | kill → survivors' next step | minus heartbeat_timeout (%g s) |" % hbt)
    print("|---|---|---|")
    for mode, times in rows:
        minus = spread([t - hbt for t in times]) if times else "–"
        print("| %s | %s | %s |" % (labels[mode], spread(times), minus))
    print()
