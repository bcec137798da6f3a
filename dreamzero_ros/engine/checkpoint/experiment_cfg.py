# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A checkpoint's ``experiment_cfg/``: the embodiment it was trained for, read and written.

Upstream's training run saves, next to the weights::

    experiment_cfg/conf.yaml       the hydra training config, resolved (OmegaConf.save)
    experiment_cfg/metadata.json   per embodiment tag: statistics and modality metadata

:func:`embodiment_from_checkpoint` turns them into an :class:`~.embodiment.Embodiment`:

* the tag is the one embodiment of ``metadata.json`` (the datasets the run trained on), or the
  one asked for where it holds several;
* ``conf.yaml``'s ``modality_configs[tag]`` names the video, state and action keys, and its
  ``transforms[tag]`` gives their order (``ConcatTransform``), the centre crop (``VideoCrop``),
  the view size (``VideoResize``) and each key's normalisation (``StateActionTransform``);
  ``relative_action_keys`` says which actions are relative; ``fps[tag]`` the control rate;
* ``metadata.json`` gives each camera's dataset resolution, each key's width and statistics;
* the stitch layout and the prompt template follow upstream's ``DreamTransform`` and collator
  for the tags it knows; any other tag needs the template its run was trained with.

Transforms that change what the model sees at inference and that this engine does not
implement (rotation conversions, per-horizon relative actions, unknown transform classes) are
refused by name rather than skipped.  A checkpoint without ``experiment_cfg/`` (a fine-tuning
base) is refused with what to supply: an embodiment file.

:func:`write_experiment_cfg` writes both files in upstream's layout for an embodiment.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
import json
from pathlib import Path
from typing import Any

import yaml

from dreamzero_ros.engine.checkpoint.data_files import read_json_object, read_yaml
from dreamzero_ros.engine.embodiment import INSTRUCTION, Embodiment
from dreamzero_ros.errors import EmbodimentError, MetadataError

__all__ = [
    'CONF_FILE',
    'EXPERIMENT_DIR',
    'KNOWN_PROMPT_TEMPLATES',
    'METADATA_JSON',
    'embodiment_from_checkpoint',
    'embodiment_from_training_config',
    'load_embodiment_file',
    'load_metadata',
    'write_experiment_cfg',
]

EXPERIMENT_DIR = 'experiment_cfg'
CONF_FILE = 'conf.yaml'
METADATA_JSON = 'metadata.json'

_MULTI_VIEW = 'A multi-view video shows that a robot ' + INSTRUCTION
_FOUR_VIEWS = (
    ' The video is split into four views: The top-left view shows the camera view from the '
    "robot's head, the top-right view shows the camera view from the right hand, the bottom-left "
    'view shows the camera view from the left hand, and the bottom-right view is a black screen '
    '(inactive view). The robot ' + INSTRUCTION
)
#: Prompt templates of the tags upstream's collator knows (``agibot`` when multi-view).
KNOWN_PROMPT_TEMPLATES: dict[str, str] = {
    'oxe_droid': _MULTI_VIEW
    + " The video is split into three views: The top view shows the camera view from the robot's"
    ' wrist, the bottom-left view shows the camera view from the left exterior camera, and the'
    ' bottom-right view shows the camera view from the right exterior camera. During training,'
    ' one of the two bottom exterior views may be a black screen (dropped view). The robot '
    + INSTRUCTION,
    'agibot': _MULTI_VIEW + _FOUR_VIEWS,
    'xdof': _MULTI_VIEW + _FOUR_VIEWS,
    'yam': _MULTI_VIEW
    + ' The video is split into four views: The top-left view shows the top camera, the'
    ' top-right view shows the right camera, the bottom-left view shows the left camera, and the'
    ' bottom-right view is a black screen. The robot ' + INSTRUCTION,
    'gr1_unified': 'A single view video shows that a human ' + INSTRUCTION,
    'mecka_hands': 'A single view video shows that a human ' + INSTRUCTION,
}
_SINGLE_VIEW_UNKNOWN = frozenset({'agibot'})

_PREFIX = 'groot.vla.data.transform.'
_VIDEO_CROP = _PREFIX + 'VideoCrop'
_VIDEO_RESIZE = _PREFIX + 'VideoResize'
_STATE_ACTION = _PREFIX + 'StateActionTransform'
_CONCAT = _PREFIX + 'ConcatTransform'
_DREAM = 'groot.vla.model.dreamzero.transform.dreamzero_cotrain.DreamTransform'
#: Transforms that do nothing at inference, or nothing this engine does not do itself.
_INFERENCE_NO_OPS = frozenset(
    _PREFIX + name
    for name in (
        'VideoToTensor VideoToNumpy VideoColorJitter VideoGrayscale VideoRandomGrayscale'
        ' VideoRandomPosterize VideoRandomRotation VideoHorizontalFlip VideoRandomErasing'
        ' StateActionToTensor'
    ).split()
) | {_DREAM}


