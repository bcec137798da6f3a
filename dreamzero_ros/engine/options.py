# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Every engine option a user sets, declared once: name, type, choices, default, help, range.

:class:`EngineOptions` is the one declaration, and the one object that carries the options: the
policy node's ``engine.*`` parameters
(:class:`~dreamzero_ros.core.config.node_parameters.EngineSettings` extends it with the node's own),
the command-line options of every tool that loads an engine (:func:`.loader.add_engine_arguments`)
and the engine launch arguments are generated from its fields
(:mod:`~dreamzero_ros.parameter_schema`); the parsed instance is handed to the engine whole
(:func:`.loader.load_engine`), whose parts read the fields they need, and to its worker ranks as a
command line (:meth:`EngineOptions.arguments`).  Free of torch, so that command lines and parameter
declarations can offer them without loading it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING

from dreamzero_ros.engine.option_names import (
    ATTENTION_BACKENDS,
    DTYPE_NAMES,
    FP8_MODES,
    IMAGE_ENCODER_PLACEMENTS,
    KV_CACHE_KINDS,
    STEP_CACHE_MODES,
    TEXT_ENCODER_PLACEMENTS,
)
from dreamzero_ros.errors import ConfigError, DeviceUnavailableError
from dreamzero_ros.parameter_schema import (
    Kind,
    ParameterSpec,
    argument_values,
    build,
    flag,
    parameter,
    parameter_specs,
)

if TYPE_CHECKING:
    import argparse
    from collections.abc import Collection

__all__ = [
    'AUTO',
    'ENGINE_OPTION_SECTIONS',
    'EngineOptions',
    'check_device',
    'engine_option_specs',
    'resolve_device_dtype',
]

#: ``device`` / ``dtype``: CUDA where present, else the CPU; bfloat16 on CUDA, float32 on the CPU.
AUTO = 'auto'
#: Bytes in a GiB (``memory_budget_gib``).
_GIB = 2**30


def resolve_device_dtype(device: str, dtype: str) -> tuple[str, str]:
    """The device and dtype an engine runs with, either or both given as ``auto``.

    ``device``, or (``auto``) CUDA where present, else the CPU; ``dtype``, or (``auto``)
    bfloat16 on CUDA and float32 on the CPU (where bfloat16 kernels are slow).  Imports torch.
    """
    import torch

    if device == AUTO:
        device = 'cuda' if torch.cuda.is_available() else 'cpu'
    if dtype == AUTO:
        dtype = 'float32' if torch.device(device).type == 'cpu' else 'bfloat16'
    return device, dtype


@dataclass(frozen=True)
class EngineOptions:
    """The engine options (the defaults: the reference path, everything on the device)."""

    device: str = parameter(
        AUTO, 'Torch device of rank 0, e.g. cpu or cuda:0; auto: cuda if present, else cpu.'
    )
    dtype: str = parameter(
        AUTO,
        'Weight and activation dtype; auto: bfloat16 on CUDA, float32 on the CPU.',
        choices=(AUTO, *DTYPE_NAMES),
    )
    num_threads: int = parameter(0, 'torch CPU threads; 0 leaves the default.', range=(0, 1024))
    base_checkpoint: str = parameter(
        '', 'The base checkpoint of a LoRA-only checkpoint; empty: none.'
    )
    encoder_dir: str = parameter(
        '',
        'Folder of the Wan2.1 encoder files, for a checkpoint that carries no encoder weights; '
        'empty: the checkpoint folder.',
    )
    embodiment_tag: str = parameter(
        '',
        "Embodiment of the checkpoint's experiment_cfg/metadata.json to drive, where it holds "
        'several; empty: its only one.',
    )
    embodiment_file: str = parameter(
        '',
        'Embodiment file (YAML: cameras, state and action keys, statistics, prompt template) '
        "for a checkpoint without experiment_cfg/ (docs/embodiments.md); empty: the checkpoint's.",
    )
    prompt_template: str = parameter(
        '',
        'Prompt template with {instruction}, for an embodiment upstream has none for; empty: '
        "upstream's for the tag.",
    )
    step_cache: str = parameter(
        'static',
        'Which denoising steps run the DiT: static (upstream default, 8 of 16), dynamic '
        '(skips steps whose velocities agree) or full (all 16, the reference).',
        choices=STEP_CACHE_MODES,
    )
    compile: bool = parameter(
        False, 'torch.compile the DiT blocks and VAE norms (GPU: slower first chunk, faster after).'
    )
    fp8_linear: str = parameter(
        'off',
        'DiT block linears held and run in FP8 e4m3 instead of the dtype (Hopper GPUs; needs '
        'bfloat16; 16 GB less memory for the 14B model); off is the reference.',
        choices=FP8_MODES,
    )
    attention_backend: str = parameter(
        'auto',
        'Attention kernel: auto (torch chooses), cudnn, flash, efficient, math, or fa3 '
        '(FlashAttention-3 on Hopper; needs the flash_attn_3 package).',
        choices=ATTENTION_BACKENDS,
    )
    compile_cache: str = parameter(
        '',
        'Folder of the persistent torch.compile cache (compile), so that a restarted process '
        "compiles from disk; empty: $XDG_CACHE_HOME/dreamzero_ros/torch_compile; off: torch's "
        'own (/tmp).',
    )
    text_encoder: str = parameter(
        'device',
        'Where umT5 (11 GB in bf16) lives: device, cpu (encodes there; prompts are cached) or '
        'offload (host memory, streamed to the GPU block by block when a prompt is new).',
        choices=TEXT_ENCODER_PLACEMENTS,
    )
    image_encoder: str = parameter(
        'device',
        'Where CLIP (1.3 GB) lives: device, or offload (streamed when a context window starts).',
        choices=IMAGE_ENCODER_PLACEMENTS,
    )
    kv_cache: str = parameter(
        'model',
        'Precision of the DiT K/V cache: model (the dtype) or fp8 (about half the memory).',
        choices=KV_CACHE_KINDS,
    )
    memory_budget_gib: float = parameter(
        0.0,
        'GPU memory the engine may use, GiB; loading refuses a configuration whose estimate is '
        "larger. 0: the GPU's free memory when the engine loads.",
        range=(0.0, 4096.0),
    )
    cfg_parallel: int = parameter(
        1,
        'CFG branches on ranks of their own: 2 runs the unconditional branch on other ranks '
        '(dreamzero-engine-worker processes started with the engine and ended with it).',
        range=(1, 2),
    )
    tensor_parallel: int = parameter(
        1,
        "Ranks each CFG branch's DiT is split over (attention heads and FFN columns; it must "
        'divide both, e.g. 1, 2, 4 or 8 for DROID). The engine runs on cfg_parallel x '
        'tensor_parallel ranks, one device each: this process is rank 0 and starts the others.',
        range=(1, 8),
    )
    worker_gpus: str = parameter(
        '',
        'CUDA_VISIBLE_DEVICES of each worker rank, comma-separated (rank 1 first, one per rank '
        'after this process); each then uses cuda:0. Empty: workers use the devices after '
        'device (cuda:0 -> cuda:1, ...), or the CPU.',
    )
    worker_timeout: float = parameter(
        600.0,
        'Longest wait, seconds, for the worker ranks to load and join, and for any collective '
        'operation between the ranks.',
        range=(1.0, 3600.0),
    )

    def __post_init__(self) -> None:
        """Every value checked as its parameter is (type, choices, range): ConfigError."""
        for spec in parameter_specs(type(self)):
            try:
                spec.check(getattr(self, spec.name))
            except ValueError as error:
                raise ConfigError(str(error)) from error

    @classmethod
    def from_arguments(
        cls, args: argparse.Namespace, names: Collection[str] | None = None
    ) -> EngineOptions:
        """The options of a command line made by :func:`.loader.add_engine_arguments`.

        ``names``: the options it added (field names), the others keep their defaults; None:
        every one. The device is not checked here (rank 0 carries its workers' devices): the
        process that uses it does, with :func:`check_device`.

        Raises:
            ConfigError: an option's value is invalid, naming it.

        """
        specs = [spec for spec in engine_option_specs() if names is None or spec.name in names]
        return build(cls, argument_values(args, specs))

    def resolved(self) -> EngineOptions:
        """The same options, ``device`` and ``dtype`` resolved (:func:`resolve_device_dtype`)."""
        device, dtype = resolve_device_dtype(self.device, self.dtype)
        if (device, dtype) == (self.device, self.dtype):
            return self
        return replace(self, device=device, dtype=dtype)

    @property
    def memory_budget(self) -> int | None:
        """``memory_budget_gib`` in bytes; None for 0 (the GPU's free memory)."""
        return int(self.memory_budget_gib * _GIB) if self.memory_budget_gib > 0 else None

    def arguments(self) -> list[str]:
        """The command line of these options that :meth:`from_arguments` reads back.

        Every engine option (not the fields a subclass adds), each with its value.
        """
        command = []
        for spec in engine_option_specs():
            value = getattr(self, spec.name)
            if spec.kind is Kind.BOOL:
                command.append(flag(spec) if value else '--no-' + flag(spec)[2:])
            else:  # one word: a value that starts with '-' is not taken for an option
                command.append(f'{flag(spec)}={value}')
        return command

    def engine_fields(self) -> dict[str, object]:
        """``name -> value`` of the engine options alone (not the fields a subclass adds)."""
        return {item.name: getattr(self, item.name) for item in fields(EngineOptions)}


def engine_option_specs() -> tuple[ParameterSpec, ...]:
    """The specs of :class:`EngineOptions`, named by field (``device``, ``fp8_linear``, ...)."""
    return parameter_specs(EngineOptions)


#: Command-line sections: title -> the options it shows, in order (every option in one).
ENGINE_OPTION_SECTIONS: dict[str, tuple[str, ...]] = {
    'engine device': ('device', 'dtype', 'num_threads'),
    'checkpoint and robot (docs/embodiments.md)': (
        'base_checkpoint',
        'encoder_dir',
        'embodiment_tag',
        'embodiment_file',
        'prompt_template',
    ),
    'engine speed (docs/performance.md)': (
        'step_cache',
        'compile',
        'fp8_linear',
        'attention_backend',
        'compile_cache',
    ),
    'engine memory (docs/performance.md)': (
        'text_encoder',
        'image_encoder',
        'kv_cache',
        'memory_budget_gib',
    ),
    'parallel engine (docs/policy_node.md)': (
        'cfg_parallel',
        'tensor_parallel',
        'worker_gpus',
        'worker_timeout',
    ),
}


def check_device(device: str, name: str = 'device') -> None:
    """Refuse, in one line, a ``device`` that torch cannot use here (``name``: the option).

    ``auto`` and ``cpu`` pass without importing torch; a CUDA device needs a torch built with
    CUDA and that device visible.

    Raises:
        ConfigError: ``device`` is not a torch device name.
        DeviceUnavailableError: no CUDA in this torch, or no such CUDA device.

    """
    if device in (AUTO, 'cpu'):
        return
    import torch

    try:
        parsed = torch.device(device)
    except RuntimeError as error:
        raise ConfigError(f'{name} {device!r}: {error}') from None
    if parsed.type != 'cuda':
        return
    if not torch.backends.cuda.is_built():
        raise DeviceUnavailableError(
            f'{name} {device}: this torch ({torch.__version__}) is built without CUDA; use '
            f'{name} cpu or auto, or install a CUDA build of torch'
        )
    count = torch.cuda.device_count()
    if count == 0 or (parsed.index or 0) >= count:
        raise DeviceUnavailableError(
            f'{name} {device}: {count} CUDA device(s) visible here (CUDA_VISIBLE_DEVICES, '
            f'driver); use {name} cpu or auto, or one of cuda:0..cuda:{max(count - 1, 0)}'
        )
