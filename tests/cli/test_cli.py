import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import shoal as shoal_pkg
from shoal.cli.main import cli


def shoal(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "shoal", *args], capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.parametrize("cmd", [[], ["gossip"], ["gossip", "simulate"], ["gossip", "run"],
                                 ["demo"], ["run"], ["netmodel"], ["netmodel", "fit"],
                                 ["netmodel", "predict"], ["netmodel", "advise"],
                                 ["netmodel", "bench"], ["netmodel", "emulate"], ["map"],
                                 ["topology"], ["topology", "show"],
                                 ["lb"], ["lb", "synth"], ["lb", "simulate"],
                                 ["gossip", "overhead"], ["gossip", "daemon"],
                                 ["gossip", "status"], ["gossip", "set"],
                                 ["gossip", "unset"], ["gossip", "keys"],
                                 ["gossip", "keys", "generate"], ["gossip", "keys", "install"],
                                 ["gossip", "keys", "use"], ["gossip", "keys", "remove"],
                                 ["gossip", "keys", "list"], ["dashboard"], ["top"],
                                 ["profile"]])
def test_help_on_every_command(cmd):
    """``shoal --help`` as a user runs it; the commands' helps in this process (click's
    runner on the same command tree: a process each cost 0.5 CPU-s of start-up)."""
    if not cmd:
        out = shoal("--help")
        assert out.returncode == 0
        assert "Usage:" in out.stdout
        return
    out = CliRunner().invoke(cli, [*cmd, "--help"])
    assert out.exit_code == 0, out.output
    assert "Usage:" in out.stdout


def test_version_says_which_core_runs():
    from shoal._compiled import core

    out = shoal("--version")
    assert out.returncode == 0
    assert out.stdout == f"shoal {shoal_pkg.__version__} ({core()} core)\n"


@pytest.mark.parametrize("args,hint", [
    (["gossip", "simulate", "--nodes", "10", "--window", "11"], "lower --window"),
    (["gossip", "simulate", "--nodes", "1"], "--nodes must be at least 2"),
    (["gossip", "simulate", "--interval", "-5ms"], "must not be negative"),
    (["gossip", "simulate", "--interval", "5 fortnights"], "unknown unit"),
    (["gossip", "simulate", "--window", "150%"], "between 0% and 100%"),
    (["gossip", "simulate", "--loss", "100%"], "below 100%"),
    (["gossip", "run", "-n", "1"], "at least 2 ranks"),
    (["gossip", "run", "-n", "2", "--duration", "1 eon"], "unknown unit"),
    (["gossip", "simulate", "--bogus"], "No such option"),
])
def test_bad_input_is_one_line_and_exit_code_2(args, hint):
    out = shoal(*args)
    assert out.returncode == 2
    assert hint in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert "Traceback" not in out.stderr


def test_simulate_table_csv_and_plot(tmp_path):
    csv = tmp_path / "age.csv"
    png = tmp_path / "age.png"
    out = shoal("gossip", "simulate", "--nodes", "64,128", "--window", "10%:30%:10%",
                "--units", "60", "--interval", "256ms", "--csv", str(csv), "--plot", str(png))
    assert out.returncode == 0, out.stderr
    assert "expected" in out.stdout
    lines = csv.read_text().splitlines()
    assert len(lines) == 1 + 6
    header = lines[0].split(",")
    row = dict(zip(header, lines[1].split(","), strict=True))
    assert float(row["mean_age_s"]) == pytest.approx(0.256 * float(row["mean_age"]))
    meta = json.loads((tmp_path / "age.csv.json").read_text())
    assert meta["interval_s"] == 0.256
    assert png.stat().st_size > 10_000


def test_gossip_run_launches_ranks_and_prints_the_cluster():
    out = shoal("gossip", "run", "-n", "3", "--interval", "20ms", "--duration", "1s",
                "--window", "2")
    assert out.returncode == 0, out.stderr
    assert "Cluster as rank 0 sees it (3 nodes" in out.stdout
    assert "Per rank" in out.stdout


