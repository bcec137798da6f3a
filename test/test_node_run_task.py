# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The task action ``~/run_task`` over real DDS: time limit, cancel, preemption, faults.

The policy node runs in its own process on the tiny engine (commands enabled, not in dry run);
this process publishes the cameras and joint states, sends goals with an rclpy ActionClient and
records every trajectory sent to the controller. The tests run in file order on one node.
"""

import time
from types import SimpleNamespace

from closed_loop import ClosedLoop
from machine_load import load_factor
from node_support import NODE, is_hold
import pytest

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

TIMEOUT = 90.0  # generous: the CPU is shared with other test processes
QUIET = 2.0  # seconds without any trajectory that show the node stopped (chunks take ~0.2 s)


@pytest.fixture(scope='module')
def system(tmp_path_factory):
    """(harness, stream, node, client)."""
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.action import ActionClient
    from trajectory_msgs.msg import JointTrajectory

    from dreamzero_ros.droid_clips import demo_clips
    from dreamzero_ros.ros.task_server import RunTask, TaskEvent

    assert RunTask is not None, 'the RunTask action is not built (scripts/build_interfaces.sh)'
    with ClosedLoop(tmp_path_factory.mktemp('run_task'), 'run_task_harness') as loop:
        harness = loop.harness
        # joint_trajectory_controller and the gripper controller of config/cpu_small.yaml, named
        # as ros2_control names them: enable needs every group's controller
        harness.record_controller(
            'controller', JointTrajectory, 'joint_trajectory_controller/joint_trajectory'
        )
        harness.record_controller('gripper', JointTrajectory, 'gripper_controller/joint_trajectory')
        harness.record('diagnostics', DiagnosticArray, '/diagnostics')
        harness.record('task_events', TaskEvent, f'{NODE}/task_events')
        node = loop.start_tiny_node('task.input_timeout:=1.0')
        stream = loop.stream_cameras(demo_clips(30)[0], joint_states=True)
        client = ActionClient(harness.node, RunTask, f'{NODE}/run_task')
        assert client.wait_for_server(timeout_sec=60), node.log()
        # free-running on the configured prompt first, as before any task
        harness.wait_for(lambda: _motions(harness, 0.0), TIMEOUT, 'a first trajectory', node.log)
        yield harness, stream, node, client
        client.destroy()
        assert loop.close() == 0, node.log()[-3000:]


def _motions(harness, since):
    return [m for m in harness.messages('controller', since) if not is_hold(m)]


def _wait(future, timeout, what, log):
    end = time.monotonic() + timeout
    while not future.done():
        if time.monotonic() > end:
            raise AssertionError(f'timed out waiting for {what}\n{log()[-4000:]}')
        time.sleep(0.02)
    return future.result()


def _send(system, instruction, time_limit=0.0):
    """Send a goal; its handle, the feedback it receives and the future of its result."""
    from dreamzero_ros.ros.task_server import RunTask

    harness, _, node, client = system
    feedback = []
    future = client.send_goal_async(
        RunTask.Goal(instruction=instruction, time_limit=time_limit),
        feedback_callback=lambda msg: feedback.append(msg.feedback),
    )
    handle = _wait(future, 30, f'the answer to goal {instruction!r}', node.log)
    result = handle.get_result_async() if handle.accepted else None
    return SimpleNamespace(handle=handle, feedback=feedback, result=result)


def _result(system, goal):
    """(status, result, arrival time) of a goal."""
    harness, _, node, _ = system
    response = _wait(goal.result, TIMEOUT, 'a task result', node.log)
    return response.status, response.result, harness.now()


def _quiet_after(system, since):
    """Nothing at all reached the controller for QUIET seconds after ``since``."""
    harness, _, node, _ = system
    harness.wait_for(lambda: harness.now() > since + QUIET, QUIET + 5, 'time', node.log)
    assert harness.messages('controller', since) == [], node.log()[-3000:]


def _holds_between(harness, start, end):
    """Holds that reached the controller between ``start`` and ``end``."""
    sent = harness.received.get('controller', [])
    return [msg for arrived, msg in sent if is_hold(msg) and start <= arrived <= end]


def _task_diagnostics(harness, since, instruction):
    for msg in harness.messages('diagnostics', since):
        for status in msg.status:
            values = {kv.key: kv.value for kv in status.values}
            if values.get('task') == instruction and values.get('prompt') == instruction:
                return values
    return None


def _events(harness, since):
    """(event, goal id, instruction, outcome, chunks, stamp s) of ~/task_events since ``since``."""
    return [
        (
            'started' if e.event == e.STARTED else 'ended',
            e.goal_id,
            e.instruction,
            e.outcome,
            e.chunks_executed,
            e.header.stamp.sec + e.header.stamp.nanosec * 1e-9,
        )
        for e in harness.messages('task_events', since)
    ]


def test_a_goal_runs_with_feedback_until_its_time_limit_then_holds(system):
    from action_msgs.msg import GoalStatus

    harness, _, node, _ = system
    start = harness.now()
    goal = _send(system, 'open the drawer', time_limit=3.0)
    assert goal.handle.accepted
    status, result, arrived = _result(system, goal)
    assert status == GoalStatus.STATUS_SUCCEEDED, result
    assert result.outcome == 'time_limit' and 'time limit of 3 s' in result.message
    # never before the limit; after it by at most a control tick's lateness, longer under load
    assert 3.0 <= result.elapsed < 3.0 + 0.5 * load_factor(), result
    counts = [f.chunks_executed for f in goal.feedback]
    assert len(counts) >= 2 and counts == list(range(1, len(counts) + 1)), counts
    assert result.chunks_executed == counts[-1]
    assert {f.state for f in goal.feedback} == {'executing'}
    assert [f.elapsed for f in goal.feedback] == sorted(f.elapsed for f in goal.feedback)
    assert _motions(harness, start), 'the task sent no trajectory'
    assert _task_diagnostics(harness, start, 'open the drawer'), 'no diagnostics named the task'
    # ~/task_events holds the goal's span, instruction and result (what a recording keeps)
    goal_id = bytes(goal.handle.goal_id.uuid).hex()

    def spans():
        return [e for e in _events(harness, start) if e[1] == goal_id]

    started, ended = harness.wait_for(lambda: len(spans()) == 2 and spans(), 10, 'events', node.log)
    assert started[:4] == ('started', goal_id, 'open the drawer', '')
    assert ended[:5] == ('ended', goal_id, 'open the drawer', 'time_limit', result.chunks_executed)
    assert abs((ended[5] - started[5]) - result.elapsed) < 1e-6, (started, ended, result)
    # it ended with a hold and nothing after the result
    assert any(is_hold(m) for m in harness.messages('controller', start + 2.5)), node.log()
    _quiet_after(system, arrived)


def test_cancel_holds_at_once_and_nothing_reaches_the_controller_after(system):
    from action_msgs.msg import GoalStatus

    harness, _, node, _ = system
    goal = _send(system, 'pick up the marker')
    harness.wait_for(lambda: len(goal.feedback) >= 2, TIMEOUT, 'two chunks', node.log)
    canceled_at = harness.now()
    answer = _wait(goal.handle.cancel_goal_async(), 30, 'the cancel answer', node.log)
    assert len(answer.goals_canceling) == 1
    status, result, arrived = _result(system, goal)
    assert status == GoalStatus.STATUS_CANCELED and result.outcome == 'canceled', result
    assert result.chunks_executed >= 2
    # the arm was moving: a (braking) hold was sent between the cancel and its result
    assert _holds_between(harness, canceled_at, arrived), node.log()[-3000:]
    _quiet_after(system, arrived)


def test_a_new_goal_preempts_the_running_one(system):
    from action_msgs.msg import GoalStatus

    harness, _, node, _ = system
    first = _send(system, 'pick up the marker')
    harness.wait_for(lambda: first.feedback, TIMEOUT, 'a chunk of the first task', node.log)
    sent = harness.now()
    second = _send(system, 'put it in the cup', time_limit=2.0)
    assert second.handle.accepted
    status, result, arrived = _result(system, first)
    assert status == GoalStatus.STATUS_ABORTED and result.outcome == 'preempted', result
    # the first task's motion braked to a hold before its result (the second runs 2 s)
    assert _holds_between(harness, sent, arrived + 0.5), node.log()[-3000:]
    assert "'put it in the cup'" in result.message and result.chunks_executed >= 1
    status, result, arrived = _result(system, second)
    assert status == GoalStatus.STATUS_SUCCEEDED and result.outcome == 'time_limit', result
    assert result.chunks_executed >= 1 and second.feedback[0].chunks_executed == 1
    # the first goal's end (preempted) is published before the second goal's start
    expected = [
        ('ended', 'pick up the marker', 'preempted'),
        ('started', 'put it in the cup', ''),
        ('ended', 'put it in the cup', 'time_limit'),
    ]

    def last_three():
        return [(e[0], e[2], e[3]) for e in _events(harness, sent - 30.0)][-3:]

    harness.wait_for(lambda: last_three() == expected, 10, 'the task events', node.log)
    _quiet_after(system, arrived)


def test_goals_are_refused_while_disabled_and_an_estop_ends_a_task_as_a_fault(system):
    from action_msgs.msg import GoalStatus
    from std_msgs.msg import Bool
    from std_srvs.srv import SetBool

    harness, _, node, _ = system
    harness.call(SetBool, f'{NODE}/enable', SetBool.Request(data=False))
    assert not _send(system, 'pick up the marker').handle.accepted
    assert 'commands are disabled' in node.log()
    assert not _send(system, '').handle.accepted  # an empty instruction, also when enabled
    harness.call(SetBool, f'{NODE}/enable', SetBool.Request(data=True))
    assert not _send(system, '  ').handle.accepted
    goal = _send(system, 'pick up the marker')
    harness.wait_for(lambda: goal.feedback, TIMEOUT, 'a chunk', node.log)
    estop = harness.node.create_publisher(Bool, f'{NODE}/estop', 10)
    harness.wait_for(lambda: estop.get_subscription_count() > 0, 10, 'estop subscriber', node.log)
    estop.publish(Bool(data=True))
    status, result, arrived = _result(system, goal)
    assert status == GoalStatus.STATUS_ABORTED and result.outcome == 'fault', result
    assert result.message == 'commands disabled by the e-stop topic'
    _quiet_after(system, arrived)
    # the e-stop stays in force until ~/enable: a goal now is refused and moves nothing
    refusals = node.log().count('commands are disabled')
    refused_at = harness.now()
    assert not _send(system, 'pick up the marker').handle.accepted
    harness.wait_for(
        lambda: node.log().count('commands are disabled') > refusals, 10, 'the refusal', node.log
    )
    _quiet_after(system, refused_at)
    harness.node.destroy_publisher(estop)
    harness.call(SetBool, f'{NODE}/enable', SetBool.Request(data=True))


def test_inputs_unusable_beyond_the_timeout_end_the_task_as_a_fault(system):
    from action_msgs.msg import GoalStatus

    harness, stream, node, _ = system
    goal = _send(system, 'pick up the marker')
    harness.wait_for(lambda: goal.feedback, TIMEOUT, 'a chunk', node.log)
    stream.cameras_on = False
    try:
        status, result, _ = _result(system, goal)
    finally:
        stream.cameras_on = True
    assert status == GoalStatus.STATUS_ABORTED and result.outcome == 'fault', result
    assert result.message.startswith('inputs unusable for more than 1 s: '), result.message


def test_a_dry_run_task_previews_only(system):
    from action_msgs.msg import GoalStatus
    from std_srvs.srv import SetBool

    harness, _, node, _ = system
    harness.set_parameter(NODE, 'dry_run', True)
    harness.call(SetBool, f'{NODE}/enable', SetBool.Request(data=False))
    try:
        start = harness.now()
        goal = _send(system, 'wipe the table', time_limit=2.0)
        assert goal.handle.accepted  # dry run: accepted even with commands disabled
        status, result, _ = _result(system, goal)
        assert status == GoalStatus.STATUS_SUCCEEDED and result.chunks_executed >= 1, result
        assert {f.state for f in goal.feedback} == {'dry_run'}
        assert harness.messages('controller', start) == []
    finally:
        harness.set_parameter(NODE, 'dry_run', False)
        harness.call(SetBool, f'{NODE}/enable', SetBool.Request(data=True))


def test_the_prompt_topic_preempts_a_task_and_works_when_none_runs(system):
    from action_msgs.msg import GoalStatus
    from std_msgs.msg import String

    harness, _, node, _ = system
    prompt = harness.node.create_publisher(String, f'{NODE}/prompt', 10)  # volatile
    harness.wait_for(lambda: prompt.get_subscription_count() > 0, 10, 'prompt sub', node.log)
    # no task runs (the last one ended): the node holds until a prompt arrives
    idle = harness.now()
    _quiet_after(system, idle)
    prompt.publish(String(data='stack the blocks'))
    harness.wait_for(lambda: _motions(harness, idle), TIMEOUT, 'motion on the prompt', node.log)
    assert harness.get_parameters(NODE, ['prompt'])['prompt'] == 'stack the blocks'
    # a prompt published while a task runs takes over from the task
    goal = _send(system, 'pick up the marker')
    harness.wait_for(lambda: goal.feedback, TIMEOUT, 'a chunk', node.log)
    published = harness.now()
    prompt.publish(String(data='open the drawer'))
    status, result, arrived = _result(system, goal)
    assert status == GoalStatus.STATUS_ABORTED and result.outcome == 'preempted', result
    assert result.message == "prompt set to 'open the drawer'"
    assert _holds_between(harness, published, arrived + 0.5), node.log()[-3000:]
    harness.wait_for(lambda: _motions(harness, arrived), TIMEOUT, 'motion after', node.log)
    harness.node.destroy_publisher(prompt)


#: A client killed without a clean shutdown leaves the graph when its DDS lease ends (the peer's
#: Fast DDS profile: 2 s, instead of the default 20 s, to keep the test short), then
#: ``task.client_timeout`` (1 s); a margin for the loaded CPU.
CLIENT_GONE_WITHIN = 10.0
_SHORT_LEASE = """<?xml version="1.0" encoding="UTF-8" ?>
<profiles xmlns="http://www.eprosima.com/XMLSchemas/fastRTPS_Profiles">
  <participant profile_name="short_lease" is_default_profile="true">
    <rtps><builtin><discovery_config>
      <leaseDuration><sec>2</sec></leaseDuration>
      <leaseAnnouncement><nanosec>500000000</nanosec></leaseAnnouncement>
    </discovery_config></builtin></rtps>
  </participant>
