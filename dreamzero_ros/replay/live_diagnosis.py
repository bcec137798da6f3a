# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Why a live replay recorded nothing: no node, or a node that does not read what the bag holds.

When the policy node published nothing while a bag played, the usual cause is not a missing
node but a node configured for other inputs: raw images where the bag has compressed ones (or
the reverse), other topics, a gripper or arm joint the bag's joint states do not name, or a
node on the wall clock (no ``use_sim_time``). :func:`find_mismatches` compares what the node
reads (its parameters, asked over its parameter service: :func:`ask_node_inputs`) with the
bag, and names each difference with its fix.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
import threading
from typing import Any

from dreamzero_ros.replay.topics import (
    COMPRESSED_IMAGE_TYPE,
    COMPRESSED_SUFFIX,
    IMAGE_TYPE,
    IMAGE_TYPES,
    absolute,
)

__all__ = [
    'NodeInputs',
    'ask_node_inputs',
    'explain_nothing_recorded',
    'find_mismatches',
    'no_node_message',
]

#: The node parameters that say what it reads.
INPUT_PARAMETERS = (
    'use_sim_time',
    'camera_topics',
    'image_transport',
    'joint_states_topic',
    'arm_joint_names',
    'gripper_joint_name',
)


@dataclass(frozen=True)
class NodeInputs:
    """What a running policy node reads, from its parameters (topics resolved from ``/``)."""

    use_sim_time: bool
    camera_topics: tuple[str, ...]
    image_transport: str
    joint_states_topic: str
    arm_joints: tuple[str, ...]
    gripper_joint: str

    @classmethod
    def from_parameters(cls, values: Mapping[str, Any]) -> NodeInputs:
        """From ``name -> value`` of :data:`INPUT_PARAMETERS`."""
        return cls(
            use_sim_time=bool(values['use_sim_time']),
            camera_topics=tuple(absolute(t) for t in values['camera_topics']),
            image_transport=str(values['image_transport']),
            joint_states_topic=absolute(values['joint_states_topic']),
            arm_joints=tuple(values['arm_joint_names']),
            gripper_joint=str(values['gripper_joint_name']),
        )


def no_node_message(node_name: str) -> str:
    """There is no policy node ``node_name`` to play to."""
    return (
        f'no policy node /{node_name} is running (start one with use_sim_time:=true on the '
        'same ROS_DOMAIN_ID, --node-name if it is not the default)'
    )


def find_mismatches(
    inputs: NodeInputs, bag_topics: Mapping[str, str], bag_joints: Collection[str] | None
) -> list[str]:
    """Each way the node's inputs differ from the bag's topics and joint names, with its fix.

    Args:
        inputs: what the node reads.
        bag_topics: topic -> message type of the bag, as played.
        bag_joints: the joint names of the bag's joint states on the node's topic; None where
            the bag has no such topic.

    """
    found = []
    if not inputs.use_sim_time:
        found.append(
            "it runs on the wall clock: start it with -p use_sim_time:=true to take the bag's "
            '/clock'
        )
    found += _camera_mismatches(inputs, bag_topics)
    if bag_joints is None:
        found.append(
            f'it reads joint states on {inputs.joint_states_topic}, the bag has none there: '
            '--remap them or set joint_states_topic'
        )
        return found
    named = set(bag_joints)
    missing = [joint for joint in inputs.arm_joints if joint not in named]
    if inputs.gripper_joint and inputs.gripper_joint not in named:
        missing.append(inputs.gripper_joint)
    if missing:
        found.append(
            f"it reads joints {missing} on {inputs.joint_states_topic}, the bag's joint "
            f"states name {sorted(named)}: make the bag with the node's --params-file, or set "
            'arm_joint_names and gripper_joint_name'
        )
    return found


