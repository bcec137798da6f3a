# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Starting the worker ranks of a multi-process engine, and ending them.

An engine of ``cfg_parallel x tensor_parallel`` ranks (:class:`EngineRanks`: CFG branches on
their own ranks, the DiT split over ``tensor_parallel`` ranks per branch) runs rank 0 in the
process that serves it (the node, ``dreamzero-openpi-server``, ``dreamzero-replay``), which
starts ranks 1 .. N-1 itself as ``dreamzero-engine-worker`` child processes (:mod:`.worker`),
each with rank 0's engine options on its command line: every configure (or start) runs fresh
workers on a fresh rendezvous port (``master_port`` 0 chooses a free one, so two nodes on one
host do not collide), and every cleanup ends them.  A worker dies with its parent (parent-death
signal, :func:`die_with_parent`), so a killed node leaves no worker behind.

Devices: one per rank, rank 0 on ``device``; the workers on the GPUs named in ``worker_gpus``
(each sees only its own) or on the CUDA devices after rank 0's, checked against the devices
visible before anything starts; with a CPU ``device``, on the CPU (gloo).

Start-up: rank 0 opens the rendezvous store, starts the workers, and waits (polling, so that a
stop request is seen at once) until each has loaded its weights; a worker that exits meanwhile
fails the start at once with its exit status.  Then all ranks join the process group.  Free of
torch until a start: the tools that offer these options import it when an engine loads.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
import ctypes
import ctypes.util
from dataclasses import dataclass, field, replace
import datetime
import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, TypeVar

from dreamzero_ros.engine.options import EngineOptions, check_device
from dreamzero_ros.errors import WorkerStartError
from dreamzero_ros.log_forwarding import forwarded_logs

__all__ = [
    'WORKER_EXIT_TIMEOUT',
    'WORKER_IDLE_TIMEOUT',
    'EngineRanks',
    'EngineWorkers',
    'WorkerLaunch',
    'die_with_parent',
    'load_from_arguments',
    'load_on_ranks',
    'plan_workers',
    'worker_command',
]

T = TypeVar('T')

#: Seconds a worker gets to leave after the shutdown command before it is killed.
WORKER_EXIT_TIMEOUT = 10.0
#: A worker's collective timeout, seconds: it waits for rank 0's next command for as long as the
#: node stays configured (inactive for hours, say); it ends with the node anyway (parent-death
#: signal, or rank 0's closed connection). Rank 0 keeps ``worker_timeout``.
WORKER_IDLE_TIMEOUT = 30 * 24 * 3600.0
_POLL_PERIOD = 0.1
_PORT_TRIES = 5
_PR_SET_PDEATHSIG = 1
_LIBC = (
    ctypes.CDLL(ctypes.util.find_library('c'), use_errno=True) if sys.platform == 'linux' else None
)


@dataclass(frozen=True)
class EngineRanks:
    """The ranks of a multi-process engine: the weights they load, rank 0's options, rendezvous.

    ``options``: rank 0's engine options, whole (``device`` and ``dtype`` resolved); the
    workers get them on their command line, each with its own device.
    """

    checkpoint: str
    options: EngineOptions = EngineOptions()
    master_addr: str = '127.0.0.1'
    master_port: int = 0  # 0: a free port at every start

    def __post_init__(self) -> None:
        if self.world_size > 1 and not self.checkpoint:
            raise ValueError(f'{self.describe()} need a checkpoint folder (the workers load it)')

    @property
    def world_size(self) -> int:
        """Ranks in all: ``cfg_parallel x tensor_parallel``."""
        return self.options.cfg_parallel * self.options.tensor_parallel

    def describe(self) -> str:
        """``cfg_parallel 2 x tensor_parallel 2 = 4 ranks``."""
        options = self.options
        return (
            f'cfg_parallel {options.cfg_parallel} x tensor_parallel {options.tensor_parallel} = '
            f'{self.world_size} rank{"s" if self.world_size > 1 else ""}'
        )


@dataclass(frozen=True)
class WorkerLaunch:
    """One worker rank: its torch device and the environment it adds to the node's."""

    rank: int
    device: str
    env: dict[str, str] = field(default_factory=dict)


