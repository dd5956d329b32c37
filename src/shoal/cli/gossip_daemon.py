"""``shoal gossip daemon|set|unset|status|keys``: the node daemon, its queries and its keyring
(the library is :mod:`shoal.gossip.daemon`, :mod:`shoal.gossip.control` and
:mod:`shoal.gossip.secure`)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import click

from shoal import units
from shoal.cli.render import console, table
from shoal.errors import UsageError

STATE_HELP = ("The daemon's state directory [default: $SHOAL_GOSSIP_STATE_DIR, else "
              "/var/lib/shoal-gossip as root, else ~/.local/state/shoal-gossip].")


def parse_hostport(text: str, flag: str, resolve: bool = True) -> tuple[str, int]:
    """``host:port`` (``[v6]:port``) as (IP, port): a name is resolved once, here."""
    host, sep, port = text.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"{flag} {text!r}: give host:port, e.g. 127.0.0.1:7946")
    if not resolve:
        return host, int(port)
    try:
        info = socket.getaddrinfo(host, int(port), type=socket.SOCK_DGRAM)
    except (OSError, UnicodeError) as exc:
        raise UsageError(f"{flag} {text!r}: host {host!r} does not resolve ({exc}): give an "
                         "IP address or a known host name") from None
    return str(info[0][4][0]), int(port)


def _state_dir(given: str | None) -> Path:
    from shoal.gossip.control import default_state_dir

    return Path(given).expanduser() if given else default_state_dir()


@click.command()
@click.option("--bind", default="0.0.0.0:7946", show_default=True,
              help="UDP address to gossip on (host:port).")
@click.option("--join", default="", help="Seed addresses to join through: host:port,...")
@click.option("--name", default=None, help="The node's stable name [default: "
              "HOSTNAME@ADDRESS]; at most 64 bytes.")
@click.option("--advertise", default=None, help="host:port peers send to [default: the "
              "bound address; the host's address for a 0.0.0.0 bind].")
@click.option("--interval", default="1s", show_default=True, help="Unit of time (256ms, 1s).")
@click.option("--window", default="20%", show_default=True,
              help="Window: a percentage of the known nodes or a count of entries.")
@click.option("--state-dir", default=None, help=STATE_HELP)
@click.option("--http", "http", default=None,
              help="Serve /status (JSON) and /metrics (Prometheus) on this loopback "
                   "host:port, e.g. 127.0.0.1:7947.")
@click.option("--detach", is_flag=True, help="Run in the background (log: daemon.log in "
              "the state directory).")
@click.option("--key", default=None, help="Encrypt and authenticate every packet with this "
              "key (32 bytes in base64, `shoal gossip keys generate`); it starts the keyring "
              "when there is none (an existing keyring wins).")
@click.option("--keyring", "keyring", default=None, help="The keyring file [default: "
              "keyring.json in the state directory]; a keyring there encrypts even without "
              "--key.")
@click.option("--label", default="shoal", show_default=True, help="The cluster label, "
              "authenticated with every sealed packet: nodes of another label are refused.")
@click.option("--allow", default="", help="Accept packets only from these networks: "
              "CIDR,... e.g. 10.0.0.0/8,127.0.0.0/8 [default: any].")
@click.option("--suspect-tail", default=0.05, show_default=True, type=float,
              help="Suspect a node once its entry is older than a live node's is with this "
              "probability (from the age law); 6 unanswered probes, a third of an interval "
              "apart, then declare it dead.")
@click.option("--cores", default=None, type=click.IntRange(1, 65535), help="The cores this "
              "node offers to jobs, as placement counts them [default: the machine's count].")
@click.option("--group", default=None, help="Hierarchical gossip: this node's group, a "
              "topology key such as its rack (at most 32 bytes). Full records within the "
              "group, group summaries between groups [default: flat gossip].")
@click.option("--groups", default=None, type=click.IntRange(1, 1 << 20), help="Hierarchical "
              "gossip in this many groups, a node's group by a hash of its name (instead of "
              "--group).")
def daemon(bind: str, join: str, name: str | None, advertise: str | None, interval: str,
           window: str, state_dir: str | None, http: str | None, detach: bool,
           key: str | None, keyring: str | None, label: str, allow: str,
           suspect_tail: float, cores: int | None, group: str | None,
           groups: int | None) -> None:
    """Run the gossip daemon of this node (UDP, no MPI) until SIGTERM."""
    import ipaddress

    from shoal.cli.gossip import _interval, _window
    from shoal.gossip import secure
    from shoal.gossip.daemon import DaemonConfig, format_addr, serve

    seeds = [parse_hostport(s, "--join") for s in join.split(",") if s.strip()]
    http_addr = parse_hostport(http, "--http") if http else None
    if http_addr and not ipaddress.ip_address(http_addr[0]).is_loopback:
        raise UsageError(f"--http {http}: the endpoint serves localhost only; give "
                         "127.0.0.1:PORT or [::1]:PORT")
    if not 0.0 < suspect_tail < 0.5:
        raise UsageError(f"--suspect-tail {suspect_tail}: give a probability in (0, 0.5), "
                         "e.g. 0.01 (lower: fewer false suspicions, slower detection)")
    if name is not None and not 0 < len(name.encode()) <= 64:
        raise UsageError(f"--name {name!r}: give 1 to 64 bytes")
    if group is not None and groups is not None:
        raise UsageError("give --group NAME or --groups G, not both")
    if group is not None and not 0 < len(group.encode()) <= 32:
        raise UsageError(f"--group {group!r}: give 1 to 32 bytes")
    cfg = DaemonConfig(
        bind=parse_hostport(bind, "--bind"), seeds=seeds, interval=_interval(interval),
        window=_window(window), state_dir=_state_dir(state_dir), name=name,
        advertise=format_addr(parse_hostport(advertise, "--advertise")) if advertise else None,
        http=http_addr, key=secure.parse_key(key, "--key") if key is not None else None,
        keyring=Path(keyring).expanduser() if keyring else None,
        label=secure.check_label(label), allow=secure.parse_allow(allow),
        suspect_tail=suspect_tail, cores=cores, group=group, groups=groups)
    serve(cfg, background=detach)


@click.command("set")
@click.argument("key")
@click.argument("value")
@click.option("--state-dir", default=None, help=STATE_HELP)
def set_key(key: str, value: str, state_dir: str | None) -> None:
    """Publish KEY=VALUE in this node's gossip record (through the local daemon)."""
    from shoal.gossip.control import request

    keys = request(_state_dir(state_dir), {"op": "set", "key": key, "value": value})["keys"]
    console.print(f"keys of this node: {json.dumps(keys)}")