def load_metadata(path: str | Path) -> dict[str, Any]:
    """Read ``metadata.json``; a missing or unparsable file is a :class:`MetadataError`."""
    missing = f'missing statistics file {path}'
    return read_json_object(path, MetadataError, missing, 'a JSON object keyed by embodiment tag')


def load_embodiment_file(
    path: str | Path, statistics: Mapping[str, Any] | None = None
) -> Embodiment:
    """Read an embodiment file (YAML); see :meth:`Embodiment.from_mapping`."""
    path = Path(path)
    return Embodiment.from_mapping(read_yaml(path, EmbodimentError), str(path), statistics)


def embodiment_from_checkpoint(
    folder: str | Path,
    tag: str | None = None,
    embodiment_file: str | Path | None = None,
    prompt_template: str | None = None,
) -> Embodiment:
    """The embodiment of the checkpoint in ``folder``.

    Args:
        folder: checkpoint folder.
        tag: the embodiment tag, needed when ``metadata.json`` holds several.
        embodiment_file: an embodiment file (YAML) to use instead of ``conf.yaml``; its
            statistics default to ``metadata.json``'s for its tag.
        prompt_template: the prompt template, for a tag upstream has none for (or to
            replace upstream's).

    """
    folder = Path(folder)
    experiment = folder / EXPERIMENT_DIR
    metadata_path = experiment / METADATA_JSON
    if embodiment_file is not None:
        return _from_file(Path(embodiment_file), metadata_path, tag, prompt_template)
    conf_path = experiment / CONF_FILE
    missing = [p.name for p in (conf_path, metadata_path) if not p.is_file()]
    if missing:
        raise EmbodimentError(
            f'checkpoint {folder} has no {EXPERIMENT_DIR}/{" or ".join(missing)}, so it does not '
            'say which robot it drives (a fine-tuning base has none): supply an embodiment file '
            '(YAML: cameras, state and action keys with their statistics, prompt template; see '
            'docs/embodiments.md)'
        )
    metadata = load_metadata(metadata_path)
    tag = _choose_tag(metadata, tag, metadata_path)
    conf = read_yaml(conf_path, EmbodimentError)
    try:
        return embodiment_from_training_config(conf, metadata[tag], tag, prompt_template)
    except EmbodimentError as error:
        raise EmbodimentError(f'{conf_path}: {error}') from error


def _from_file(
    path: Path, metadata_path: Path, tag: str | None, prompt_template: str | None
) -> Embodiment:
    data = dict(_mapping(read_yaml(path, EmbodimentError), str(path)))
    if tag is not None and data.get('tag') != tag:
        raise EmbodimentError(f'{path} describes tag {data.get("tag")!r}, not {tag!r}')
    if prompt_template is not None:
        data['prompt_template'] = prompt_template
    statistics = None
    if 'statistics' not in data and metadata_path.is_file():
        entry = load_metadata(metadata_path).get(data.get('tag'))
        if isinstance(entry, Mapping):
            statistics = entry.get('statistics')
    return Embodiment.from_mapping(data, str(path), statistics)