def plan_workers(ranks: EngineRanks, cuda_devices: int) -> list[WorkerLaunch]:
    """Device and environment of ranks ``1 .. world_size - 1``, one device each.

    With ``worker_gpus`` each worker sees only its GPU (``CUDA_VISIBLE_DEVICES``) as ``cuda:0``;
    without, a CUDA rank ``r`` uses the ``r``-th device after rank 0's, which must be among the
    ``cuda_devices`` visible; CPU ranks stay on the CPU.

    Raises:
        ValueError: ``worker_gpus`` does not name one GPU per worker, names GPUs for a CPU
            engine, or rank 0's device or the devices after it are not there.

    """
    count = ranks.world_size - 1
    options = ranks.options
    gpus = [gpu.strip() for gpu in options.worker_gpus.split(',') if gpu.strip()]
    on_cuda = options.device.startswith('cuda')
    if gpus and len(gpus) != count:
        raise ValueError(
            f'worker_gpus names {len(gpus)} GPU(s) for {count} worker rank(s) '
            f'({ranks.describe()}): {options.worker_gpus!r}'
        )
    if gpus and not on_cuda:
        raise ValueError(
            f'worker_gpus names GPUs but rank 0 runs on {options.device!r}: all ranks need CUDA '
            'devices, or all the CPU'
        )
    index = int(options.device.partition(':')[2] or 0) if on_cuda else 0
    if on_cuda and not gpus and index + count >= cuda_devices:
        raise ValueError(
            f'{ranks.describe()} need one GPU each, cuda:{index} .. cuda:{index + count}, but '
            f'{cuda_devices} CUDA device(s) are visible; name the GPUs of the worker ranks in '
            'worker_gpus (the launch file: gpus:=), or use fewer ranks'
        )
    if on_cuda and gpus and index >= cuda_devices:
        raise ValueError(
            f'rank 0 of {ranks.describe()} runs on {options.device}, but {cuda_devices} CUDA '
            'device(s) are visible; use a visible device, or the CPU for every rank'
        )
    workers = []
    for rank in range(1, count + 1):
        if gpus:
            workers.append(WorkerLaunch(rank, 'cuda:0', {'CUDA_VISIBLE_DEVICES': gpus[rank - 1]}))
        elif on_cuda:
            workers.append(WorkerLaunch(rank, f'cuda:{index + rank}'))
        else:
            workers.append(WorkerLaunch(rank, options.device))
    return workers


def worker_command(ranks: EngineRanks, worker: WorkerLaunch) -> list[str]:
    """The command line of a worker rank (the ``dreamzero-engine-worker`` console script).

    Rank 0's options, every one, with the worker's device.
    """
    from dreamzero_ros.engine.workers import worker as worker_module

    options = replace(ranks.options, device=worker.device)
    return [
        sys.executable,
        '-m',
        worker_module.__name__,
        '--checkpoint',
        ranks.checkpoint,
        '--timeout',
        str(WORKER_IDLE_TIMEOUT),
        *options.arguments(),
    ]


class EngineWorkers:
    """Rank 0's side of the worker ranks: start them and join the group; end them.

    ``stop_requested`` is polled while waiting for the workers (a node that is asked to stop
    during configure gives up at once).
    """

    def __init__(
        self,
        ranks: EngineRanks,
        log: Callable[[str], None] = print,
        stop_requested: Callable[[], bool] = lambda: False,
    ) -> None:
        self.ranks = ranks
        self.log = log
        self.stop_requested = stop_requested
        self.processes: list[subprocess.Popen] = []
        self.port = 0
        self._store = None
        self._driver = None

    def start(self):
        """Start the workers, wait for them to load, join as rank 0; the engine's layout.

        Returns:
            the :class:`~.driver.ParallelDriver` to build the engine with.

        Raises:
            ValueError: the devices of the ranks are not there (nothing is started).
            WorkerStartError: a worker exited, the wait timed out, or a stop was requested; the
                workers started are ended.

        """
        import torch

        from dreamzero_ros.engine.workers.driver import connect_driver
        from dreamzero_ros.engine.workers.protocol import loaded_key

        ranks = self.ranks
        workers = plan_workers(ranks, torch.cuda.device_count())
        try:
            self._open_store()
            for worker in workers:  # a reused port's earlier run
                self._store.delete_key(loaded_key(worker.rank))
            for worker in workers:
                rendezvous = {
                    'RANK': str(worker.rank),
                    'WORLD_SIZE': str(ranks.world_size),
                    'MASTER_ADDR': ranks.master_addr,
                    'MASTER_PORT': str(self.port),
                }
                self.processes.append(
                    subprocess.Popen(
                        worker_command(ranks, worker),
                        env={**os.environ, **rendezvous, **worker.env},
                        preexec_fn=die_with_parent(),
                    )
                )
            self.log(
                f'parallel engine ({ranks.describe()}): rank 0 on {ranks.options.device}, started '
                f'worker rank(s) {[p.pid for p in self.processes]} on '
                f'{[w.env.get("CUDA_VISIBLE_DEVICES", w.device) for w in workers]}, rendezvous '
                f'{ranks.master_addr}:{self.port}'
            )
            self._wait_loaded(loaded_key)
            self._driver = connect_driver(
                ranks.master_addr,
                self.port,
                device=ranks.options.device,
                world_size=ranks.world_size,
                tp_size=ranks.options.tensor_parallel,
                timeout_s=ranks.options.worker_timeout,
            )
        except BaseException:
            self.close()
            raise
        return self._driver

    def _open_store(self) -> None:
        """Rank 0's rendezvous store; the group's join reuses it (same host and port)."""
        import torch.distributed as dist

        from dreamzero_ros.engine.workers.protocol import free_port

        timeout = datetime.timedelta(seconds=self.ranks.options.worker_timeout)
        address, fixed = self.ranks.master_addr, self.ranks.master_port
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
        keys = [loaded_key(rank) for rank in range(1, self.ranks.world_size)]
        deadline = time.monotonic() + self.ranks.options.worker_timeout
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
                    f'the engine workers did not load within the worker timeout '
                    f'({self.ranks.options.worker_timeout} s)'
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


