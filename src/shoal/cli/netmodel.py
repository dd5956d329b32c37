"""``shoal netmodel``: fit, predict and advise with the max-rate model of Gropp16."""

from __future__ import annotations

import math

import click

from shoal import memory, units
from shoal.cli.relaunch import nprocs_option, relaunch
from shoal.cli.render import console, csv_outputs, table
from shoal.errors import UsageError
from shoal.files import check_outputs, figure
from shoal.netmodel.models import EQUATION, Model, format_rate

SAVED = {"maxrate4": "maxrate4", "maxrate": "maxrate", "postal": "postal_all"}
"""The models a profile keeps per regime, and the fit variant each comes from."""


@click.group()
def netmodel() -> None:
    """Communication models of multicore nodes (Gropp et al.; Gropp16): postal,
    max-rate (T = alpha + k n / min(R_N, k R_C)) and their fitting."""


def _sizes(text: str, flag: str) -> list[float]:
    values = [float(units.parse_size(x, flag)) for x in units.expand_sweep(text)]
    if any(v <= 0 for v in values):
        raise UsageError(f"{flag} sizes must be positive")
    return values


def _counts(text: str, flag: str) -> list[int]:
    return [units.parse_count(x, flag, 1) for x in units.expand_sweep(text)]


def _params_row(model: Model) -> list:
    p = model.params
    out = []
    for name in ("alpha", "rn", "rc", "rcb", "rci", "beta"):
        if name not in p:
            out.append("")
        elif name == "alpha":
            out.append(units.format_duration(p[name]))
        elif name == "beta":
            out.append(format_rate(1.0 / p[name]) if p[name] > 0 else "∞")
        else:
            out.append(format_rate(p[name]))
    return out


@netmodel.command()
@click.argument("csv_path", metavar="DATA.csv", type=click.Path(dir_okay=False))
@click.option("--thresholds", default=None,
              help="Regime thresholds, e.g. 32B,1KiB (default: found in the data); "
                   "'none' for a single regime.")
@click.option("--reduce", "how", type=click.Choice(["best", "median"]), default="best",
              show_default=True, help="How repetitions of one (k, n) become one time.")
@click.option("--save", default=None, help="Write the machine profile (TOML): every fitted "
              "model per regime with its error sum.")
@click.option("--plot", default=None, help="Figure: bandwidth vs size per k (PNG).")
@click.option("--errors", "errors_png", default=None, help="Figure: relative errors (PNG).")
def fit(csv_path, thresholds, how, save, plot, errors_png) -> None:
    """Fit every model to benchmark data per protocol regime and compare them: parameters
    (the form of Table 1) and relative-error sums (Table 2)."""
    from shoal.netmodel.data import read_csv
    from shoal.netmodel.regimes import analyse

    check_outputs({"--save": save, "--plot": figure(plot), "--errors": figure(errors_png)})
    m = read_csv(csv_path)
    cuts = None
    if thresholds is not None:
        cuts = [] if thresholds.strip() == "none" else _sizes(thresholds, "--thresholds")
    regimes = analyse(m, cuts, how)
    _print_parameters(regimes, f"{csv_path}, {len(m.t)} measurements")
    _print_errors(regimes)
    if save:
        _save_profile(regimes, csv_path, save)
    if plot:
        from shoal.netmodel.plots import bandwidth

        bandwidth(m, regimes, "maxrate", plot)
    if errors_png:
        from shoal.netmodel.plots import errors

        errors(m, regimes, errors_png)


def _print_parameters(regimes, source: str) -> None:
    """The fitted parameters per regime and model (the form of Table 1)."""
    from shoal.netmodel.regimes import LABELS, describe

    rows = []
    for reg in regimes:
        for variant in ("maxrate4", "maxrate", "postal_all"):
            f = reg.fits.get(variant)
            if f is not None:
                rows.append([reg.name, describe(reg), LABELS[variant], *_params_row(f.model)])
    console.print(table(f"Fitted parameters ({source})",
                        ["regime", "sizes", "model", "alpha", "R_N", "R_C", "R_Cb", "R_Ci",
                         "1/beta"], rows))


