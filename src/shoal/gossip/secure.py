"""The node daemon's security (issue 28 item 2): the keyring, the envelope every packet
travels in when a key is given, the replay window and the allowed networks.

Envelope (a sealed packet)::

    header 13 B, clear  | nonce 12 B | AES-256-GCM( seq u64 | wire message ) | tag 16 B
    magic "SHGE", format version 1, label tag u32, key id u32

The header and the cluster label (``--label``) are the associated data: the tag covers them,
so a packet whose header or label differs is refused by the tag even where its cheap checks
pass. The cheap checks come first and cost no cryptography: the magic and format version (a
packet of another format), the label tag (the first 4 bytes of the BLAKE2b hash of the
label: a packet of another cluster) and the key id (BLAKE2b of the key, 4 bytes; a key this
node does not hold). Because the key id is authenticated, no key but the one it names can
open a packet, so no other key is tried.

``seq`` is the sender's packet sequence number, ``version << 20 | k`` for the ``k``-th packet
of the tick whose record version is ``version``: the version never goes back, even across a
restart or a crash (:mod:`shoal.gossip.daemon` persists it before it sends), so neither does
``seq``, and nothing more has to be stored. :class:`ReplayWindow` keeps, per sender, the 64
highest numbers it accepted; a number at or below the lowest of them, or equal to one of
them, is a replay.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import heapq
import ipaddress
import json
import os
import struct
import tempfile
from collections import OrderedDict
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from shoal.errors import UsageError, WireError

KEY_BYTES, NONCE_BYTES, TAG_BYTES = 32, 12, 16
MAGIC, FORMAT = b"SHGE", 1
HEADER = struct.Struct("<4sBII")  # magic, format version, label tag, key id
SEQ = struct.Struct("<Q")
OVERHEAD = HEADER.size + NONCE_BYTES + SEQ.size + TAG_BYTES  # 49 B around a wire message
SEQ_SHIFT = 20  # seq = version << 20 | packet index within the tick
DEFAULT_LABEL = "shoal"
KEYRING = "keyring.json"
KEY_HINT = "give 32 random bytes in base64 (`shoal gossip keys generate` prints one)"
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class ForeignPacketError(WireError):
    """A packet of another format, format version or cluster label (or an open one)."""


class UnknownKeyError(WireError):
    """A sealed packet under a key this node does not hold (never installed, or removed)."""


class ForgedPacketError(WireError):
    """A sealed packet whose tag is wrong: altered, forged, or under another label."""


def _hash32(data: bytes, person: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=4, person=person).digest(),
                          "little")


def key_id(key: bytes) -> int:
    """The 32-bit id a sealed packet names its key by."""
    return _hash32(key, b"shoal-key-id")


def label_tag(label: str) -> int:
    """The 32-bit tag of a cluster label, in the clear header."""
    return _hash32(label.encode(), b"shoal-label")


def generate_key() -> str:
    """A new key: 32 random bytes in base64."""
    return encode_key(os.urandom(KEY_BYTES))


def encode_key(key: bytes) -> str:
    return base64.b64encode(key).decode()


def parse_key(text: str, what: str = "the key") -> bytes:
    """A key from its base64 text; a :class:`UsageError` saying what to change if it is not
    32 bytes in base64."""
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise UsageError(f"{what} {text!r} is not base64: {KEY_HINT}") from None
    if len(key) != KEY_BYTES:
        raise UsageError(f"{what} is {len(key)} bytes, AES-256 needs {KEY_BYTES}: {KEY_HINT}")
    return key


def check_label(label: str) -> str:
    if not 0 < len(label.encode()) <= 64:
        raise UsageError(f"--label {label!r}: give 1 to 64 bytes (the same on every node)")
    return label


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` with mode 0600, atomically (temporary file, fsync,
    rename): a reader sees the old file or the new one, never a part."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            os.fchmod(out.fileno(), 0o600)
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class Keyring:
    """The installed keys (each decrypts) and the primary one (it encrypts). Changes are
    written to ``path`` (mode 0600) when it is set."""

    def __init__(self, keys: list[bytes], primary: bytes, path: Path | None = None):
        self.path = path
        self._keys: dict[int, bytes] = {}
        self._aead: dict[int, AESGCM] = {}
        for key in [primary, *keys]:
            self._add(key)
        self.primary = key_id(primary)

    def _add(self, key: bytes) -> bool:
        kid = key_id(key)
        if kid in self._keys:
            return False
        self._keys[kid] = key
        self._aead[kid] = AESGCM(key)
        return True

    def __len__(self) -> int:
        return len(self._keys)

    def aead(self, kid: int) -> AESGCM | None:
        return self._aead.get(kid)

    def install(self, key: bytes) -> bool:
        """Add ``key`` (it decrypts from now on); False if it was installed."""
        added = self._add(key)
        self.save()
        return added

    def use(self, key: bytes) -> None:
        """Make an installed key the primary (it encrypts from now on)."""
        kid = key_id(key)
        if kid not in self._keys:
            raise UsageError(f"key {kid:08x} is not installed here: `shoal gossip keys install` "
                             "it on every node first, then `use` it")
        self.primary = kid
        self.save()

    def remove(self, key: bytes) -> None:
        """Forget a key that is not the primary."""
        kid = key_id(key)
        if kid == self.primary:
            raise UsageError(f"key {kid:08x} is the primary: `use` another key first (on "
                             "every node), then remove this one")
        if kid not in self._keys:
            raise UsageError(f"key {kid:08x} is not installed here")
        del self._keys[kid], self._aead[kid]
        self.save()

    def listing(self) -> list[dict[str, Any]]:
        """The keys, the primary first: id, key (base64) and whether it is the primary."""
        return [{"id": f"{kid:08x}", "key": encode_key(key), "primary": kid == self.primary}
                for kid, key in sorted(self._keys.items(), key=lambda kv: kv[0] != self.primary)]

    def summary(self) -> dict[str, Any]:
        """What status may show: ids only, never a key."""
        return {"primary": f"{self.primary:08x}", "keys": [f"{k:08x}" for k in self._keys]}

    def save(self) -> None:
        if self.path is not None:
            doc = {"primary": encode_key(self._keys[self.primary]),
                   "keys": [encode_key(k) for k in self._keys.values()]}
            write_private(self.path, json.dumps(doc, indent=1) + "\n")

    @classmethod
    def load(cls, path: Path) -> Keyring:
        """The keyring of a file written by :meth:`save`; a :class:`UsageError` naming the
        file if it is not one."""
        try:
            doc = json.loads(path.read_text())
            keys = [parse_key(k, f"{path}: a key") for k in doc["keys"]]
            primary = parse_key(doc["primary"], f"{path}: the primary key")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"--keyring {path} is not a keyring ({exc}): give a file "
                             "written by the daemon, or start with --key") from None
        return cls(keys, primary, path)


def open_keyring(path: Path, key: bytes | None,
                 required: bool = False) -> tuple[Keyring | None, str]:
    """The keyring at ``path`` if the file exists (``key`` is then only checked against it),
    else a new one holding ``key`` as its primary, written there; None without either (a
    :class:`UsageError` if ``required``: a --keyring that was named). Also a line that says
    what happened."""
    if path.exists():
        ring = Keyring.load(path)
        note = f"keyring {path}: {len(ring)} key(s), primary {ring.primary:08x}"
        if key is not None and key_id(key) != ring.primary:
            note += (" (--key is not its primary and was ignored: the keyring of a previous "
                     "run wins; rotate with `shoal gossip keys`)")
        return ring, note
    if key is None:
        if required:
            raise UsageError(f"--keyring {path} does not exist: give --key KEY as well to "
                             "create it, or the path of an existing keyring")
        return None, ""
    ring = Keyring([], key, path)
    ring.save()
    return ring, f"keyring {path} created with key {ring.primary:08x}"


class Envelope:
    """Seals and opens packets with a keyring under a cluster label."""

    def __init__(self, keyring: Keyring, label: str = DEFAULT_LABEL):
        self.keyring, self.label = keyring, label.encode()
        self.tag = label_tag(label)

    def seal(self, seq: int, message: bytes) -> bytes:
        """One packet: the clear header, a random nonce, the encrypted (seq, message)."""
        kid = self.keyring.primary
        aead = self.keyring.aead(kid)
        assert aead is not None
        header = HEADER.pack(MAGIC, FORMAT, self.tag, kid)
        nonce = os.urandom(NONCE_BYTES)
        return header + nonce + aead.encrypt(nonce, SEQ.pack(seq) + message,
                                             header + self.label)

    def open(self, data: bytes) -> tuple[int, bytes]:
        """(seq, message) of a sealed packet, or the :class:`WireError` subclass that says
        why it is refused; only a packet that passes the cheap checks is decrypted."""
        if len(data) < OVERHEAD:
            if data[:4] == MAGIC or len(data) < 4:
                raise WireError(f"a sealed packet of {len(data)} B is shorter than its "
                                f"{OVERHEAD} B envelope")
            raise ForeignPacketError("not a sealed packet (another format, or an open cluster)")
        magic, fmt, tag, kid = HEADER.unpack_from(data)
        if magic != MAGIC or fmt != FORMAT:
            raise ForeignPacketError("not a sealed packet of this format version")
        if tag != self.tag:
            raise ForeignPacketError("a packet of another cluster label")
        aead = self.keyring.aead(kid)
        if aead is None:
            raise UnknownKeyError(f"a packet under key {kid:08x}, which is not installed")
        start = HEADER.size + NONCE_BYTES
        try:
            plain = aead.decrypt(data[HEADER.size:start], data[start:],
                                 data[:HEADER.size] + self.label)
        except InvalidTag:
            raise ForgedPacketError("a packet whose tag is wrong (altered or forged)") from None
        return SEQ.unpack_from(plain)[0], plain[SEQ.size:]


class ReplayWindow:
    """Per sender, the :data:`WIDTH` highest sequence numbers accepted: a number equal to
    one of them or below all of them is refused. At most :data:`SENDERS` senders are kept
    (the least recently heard is forgotten); only packets that passed the tag reach here,
    so only key holders take room."""

    WIDTH = 64
    SENDERS = 1 << 16

    def __init__(self) -> None:
        self._senders: OrderedDict[int, tuple[list[int], set[int]]] = OrderedDict()

    def accept(self, sender: int, seq: int) -> bool:
        """True (and remembered) if ``seq`` is new from ``sender``; False for a replay."""
        entry = self._senders.get(sender)
        if entry is None:
            entry = self._senders[sender] = ([], set())
            if len(self._senders) > self.SENDERS:
                self._senders.popitem(last=False)
        heap, seen = entry
        if seq in seen or (len(heap) == self.WIDTH and seq <= heap[0]):
            return False
        self._senders.move_to_end(sender)
        heapq.heappush(heap, seq)
        seen.add(seq)
        if len(heap) > self.WIDTH:
            seen.discard(heapq.heappop(heap))
        return True


def parse_allow(text: str) -> list[Network]:
    """``--allow``: comma-separated CIDRs (``10.0.0.0/8,127.0.0.0/8``); empty: any."""
    nets = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        try:
            nets.append(ipaddress.ip_network(part, strict=False))
        except ValueError:
            raise UsageError(f"--allow {part!r} is not a network: give CIDRs such as "
                             "10.0.0.0/8,127.0.0.0/8") from None
    return nets


class Allow:
    """Which source addresses may send: any when no network is given. Answers are cached
    per address (the cache is emptied when it reaches 4096 addresses)."""

    def __init__(self, networks: list[Network] | None = None):
        self.networks = list(networks or [])
        self._cache: dict[str, bool] = {}

    def permits(self, host: str) -> bool:
        if not self.networks:
            return True
        known = self._cache.get(host)
        if known is None:
            known = self._decide(host)
            if len(self._cache) >= 4096:
                self._cache.clear()
            self._cache[host] = known
        return known

    def _decide(self, host: str) -> bool:
        try:
            addr = ipaddress.ip_address(host.split("%", 1)[0])
        except ValueError:
            return False
        if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
            addr = addr.ipv4_mapped
        return any(addr.version == net.version and addr in net for net in self.networks)
