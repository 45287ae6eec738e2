"""The requests clients send most often, served without FastAPI's per-request work.

A stat, a read, an upload of an object and a listing page are the requests a data pipeline
sends by the thousand, and a commit ends each batch of its writes; for each, FastAPI resolves
the same dependency tree (state, HTTP Basic, caller) and validates the same few parameters,
which cost about as much CPU as a read itself. A :class:`FastRead` route stands in front of the
app's own route for the same path and method: it takes a request only when its query parameters
are plain (each parameter once, each value in the form the app's route would accept unchanged)
and, for a route with a JSON body, when the body is a JSON object its model accepts as it is;
it reads the credentials with the app's own HTTP Basic scheme and authenticates the caller as
the app does, and then calls the very function the app's route calls, with the same arguments.
Anything else (a parameter given twice, ``presign=True``, a body the model refuses, another
content type) is declined, and the app's route answers it, with its own validation errors (a
declined body is handed to it unread). The answers are therefore the app's answers; only the
way to them is shorter.

Errors raised here go to the app's exception handlers, as a route's do; the metrics label a
request by the app's route template.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from fastapi import FastAPI
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, compile_path
from starlette.types import Message, Receive, Scope, Send

from mirror.api.deps import ApiState, basic_credentials, get_caller

__all__ = [
    "BODY",
    "FastRead",
    "FastRoutes",
    "QueryParam",
    "QueryValues",
    "install_fast_reads",
    "parse_body",
    "parse_query",
]

_TRUE = frozenset({"true", "1", "yes", "on", "t", "y"})
_FALSE = frozenset({"false", "0", "no", "off", "f", "n"})
_INT = re.compile(r"-?[0-9]{1,9}")

QueryValues = dict[str, Any]
"""The parsed query parameters of a request a :class:`FastRead` takes."""


@dataclass(frozen=True)
class QueryParam:
    """One query parameter of a route: its name, kind and default.

    Attributes:
        name: The parameter's name in the query string.
        kind: ``str``, ``int`` or ``bool``.
        default: Its value when absent (:data:`REQUIRED`: the request is declined).
    """

    name: str
    kind: type
    default: Any = None


REQUIRED = object()
"""The default of a parameter a request must carry."""


def _value(param: QueryParam, raw: str) -> tuple[bool, Any]:
    """Return (ok, value): ``raw`` read as the app's route reads it, or not ok to decline."""
    if param.kind is str:
        return True, raw
    if param.kind is bool:
        # the lower-case spellings pydantic reads as booleans; others go to the app's route
        if raw in _TRUE:
            return True, True
        if raw in _FALSE:
            return True, False
        return False, None
    if param.kind is int and _INT.fullmatch(raw):
        return True, int(raw)
    return False, None


def parse_query(raw: bytes, params: tuple[QueryParam, ...]) -> QueryValues | None:
    """Return the query's values for ``params``, or ``None`` when the app's route must decide.

    Parameters the route does not declare are ignored, as the app's route ignores them; a
    declared one given twice, or in a form not read here, declines the request.
    """
    wanted = {p.name: p for p in params}
    found: QueryValues = {}
    for name, raw_value in parse_qsl(raw.decode("latin-1"), keep_blank_values=True):
        param = wanted.get(name)
        if param is None:
            continue
        if name in found:
            return None
        ok, value = _value(param, raw_value)
        if not ok:
            return None
        found[name] = value
    for param in params:
        if param.name not in found:
            if param.default is REQUIRED:
                return None
            found[param.name] = param.default
    return found


BODY = "lakemirror.body"
"""The key of a request's validated body among the query values :class:`FastRead` passes."""


def parse_body(headers: Any, raw: bytes, model: type[BaseModel]) -> BaseModel | None:
    """Return ``raw`` as ``model``, or ``None`` when the app's route must decide.

    Taken: a body sent as ``application/json`` (any parameters) that decodes to a JSON object
    ``model`` validates, which is what the app's route does with it.
    """
    content_type = headers.get("content-type", "")
    if content_type.partition(";")[0].strip().lower() != "application/json":
        return None
    try:
        value = json.loads(raw)
        if not isinstance(value, dict):
            return None
        return model.model_validate(value)
    except (ValueError, ValidationError):
        return None