def _print_errors(regimes) -> None:
    """Relative-error sums and maxima per regime (Table 2), then what the fits could not
    determine."""
    from shoal.netmodel.regimes import LABELS, VARIANTS

    rows = []
    for reg in regimes:
        rows.append([reg.name, reg.count, *[reg.error_sum.get(v, math.nan) for v in VARIANTS],
                     *[reg.error_max.get(v, math.nan) for v in ("maxrate", "postal_all")]])
    console.print(table("Relative-error sums (and maxima) of the fits",
                        ["regime", "points", *[LABELS[v] for v in VARIANTS],
                         "max err 3-p", "max err postal"], rows))
    for reg in regimes:
        for note in dict.fromkeys(reg.notes):
            console.print(f"[yellow]{reg.name}: {note}[/yellow]")


def _save_profile(regimes, csv_path, save: str) -> None:
    """Write every fitted model of every regime, with its relative-error sum, as a machine
    profile to ``save``."""
    from shoal.netmodel.profile import Profile, RegimeModels, provenance
    from shoal.netmodel.regimes import LABELS

    kept = []
    for reg in regimes:
        models = {kind: reg.fits[v].model for kind, v in SAVED.items() if v in reg.fits}
        errors = {kind: reg.error_sum[v] for kind, v in SAVED.items() if v in reg.fits}
        kept.append(RegimeModels(reg.name, reg.low, reg.high, models, errors))
    Profile(kept, provenance(str(csv_path))).save(save)
    best = ", ".join(f"{r.name}: {LABELS[SAVED[r.best()]]}" for r in kept)
    console.print(f"profile written to {save} (least error: {best})")


@netmodel.command()
@nprocs_option("Launch this many ranks through mpiexec; without it, run as the ranks of an MPI "
               "job already started (mpiexec or srun across two nodes).")
@click.option("--k", "ks", default="1:4:1", show_default=True,
              help="Pairs communicating at once (list or start:stop:step).")
@click.option("--sizes", default="1B:4MiB", show_default=True,
              help="Message sizes: a list, START:STOP (powers of two) or START:STOP:xF.")
@click.option("--repeat", default=5, show_default=True, help="Repetitions per (k, n).")
@click.option("--mode", type=click.Choice(["pingpong", "ack"]), default="pingpong",
              show_default=True, help="n bytes back, or a zero-byte acknowledgement.")
@click.option("--min-time", default="20ms", show_default=True,
              help="Each repetition loops until it lasts about this long.")
@click.option("--pseudo-nodes", default=None,
              help="NODESxRANKS: treat consecutive ranks of one host as nodes (testing).")
@click.option("--csv", "csv_path", default="netmodel.csv", show_default=True,
              help="Tidy output (k, n, repetition, seconds, bytes_per_s) + JSON sidecar.")
