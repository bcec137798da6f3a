# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""TaskRunner: which goals are accepted, feedback, and each way a task ends."""

import pytest

from dreamzero_ros.core.control.task_runner import (
    DRY_RUN,
    EXECUTING,
    INPUTS_UNUSABLE,
    CommandState,
    Outcome,
    TaskRunner,
)
from dreamzero_ros.errors import TaskRefusedError

COMMANDING = CommandState(active=True, enabled=True, dry_run=False)
DISABLED = CommandState(active=True, enabled=False, dry_run=False)
PREVIEW = CommandState(active=True, enabled=False, dry_run=True)
INACTIVE = CommandState(active=False, enabled=True, dry_run=False)


@pytest.mark.parametrize(
    ('instruction', 'limit', 'state', 'reason'),
    [
        ('pick up the cup', 0.0, COMMANDING, ''),
        ('pick up the cup', 5.0, PREVIEW, ''),
        ('  ', 0.0, COMMANDING, 'the instruction is empty'),
        ('pick', -1.0, COMMANDING, 'time_limit must be >= 0'),
        ('pick', float('nan'), COMMANDING, 'time_limit must be >= 0'),
        ('pick', 0.0, INACTIVE, 'the node is not active'),
        ('pick', 0.0, DISABLED, 'commands are disabled: enable them with ~/enable'),
    ],
)
def test_goal_acceptance(instruction, limit, state, reason):
    refusal = TaskRunner.refusal(instruction, limit, state)
    assert refusal.startswith(reason) and bool(refusal) == bool(reason)
    runner = TaskRunner(input_timeout=1.0)
    if reason:
        with pytest.raises(TaskRefusedError, match=reason.split(':')[0]):
            runner.start('g', instruction, limit, state, 0.0)
        assert runner.goal_id is None
    else:
        assert runner.start('g', instruction, limit, state, 0.0) is None
        assert runner.goal_id == 'g' and runner.instruction == instruction


def test_feedback_counts_chunks_and_the_time_limit_ends_the_task():
    runner = TaskRunner(input_timeout=1.0)
    runner.start('g', 'pick', 3.0, COMMANDING, 10.0)
    assert runner.chunk_executed(10.5).chunks_executed == 1
    feedback = runner.chunk_executed(11.0)
    assert (feedback.chunks_executed, feedback.elapsed, feedback.state) == (2, 1.0, EXECUTING)
    assert runner.check(12.9, COMMANDING, '') is None
    result = runner.check(13.0, COMMANDING, '')
    assert result.outcome == Outcome.TIME_LIMIT and result.outcome == 'time_limit'
    assert (result.chunks_executed, result.elapsed) == (2, 3.0)
    assert 'time limit of 3 s reached' in result.message
    assert runner.goal_id is None and runner.check(20.0, COMMANDING, '') is None
    assert runner.chunk_executed(20.0) is None and runner.feedback(20.0) is None


def test_no_time_limit_runs_until_canceled():
    runner = TaskRunner(input_timeout=1.0)
    runner.start('g', 'pick', 0.0, COMMANDING, 0.0)
    assert runner.check(1e6, COMMANDING, '') is None
    result = runner.cancel(1e6 + 1)
    assert result.outcome == Outcome.CANCELED and result.elapsed == 1e6 + 1
    assert runner.cancel(1e6 + 2) is None  # nothing left to cancel


def test_a_new_goal_preempts_the_running_one():
    runner = TaskRunner(input_timeout=1.0)
    runner.start('first', 'pick', 0.0, COMMANDING, 0.0)
    runner.chunk_executed(1.0)
    preempted = runner.start('second', 'place', 0.0, COMMANDING, 2.0)
    assert preempted.outcome == Outcome.PREEMPTED and preempted.chunks_executed == 1
    assert "'place'" in preempted.message and preempted.elapsed == 2.0
    assert runner.goal_id == 'second' and runner.feedback(2.0).chunks_executed == 0


def test_a_refused_goal_leaves_the_running_task_alone():
    runner = TaskRunner(input_timeout=1.0)
    runner.start('first', 'pick', 0.0, COMMANDING, 0.0)
    with pytest.raises(TaskRefusedError):
        runner.start('second', '', 0.0, COMMANDING, 1.0)
    assert runner.goal_id == 'first'


def test_manual_prompt_preempts():
    runner = TaskRunner(input_timeout=1.0)
    runner.start('g', 'pick', 0.0, COMMANDING, 0.0)
    result = runner.preempt(1.0, 'prompt set through ~/prompt')
    assert result.outcome == Outcome.PREEMPTED and result.message == 'prompt set through ~/prompt'


