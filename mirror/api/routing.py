"""The route class of every lakeFS endpoint, and the query parameters they share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Query
from fastapi.routing import APIRoute

__all__ = [
    "BINARY_BODY",
    "AfterQuery",
    "AmountQuery",
    "DelimiterQuery",
    "LakeFSRoute",
    "ObjectPathQuery",
    "PrefixQuery",
]


class LakeFSRoute(APIRoute):
    """An API route whose JSON leaves out ``null`` optional fields, as lakeFS does."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        kwargs["response_model_exclude_none"] = True
        super().__init__(path, endpoint, **kwargs)


AfterQuery = Annotated[str, Query(description="return items after this value")]
AmountQuery = Annotated[int, Query(description="how many items to return (at most 1000)")]
PrefixQuery = Annotated[str, Query(description="return items prefixed with this value")]
DelimiterQuery = Annotated[str, Query(description="group paths by this delimiter")]
ObjectPathQuery = Annotated[str, Query(description="the object's path")]

BINARY_BODY: dict[str, Any] = {
    "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}
}
"""The OpenAPI content of an object's bytes, as a request or a response body."""
