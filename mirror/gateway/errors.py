"""S3 errors of the gateway: a code, an HTTP status and a message, rendered as S3's XML.

Every refusal of the gateway is an :class:`S3Error` carrying one of S3's codes (or lakeFS's
gateway-only ones, such as ``ErrReadOnlyRepository``), never a bare status: clients such as
botocore, the AWS CLI, s3a and pyarrow branch on the ``<Code>`` element.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["S3Code", "S3Error"]


@dataclass(frozen=True, slots=True)
class _Code:
    name: str
    status: int
    description: str


class S3Code(Enum):
    """The S3 error codes the gateway answers with, each with its HTTP status and usual text."""

    ACCESS_DENIED = _Code("AccessDenied", 403, "Access Denied")
    AUTHORIZATION_HEADER_MALFORMED = _Code(
        "AuthorizationHeaderMalformed", 400, "The authorization header is malformed"
    )
    AUTHORIZATION_QUERY_PARAMETERS_ERROR = _Code(
        "AuthorizationQueryParametersError",
        400,
        "The authorization query parameters are malformed",
    )
    BAD_DIGEST = _Code(
        "BadDigest",
        400,
        "The Content-MD5 or checksum you specified did not match what we received.",
    )
    BAD_REQUEST = _Code("BadRequest", 400, "Bad Request")
    ENTITY_TOO_LARGE = _Code(
        "EntityTooLarge", 400, "Your proposed upload exceeds the maximum allowed object size."
    )
    ENTITY_TOO_SMALL = _Code(
        "EntityTooSmall",
        400,
        "Your proposed upload is smaller than the minimum allowed object size.",
    )
    INCOMPLETE_BODY = _Code(
        "IncompleteBody",
        400,
        "You did not provide the number of bytes specified by the Content-Length HTTP header.",
    )
    INTERNAL_ERROR = _Code(
        "InternalError", 500, "We encountered an internal error, please try again."
    )
    INVALID_ACCESS_KEY_ID = _Code(
        "InvalidAccessKeyId",
        403,
        "The AWS access key ID you provided does not exist in our records.",
    )
    INVALID_ARGUMENT = _Code("InvalidArgument", 400, "Invalid Argument")
    INVALID_BUCKET_NAME = _Code("InvalidBucketName", 400, "The specified bucket is not valid.")
    INVALID_DIGEST = _Code("InvalidDigest", 400, "The Content-MD5 you specified is not valid.")
    INVALID_PART = _Code(
        "InvalidPart",
        400,
        "One or more of the specified parts could not be found. The part may not have been "
        "uploaded, or the specified entity tag may not match the part's entity tag.",
    )
    INVALID_PART_ORDER = _Code(
        "InvalidPartOrder",
        400,
        "The list of parts was not in ascending order. Parts must be ordered by part number.",
    )
    INVALID_RANGE = _Code("InvalidRange", 416, "The requested range is not satisfiable")
    INVALID_REQUEST = _Code("InvalidRequest", 400, "Invalid Request")
    KEY_TOO_LONG = _Code("KeyTooLongError", 400, "Your key is too long.")
    MALFORMED_XML = _Code(
        "MalformedXML",
        400,
        "The XML you provided was not well-formed or did not validate against our published "
        "schema.",
    )
    METADATA_TOO_LARGE = _Code(
        "MetadataTooLarge",
        400,
        "Your metadata headers exceed the maximum allowed metadata size.",
    )
    METHOD_NOT_ALLOWED = _Code(
        "MethodNotAllowed", 405, "The specified method is not allowed against this resource."
    )
    MISSING_CONTENT_LENGTH = _Code(
        "MissingContentLength", 411, "You must provide the Content-Length HTTP header."
    )
    MISSING_FIELDS = _Code("MissingFields", 400, "Missing fields in request.")
    NO_SUCH_BUCKET = _Code("NoSuchBucket", 404, "The specified bucket does not exist")
    NO_SUCH_KEY = _Code("NoSuchKey", 404, "The specified key does not exist.")
    NO_SUCH_UPLOAD = _Code(
        "NoSuchUpload",
        404,
        "The specified upload does not exist. The upload ID may be invalid, or the "
        "upload may have been aborted or completed.",
    )
    NO_SUCH_VERSION = _Code(
        "NoSuchVersion",
        404,
        "The version ID specified in the request does not match an existing version.",
    )
    NOT_IMPLEMENTED = _Code(
        "NotImplemented", 501, "A header you provided implies functionality that is not implemented"
    )
    NOT_SUPPORTED = _Code("ERRLakeFSNotSupported", 405, "This operation is not supported")
    PRECONDITION_FAILED = _Code(
        "PreconditionFailed", 412, "At least one of the pre-conditions you specified did not hold"
    )
    READ_ONLY_REPOSITORY = _Code("ErrReadOnlyRepository", 403, "read-only repository")
    PROTECTED_BRANCH = _Code("ErrWriteToProtectedBranch", 403, "cannot write to protected branch")
    REQUEST_TIME_TOO_SKEWED = _Code(
        "RequestTimeTooSkewed",
        403,
        "The difference between the request time and the server's time is too large.",
    )
    SIGNATURE_DOES_NOT_MATCH = _Code(
        "SignatureDoesNotMatch",
        403,
        "The request signature we calculated does not match the signature you provided. Check "
        "your key and signing method.",
    )
    SLOW_DOWN = _Code("SlowDown", 503, "Please reduce your request rate.")
    XAMZ_CONTENT_SHA256_MISMATCH = _Code(
        "XAmzContentSHA256Mismatch",
        400,
        "The provided 'x-amz-content-sha256' header does not match what was computed.",
    )

    @property
    def code(self) -> str:
        """Return the ``<Code>`` text."""
        return self.value.name

    @property
    def status(self) -> int:
        """Return the HTTP status."""
        return self.value.status

    @property
    def description(self) -> str:
        """Return S3's usual message for the code."""
        return self.value.description


class S3Error(Exception):
    """A refusal the gateway answers with S3's XML error body.

    Args:
        code: The S3 code (it fixes the HTTP status).
        message: The ``<Message>``; S3's usual text for the code when omitted. Detail of our
            own follows S3's text (``"Access Denied: ..."``), never replaces it.
        bucket: The ``<BucketName>``, when the request named one.
        key: The ``<Key>`` (the object path, without the ref), when the request named one.
        headers: Extra response headers (e.g. ``Retry-After`` with ``SlowDown``).
    """

    def __init__(
        self,
        code: S3Code,
        message: str | None = None,
        *,
        bucket: str | None = None,
        key: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.code = code
        self.message = message or code.description
        self.bucket = bucket
        self.key = key
        self.headers = dict(headers or {})
        super().__init__(f"{code.code}: {self.message}")

    @property
    def status(self) -> int:
        """Return the HTTP status of the error."""
        return self.code.status