@pytest.mark.parametrize(
    ('state', 'message'),
    [
        (DISABLED, 'commands went from commanding to disabled'),
        (PREVIEW, 'commands went from commanding to dry_run'),
        (INACTIVE, 'the node was deactivated'),
    ],
)
def test_losing_the_command_path_is_a_fault(state, message):
    runner = TaskRunner(input_timeout=1.0)
    runner.start('g', 'pick', 0.0, COMMANDING, 0.0)
    result = runner.check(1.0, state, '')
    assert result.outcome == Outcome.FAULT and result.message == message


def test_a_dry_run_task_reports_dry_run_and_ends_when_dry_run_is_cleared():
    runner = TaskRunner(input_timeout=1.0)
    runner.start('g', 'pick', 0.0, PREVIEW, 0.0)
    assert runner.chunk_executed(0.5).state == DRY_RUN
    result = runner.check(1.0, COMMANDING, '')
    assert result.outcome == Outcome.FAULT and 'dry_run to commanding' in result.message


def test_inputs_unusable_beyond_the_timeout_is_a_fault():
    runner = TaskRunner(input_timeout=2.0)
    runner.start('g', 'pick', 0.0, COMMANDING, 0.0)
    assert runner.check(1.0, COMMANDING, 'stale: wrist_image_left') is None
    assert runner.feedback(1.0).state == INPUTS_UNUSABLE
    assert runner.check(2.5, COMMANDING, '') is None  # usable again: the clock restarts
    assert runner.feedback(2.5).state == EXECUTING
    assert runner.check(3.0, COMMANDING, 'missing: joint_states') is None
    assert runner.check(5.0, COMMANDING, 'missing: joint_states') is None
    result = runner.check(5.1, COMMANDING, 'missing: joint_states')
    assert result.outcome == Outcome.FAULT
    assert result.message == 'inputs unusable for more than 2 s: missing: joint_states'


def test_explicit_faults_carry_their_reason():
    runner = TaskRunner(input_timeout=1.0)
    runner.start('g', 'pick', 0.0, COMMANDING, 0.0)
    result = runner.fail(0.5, 'commands disabled by the e-stop topic')
    assert result.outcome == Outcome.FAULT and 'e-stop' in result.message
    assert runner.fail(0.6, 'again') is None


def test_input_timeout_must_be_positive():
    with pytest.raises(ValueError, match='input_timeout'):
        TaskRunner(input_timeout=0.0)


def test_a_goal_ends_when_a_client_seen_at_its_start_stays_gone_beyond_the_client_timeout():
    runner = TaskRunner(input_timeout=5.0, client_timeout=1.0)
    runner.start('g', 'pick', 0.0, COMMANDING, now=0.0)
    assert runner.watches_clients
    both, observer = frozenset({'client', 'observer'}), frozenset({'observer'})
    assert runner.check(0.1, COMMANDING, '', both) is None
    assert runner.check(0.5, COMMANDING, '', observer) is None  # missing from here
    assert runner.check(1.0, COMMANDING, '', both) is None  # back: the count starts again
    assert runner.check(2.0, COMMANDING, '', observer) is None
    assert runner.check(3.0, COMMANDING, '', observer | {'newcomer'}) is None
    result = runner.check(3.01, COMMANDING, '', observer)
    assert result.outcome is Outcome.FAULT and "the goal's client is gone" in result.message
    assert runner.goal_id is None and not runner.watches_clients


def test_a_goal_whose_client_never_appears_ends_and_a_zero_timeout_never_ends_one():
    runner = TaskRunner(input_timeout=5.0, client_timeout=0.5)
    runner.start('g', 'pick', 0.0, COMMANDING, now=0.0)
    assert runner.check(0.0, COMMANDING, '', frozenset()) is None
    assert runner.check(0.4, COMMANDING, '', frozenset()) is None
    result = runner.check(0.6, COMMANDING, '', frozenset())
    assert result.outcome is Outcome.FAULT and 'no action client' in result.message
    unbounded = TaskRunner(input_timeout=5.0, client_timeout=0.0)
    unbounded.start('g', 'pick', 0.0, COMMANDING, now=0.0)
    assert not unbounded.watches_clients
    assert unbounded.check(100.0, COMMANDING, '', frozenset()) is None
    with pytest.raises(ValueError, match='client_timeout'):
        TaskRunner(input_timeout=1.0, client_timeout=float('nan'))


def test_instructions_beyond_the_length_cap_are_refused_and_long_ones_abbreviated():
    from dreamzero_ros.core.control.task_runner import abbreviate

    runner = TaskRunner(input_timeout=1.0, max_length=10)
    with pytest.raises(TaskRefusedError, match='11 characters, more than max_prompt_length'):
        runner.start('g', 'x' * 11, 0.0, COMMANDING, now=0.0)
    runner.start('g', 'x' * 10, 0.0, COMMANDING, now=0.0)
    assert abbreviate('short') == 'short'
    shown = abbreviate('a' * 50 + 'b' * 1000 + 'c' * 50)
    assert shown == 'a' * 40 + ' ... ' + 'c' * 40 + ' (1100 characters)'
