"""Action files: the YAML under ``_lakefs_actions/`` (lakeFS's schema, YAML 1.2 booleans).

The input is the file. :func:`parse_action` parses and validates it; an action it accepts is
matched against an event of each type it names, and each of its webhook and airflow hooks is
called (through httpx's mock transport, answering 200): the properties the file gives are read
there, :func:`call_hook` never raises, and its log never shows an environment variable's
value. Documented refusal: :class:`ActionFileError`.
"""

from __future__ import annotations

import httpx

from mirror.actions.model import ActionFileError, parse_action
from mirror.actions.webhook import call_hook
from mirror.core.hooks import HookEvent

__all__ = ["check"]


def _answer(request: httpx.Request) -> httpx.Response:
    # refuse what httpx's own transport refuses before connecting, then answer as a hook would
    if request.url.scheme not in ("http", "https") or not request.url.host:
        raise httpx.UnsupportedProtocol(f"unsupported URL {request.url}", request=request)
    return httpx.Response(200)


_CLIENT = httpx.Client(transport=httpx.MockTransport(_answer))
_ENVIRON = {"LAKEFSACTION_TOKEN": "secret-token"}


def check(data: bytes) -> str | None:
    """Parse the action file ``data``, match it and call its hooks (see the module)."""
    try:
        action = parse_action("_lakefs_actions/fuzz.yaml", data)
    except ActionFileError:
        return "ActionFileError"
    for event_type in action.on:
        for branch in ("main", "release-1", "a/b"):
            action.matches(HookEvent(event_type, "repo", branch_id=branch))
    for hook in action.hooks:
        if hook.type in ("webhook", "airflow"):
            outcome = call_hook(
                hook,
                {"event_type": "pre-commit", "repository_id": "repo"},
                env_prefix="LAKEFSACTION_",
                environ=_ENVIRON,
                client=_CLIENT,
            )
            if b"secret-token" not in data:
                assert "secret-token" not in outcome.log, outcome.log
    return None