@click.command("unset")
@click.argument("key")
@click.option("--state-dir", default=None, help=STATE_HELP)
def unset_key(key: str, state_dir: str | None) -> None:
    """Remove KEY from this node's gossip record."""
    from shoal.gossip.control import request

    keys = request(_state_dir(state_dir), {"op": "unset", "key": key})["keys"]
    console.print(f"keys of this node: {json.dumps(keys)}")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the daemon's whole view as JSON.")
@click.option("--state-dir", default=None, help=STATE_HELP)
def status(as_json: bool, state_dir: str | None) -> None:
    """Every node the local daemon knows: address, state (alive, suspect, dead), age, load,
    cores busy (of them shoal's PEs), memory, cores, jobs, keys."""
    from shoal.gossip.control import request

    view = request(_state_dir(state_dir), {"op": "status"})
    view.pop("ok", None)
    if as_json:
        click.echo(json.dumps(view, indent=1))
        return
    rows = [[("* " if n["self"] else "") + n["name"], n["addr"], n["state"], f"{n['age']:.2f}",
             " ".join(f"{x:.2f}" for x in n["load"]), f"{n['busy']:.2f} ({n['shoal']:.2f})",
             units.format_bytes(n["free_mem"]),
             n["cores"], n["jobs"], n["pes"],
             " ".join(f"{k}={v}" for k, v in sorted(n["keys"].items()))]
            for n in view["nodes"]]
    mean = view["mean_age"]
    console.print(table(
        f"Gossip: {len(rows)} nodes as {view['name']} sees them (interval "
        f"{units.format_duration(view['interval'])}, mean age "
        f"{'-' if mean is None else f'{mean:.2f} s'}, {_security_line(view)})",
        ["node", "address", "state", "age (s)", "load 1/5/15", "busy (shoal)", "free memory",
         "cores", "jobs", "PEs", "keys"], rows))
    if view.get("groups"):
        console.print(table(
            f"Groups: {len(view['groups'])} ({view['name']} is in {view['group']!r})",
            ["group", "age (s)", "live nodes", "cores", "busy min/mean/max", "free memory",
             "oldest record (s)", "contact"],
            [[("* " if g["own"] else "") + g["group"], f"{g['age']:.2f}", g["nodes"],
              g["cores"], " ".join(f"{x:.2f}" for x in g["busy"]),
              units.format_bytes(g["free_mem"]), f"{g['oldest']:.2f}", g["contact"]]
             for g in view["groups"]]))