def bench(nprocs, ks, sizes, repeat, mode, min_time, pseudo_nodes, csv_path) -> None:
    """Measure k pairs exchanging n-byte messages between two nodes (Gropp16, 4.1)."""
    from shoal.launch import ranks_share_this_host
    from shoal.netmodel.bench import geometric_sizes
    from shoal.rank import abort_on_error, require_mpi

    check_outputs({"--csv": csv_outputs(csv_path)})
    klist = _counts(ks, "--k")
    nlist = geometric_sizes(sizes)
    tmin = units.parse_duration(min_time, "--min-time")
    if repeat < 1:
        raise UsageError("--repeat must be at least 1")
    pseudo = _pseudo_nodes(pseudo_nodes)
    memory.require(2 * max(nlist) * (nprocs or 1), f"--sizes up to "
                   f"{units.format_bytes(max(nlist))} on {nprocs or 1} rank(s)",
                   "measure smaller messages")
    if nprocs is not None:
        if pseudo is None and ranks_share_this_host():
            raise UsageError(f"every rank of -n {nprocs} runs on this host, so no two nodes "
                             f"can be measured: declare --pseudo-nodes 2x{max(nprocs // 2, 1)}"
                             f", or set SHOAL_MPIEXEC to a launcher that spans two nodes")
        if pseudo is not None and pseudo[0] * pseudo[1] != nprocs:
            raise UsageError(f"--pseudo-nodes {pseudo_nodes} declares {pseudo[0] * pseudo[1]} "
                             f"ranks but the job has {nprocs}: use -n {pseudo[0] * pseudo[1]}")
        if pseudo is not None and max(klist) > pseudo[1]:
            raise UsageError(f"k must lie in 1..{pseudo[1]}: a pseudo-node has {pseudo[1]} "
                             f"ranks")
        relaunch(nprocs)
        return
    require_mpi("netmodel bench")
    from mpi4py import MPI

    from shoal.cli.render import write_csv
    from shoal.netmodel.bench import run

    comm = MPI.COMM_WORLD
    with abort_on_error(comm):
        res = run(comm, klist, nlist, repeat, mode, tmin, pseudo)
        if res is not None:
            write_csv(csv_path, res["rows"], res["meta"])
            best = {}
            for row in res["rows"]:
                key = (row["k"], row["n"])
                best[key] = min(best.get(key, math.inf), row["seconds"])
            rows = [[units.format_bytes(n), k, units.format_duration(t), format_rate(k * n / t)]
                    for (k, n), t in sorted(best.items(), key=lambda kv: (kv[0][1], kv[0][0]))]
            console.print(table(f"Best of {repeat} ({mode}; {res['meta']['mpi_library']})",
                                ["bytes", "k", "time", "aggregate"], rows))
            console.print(f"wrote {csv_path} (+ .json); fit with: shoal netmodel fit {csv_path}")


def _pseudo_nodes(text: str | None) -> tuple[int, int] | None:
    """``2x4`` -> (2, 4): nodes and ranks per node of --pseudo-nodes."""
    if text is None:
        return None
    try:
        a, b = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise UsageError(f"--pseudo-nodes {text!r}: write NODESxRANKS, e.g. 2x4") from None
    if a < 2 or b < 1:
        raise UsageError("--pseudo-nodes needs at least 2 nodes of 1 rank")
    return a, b


@netmodel.command()
@click.option("--rc", default="150Mbit", show_default=True, help="Rate of each process's link.")
@click.option("--rn", default="250Mbit", show_default=True, help="Rate of the node's link.")
@click.option("--pairs", default=4, show_default=True, help="Processes per emulated node.")
@click.option("--sizes", default="64KiB:1MiB:x4", show_default=True,
              help="Message sizes (small ones pass the shapers' buckets unshaped).")
@click.option("--mode", type=click.Choice(["ack", "pingpong"]), default="ack",
              show_default=True, help="Benchmark pattern.")
@click.option("--repeat", default=5, show_default=True, help="Repetitions (best is kept).")
@click.option("--csv", "csv_path", default="emulated.csv", show_default=True,
              help="Where the measurements go.")
