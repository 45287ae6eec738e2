"""What a page does with a form it was sent: read its fields, make the call, go on or say why not.

Every change a page makes is a POST whose fields become one API call. When the API accepts it,
the browser is sent on with a 303 (so reloading repeats nothing); when it refuses, the page the
form stood on is shown again with the API's message and what was typed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.datastructures import FormData
from starlette.responses import RedirectResponse, Response

from mirror.ui.api import ApiError

__all__ = ["field", "redirect_after", "text", "texts"]


def text(form: FormData, name: str) -> str:
    """Return a text field of ``form`` as typed (empty when absent)."""
    value = form.get(name)
    return value if isinstance(value, str) else ""


def field(form: FormData, name: str) -> str:
    """Return a text field of ``form``, stripped (empty when absent)."""
    return text(form, name).strip()


def texts(form: FormData, name: str, *, strip: bool = False) -> list[str]:
    """Return the text values of a field that repeats (a form's rows), in order."""
    values = [v for v in form.getlist(name) if isinstance(v, str)]
    return [v.strip() for v in values] if strip else values


async def redirect_after(
    call: Awaitable[object],
    url: str,
    *,
    refused: Callable[[ApiError], Response | Awaitable[Response]],
) -> Response:
    """Await an API call, then send the browser to ``url``; or answer ``refused(refusal)``.

    Args:
        call: The call the form asks for (``page.send(...)``, not awaited yet).
        url: Where the browser goes once the call succeeded (``303 See Other``).
        refused: Makes the page that shows the API's refusal (the form again, with its message).
    """
    try:
        await call
    except ApiError as refusal:
        answer = refused(refusal)
        return answer if isinstance(answer, Response) else await answer
    return RedirectResponse(url, status_code=303)