def _security_line(view: dict) -> str:
    """Encrypted or open, and the packets dropped by cause."""
    sec, stats = view.get("security", {}), view["stats"]
    causes = ("malformed", "foreign", "unknown_key", "forged", "replayed", "disallowed")
    dropped = ", ".join(f"{c.replace('_', ' ')} {stats.get(c, 0)}" for c in causes)
    return f"{'encrypted' if sec.get('encrypted') else 'OPEN'}; dropped: {dropped}"


@click.group()
def keys() -> None:
    """The keyring of an encrypted cluster. Rotation without downtime: `install` the new key
    on every node, then `use` it on every node, then `remove` the old one everywhere."""


@keys.command()
def generate() -> None:
    """Print a new key (32 random bytes in base64)."""
    from shoal.gossip.secure import generate_key

    click.echo(generate_key())


def _keys_request(action: str, key: str | None, state_dir: str | None) -> None:
    from shoal.gossip.control import request
    from shoal.gossip.secure import parse_key

    message = {"op": "keys", "action": action}
    if key is not None:
        parse_key(key, "KEY")  # refused here, before asking the daemon
        message["key"] = key.strip()
    listing = request(_state_dir(state_dir), message)["keys"]
    rows = [[k["id"], "primary" if k["primary"] else "", k["key"]] for k in listing]
    console.print(table(f"Keyring: {len(rows)} key(s)", ["id", "", "key"], rows))


@keys.command("list")
@click.option("--state-dir", default=None, help=STATE_HELP)
def list_keys(state_dir: str | None) -> None:
    """The installed keys (the primary one encrypts, every one decrypts)."""
    _keys_request("list", None, state_dir)


@keys.command()
@click.argument("key")
@click.option("--state-dir", default=None, help=STATE_HELP)
def install(key: str, state_dir: str | None) -> None:
    """Install KEY: this node decrypts packets under it from now on."""
    _keys_request("install", key, state_dir)


@keys.command()
@click.argument("key")
@click.option("--state-dir", default=None, help=STATE_HELP)
def use(key: str, state_dir: str | None) -> None:
    """Make the installed KEY the primary: this node encrypts with it from now on."""
    _keys_request("use", key, state_dir)


@keys.command()
@click.argument("key")
@click.option("--state-dir", default=None, help=STATE_HELP)
def remove(key: str, state_dir: str | None) -> None:
    """Remove KEY (not the primary): packets under it are refused from now on."""
    _keys_request("remove", key, state_dir)
