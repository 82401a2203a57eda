"""``--sched`` on the command line against a config's hold options: the shipped video configs (``sched:
hold_cosine`` with ``hold_until`` / ``hold_release_by``) run with ``--sched cosine``, the config's hold options dropped
with one logged line; hold options typed on the command line with another schedule are still refused."""
import logging
import os

import pytest

from zoo.train.args import parse_train_args

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(REPO, 'configs', 'video_ape.yaml')


def _parse(tmp_path, *extra):
    return parse_train_args(['--config', CONFIG, '--data-dir', str(tmp_path), '--output', str(tmp_path / 'o'),
                             *extra])


def test_config_hold_options_are_dropped_for_a_command_line_sched(tmp_path, caplog):
    args = _parse(tmp_path)
    assert args.sched == 'hold_cosine' and args.hold_until is not None and args.hold_release_by is not None
    with caplog.at_level(logging.INFO, logger='zoo.train'):
        args = _parse(tmp_path, '--sched', 'cosine')
    assert (args.sched, args.hold_until, args.hold_release_by) == ('cosine', None, None)
    lines = [r.getMessage() for r in caplog.records if 'dropped' in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith('--sched cosine on the command line: --hold-until ')
    assert '--hold-release-by' in lines[0] and 'apply to --sched hold_cosine only' in lines[0]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger='zoo.train'):   # zoo train's first pass (finds the run dir): quiet
        args = parse_train_args(['--config', CONFIG, '--sched', 'cosine'], check_required=False)
    assert args.hold_until is None and not caplog.records
    with caplog.at_level(logging.INFO, logger='zoo.train'):
        args = _parse(tmp_path, '--sched', 'hold_cosine', '--hold-until', '50')
    assert args.hold_until == 50 and args.hold_release_by is not None and not caplog.records


@pytest.mark.parametrize('flag, value', [('--hold-until', '50'), ('--hold-release-by', '0.5')])
def test_hold_options_typed_with_another_sched_are_still_refused(tmp_path, flag, value):
    with pytest.raises(ValueError, match=rf'{flag} applies to --sched hold_cosine only \(got --sched cosine\)'):
        _parse(tmp_path, '--sched', 'cosine', flag, value)


def test_train_vlm_help_lists_what_may_change_on_resume():
    from zoo.train.args import MAY_CHANGE_ON_RESUME, may_change_on_resume
    from zoo.train.vlm import build_vlm_parser
    epilog = build_vlm_parser().epilog          # (the --resume option's own help names them too)
    assert f'(only {may_change_on_resume()} may change)' in epilog
    assert 'allow_root' in MAY_CHANGE_ON_RESUME and '--allow-root may change)' in epilog