def embodiment_from_training_config(
    conf: Any, entry: Any, tag: str, prompt_template: str | None = None
) -> Embodiment:
    """Build the embodiment ``tag`` from a parsed ``conf.yaml`` and its ``metadata.json`` entry."""
    conf = _mapping(conf, 'conf.yaml')
    entry = _mapping(entry, f'metadata.json[{tag!r}]')
    modality = _mapping(_mapping(conf.get('modality_configs'), 'modality_configs').get(tag), tag)
    keys = {
        group: _strip(_modality_keys(modality, group, tag), group)
        for group in ('video', 'state', 'action')
    }
    transforms = _transforms(conf, tag)
    concat = _single(transforms, _CONCAT, tag)
    if concat is not None:
        for group in ('video', 'state', 'action'):
            order = _strip(concat.get(f'{group}_concat_order', []), group)
            if sorted(order) != sorted(keys[group]):
                raise EmbodimentError(
                    f'transforms.{tag}: ConcatTransform {group} order {order} does not list the '
                    f'modality keys {keys[group]}'
                )
            keys[group] = order
    crop = _single(transforms, _VIDEO_CROP, tag)
    resize = _single(transforms, _VIDEO_RESIZE, tag)
    modes = _normalization_modes(transforms, tag)
    relative = _relative_keys(conf)
    modalities = _mapping(entry.get('modalities', {}), f'metadata.json[{tag!r}].modalities')
    statistics = _mapping(entry.get('statistics'), f'metadata.json[{tag!r}].statistics')
    cameras = [_camera(modalities, key, tag) for key in keys['video']]
    if resize is not None:
        view = {'height': resize.get('height'), 'width': resize.get('width')}
    else:
        view = {'height': cameras[0]['height'], 'width': cameras[0]['width']}
    view['crop_scale'] = 1.0 if crop is None else crop.get('scale')
    view['layout'] = _layout(tag, len(cameras))
    data = {
        'tag': tag,
        'control_hz': _control_hz(conf, modalities, tag),
        'cameras': cameras,
        'view': view,
        'state': [_key('state', k, modes, relative, modalities, statistics) for k in keys['state']],
        'action': [
            _key('action', k, modes, relative, modalities, statistics) for k in keys['action']
        ],
        'prompt_template': prompt_template or _prompt_template(tag, len(cameras)),
    }
    return Embodiment.from_mapping(data, f'embodiment {tag!r}', statistics)


# ---------------------------------------------------------------------- conf.yaml parts
def _choose_tag(metadata: Mapping[str, Any], tag: str | None, path: Path) -> str:
    tags = sorted(metadata)
    if tag is not None:
        if tag not in metadata:
            raise EmbodimentError(f'{path} has no embodiment {tag!r} (it has: {tags})')
        return tag
    if len(tags) != 1:
        raise EmbodimentError(
            f'{path} holds {len(tags)} embodiments {tags}: choose one with the embodiment tag '
            'parameter'
        )
    return tags[0]


def _modality_keys(modality: Mapping[str, Any], group: str, tag: str) -> list[str]:
    config = _mapping(modality.get(group), f'modality_configs.{tag}.{group}')
    keys = config.get('modality_keys')
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise EmbodimentError(f'modality_configs.{tag}.{group}.modality_keys must list strings')
    if group == 'video' and not keys:
        raise EmbodimentError(f'modality_configs.{tag}.video lists no cameras')
    return keys


def _strip(keys: Sequence[str], group: str) -> list[str]:
    prefix = group + '.'
    stripped = []
    for key in keys:
        if not isinstance(key, str) or not key.startswith(prefix):
            raise EmbodimentError(f'{group} key {key!r} does not start with {prefix!r}')
        stripped.append(key.removeprefix(prefix))
    return stripped


def _transforms(conf: Mapping[str, Any], tag: str) -> list[Mapping[str, Any]]:
    composed = _mapping(_mapping(conf.get('transforms'), 'transforms').get(tag), tag)
    items = composed.get('transforms')
    if not isinstance(items, list):
        raise EmbodimentError(f'transforms.{tag}.transforms must be a list')
    known = {_VIDEO_CROP, _VIDEO_RESIZE, _STATE_ACTION, _CONCAT} | _INFERENCE_NO_OPS
    for i, item in enumerate(items):
        target = _mapping(item, f'transforms.{tag}.transforms[{i}]').get('_target_')
        if target not in known:
            raise EmbodimentError(
                f'transforms.{tag}.transforms[{i}] is {target!r}, which this engine does not '
                'implement; write an embodiment file if the checkpoint runs without it'
            )
    return items


def _single(items: Sequence[Mapping[str, Any]], target: str, tag: str) -> Mapping | None:
    found = [item for item in items if item.get('_target_') == target]
    if len(found) > 1:
        raise EmbodimentError(f'transforms.{tag} has {len(found)} {target.rsplit(".", 1)[-1]}')
    return found[0] if found else None


def _normalization_modes(items: Sequence[Mapping[str, Any]], tag: str) -> dict[str, str]:
    modes: dict[str, str] = {}
    for item in items:
        if item.get('_target_') != _STATE_ACTION:
            continue
        if item.get('target_rotations'):
            raise EmbodimentError(
                f'transforms.{tag}: rotation conversions (target_rotations '
                f'{dict(item["target_rotations"])}) are not implemented'
            )
        modes.update(_mapping(item.get('normalization_modes', {}), 'normalization_modes'))
    return modes


def _relative_keys(conf: Mapping[str, Any]) -> set[str]:
    if conf.get('relative_action_per_horizon'):
        raise EmbodimentError(
            'relative_action_per_horizon (per-horizon statistics) is not implemented'
        )
    if not conf.get('relative_action'):
        return set()
    keys = conf.get('relative_action_keys') or []
    if not isinstance(keys, list):
        raise EmbodimentError('relative_action_keys must be a list')
    return set(keys)


