# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The package's generated interfaces: fields as defined, CDR round trips, a RunTask goal over DDS.

Runs on whichever build is importable: the pip path's (scripts/build_interfaces.sh) in the test
suite, the colcon install's under ``colcon test``.
"""

from pathlib import Path
import subprocess
import sys
import time

from node_support import Harness, ros_env
import pytest
from rclpy.serialization import deserialize_message, serialize_message

from dreamzero_ros.action import RunTask
from dreamzero_ros.msg import ActionChunk, PolicyStatus

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

PEER = Path(__file__).resolve().with_name('run_task_peer.py')
TIMEOUT = 60.0
RESEND_AFTER = 5.0


def _fields(message_type) -> dict[str, str]:
    return message_type.get_fields_and_field_types()


def test_run_task_has_the_fields_of_its_definition():
    assert _fields(RunTask.Goal) == {'instruction': 'string', 'time_limit': 'double'}
    assert _fields(RunTask.Result) == {
        'outcome': 'string',
        'chunks_executed': 'uint32',
        'elapsed': 'double',
        'message': 'string',
    }
    assert _fields(RunTask.Feedback) == {
        'chunks_executed': 'uint32',
        'elapsed': 'double',
        'state': 'string',
    }


@pytest.mark.parametrize(
    'message',
    [
        RunTask.Goal(instruction='put the cup in the sink', time_limit=30.5),
        RunTask.Result(outcome='canceled', chunks_executed=7, elapsed=3.25, message='by user'),
        RunTask.Feedback(chunks_executed=4294967295, elapsed=1e-3, state='running'),
        ActionChunk(joint_names=['a', 'b'], positions=[0.5, -1.0], horizon=1, chunk_id=2**40),
        PolicyStatus(state=PolicyStatus.STATE_ACTIVE, enabled=True, prompt='wipe', latency_p95=2.5),
    ],
    ids=lambda message: type(message).__name__,
)
def test_messages_survive_a_cdr_round_trip(message):
    data = serialize_message(message)
    assert deserialize_message(data, type(message)) == message
    assert deserialize_message(data, type(message)) != type(message)()


def _wait(future, what: str, timeout: float = TIMEOUT):
    deadline = time.monotonic() + timeout
    while not future.done():
        assert time.monotonic() < deadline, f'timed out waiting for {what}'
        time.sleep(0.02)
    return future.result()


def _send_goal(client, goal, feedback: list):
    """Send ``goal`` until the server answers; its handle.

    A reply sent before the server has discovered the client's reply reader is lost (discovery is
    per endpoint); under load that happens right after discovery, so the goal is sent again.
    """
    deadline = time.monotonic() + TIMEOUT
    while True:
        future = client.send_goal_async(goal, feedback_callback=feedback.append)
        try:
            return _wait(future, 'goal response', RESEND_AFTER)
        except AssertionError:
            assert time.monotonic() < deadline, 'timed out waiting for goal response'


def test_run_task_goal_feedback_result_and_cancel_across_processes():
    from action_msgs.msg import GoalStatus
    from rclpy.action import ActionClient

    name = 'run_task_interface_test'
    peer = subprocess.Popen(
        [sys.executable, str(PEER), name], env=ros_env(), stdout=subprocess.PIPE, text=True
    )
    harness = Harness('run_task_client')
    try:
        assert peer.stdout.readline().strip() == 'ready'
        client = ActionClient(harness.node, RunTask, name)
        assert client.wait_for_server(timeout_sec=TIMEOUT), 'no RunTask server'
        feedback = []

        def send(goal):
            handle = _send_goal(client, goal, feedback)
            assert handle.accepted
            return handle

        def feedback_of(handle):
            return [message for message in feedback if message.goal_id == handle.goal_id]

        handle = send(RunTask.Goal(instruction='pick up the cup', time_limit=0.5))
        result = _wait(handle.get_result_async(), 'result')
        mine = feedback_of(handle)
        assert result.status == GoalStatus.STATUS_SUCCEEDED
        assert result.result.outcome == 'time_limit'
        assert result.result.message == 'ran: pick up the cup'
        assert result.result.elapsed >= 0.5
        assert result.result.chunks_executed >= 3
        assert mine, 'no feedback arrived'
        counts = [message.feedback.chunks_executed for message in mine]
        assert counts == sorted(counts) and counts[-1] <= result.result.chunks_executed
        assert {message.feedback.state for message in mine} == {'running'}

        handle = send(RunTask.Goal(instruction='wipe the table', time_limit=60.0))
        deadline = time.monotonic() + TIMEOUT
        while not feedback_of(handle):
            assert time.monotonic() < deadline, 'no feedback before the cancel'
            time.sleep(0.02)
        _wait(handle.cancel_goal_async(), 'cancel response')
        result = _wait(handle.get_result_async(), 'canceled result')
        assert result.status == GoalStatus.STATUS_CANCELED
        assert result.result.outcome == 'canceled'
        assert result.result.elapsed < 30.0
    finally:
        harness.close()
        peer.terminate()
        peer.wait(timeout=20)
