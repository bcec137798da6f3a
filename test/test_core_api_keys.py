# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""API keys come from a file or the environment, never from a parameter value."""

import pytest

from dreamzero_ros.core.config.node_config import PARAMETERS, build_settings, read_params_file
from dreamzero_ros.core.policy.api_keys import read_api_key

ENV = 'DREAMZERO_TEST_API_KEY'


def test_key_file_wins_over_the_environment(tmp_path, monkeypatch):
    path = tmp_path / 'key'
    path.write_text('s3cret\n')
    path.chmod(0o600)
    monkeypatch.setenv(ENV, 'from-env')
    warnings = []
    assert read_api_key(str(path), ENV, warnings.append) == 's3cret'
    assert warnings == []


def test_environment_when_no_file_and_none_without_either(monkeypatch):
    monkeypatch.setenv(ENV, 'from-env')
    assert read_api_key('', ENV) == 'from-env'
    monkeypatch.delenv(ENV)
    assert read_api_key('', ENV) is None


def test_a_file_others_may_read_is_used_with_a_warning(tmp_path):
    path = tmp_path / 'key'
    path.write_text('s3cret')
    path.chmod(0o644)
    warnings = []
    assert read_api_key(str(path), ENV, warnings.append) == 's3cret'
    assert 'readable by other users' in warnings[0] and 's3cret' not in warnings[0]


@pytest.mark.parametrize('content', ['', '  \n', 'alpha\nbeta\n'])
def test_empty_or_multi_line_files_are_refused_without_showing_them(tmp_path, content):
    path = tmp_path / 'key'
    path.write_text(content)
    with pytest.raises(ValueError, match='must hold the key on one line') as error:
        read_api_key(str(path), ENV)
    assert 'alpha' not in str(error.value)


def test_a_missing_file_is_refused_naming_it(tmp_path):
    with pytest.raises(ValueError, match='cannot read the API key file .*missing'):
        read_api_key(str(tmp_path / 'missing'), ENV)


def test_no_parameter_holds_a_key_and_old_key_parameters_say_what_replaces_them(tmp_path):
    assert not [spec.name for spec in PARAMETERS if spec.name.endswith('api_key')]
    with pytest.raises(ValueError, match='engine.remote_api_key is replaced by engine.remote_api'):
        build_settings({'engine.remote_api_key': 'x'})
    path = tmp_path / 'old.yaml'
    path.write_text("/**:\n  ros__parameters:\n    openpi_bridge:\n      api_key: 'x'\n")
    with pytest.raises(ValueError, match=r'\$DREAMZERO_OPENPI_API_KEY'):
        read_params_file(path)
