"""The Dask client a score run uses: a LocalCluster by default, a running scheduler when an address is given.

``conf/dask/default.yaml``: ``address: null`` starts a LocalCluster of ``n_workers`` processes with
``threads_per_worker`` threads and a ``memory_limit`` each (limits only apply to processes);
``address: tcp://host:8786`` connects to a running ``dask scheduler`` + ``dask worker`` cluster.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from distributed import Client, LocalCluster

from tilecast.errors import UserError

log = logging.getLogger(__name__)


#: the local cluster listens on this machine only (scheduler, workers and the HTTP endpoint)
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class DaskConfig:
    """How to get workers, and how to split and retry the work."""

    address: str | None = None
    n_workers: int = 2
    threads_per_worker: int = 1
    processes: bool = True
    memory_limit: str | None = "2GiB"
    dashboard_address: str | None = None  # None: the scheduler's HTTP endpoint on a free port of 127.0.0.1
    chunk_rows: int = 50_000  # distinct op rows per prediction task
    retries: int = 3  # a task whose worker dies is rerun elsewhere
    connect_timeout_s: float = 30.0

    @classmethod
    def from_mapping(cls, cfg: Mapping[str, Any] | None) -> DaskConfig:
        """From a composed ``dask`` node (as a dict); unknown keys are an error naming them."""
        cfg = dict(cfg or {})
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(cfg) - known)
        if unknown:
            raise UserError(f"dask config: unknown key {unknown[0]!r}; known: {', '.join(sorted(known))}")
        out = cls(**cfg)
        if out.address is None and (out.n_workers < 1 or out.threads_per_worker < 1):
            raise UserError("dask config: n_workers and threads_per_worker must be >= 1")
        if out.chunk_rows < 1 or out.retries < 0:
            raise UserError("dask config: chunk_rows must be >= 1 and retries >= 0")
        return out


def check_scheduler(address: str, timeout_s: float) -> None:
    """Fail fast, naming ``dask.address``, when nothing accepts a connection at a ``tcp://`` / ``tls://``
    scheduler address (``distributed`` would retry for ``connect_timeout_s`` and then raise a traceback).
    Other protocols (``inproc://``, ``ucx://``) are left to ``distributed``."""
    from urllib.parse import urlsplit

    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    if parts.scheme not in ("tcp", "tls"):
        return
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if not host or port is None:
        raise UserError(f"dask.address={address}: expected tcp://<host>:<port> of a running `dask scheduler`")
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as exc:
        why = exc.strerror or str(exc) or type(exc).__name__
        raise UserError(f"dask.address={address}: no Dask scheduler answers there ({why}, within "
                         f"dask.connect_timeout_s={timeout_s:g} s); start one with `dask scheduler`, or leave "
                         f"dask.address null for a local cluster") from None


@contextlib.contextmanager
def dask_client(cfg: DaskConfig) -> Iterator[Client]:
    """A connected client; a LocalCluster it started is closed on exit, a remote scheduler is left running."""
    if cfg.address:
        log.info("connecting to dask scheduler %s", cfg.address)
        check_scheduler(cfg.address, cfg.connect_timeout_s)
        try:
            client = Client(cfg.address, timeout=f"{cfg.connect_timeout_s}s")
        except (OSError, TimeoutError) as exc:  # it accepted the connection but is no scheduler, or went away
            raise UserError(f"dask.address={cfg.address}: could not connect a Dask client within "
                             f"dask.connect_timeout_s={cfg.connect_timeout_s:g} s: {exc}") from None
        try:
            yield client
        finally:
            client.close()
        return
    cluster = LocalCluster(n_workers=cfg.n_workers, threads_per_worker=cfg.threads_per_worker,
                           processes=cfg.processes, memory_limit=cfg.memory_limit if cfg.processes else None,
                           host=LOOPBACK if cfg.processes else None,  # threads talk in-process
                           dashboard_address=cfg.dashboard_address or f"{LOOPBACK}:0",
                           silence_logs=logging.ERROR)
    try:
        client = Client(cluster)
        try:
            yield client
        finally:
            client.close()
    finally:
        cluster.close()