ROOT = Path(__file__).parents[2]


def test_run_launches_a_program_on_n_pes():
    out = shoal("run", "-n", "3", str(ROOT / "examples" / "hello.py"))
    assert out.returncode == 0, out.stderr
    assert "3 PEs on 1 node(s), 8 elements" in out.stdout
    assert sum("hello from element" in line for line in out.stdout.splitlines()) == 8


@pytest.mark.parametrize("args,hint", [
    (["run", "missing.py"], "does not exist"),
    (["run", "-n", "0", str(ROOT / "examples" / "hello.py")], "0 is not in the range x>=1"),
    (["run", "--timeout", "soon", str(ROOT / "examples" / "hello.py")], "--timeout"),
    (["run", "--lb", "gredy", str(ROOT / "examples" / "hello.py")],
     "known strategies: distributed, greedy, greedy_refine, hierarchical, metis, orb"),
    (["run", "--lb-period", "often", str(ROOT / "examples" / "hello.py")], "--lb-period"),
])
def test_run_rejects_bad_input(args, hint):
    out = shoal(*args)
    assert out.returncode == 2
    assert hint in out.stderr


def test_run_lb_options_reach_the_runtime_of_every_pe(tmp_path):
    prog = tmp_path / "lb_options.py"
    prog.write_text("import shoal\n"
                    "from shoal.runtime.context import current\n"
                    "class Probe(shoal.Chare):\n"
                    "    def show(self, fut):\n"
                    "        b = current().balancer\n"
                    "        link = b.costs.inter\n"
                    "        self.contribute((b.name, b.period, round(link.byte * 1e12)),\n"
                    "                        shoal.Reducer.gather, fut)\n"
                    "async def main():\n"
                    "    fut = shoal.future()\n"
                    "    shoal.Group(Probe).show(fut)\n"
                    "    print(await fut)\n"
                    "shoal.start(main)\n")
    from shoal.netmodel.models import Model
    from shoal.netmodel.profile import Profile, RegimeModels

    for name, beta in (("a", 1e-10), ("b", 2e-9)):  # postal: 1 us + 0.1 ns/B, 20 us + 2 ns/B
        model = Model("postal", {"alpha": 1e-6 if name == "a" else 2e-5, "beta": beta})
        Profile([RegimeModels("all", 0.0, math.inf, {"postal": model})], {}).save(
            tmp_path / f"{name}.toml")
    costs = f"{tmp_path / 'a.toml'},{tmp_path / 'b.toml'}"
    out = shoal("run", "-n", "2", "--lb", "greedy,refine", "--lb-period", "250ms",
                "--lb-costs", costs, str(prog))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ("[('greedy,refine', 0.25, 2000), "
                                  "('greedy,refine', 0.25, 2000)]")


def test_the_readme_runtime_program_runs(tmp_path):
    readme = (ROOT / "README.md").read_text()
    code = re.search(r"## Runtime.*?```python\n(.*?)```", readme, re.S).group(1)
    prog = tmp_path / "readme_runtime.py"
    prog.write_text(code)
    out = shoal("run", "-n", "2", str(prog))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "120000.0", "1", "60000.0", "2", "30000.0", "1000"]


def test_overhead_figure(tmp_path):
    from shoal.gossip.plots import overhead

    base = {"interval_s": None, "window": None, "error": "", "seconds": 2.0,
            "mpi_fraction": 0.25}
    rows = [base, {**base, "interval_s": 0.004, "window": 0.2, "seconds": 2.2,
                   "busy_fraction": 0.01},
            {**base, "interval_s": 0.004, "window": 9, "error": "window too large"}]
    png = tmp_path / "overhead.png"
    overhead(rows, str(png))
    assert png.stat().st_size > 5_000
