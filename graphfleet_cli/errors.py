"""The CLI's own errors: each is printed as one ``graphfleet: CODE: message`` line with its exit code."""

from __future__ import annotations

EXIT_FAILURE, EXIT_USAGE, EXIT_NOT_FOUND = 1, 2, 3


class CliError(Exception):
    """A failure the user can act on: ``code`` is stable, ``exit_code`` is the documented one (1 failure,
    2 invalid command line, 3 not found)."""

    def __init__(self, code: str, message: str, exit_code: int = EXIT_FAILURE):
        super().__init__(message)
        self.code, self.message, self.exit_code = code, message, exit_code


def tenant_mismatch(requested: str, tenant: str, env: str) -> CliError:
    return CliError("tenant_mismatch", f"--tenant {requested} does not match the API key's tenant {tenant!r} "
                                       f"(with GRAPHFLEET_URL the tenant comes from {env})", EXIT_USAGE)


def missing_key(env: str, what: str) -> CliError:
    return CliError("missing_api_key", f"GRAPHFLEET_URL is set: also set {env} to {what}", EXIT_USAGE)