@click.pass_context
def emulate(ctx, rc, rn, pairs, sizes, mode, repeat, csv_path) -> None:
    """Build a two-node cluster of network namespaces on this host (root; per-process links
    shaped to --rc, the node link to --rn), measure k = 1, 2, 4, ... pairs across it, fit the
    models and compare what they find with what was set."""
    from shoal.netmodel.emulate import Cluster, run_benchmark

    rc_b, rn_b = units.parse_rate(rc, "--rc"), units.parse_rate(rn, "--rn")
    ks = sorted({min(2**i, pairs) for i in range(6) if 2**i <= max(pairs, 1)} | {pairs})
    with Cluster(rc_b, rn_b, pairs) as cluster:
        console.print(f"emulated 2 nodes x {pairs} processes: R_C {format_rate(rc_b)}, "
                      f"R_N {format_rate(rn_b)} (k* = {rn_b / rc_b:.3g})")
        done = run_benchmark(cluster, ks, sizes, repeat, mode, "50ms", csv_path)
        if done.returncode:
            raise UsageError(f"the benchmark failed in the emulated cluster:\n"
                             f"{done.stderr[-2000:]}")
    ctx.invoke(fit, csv_path=csv_path, thresholds="none", how="best", save=None, plot=None,
               errors_png=None)


@netmodel.command()
@click.option("--profile", "path", required=True, help="A profile from `fit --save`.")
@click.option("--bytes", "sizes", default="1KiB,64KiB,1MiB", show_default=True,
              help="Message sizes (list or start:stop:step).")
@click.option("--k", "ks", default="1,2,4,8,16", show_default=True,
              help="Processes per node communicating at once.")
@click.option("--model", "kind", type=click.Choice(list(SAVED)), default=None,
              help="The model to use [default: the one of least error in each regime].")
def predict(path, sizes, ks, kind) -> None:
    """Time and aggregate bandwidth of k processes each sending n bytes off the node."""
    from shoal.netmodel.profile import Profile

    prof = Profile.load(path)
    rows = []
    for n in _sizes(sizes, "--bytes"):
        model = prof.model_for(n, kind)
        for k in _counts(ks, "--k"):
            t = float(model.time(n, k))
            rows.append([units.format_bytes(n), k, model.kind, units.format_duration(t),
                         format_rate(k * n / t)])
    console.print(table(f"Predicted by {path}", ["bytes", "k", "model", "time", "bandwidth"],
                        rows))


@netmodel.command()
@click.option("--profile", "path", required=True, help="A profile from `fit --save`.")
@click.option("--bytes", "size", default="1MiB", show_default=True,
              help="Bytes per halo edge.")
@click.option("--edges", default=4, show_default=True, help="Halo edges per process.")
@click.option("--k", "ks", default="1,2,4,8,16,32", show_default=True,
              help="Processes per node to compare.")
@click.option("--model", "kind", type=click.Choice(["maxrate4", "maxrate"]), default=None,
              help="The model to use [default: the max-rate model of least error].")
def advise(path, size, edges, ks, kind) -> None:
    """How many processes per node should communicate at once (k* = R_N / R_C), and a
    halo exchange under the postal vs the max-rate model (Section 3.1, eq. 6)."""
    from shoal.netmodel.advise import halo
    from shoal.netmodel.profile import Profile

    if edges < 1:
        raise UsageError("--edges must be at least 1")
    n = _sizes(size, "--bytes")[0]
    prof = Profile.load(path)
    if not {"maxrate4", "maxrate"} & set(prof.regime_for(n).models):
        raise UsageError(f"the profile has only the postal model for {units.format_bytes(n)}:"
                         f" refit with measurements at several k to get R_N")
    model = prof.model_for(n, kind, kinds=("maxrate4", "maxrate"))
    kstar = model.saturation_k()
    beyond = math.ceil(kstar) if math.isfinite(kstar) else "∞"
    console.print(f"k* = R_N / R_C = {kstar:.3g}: beyond {beyond} processes per node, more "
                  f"concurrent senders only share R_N")
    rows = [[r["k"], units.format_duration(r["postal_s"]), units.format_duration(r["maxrate_s"]),
             r["ratio"]] for r in halo(model, edges, n, _counts(ks, "--k"))]
    console.print(table(f"Halo exchange: {edges} edges of {units.format_bytes(n)} per process",
                        ["k per node", "postal (eq. 2)", f"max-rate ({EQUATION[model.kind]})",
                         "max-rate / postal"], rows))

