# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The worker ranks of a CFG-parallel engine, started at configure and ended at cleanup.

With ``engine.cfg_parallel`` 2 the node is rank 0 and starts rank 1 itself, as a
``dreamzero-engine-worker`` child process: every configure starts fresh workers on a fresh
rendezvous port (``engine.master_port`` 0 chooses a free one, so two nodes on one host do not
collide), and every cleanup ends them. A worker dies with the node (parent-death signal), so a
killed node leaves no worker behind.

Start-up: rank 0 opens the rendezvous store, starts the workers, and waits (polling, so that a
stop request is seen at once) until each has loaded its weights; a worker that exits meanwhile
fails the start at once with its exit status. Then all ranks join the process group.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
import datetime
import os
import subprocess
import sys
import time

from dreamzero_ros.core.node_config import EngineSettings
from dreamzero_ros.core.process_lifetime import die_with_parent

#: The module behind the ``dreamzero-engine-worker`` console script.
WORKER_MODULE = 'dreamzero_ros.engine.cfg_parallel'
#: Seconds a worker gets to leave after the shutdown command before it is killed.
WORKER_EXIT_TIMEOUT = 10.0
#: A worker's collective timeout, seconds: it waits for rank 0's next command for as long as the
#: node stays configured (inactive for hours, say); it ends with the node anyway (parent-death
#: signal, or rank 0's closed connection). Rank 0 keeps ``engine.worker_timeout``.
WORKER_IDLE_TIMEOUT = 30 * 24 * 3600.0
_POLL_PERIOD = 0.1
_PORT_TRIES = 5


class WorkerStartError(RuntimeError):
    """The worker ranks could not be started, or a stop was requested meanwhile."""


@dataclass(frozen=True)
class WorkerLaunch:
    """One worker rank: its torch device and the environment it adds to the node's."""

    rank: int
    device: str
    env: dict[str, str] = field(default_factory=dict)


def plan_workers(engine: EngineSettings) -> list[WorkerLaunch]:
    """Device and environment of ranks ``1 .. cfg_parallel - 1``.

    With ``engine.worker_gpus`` each worker sees only its GPU (``CUDA_VISIBLE_DEVICES``) as
    ``cuda:0``; without, a CUDA rank ``r`` uses the ``r``-th device after ``engine.device``, and
    a CPU node has CPU workers.

    Raises:
        ValueError: ``engine.worker_gpus`` does not name one GPU per worker.

    """
    count = engine.cfg_parallel - 1
    gpus = [gpu.strip() for gpu in engine.worker_gpus.split(',') if gpu.strip()]
    if gpus and len(gpus) != count:
        raise ValueError(
            f'engine.worker_gpus names {len(gpus)} GPUs for {count} worker rank(s): '
            f'{engine.worker_gpus!r}'
        )
    workers = []
    for rank in range(1, count + 1):
        if gpus:
            workers.append(WorkerLaunch(rank, 'cuda:0', {'CUDA_VISIBLE_DEVICES': gpus[rank - 1]}))
        elif engine.device.startswith('cuda'):
            index = int(engine.device.partition(':')[2] or 0)
            workers.append(WorkerLaunch(rank, f'cuda:{index + rank}'))
        else:
            workers.append(WorkerLaunch(rank, engine.device))
    return workers


def worker_command(engine: EngineSettings, worker: WorkerLaunch) -> list[str]:
    """The command line of a worker rank (the ``dreamzero-engine-worker`` console script)."""
    command = [
        sys.executable,
        '-m',
        WORKER_MODULE,
        '--checkpoint',
        engine.checkpoint,
        '--device',
        worker.device,
        '--dtype',
        engine.dtype,
        '--timeout',
        str(WORKER_IDLE_TIMEOUT),
    ]
    if engine.base_checkpoint:
        command += ['--base-checkpoint', engine.base_checkpoint]
    if engine.encoder_dir:
        command += ['--encoder-dir', engine.encoder_dir]
    return command