</profiles>
"""


def test_a_goal_whose_client_is_killed_ends_in_a_hold(system, tmp_path):
    """The client process is SIGKILLed mid-goal (no time limit): the task ends, the arm holds."""
    import os
    from pathlib import Path
    import subprocess
    import sys

    from node_support import ros_env

    harness, _, node, _ = system
    profile = tmp_path / 'short_lease.xml'
    profile.write_text(_SHORT_LEASE)
    peer = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).with_name('run_task_client_peer.py')),
            f'{NODE}/run_task',
            'wipe the table',
        ],
        env={
            **ros_env(),
            'PYTHONPATH': os.pathsep.join(sys.path),
            # Fast DDS 3 (Kilted) reads the first, Fast DDS 2 (Humble, Jazzy) the second
            'FASTDDS_DEFAULT_PROFILES_FILE': str(profile),
            'FASTRTPS_DEFAULT_PROFILES_FILE': str(profile),
        },
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert peer.stdout.readline().strip() == 'accepted', node.log()[-3000:]
        harness.wait_for(
            lambda: "task 'wipe the table' started" in node.log(), TIMEOUT, 'the task', node.log
        )
        started = harness.now()
        harness.wait_for(lambda: _motions(harness, started), TIMEOUT, 'task motion', node.log)
        killed = harness.now()
        peer.kill()
        peer.wait()
        harness.wait_for(
            lambda: "the goal's client is gone" in node.log(),
            CLIENT_GONE_WITHIN,
            'the end of the orphaned goal',
            node.log,
        )
        ended = harness.now()
        assert ended - killed < CLIENT_GONE_WITHIN
        assert _holds_between(harness, killed, ended + 1.0), node.log()[-3000:]
        _quiet_after(system, ended + 1.0)
    finally:
        peer.kill()
        peer.wait()


def test_long_instructions_and_prompts_are_refused_and_shown_abbreviated(system):
    """Beyond max_prompt_length (4096) refused with a reason; within it, abbreviated in output."""
    from action_msgs.msg import GoalStatus
    from std_msgs.msg import String

    harness, _, node, _ = system
    huge = 'x' * (1 << 20)
    logged = len(node.log())
    goal = _send(system, huge)
    assert not goal.handle.accepted
    prompt = harness.node.create_publisher(String, f'{NODE}/prompt', 10)
    harness.wait_for(lambda: prompt.get_subscription_count() > 0, 10, 'prompt sub', node.log)
    prompt.publish(String(data=huge))
    harness.wait_for(lambda: '~/prompt refused' in node.log(), 30, 'the refusal', node.log)
    harness.node.destroy_publisher(prompt)
    added = node.log()[logged:]
    assert 'the instruction has 1048576 characters, more than max_prompt_length (4096)' in added
    assert 'the prompt has 1048576 characters, more than max_prompt_length (4096)' in added
    assert len(added) < 4000, added[:4000]
    assert harness.get_parameters(NODE, ['prompt'])['prompt'] != huge
    # within the cap: accepted, shown abbreviated
    long = 'wipe ' + 'y' * 4000
    since = harness.now()
    goal = _send(system, long)
    assert goal.handle.accepted
    harness.wait_for(lambda: goal.feedback, TIMEOUT, 'a chunk', node.log)
    harness.wait_for(
        lambda: any(m.header.stamp.sec for m in harness.messages('diagnostics', since)),
        10,
        'diagnostics',
        node.log,
    )
    shown = [
        {kv.key: kv.value for kv in status.values}
        for msg in harness.messages('diagnostics', since)
        for status in msg.status
    ]
    tasks = [values['task'] for values in shown if values.get('task')]
    assert tasks and all('(4005 characters)' in task and len(task) < 150 for task in tasks)
    assert all(len(values.get('prompt', '')) < 150 for values in shown)
    answer = _wait(goal.handle.cancel_goal_async(), 30, 'the cancel answer', node.log)
    assert len(answer.goals_canceling) == 1
    status, _, _ = _result(system, goal)
    assert status == GoalStatus.STATUS_CANCELED
    assert long not in node.log()
