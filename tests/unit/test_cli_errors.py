"""The CLI's top-level guard: an unexpected exception is one ``graphfleet: internal: ...`` line and exit 1, and
``--debug`` adds its traceback; a bad command line is one ``graphfleet: usage: ...`` line and exit 2."""

from __future__ import annotations

import argparse

import pytest

from graphfleet_cli.main import main, run


def _boom(_args):
    raise RuntimeError("something nobody expected")


def test_an_unexpected_error_is_one_internal_line_and_exit_1(capsys):
    assert run(_boom, argparse.Namespace(command="stats", debug=False)) == 1
    err = capsys.readouterr().err
    assert err == ("graphfleet: internal: RuntimeError: something nobody expected (run with --debug for the "
                   "traceback)\n")


def test_debug_shows_the_traceback(capsys):
    assert run(_boom, argparse.Namespace(command="stats", debug=True)) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and err.endswith("something nobody expected (run with "
                                                                       "--debug for the traceback)\n")


def test_an_invalid_command_line_is_one_usage_line_and_exit_2(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["jobs", "list", "--limit", "zero"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == ("graphfleet: usage: graphfleet jobs list: argument --limit: expected a whole "
                                       "number, got 'zero' (see graphfleet jobs list --help)\n")