def _camera(modalities: Mapping[str, Any], key: str, tag: str) -> dict[str, Any]:
    video = modalities.get('video', {})
    resolution = video.get(key, {}).get('resolution') if isinstance(video, Mapping) else None
    if not isinstance(resolution, list) or len(resolution) != 2:
        raise EmbodimentError(
            f'metadata.json[{tag!r}].modalities.video.{key}.resolution ([width, height]) is missing'
        )
    return {'key': key, 'height': resolution[1], 'width': resolution[0]}


def _layout(tag: str, views: int) -> str:
    if views > 3:
        raise EmbodimentError(
            f'{views} cameras: upstream stitches at most three views and drops the rest'
        )
    if views == 1:
        return 'single'
    return 'droid' if tag == 'oxe_droid' and views == 3 else 'grid'


def _control_hz(conf: Mapping[str, Any], modalities: Mapping[str, Any], tag: str) -> float:
    fps = conf.get('fps')
    if isinstance(fps, Mapping) and fps.get(tag) is not None:
        return fps[tag]
    video = modalities.get('video', {})
    rates = {v.get('fps') for v in video.values() if isinstance(v, Mapping)}
    rates.discard(None)
    if len(rates) != 1:
        raise EmbodimentError(
            f'no control rate: conf.yaml has no fps.{tag} and the cameras of metadata.json have '
            f'rates {sorted(rates)}'
        )
    return rates.pop()


def _key(
    group: str,
    key: str,
    modes: Mapping[str, str],
    relative: set[str],
    modalities: Mapping[str, Any],
    statistics: Mapping[str, Any],
) -> dict[str, Any]:
    """One key of the embodiment file schema; its width from the modality metadata."""
    meta = _mapping(modalities.get(group, {}), f'modalities.{group}').get(key)
    shape = meta.get('shape') if isinstance(meta, Mapping) else None
    if isinstance(shape, list) and len(shape) == 1:
        dim = shape[0]
    else:
        stats = _mapping(statistics.get(group, {}), f'statistics.{group}').get(key)
        widths = {len(v) for v in stats.values() if isinstance(v, list)} if stats else set()
        if len(widths) != 1:
            raise EmbodimentError(
                f'metadata.json gives no width for {group}.{key} (no modalities.{group}.{key}'
                '.shape and no statistics of one width)'
            )
        dim = widths.pop()
    entry = {'key': key, 'dim': dim, 'normalization': modes.get(f'{group}.{key}', 'none')}
    if group == 'action':
        entry['relative'] = key in relative
    return entry


def _prompt_template(tag: str, views: int) -> str:
    if tag in KNOWN_PROMPT_TEMPLATES and not (tag in _SINGLE_VIEW_UNKNOWN and views == 1):
        return KNOWN_PROMPT_TEMPLATES[tag]
    raise EmbodimentError(
        f'no prompt template is known for embodiment {tag!r}: upstream builds prompts for '
        f'{sorted(KNOWN_PROMPT_TEMPLATES)} only; supply the template your training run used '
        f'(with {INSTRUCTION} where the task goes)'
    )


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise EmbodimentError(f'{where} is missing or not a mapping')
    return value


# ---------------------------------------------------------------------- writing
def write_experiment_cfg(
    folder: str | Path,
    embodiments: Embodiment | Sequence[Embodiment],
    *,
    action_horizon: int = 24,
    num_frames: int = 33,
    train_architecture: str = 'full',
    save_lora_only: bool = False,
    pretrained_model_path: str | None = None,
) -> Path:
    """Write ``experiment_cfg/conf.yaml`` and ``metadata.json`` for ``embodiments``.

    ``conf.yaml`` holds the parts of upstream's resolved training config that describe
    embodiments and the run (``load_embodiment_file`` of :meth:`Embodiment.to_mapping` gives
    the same embodiment back).  Returns the ``experiment_cfg`` folder.
    """
    if isinstance(embodiments, Embodiment):
        embodiments = [embodiments]
    relative = sorted({key.key for e in embodiments for key in e.action if key.relative})
    first = embodiments[0]
    conf: dict[str, Any] = {
        'action_horizon': action_horizon,
        'num_frames': num_frames,
        'num_views': len(first.cameras),
        'image_resolution_height': first.view_size[0],
        'image_resolution_width': first.view_size[1],
        'max_state_dim': 64,
        'max_action_dim': 32,
        'train_architecture': train_architecture,
        'save_lora_only': save_lora_only,
        'pretrained_model_path': pretrained_model_path,
        'relative_action': bool(relative),
        'relative_action_keys': relative,
        'relative_action_per_horizon': False,
    }
    for e in embodiments:
        conf[f'modality_config_{e.tag}'] = _modality_config(e, action_horizon)
        conf[f'transform_{e.tag}'] = _transform(e)
    conf['modality_configs'] = {e.tag: conf[f'modality_config_{e.tag}'] for e in embodiments}
    conf['transforms'] = {e.tag: conf[f'transform_{e.tag}'] for e in embodiments}
    conf['metadata_versions'] = {e.tag: '0221' for e in embodiments}
    conf['fps'] = {e.tag: e.control_hz for e in embodiments}
    experiment = Path(folder) / EXPERIMENT_DIR
    experiment.mkdir(parents=True, exist_ok=True)
    (experiment / CONF_FILE).write_text(yaml.safe_dump(conf, sort_keys=False))
    metadata = {e.tag: _metadata_entry(e) for e in embodiments}
    (experiment / METADATA_JSON).write_text(json.dumps(metadata, indent=4) + '\n')
    return experiment