def _replay(raw: bytes, receive: Receive) -> Receive:
    """Return a ``receive`` that gives ``raw`` as the whole body, then defers to ``receive``."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": raw, "more_body": False}
        return await receive()

    return replay


Serve = Callable[[ApiState, Request, Any, dict[str, str], QueryValues], Awaitable[Response]]
"""Answers a request: state, request, caller, path parameters, query values."""


class FastRead(BaseRoute):
    """A route that takes the plain requests of ``route`` and answers them through ``serve``.

    Args:
        route: The app's route for the same path and method (the metrics label requests by
            it).
        prefix: The prefix ``route``'s router is included under.
        params: The query parameters ``serve`` reads.
        serve: Answers a request as ``route``'s endpoint does.
        body: The model of the route's JSON body, if it has one; ``serve`` finds the body
            validated under :data:`BODY`.
    """

    def __init__(
        self,
        route: APIRoute,
        prefix: str,
        params: tuple[QueryParam, ...],
        serve: Serve,
        body: type[BaseModel] | None = None,
    ) -> None:
        self.route = route
        self.params = params
        self.serve = serve
        self.body = body
        self.path = prefix + route.path
        self.path_regex, self.path_format, self.param_convertors = compile_path(self.path)
        self.methods = frozenset(route.methods or ())

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        """Match the route's path and method, with plain query parameters."""
        if scope["type"] != "http" or scope["method"] not in self.methods:
            return Match.NONE, {}
        found = None if scope.get("root_path") else self.path_regex.match(scope["path"])
        if found is None:
            return Match.NONE, {}
        query = parse_query(scope.get("query_string", b""), self.params)
        if query is None:
            return Match.NONE, {}
        path_params = {
            key: self.param_convertors[key].convert(value)
            for key, value in found.groupdict().items()
        }
        child = {
            "endpoint": self.route.endpoint,
            "path_params": {**scope.get("path_params", {}), **path_params},
            "route": self.route,
            "lakemirror.fast_read": query,
        }
        return Match.FULL, child

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Authenticate the caller as the app does, and answer through ``serve``.

        Credentials that do not decode raise the app's HTTP Basic error, answered by the app's
        handler as on its route.
        """
        query = scope["lakemirror.fast_read"]
        request = Request(scope, receive)
        if self.body is not None:
            raw = await request.body()
            body = parse_body(request.headers, raw, self.body)
            if body is None:
                await self.route.handle(scope, _replay(raw, receive), send)
                return
            query = {**query, BODY: body}
        state: ApiState = scope["app"].state.api
        caller = await get_caller(state, request, await basic_credentials(request))
        response = await self.serve(state, request, caller, scope["path_params"], query)
        await response(scope, receive, send)


def _api_routes(routes: list[BaseRoute]) -> Iterator[APIRoute]:
    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from _api_routes(inner.routes)


FastRoutes = dict[Callable[..., Any], tuple[tuple[QueryParam, ...], Serve, type[BaseModel] | None]]
"""Endpoint -> (query parameters, serve, body model or ``None``), for :func:`install_fast_reads`."""


def install_fast_reads(app: FastAPI, prefix: str, reads: FastRoutes) -> None:
    """Put a :class:`FastRead` before the app's route of each endpoint in ``reads``.

    ``prefix``: the one the routers of those endpoints are included under.

    Raises:
        LookupError: an endpoint that no route of ``app`` serves.
    """
    by_endpoint = {route.endpoint: route for route in _api_routes(app.router.routes)}
    fast: list[BaseRoute] = []
    for endpoint, (params, serve, body) in reads.items():
        route = by_endpoint.get(endpoint)
        if route is None:
            raise LookupError(f"no route serves {endpoint.__name__}")
        fast.append(FastRead(route, prefix, params, serve, body))
    app.router.routes[:0] = fast