def load_on_ranks(
    ranks: EngineRanks,
    load: Callable[[Any], T],
    log: Callable[[str], None] = print,
    stop_requested: Callable[[], bool] = lambda: False,
) -> tuple[T, Callable[[], None] | None]:
    """``load(layout)`` as rank 0 of ``ranks``, the workers started first.

    With one rank, ``load(None)``.  Returns what ``load`` returned (the engine) and the function
    that ends the workers and leaves the group (None with one rank); a failing ``load`` ends
    them before the error propagates.
    """
    if ranks.world_size == 1:
        return load(None), None
    workers = EngineWorkers(ranks, log, stop_requested)
    driver = workers.start()
    try:
        return load(driver), workers.close
    except BaseException:
        workers.close()
        raise


def load_from_arguments(
    args: argparse.Namespace, log: Callable[[str], None] = print, **changes: Any
) -> tuple[Any, Callable[[], None] | None]:
    """The engine a command line names, on the ranks it asks for; and what ends the workers.

    ``args`` holds ``checkpoint`` or ``preset`` and the options of
    :func:`~dreamzero_ros.engine.loader.add_engine_arguments`; ``changes`` are further
    :class:`~dreamzero_ros.engine.config.EngineConfig` fields (``max_sessions``).  With more
    than one rank this process is rank 0 and starts the others; a ``preset``'s random weights
    are then written to a temporary checkpoint folder that every rank loads (and that is removed
    once they have).
    """
    from dreamzero_ros.engine.checkpoint.random_checkpoint import write_random_checkpoint
    from dreamzero_ros.engine.loader import RANDOM_PRESETS, load_engine

    options = EngineOptions.from_arguments(args)
    if options.cfg_parallel * options.tensor_parallel == 1:
        # with more ranks, plan_workers refuses their devices first, before any worker starts
        check_device(options.device, '--device')
    options = options.resolved()

    def load(layout: Any, checkpoint: str | None, preset: str | None) -> Any:
        with forwarded_logs(log):  # a line per checkpoint file read
            return load_engine(checkpoint, options, preset=preset, layout=layout, **changes)

    if options.cfg_parallel * options.tensor_parallel == 1:
        return load(None, args.checkpoint, args.preset), None
    with tempfile.TemporaryDirectory(prefix='dreamzero-ranks-') as folder:
        checkpoint = args.checkpoint
        if checkpoint is None:
            if args.preset not in RANDOM_PRESETS:
                raise ValueError(f'random weights come in presets {RANDOM_PRESETS}')
            checkpoint = str(write_random_checkpoint(folder, preset=args.preset))
        ranks = EngineRanks(checkpoint=str(checkpoint), options=options)
        return load_on_ranks(ranks, lambda layout: load(layout, checkpoint, None), log)


def die_with_parent(signum: int = signal.SIGKILL) -> Callable[[], None]:
    """A ``subprocess.Popen`` ``preexec_fn`` that has the child get ``signum`` when the parent dies.

    Also ends the child at once when the parent is already gone. Does nothing off Linux.
    """
    parent = os.getpid()
    prctl = _LIBC.prctl if _LIBC is not None else None

    def preexec() -> None:
        if prctl is None:
            return
        prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the signal was armed
            os.kill(os.getpid(), signum)

    return preexec