def _camera_mismatches(inputs: NodeInputs, bag_topics: Mapping[str, str]) -> list[str]:
    """The cameras the node reads where the bag has the other transport, or nothing."""
    compressed = inputs.image_transport == 'compressed'
    wanted_type, other_type = IMAGE_TYPE, COMPRESSED_IMAGE_TYPE
    if compressed:
        wanted_type, other_type = other_type, wanted_type
    wanted = {t: t + COMPRESSED_SUFFIX if compressed else t for t in inputs.camera_topics}
    other = {t: t if compressed else t + COMPRESSED_SUFFIX for t in inputs.camera_topics}
    lacking = [t for t in inputs.camera_topics if bag_topics.get(wanted[t]) != wanted_type]
    swapped = [t for t in lacking if bag_topics.get(other[t]) == other_type]
    absent = [t for t in lacking if t not in swapped]
    found = []
    if swapped:
        found.append(
            f'it reads {wanted_type} on {_listed(wanted[t] for t in swapped)} (image_transport '
            f'{inputs.image_transport}), the bag has {other_type} on '
            f"{_listed(other[t] for t in swapped)}: make the bag with the node's --params-file, "
            f'or run the node with -p image_transport:={"raw" if compressed else "compressed"}'
        )
    if absent:
        images = sorted(t for t, kind in bag_topics.items() if kind in IMAGE_TYPES)
        found.append(
            f'it reads {wanted_type} on {_listed(wanted[t] for t in absent)}, the bag has no '
            f'such camera (its image topics: {images}): --remap them or set camera_topics'
        )
    return found


def _listed(topics: Iterable[str]) -> str:
    return ', '.join(topics)


def explain_nothing_recorded(
    node: Any,
    node_name: str,
    played: Mapping[str, str],
    bag_joints: Callable[[str], Collection[str] | None],
    without_subscribers: Collection[str],
) -> str:
    """Why the node ``/node_name`` published nothing while the bag played.

    Args:
        node: the player's rclpy node (its executor spinning in another thread).
        node_name: the policy node's name.
        played: topic as published -> message type, of every topic played.
        bag_joints: the joint names the bag's joint states name on a topic (as published);
            None where it played none there.
        without_subscribers: played topics nobody subscribed to.

    """
    running = {name for name, namespace in node.get_node_names_and_namespaces() if namespace == '/'}
    if node_name not in running:
        return no_node_message(node_name)
    inputs = ask_node_inputs(node, node_name)
    if inputs is None:
        return (
            f'the node /{node_name} published nothing and does not answer on its parameter '
            'service: is it a dreamzero policy node? (see its log)'
        )
    mismatches = find_mismatches(inputs, played, bag_joints(inputs.joint_states_topic))
    if mismatches:
        return f'the node /{node_name} does not read what the bag holds: {"; ".join(mismatches)}'
    if without_subscribers:
        return (
            f'the node /{node_name} had not subscribed to {sorted(without_subscribers)} while '
            "the bag played (still configuring?): wait for its 'ready' line, or raise --wait"
        )
    return (
        f'the node /{node_name} reads what the bag holds but published nothing: its log and '
        'its diagnostics (/diagnostics) say what it refused'
    )


def ask_node_inputs(node: Any, node_name: str, timeout_s: float = 3.0) -> NodeInputs | None:
    """What the running node ``/node_name`` reads, asked over its parameter service.

    ``node`` is an rclpy node whose executor spins in another thread. None where the node
    does not answer within ``timeout_s`` (or is not a policy node).
    """
    from rcl_interfaces.srv import GetParameters
    from rclpy.parameter import parameter_value_to_python

    client = node.create_client(GetParameters, f'/{node_name}/get_parameters')
    try:
        if not client.wait_for_service(timeout_sec=timeout_s):
            return None
        future = client.call_async(GetParameters.Request(names=list(INPUT_PARAMETERS)))
        done = _wait(future, timeout_s)
        if not done or future.result() is None:
            return None
        values = [parameter_value_to_python(v) for v in future.result().values]
        if len(values) != len(INPUT_PARAMETERS) or any(v is None for v in values):
            return None
        return NodeInputs.from_parameters(dict(zip(INPUT_PARAMETERS, values, strict=True)))
    finally:
        node.destroy_client(client)


def _wait(future: Any, timeout_s: float) -> bool:
    """Wait for ``future`` (completed by another thread's executor); whether it completed."""
    event = threading.Event()
    future.add_done_callback(lambda _: event.set())
    return event.wait(timeout_s)
