"""The error of the `onert-py` subcommands (CliError): a mistake the user can fix, printed as one line."""
from __future__ import annotations


class CliError(Exception):
    """A mistake the user can fix (bad path, bad argument); printed as one line, exit code 2."""
