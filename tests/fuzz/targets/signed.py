"""What the signature targets share: the key the corpus is signed with, and the whole check.

:func:`authenticated` runs a request through :func:`mirror.gateway.auth.authenticate` as the
gateway does (an auth store holding the corpus's key, the clock at
:data:`~tests.fuzz.harness.FUZZ_NOW`) and reads the body it hands back, so the signature
parsers, the time checks, the verification and the body's checks (``aws-chunked`` framing,
digests, length) all see the input.
"""

from __future__ import annotations

import functools

import anyio

from mirror.auth.secrets import SecretCipher
from mirror.auth.store import AuthStore
from mirror.config import GatewaySettings
from mirror.gateway.auth import authenticate
from mirror.gateway.errors import S3Error
from mirror.kv import MemoryKV
from tests.fuzz.harness import FUZZ_NOW
from tests.fuzz.targets.http_input import WireInput, asgi_request

__all__ = ["KEY_ID", "REGION", "SECRET", "SETTINGS", "auth_store", "authenticated", "refusal"]

KEY_ID = "AKIAFUZZCORPUS000001"
SECRET = "fuzz/Corpus+Secret/0123456789abcdefghij"
REGION = "us-east-1"
SETTINGS = GatewaySettings()
_USER = "fuzzer"


@functools.cache
def auth_store() -> AuthStore:
    """Return an auth store holding the corpus's key (user ``fuzzer``, a Writer)."""
    auth = AuthStore(MemoryKV(), cipher=SecretCipher("fuzz corpus encryption key"))
    auth.ensure_builtins()
    auth.create_user(_USER)
    auth.add_member("Writers", _USER)
    auth.create_credentials(_USER, KEY_ID, SECRET)
    return auth


def refusal(err: S3Error) -> str:
    """Return the name of an S3 refusal, as a target reports it."""
    return f"S3Error:{err.code.code}"


def piece_size(wire: WireInput) -> int:
    """Return how many bytes of the body arrive at once: a function of the input, 1 to 4096."""
    return 1 + (len(wire.body) * 7919 + len(wire.headers)) % 4096


async def _authenticate(wire: WireInput) -> None:
    result = await authenticate(
        asgi_request(wire, piece_size(wire)), auth_store(), SETTINGS, now=lambda: FUZZ_NOW
    )
    async for _ in result.body:
        pass


def authenticated(wire: WireInput) -> str | None:
    """Authenticate ``wire`` and read its body; return ``None`` or the refusal's name."""
    try:
        anyio.run(_authenticate, wire)
    except S3Error as err:
        return refusal(err)
    return None