class EngineWorkers:
    """Rank 0's side of the worker ranks: start them and join the group; end them.

    ``stop_requested`` is polled while waiting for the workers (a node that is asked to stop
    during configure gives up at once).
    """

    def __init__(
        self,
        engine: EngineSettings,
        log: Callable[[str], None] = print,
        stop_requested: Callable[[], bool] = lambda: False,
    ) -> None:
        self.engine = engine
        self.log = log
        self.stop_requested = stop_requested
        self.processes: list[subprocess.Popen] = []
        self.port = 0
        self._store = None
        self._driver = None

    def start(self):
        """Start the workers, wait for them to load, join as rank 0; the engine's layout.

        Returns:
            the :class:`~dreamzero_ros.engine.cfg_parallel.ParallelDriver` to build the engine
            with.

        Raises:
            WorkerStartError: a worker exited, the wait timed out, or a stop was requested; the
                workers started are ended.

        """
        from dreamzero_ros.engine import cfg_parallel

        try:
            self._open_store()
            for rank in range(1, self.engine.cfg_parallel):  # a reused port's earlier run
                self._store.delete_key(cfg_parallel.loaded_key(rank))
            world_size = self.engine.cfg_parallel
            for worker in plan_workers(self.engine):
                rendezvous = {
                    'RANK': str(worker.rank),
                    'WORLD_SIZE': str(world_size),
                    'MASTER_ADDR': self.engine.master_addr,
                    'MASTER_PORT': str(self.port),
                }
                self.processes.append(
                    subprocess.Popen(
                        worker_command(self.engine, worker),
                        env={**os.environ, **rendezvous, **worker.env},
                        preexec_fn=die_with_parent(),
                    )
                )
            self.log(
                f'CFG parallel: rank 0 of {world_size}, started worker rank(s) '
                f'{[p.pid for p in self.processes]}, rendezvous '
                f'{self.engine.master_addr}:{self.port}'
            )
            self._wait_loaded(cfg_parallel.loaded_key)
            self._driver = cfg_parallel.connect_driver(
                self.engine.master_addr,
                self.port,
                device=self.engine.device,
                world_size=world_size,
                timeout_s=self.engine.worker_timeout,
            )
        except BaseException:
            self.close()
            raise
        return self._driver

    def _open_store(self) -> None:
        """Rank 0's rendezvous store; the group's join reuses it (same host and port)."""
        import torch.distributed as dist

        from dreamzero_ros.engine.cfg_parallel import free_port

        timeout = datetime.timedelta(seconds=self.engine.worker_timeout)
        address, fixed = self.engine.master_addr, self.engine.master_port
        for attempt in range(1 if fixed else _PORT_TRIES):
            self.port = fixed or free_port(address)
            try:
                self._store = dist.TCPStore(
                    address,
                    self.port,
                    is_master=True,
                    multi_tenant=True,
                    wait_for_workers=False,
                    timeout=timeout,
                )
                return
            except RuntimeError as error:  # the port was taken meanwhile
                if fixed or attempt == _PORT_TRIES - 1:
                    raise WorkerStartError(
                        f'cannot open the rendezvous at {address}:{self.port}: {error}'
                    ) from error

    def _wait_loaded(self, loaded_key: Callable[[int], str]) -> None:
        keys = [loaded_key(rank) for rank in range(1, self.engine.cfg_parallel)]
        deadline = time.monotonic() + self.engine.worker_timeout
        while not self._store.check(keys):
            for rank, process in enumerate(self.processes, start=1):
                if process.poll() is not None:
                    raise WorkerStartError(
                        f'engine worker rank {rank} exited with status {process.returncode} '
                        'before it had loaded the checkpoint (see its output above)'
                    )
            if self.stop_requested():
                raise WorkerStartError('stop requested while the engine workers were loading')
            if time.monotonic() > deadline:
                raise WorkerStartError(
                    f'the engine workers did not load within engine.worker_timeout '
                    f'({self.engine.worker_timeout} s)'
                )
            time.sleep(_POLL_PERIOD)

    def close(self) -> None:
        """End the workers and leave the group; idempotent.

        Joined workers get the shutdown command and are killed if they have not exited
        :data:`WORKER_EXIT_TIMEOUT` seconds later; workers that never joined are killed at once.
        """
        import torch.distributed as dist

        joined = self._driver is not None
        if joined:
            try:
                self._driver.shutdown()
            finally:
                self._driver = None
                dist.destroy_process_group()
        for process in self.processes:
            if not joined:  # still loading or waiting to join: nothing to end cleanly
                process.kill()
            try:
                process.wait(WORKER_EXIT_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.processes = []
        self._store = None