def _modality_config(e: Embodiment, action_horizon: int) -> dict[str, Any]:
    def config(keys: list[str], **indices: Any) -> dict[str, Any]:
        return {
            '_target_': 'groot.vla.data.dataset.ModalityConfig',
            **indices,
            'modality_keys': keys,
        }

    return {
        'video': config(_video_keys(e), delta_indices=list(range(25)), eval_delta_indices=[0]),
        'state': config([f'state.{k.key}' for k in e.state], delta_indices=[0]),
        'action': config(
            [f'action.{k.key}' for k in e.action], delta_indices=list(range(action_horizon))
        ),
        'language': config(['annotation.task'], delta_indices=[0]),
    }


def _video_keys(e: Embodiment) -> list[str]:
    return [f'video.{key}' for key in e.camera_keys]


def _transform(e: Embodiment) -> dict[str, Any]:
    video = _video_keys(e)
    state = [f'state.{k.key}' for k in e.state]
    action = [f'action.{k.key}' for k in e.action]

    def modes(group: str, keys: Sequence) -> dict[str, str]:
        return {f'{group}.{k.key}': k.normalization for k in keys if k.normalization != 'none'}

    items = [
        {'_target_': _PREFIX + 'VideoToTensor', 'apply_to': video},
        {'_target_': _VIDEO_CROP, 'apply_to': video, 'scale': e.crop_scale, 'mode': 'random'},
        {
            '_target_': _VIDEO_RESIZE,
            'apply_to': video,
            'height': e.view_size[0],
            'width': e.view_size[1],
            'interpolation': 'linear',
        },
        {'_target_': _PREFIX + 'VideoColorJitter', 'apply_to': video, 'brightness': 0.3},
        {'_target_': _PREFIX + 'VideoToNumpy', 'apply_to': video},
        {'_target_': _PREFIX + 'StateActionToTensor', 'apply_to': state},
        {
            '_target_': _STATE_ACTION,
            'apply_to': state,
            'normalization_modes': modes('state', e.state),
        },
        {'_target_': _PREFIX + 'StateActionToTensor', 'apply_to': action},
        {
            '_target_': _STATE_ACTION,
            'apply_to': action,
            'normalization_modes': modes('action', e.action),
        },
        {
            '_target_': _CONCAT,
            'video_concat_order': video,
            'state_concat_order': state,
            'action_concat_order': action,
        },
        {'_target_': _DREAM, 'default_instruction': 'Perform the default behavior.'},
    ]
    return {'_target_': _PREFIX + 'ComposedModalityTransform', 'transforms': items}


def _metadata_entry(e: Embodiment) -> dict[str, Any]:
    def modality(key: Any) -> dict[str, Any]:
        return {
            'absolute': not key.relative,
            'rotation_type': None,
            'shape': [key.dim],
            'continuous': True,
        }

    return {
        'statistics': {
            group: {key.key: key.statistics.to_mapping() for key in keys}
            for group, keys in (('state', e.state), ('action', e.action))
        },
        'modalities': {
            'video': {
                c.key: {
                    'resolution': [c.source_size[1], c.source_size[0]],
                    'channels': 3,
                    'fps': e.control_hz,
                }
                for c in e.cameras
            },
            'state': {key.key: modality(key) for key in e.state},
            'action': {key.key: modality(key) for key in e.action},
        },
        'embodiment_tag': e.tag,
    }
